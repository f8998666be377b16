"""What a content item may be, however it arrives: an http(s) address of an allowed origin, or
a data: image the CDS names as an image. Everything else (file:, javascript:, data: pages,
qrc:) is refused: 400 with a JSON error for a request, the line at fault for a CDS posted or
a remote set fetched (logged, since nobody is there to answer)."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from cds.errors import CdsError
from player.remotesets import RemoteSetFetcher
from tests.support.inprocess_display import Display
from tests.support.pages import PageServer, Reply, Request

REFUSED = [
    "file:///etc/hostname",
    "file:///var/lib/pdn/webhook-secret",
    "javascript:alert(document.cookie)",
    "data:text/html,<script>fetch('http://127.0.0.1:8080/x/pairings')</script>",
    "qrc:/qt-project.org/imports/QtWebEngine/index.html",
]
# A 1x1 PNG: the data: image a CDS may name.
PIXEL = (
    "data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAIAAACQd1PeAAAADElEQVR4nGP4z8AAAAMBAQ"
    "DJ/pLvAAAAAElFTkSuQmCC"
)


def item_cds(name: str, uri: str, content_type: str = "text/html") -> bytes:
    """A CDS whose only item (its <uri> on line 4) is ``uri``."""
    return (
        f'<content-set name="{name}">\n'
        f'  <content-item content-type="{content_type}">\n'
        "    <requires-file><sources>\n"
        f"      <uri>{uri.replace('&', '&amp;').replace('<', '&lt;')}</uri>\n"
        "    </sources></requires-file>\n"
        "  </content-item>\n"
        "</content-set>\n"
    ).encode()


def post_cds(display: Display, body: bytes) -> Any:
    return display.post("/schedule", data=body, headers={"Content-Type": "text/xml"})


@pytest.mark.parametrize("uri", REFUSED)
def test_a_request_for_a_refused_scheme_gets_400(display: Display, uri: str) -> None:
    answer = display.post("/schedule", json={"content-item": uri})
    assert answer.status_code == 400, answer.text
    body = answer.json()
    assert body["error"] == "invalid-field" and "content-item" in body["message"], body
    assert display.service.engine.queue_length() == 0


@pytest.mark.parametrize("uri", REFUSED)
def test_a_cds_with_a_refused_scheme_is_refused_at_its_line(display: Display, uri: str) -> None:
    answer = post_cds(display, item_cds("trap", uri))
    assert answer.status_code == 400, answer.text
    body = answer.json()
    assert body["error"] == "invalid-cds" and body["line"] == 4, body
    assert "http or https" in body["message"] or "data: address" in body["message"], body
    assert display.service.document_names() == []


def test_a_data_uri_is_taken_only_for_an_image_item(display: Display) -> None:
    refused = post_cds(display, item_cds("page", PIXEL, "text/html"))
    assert refused.status_code == 400 and refused.json()["line"] == 4, refused.text
    page_as_image = "data:text/html;base64,PHNjcmlwdD48L3NjcmlwdD4="
    refused = post_cds(display, item_cds("page", page_as_image, "image/png"))
    assert refused.status_code == 400 and refused.json()["line"] == 4, refused.text
    taken = post_cds(display, item_cds("pixel", PIXEL, "image/png"))
    assert taken.status_code == 202, taken.text
    record = display.wait_playback(lambda r: r.get("set") == "pixel")
    assert record["content-item"] == PIXEL
    # Carried in the CDS itself: nothing to download, played as it is.
    assert display.renderer.shown[-1].url == PIXEL


ALLOWED = "http://127.0.0.1:9"


@pytest.fixture
def guarded(make_display: Callable[..., Display]) -> Display:
    return make_display(allowed_origins=(ALLOWED,))


def test_allowed_origins_apply_to_requests_and_to_cds(guarded: Display) -> None:
    answer = guarded.post("/schedule", json={"content-item": "http://127.0.0.2:9/a.html"})
    assert answer.json()["request-status"] == "rejected", answer.text  # as it always was
    refused = post_cds(guarded, item_cds("elsewhere", "https://example.org/a.html"))
    assert refused.status_code == 400, refused.text
    body = refused.json()
    assert body["line"] == 4 and "allowed_origins" in body["message"], body
    assert guarded.service.document_names() == []
    assert post_cds(guarded, item_cds("ours", ALLOWED + "/a.html")).status_code == 202
    # A data: image has no origin: the CDS that names it is all there is to trust.
    assert post_cds(guarded, item_cds("pixel", PIXEL, "image/png")).status_code == 202
    assert sorted(guarded.service.document_names()) == ["ours", "pixel"]


@dataclass
class Remote:
    key: str
    uris: tuple[str, ...]
    refresh: float | None = None


@pytest.fixture
def set_server() -> Iterator[tuple[str, dict[str, bytes]]]:
    """Remote sets (``documents``: path -> CDS) served as text/xml; 404 for the others."""
    documents: dict[str, bytes] = {}

    def serve(request: Request) -> Reply | None:
        body = documents.get(request.path)
        return None if body is None else Reply(200, body, "text/xml")

    with PageServer() as server:
        server.handle(serve)
        yield server.url, documents


@pytest.mark.parametrize("uri", [*REFUSED, "https://example.org/a.html"])
def test_a_remote_set_holding_a_refused_item_is_refused_and_logged_with_its_line(
    guarded: Display,
    set_server: tuple[str, dict[str, bytes]],
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
    uri: str,
) -> None:
    base, documents = set_server
    documents["/set.xml"] = item_cds("fetched", uri)
    with pytest.raises(CdsError) as refused:
        guarded.service.set_remote_document("remote", documents["/set.xml"])
    assert refused.value.problems[0].line == 4
    # In the background, as the display fetches it: nothing plugged in, the line logged.
    fetcher = RemoteSetFetcher(
        remote_sets=lambda: [Remote("remote", (base + "/set.xml",))],
        deliver=guarded.service.set_remote_document,
        cache_dir=tmp_path / "remote-sets",
    )
    try:
        with caplog.at_level(logging.WARNING, logger="pdn.remotesets"):
            fetcher.step()
    finally:
        fetcher.stop()
    logged = " ".join(record.getMessage() for record in caplog.records)
    assert "could not be fetched" in logged and "line 4" in logged, logged
    assert not fetcher.cache_path("remote").exists()
    # A set of allowed items from the same place is taken.
    documents["/set.xml"] = item_cds("fetched", ALLOWED + "/b.html")
    guarded.service.set_remote_document("remote", documents["/set.xml"])

"""The Content Segment through its real waitress server on loopback, with a fake display.

The fake display is listed in the content server's displays file (it forwards to no other);
what it refuses, and the tokens it sends, are in test_content_targets.py.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest
import requests

from server.content.app import BUILTIN_APPS, DisplayForwarder
from server.platform.displaycreds import DisplayCredentials
from server.platform.lockout import RateLimit
from server.platform.wsgi import WsgiServer
from tests.support.content import content_app
from tests.support.pages import PageServer
from tests.support.ports import free_port

REQUESTOR = {"device-id": "phone-7", "user-id": "alice"}


def request_body(display: str, **params: object) -> dict[str, object]:
    return {
        "application-params": params or {"text": "Hello", "background": "teal"},
        "display-uri": display,
        "requestor": REQUESTOR,
    }


@pytest.fixture(scope="module")
def apps_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp_path = tmp_path_factory.mktemp("content")
    app = tmp_path / "apps" / "clock"
    app.mkdir(parents=True)
    (app / "index.html").write_text(
        "<!doctype html><title>clock</title><script src=app.js></script>"
    )
    (app / "app.js").write_text("document.title = 'tick';")
    (tmp_path / "apps" / "no-index").mkdir()
    return tmp_path / "apps"


@pytest.fixture(scope="module")
def displays_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("content-displays") / "displays.toml"


def listing(displays_file: Path, *urls: str) -> DisplayCredentials:
    """The content server's displays file, listing ``urls`` (no token of their own)."""
    displays_file.write_text("".join(f'[displays."{url}"]\n' for url in urls))
    return DisplayCredentials(displays_file)


@pytest.fixture
def peer(peer: PageServer, displays_file: Path) -> PageServer:
    """The fake display, listed in the content server's displays file."""
    listing(displays_file, peer.url)
    return peer


@pytest.fixture(scope="module")
def content(apps_dir: Path, displays_file: Path) -> Iterator[str]:
    credentials = listing(displays_file)
    forwarder = DisplayForwarder(credentials=credentials)
    app = content_app(
        forwarder, credentials, apps=[apps_dir, BUILTIN_APPS], public="http://content.example:8091"
    )
    server = WsgiServer(app, "127.0.0.1", 0, name="content").start()
    yield server.url
    server.stop()
    forwarder.close()


def test_apps_are_served(content: str) -> None:
    page = requests.get(f"{content}/message/?text=Hi&background=red", timeout=5)
    assert page.status_code == 200
    assert page.headers["Content-Type"].startswith("text/html")
    assert b"URLSearchParams" in page.content
    clock = requests.get(f"{content}/clock/", timeout=5)
    assert b"<title>clock</title>" in clock.content
    assert requests.get(f"{content}/clock/app.js", timeout=5).text == "document.title = 'tick';"
    redirect = requests.get(f"{content}/clock?x=1", timeout=5, allow_redirects=False)
    assert redirect.status_code == 308
    assert redirect.headers["Location"].endswith("/clock/?x=1")
    assert requests.get(f"{content}/clock/missing.js", timeout=5).status_code == 404
    assert requests.get(f"{content}/clock/../../etc/passwd", timeout=5).status_code == 404
    unknown = requests.get(f"{content}/no-index/", timeout=5)
    assert unknown.status_code == 404
    assert unknown.json()["error"] == "unknown-application"
    listing = requests.get(f"{content}/x/apps", timeout=5).json()
    assert [a["name"] for a in listing] == ["clock", "message"]


def test_schedule_forwards_to_the_display(content: str, peer: PageServer) -> None:
    peer.route("POST", "/schedule", 202, {"request-status": "scheduling"})
    body = request_body(peer.url, text="Fire drill at 3 pm", background="#c0392b", size=3)
    body["preferred-duration"] = "2 minutes"
    answer = requests.post(f"{content}/message/schedule", json=body, timeout=10)
    assert answer.status_code == 202
    assert answer.json() == {"request-status": "forwarded"}
    sent = peer.received("/schedule")[0].json()
    assert sent["preferred-duration"] == "2 minutes"
    item = urlsplit(sent["content-item"])
    assert f"{item.scheme}://{item.netloc}{item.path}" == "http://content.example:8091/message/"
    assert parse_qs(item.query) == {
        "text": ["Fire drill at 3 pm"],
        "background": ["#c0392b"],
        "size": ["3"],
    }


def test_root_schedule_is_the_message_app(content: str, peer: PageServer) -> None:
    peer.route("POST", "/schedule", 202, {"request-status": "scheduling"})
    answer = requests.post(f"{content}/schedule", json=request_body(peer.url + "/"), timeout=10)
    assert answer.json() == {"request-status": "forwarded"}
    sent = peer.received("/schedule")[0].json()
    assert "/message/?" in sent["content-item"]
    assert "preferred-duration" not in sent


@pytest.mark.parametrize(
    ("status", "answer", "told"),
    [
        (
            202,
            {"request-status": "rejected", "reason": "queue full"},
            {"request-status": "rejected", "reason": "the display did not take the request"},
        ),
        (
            415,
            {"error": "unsupported-media-type", "message": "no"},
            {
                "request-status": "failed",
                "reason": "the display answered 415 Unsupported Media Type",
            },
        ),
    ],
    ids=["rejects", "answers-something-else"],
)
def test_what_the_display_says_is_told_in_the_content_servers_own_words(
    content: str, peer: PageServer, status: int, answer: dict[str, str], told: dict[str, str]
) -> None:
    """A display that rejects the request, or answers something else: the content server
    says so in its own words; what the display said is not passed on."""
    peer.route("POST", "/schedule", status, answer)
    forwarded = requests.post(f"{content}/clock/schedule", json=request_body(peer.url), timeout=10)
    assert forwarded.status_code == 202
    assert forwarded.json() == told


def test_unreachable_display_is_504(content: str, displays_file: Path) -> None:
    port = free_port()  # nothing listens there
    listing(displays_file, f"http://127.0.0.1:{port}")
    started = time.monotonic()
    answer = requests.post(
        f"{content}/message/schedule",
        json=request_body(f"http://127.0.0.1:{port}"),
        timeout=10,
    )
    assert time.monotonic() - started < 5
    assert answer.status_code == 504
    assert answer.json()["request-status"] == "failed"
    assert answer.json()["error"] == "display-unreachable"


def test_silent_display_is_504_within_5_seconds(content: str, peer: PageServer) -> None:
    peer.route("POST", "/schedule", 202, {"request-status": "scheduling"}, delay=7)
    started = time.monotonic()
    answer = requests.post(f"{content}/message/schedule", json=request_body(peer.url), timeout=10)
    assert time.monotonic() - started < 5.2
    assert answer.status_code == 504
    assert answer.json()["request-status"] == "failed"


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"application-params": None}, "application-params"),
        ({"application-params": "text=hi"}, "application-params"),
        ({"display-uri": None}, "display-uri"),
        ({"display-uri": "display-7"}, "display-uri"),
        ({"display-uri": "ftp://127.0.0.1/"}, "display-uri"),
        ({"requestor": None}, "requestor"),
        ({"requestor": "alice"}, "requestor"),
        ({"requestor": {"user-id": 7}}, "requestor.user-id"),
        ({"preferred-duration": "soon"}, "preferred-duration"),
        ({"preferred-duration": "0 seconds"}, "preferred-duration"),
    ],
)
def test_malformed_requests_are_400(
    content: str, peer: PageServer, change: dict[str, object], field: str
) -> None:
    body = request_body(peer.url)
    for key, value in change.items():
        if value is None:
            del body[key]
        else:
            body[key] = value
    answer = requests.post(f"{content}/message/schedule", json=body, timeout=10)
    assert answer.status_code == 400
    assert answer.json()["field"] == field
    assert peer.received("/schedule") == []


def test_bad_bodies_and_unknown_app(content: str, peer: PageServer) -> None:
    url = f"{content}/message/schedule"
    assert (
        requests.post(
            url, data=b"{", headers={"Content-Type": "application/json"}, timeout=5
        ).status_code
        == 400
    )
    assert (
        requests.post(
            url, data=b"<content-set/>", headers={"Content-Type": "text/xml"}, timeout=5
        ).status_code
        == 415
    )
    unknown = requests.post(f"{content}/nothing/schedule", json=request_body(peer.url), timeout=5)
    assert unknown.status_code == 404
    assert unknown.json()["error"] == "unknown-application"
    assert peer.received("/schedule") == []


def test_schedule_requests_are_rate_limited_per_address(
    peer: PageServer, displays_file: Path
) -> None:
    """POST /<app>/schedule stays open (a visitor's phone), also with the content server's own
    token set, and is limited per address."""
    peer.route("POST", "/schedule", 202, {"request-status": "scheduling"})
    credentials = listing(displays_file, peer.url)
    forwarder = DisplayForwarder(credentials=credentials)
    app = content_app(forwarder, credentials, token="content-token")
    app.extensions["pdn.schedule-rate"] = RateLimit(limit=3, window=60)
    server = WsgiServer(app, "0.0.0.0", 0, name="content").start()
    clients = {
        source: httpx.Client(
            base_url=f"http://127.0.0.1:{server.port}",
            transport=httpx.HTTPTransport(local_address=source),
            timeout=10,
        )
        for source in ("127.0.0.2", "127.0.0.3")
    }
    try:
        phone = clients["127.0.0.2"]
        for _ in range(3):
            answer = phone.post("/message/schedule", json=request_body(peer.url))
            assert answer.json()["request-status"] == "forwarded"
        limited = phone.post("/message/schedule", json=request_body(peer.url))
        assert limited.status_code == 429 and limited.json()["error"] == "too-many-requests"
        assert 0 < int(limited.headers["Retry-After"]) <= 60
        other = clients["127.0.0.3"].post("/message/schedule", json=request_body(peer.url))
        assert other.json()["request-status"] == "forwarded"
        assert len(peer.received("/schedule")) == 4  # the limited one was not forwarded
    finally:
        for client in clients.values():
            client.close()
        server.stop()
        forwarder.close()

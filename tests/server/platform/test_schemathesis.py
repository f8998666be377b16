"""Schemathesis against the scheduler, content and sensor segments: their OpenAPI documents say
exactly what they accept (tests/support/apifuzz.py says what is checked)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from server.content.app import DisplayForwarder, ForwardResult
from server.content.displays import DisplayDirectory, Target, display_origin
from server.platform.displaycreds import DisplayCredentials
from server.platform.lockout import RateLimit
from server.platform.wsgi import WsgiServer
from tests.support.apifuzz import Finding, assert_agrees, run
from tests.support.content import content_app
from tests.support.scheduler import lobby_folder
from tests.support.scheduler import start as start_scheduler
from tests.support.sensor import light_sensor

#: Examples per operation in the fuzzing phase (the coverage phase adds its own).
MAX_EXAMPLES = 50


def schedule_is_not_json_schema(finding: Finding, answer: dict[str, Any]) -> bool:
    """A schedule written with PUT /x/schedules/<id> is a CDS, whose grammar (RELAX NG) the
    document names but cannot give as JSON Schema: a generated string is refused as invalid-cds
    (400). tests/server/scheduler/test_fleet.py and tests/cds test the grammar."""
    return (
        finding.operation == "PUT /x/schedules/{id}"
        and finding.check == "positive_data_acceptance"
        and answer.get("error") == "invalid-cds"
    )


def library_refusal(finding: Finding, answer: dict[str, Any]) -> bool:
    """What the document can say of a media upload's shape but not of its content: generated
    bytes are no picture, video or bundle (or not the type their name says), and a file's or
    link's name and tags are checked as text the schema leaves open. A playlist may name a
    media item the library does not hold (400 unknown-media, the state of the library, as 404
    is of a resource), an 'until' before its 'from', or a window that starts when it ends
    (rules between two fields). A schedule's id that a playlist holds is changed through the
    playlist only (409 schedule-conflict, the state of the scheduler). tests/server/scheduler/
    media and .../playlists test each."""
    if finding.check != "positive_data_acceptance":
        return False
    if answer.get("error") == "schedule-conflict":
        return True
    if finding.operation == "POST /x/media":
        return answer.get("error") in (
            "no-name", "bad-name", "bad-tags", "unsupported-type", "type-mismatch", "corrupt",
            "no-video-stream", "bad-bundle",
        )  # fmt: skip
    if finding.operation == "PUT /x/playlists/{id}":
        field = str(answer.get("field", ""))
        return answer.get("error") == "unknown-media" or (
            answer.get("error") == "invalid-field"
            and (field.endswith(".until") or (".windows[" in field and field.endswith(".end")))
        )
    return False


def allowed_refusals(finding: Finding, answer: dict[str, Any]) -> bool:
    """What a schema-valid request may still get: a generated CDS refused (above), and a
    display URL registered before with another TLS certificate (409 certificate-changed, issue
    22: the first certificate stays pinned, whatever the request looks like), and a display to
    pair with that is not there (502 display-unreachable) or refuses the code."""
    return (
        schedule_is_not_json_schema(finding, answer)
        or library_refusal(finding, answer)
        or (
            finding.operation == "POST /displays"
            and finding.check == "positive_data_acceptance"
            and answer.get("error") == "certificate-changed"
        )
        or (
            # A generated display URL has no display behind it to pair with (502, documented).
            finding.operation == "POST /x/displays/pair"
            and finding.check in ("positive_data_acceptance", "not_a_server_error")
            and answer.get("error") in ("display-unreachable", "pairing-refused")
        )
    )


def test_scheduler(tmp_path: Path) -> None:
    service = start_scheduler(tmp_path, lobby_folder(tmp_path))
    try:
        result = run("scheduler", service.url, max_examples=MAX_EXAMPLES, allow=allowed_refusals)
    finally:
        service.stop()
    print(f"scheduler: {result.cases} cases {result.by_phase} {result.statuses}")
    assert_agrees(result)
    assert result.cases > 200


class AcceptingForwarder(DisplayForwarder):
    """Every display says 202 scheduling at once: generated display-uris name no real host."""

    def __init__(self) -> None:
        super().__init__(timeout=1.0)
        self.forwarded: list[tuple[str, dict[str, Any]]] = []

    def forward(self, display: Target, body: dict[str, Any]) -> ForwardResult:
        self.forwarded.append((display.origin, body))
        return ForwardResult("forwarded")


class EveryDisplay(DisplayDirectory):
    """Every well-formed display-uri names a known display (the generated ones are random)."""

    def target(self, display_uri: str) -> Target:
        return Target(display_origin(display_uri))


@pytest.fixture
def content(tmp_path: Path) -> Iterator[tuple[str, AcceptingForwarder]]:
    forwarder = AcceptingForwarder()
    app = content_app(forwarder, EveryDisplay(DisplayCredentials(tmp_path / "none.toml")))
    # The fuzzer asks far more often than a visitor may (the per-address rate limit).
    app.extensions["pdn.schedule-rate"] = RateLimit(limit=1_000_000, window=60)
    server = WsgiServer(app, "127.0.0.1", 0).start()
    yield server.url, forwarder
    server.stop()
    forwarder.close()


def test_content(content: tuple[str, AcceptingForwarder]) -> None:
    url, forwarder = content
    result = run("content", url, max_examples=MAX_EXAMPLES)
    print(f"content: {result.cases} cases {result.by_phase} {result.statuses}")
    assert_agrees(result)
    assert result.cases > 200
    assert forwarder.forwarded, "no generated request reached the display"


def test_sensor(tmp_path: Path) -> None:
    service = light_sensor(tmp_path, interval=3600.0)
    try:
        result = run("sensor", service.url, max_examples=MAX_EXAMPLES)
    finally:
        service.stop()
    print(f"sensor: {result.cases} cases {result.by_phase} {result.statuses}")
    assert_agrees(result)
    assert result.cases > 80

"""Schemathesis against the Display Segment: its OpenAPI document says exactly what it accepts
(tests/support/apifuzz.py says what is checked)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tests.support.apifuzz import Finding, assert_agrees, run
from tests.support.inprocess_display import Display

MAX_EXAMPLES = 50
#: Open until the client leaves: nothing to fuzz, and it would hold the run.
STREAMS = ("/x/playback/events",)


def new_sensor_without_type(finding: Finding, answer: dict[str, Any]) -> bool:
    """The one rule of POST /sensing JSON Schema cannot say: a sensor's first message names its
    sensor-type (documented in words; tests/server/display/test_api.py tests it)."""
    return (
        finding.operation == "POST /sensing"
        and finding.check == "positive_data_acceptance"
        and answer.get("field") == "sensor-type"
        and "is new here" in str(answer.get("message"))
    )


def cds_is_not_json_schema(finding: Finding, answer: dict[str, Any]) -> bool:
    """A CDS body is XML with its own grammar (RELAX NG), which the document names but cannot
    give as JSON Schema: a generated string is refused as invalid-cds (400), or as
    unsupported (415) by a display that takes single items only. tests/cds test the grammar."""
    return (
        finding.operation == "POST /schedule"
        and finding.check == "positive_data_acceptance"
        and answer.get("error") == "invalid-cds"
    )


def no_screen_here(finding: Finding, answer: dict[str, Any]) -> bool:
    """This display has a stand-in renderer and no screen: /x/health says degraded and
    /x/screenshot no-screen, both the documented 503 (their schemas are still checked)."""
    return finding.operation in ("GET /x/health", "GET /x/screenshot") and finding.check in (
        "not_a_server_error",
        "positive_data_acceptance",
    )


def test_display(make_display: Callable[..., Display]) -> None:
    # Items from anywhere but this origin are rejected by policy (202 rejected): generated
    # URLs name no real host, and a rejected item changes nothing on the screen.
    display = make_display(
        name="Lobby",
        location={"latitude": "N54.0104", "longitude": "W2 47.22"},
        allowed_origins=("http://127.0.0.1:9",),
    )

    def allow(finding: Finding, answer: dict[str, Any]) -> bool:
        return any(
            rule(finding, answer)
            for rule in (new_sensor_without_type, cds_is_not_json_schema, no_screen_here)
        )

    result = run(
        "display", display.url, max_examples=MAX_EXAMPLES, exclude_paths=STREAMS, allow=allow
    )
    print(f"display: {result.cases} cases {result.by_phase} {result.statuses}")
    assert_agrees(result)
    assert result.cases > 200

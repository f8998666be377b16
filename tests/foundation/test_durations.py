"""preferred-duration forms from INTERFACE.md, Durations."""

from __future__ import annotations

import pytest

from cds.durations import format_duration, parse_duration


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("30 seconds", 30.0),
        ("2 minutes", 120.0),
        ("1 hour", 3600.0),
        ("1.5 min", 90.0),
        ("45 s", 45.0),
        ("45s", 45.0),
        ("10", 10.0),
        ("2.5", 2.5),
        ("PT30S", 30.0),
        ("PT1H30M", 5400.0),
        ("pt2m", 120.0),
        ("P1D", 86400.0),
        ("  20 Seconds ", 20.0),
        ("500 ms", 0.5),
    ],
)
def test_accepted_forms(text: str, seconds: float) -> None:
    assert parse_duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize(
    "text",
    [
        "",
        "   ",
        "0",
        "0 seconds",
        "-5 seconds",
        "PT0S",
        "P",
        "PT",
        "soon",
        "5 fortnights",
        "1e3",
        "nan",
        "inf",
        "10 seconds later",
        "400 days",
    ],
)
def test_refused_forms_say_why(text: str) -> None:
    with pytest.raises(ValueError) as error:
        parse_duration(text)
    assert str(error.value)


@pytest.mark.parametrize("seconds", [1.0, 30.0, 90.0, 120.0, 3600.0, 5400.0, 0.5])
def test_format_round_trips(seconds: float) -> None:
    assert parse_duration(format_duration(seconds)) == pytest.approx(seconds)

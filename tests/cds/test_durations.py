"""preferred-duration forms (docs/interface.md, "Durations")."""

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


WEEK = 7 * 86400.0

# Every unit from seconds to weeks, singular and plural, with its usual abbreviations.
UNIT_WORDS = {
    1.0: ("s", "sec", "secs", "second", "seconds"),
    60.0: ("m", "min", "mins", "minute", "minutes"),
    3600.0: ("h", "hr", "hrs", "hour", "hours"),
    86400.0: ("d", "day", "days"),
    WEEK: ("w", "wk", "wks", "week", "weeks"),
}


@pytest.mark.parametrize(
    ("word", "factor"), [(word, factor) for factor, words in UNIT_WORDS.items() for word in words]
)
def test_every_unit_word_from_seconds_to_weeks(word: str, factor: float) -> None:
    for text in (f"2 {word}", f"2{word}", f"2 {word.upper()}", f"2 {word.capitalize()}"):
        assert parse_duration(text) == pytest.approx(2 * factor), text
    assert parse_duration(f"0.5 {word}") == pytest.approx(0.5 * factor)


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("1 week", WEEK),  # a Yarely refresh interval
        ("2 weeks", 2 * WEEK),
        ("52 weeks", 52 * WEEK),
        ("1 hour 30 minutes", 5400.0),
        ("1h30m", 5400.0),
        ("1 week, 2 days", WEEK + 2 * 86400),
        ("2 days and 4 hours", 2 * 86400 + 4 * 3600.0),
        ("1 min 30 secs", 90.0),
        ("2 mins.", 120.0),
        ("P2W", 2 * WEEK),
        ("p1w", WEEK),
    ],
)
def test_weeks_and_sums(text: str, seconds: float) -> None:
    assert parse_duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize(
    "text",
    ["53 weeks", "1 hour 30", "10 seconds,", "1 week and", "and 3 s", "1 week 2 fortnights"],
)
def test_refused_sums_and_lengths(text: str) -> None:
    with pytest.raises(ValueError, match=r"\S"):
        parse_duration(text)

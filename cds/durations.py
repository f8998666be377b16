"""Durations as people write them in a `preferred-duration` (docs/interface.md, "Durations").

Accepted: a number and a unit word (``30 seconds``, ``2 minutes``, ``1 hour``, ``1.5 min``,
``45 s``, ``2 weeks``), several of them added up (``1 hour 30 minutes``, ``1h30m``,
``1 week, 2 days``, ``2 days and 4 hours``), a bare number (seconds), or ISO 8601 (``PT30S``,
``PT1H30M``, ``P1D``, ``P2W``). Units, in any case, singular or plural, with their usual
abbreviations: milliseconds (ms, msec), seconds (s, sec, secs, second), minutes (m, min, mins,
minute), hours (h, hr, hrs, hour), days (d, day) and weeks (w, wk, wks, week). This is what
every duration of a CDS is read with (``preferred-duration``, ``<uri refresh>``), and the JSON
API's ``preferred-duration``. Zero, negative and anything else are refused with a message a
person can act on.
"""

from __future__ import annotations

import math
import re
from decimal import Decimal

__all__ = ["format_duration", "parse_duration"]

_UNITS: dict[str, float] = {}
for _seconds, _words in (
    (0.001, ("ms", "msec", "msecs", "millisecond", "milliseconds")),
    (1.0, ("s", "sec", "secs", "second", "seconds")),
    (60.0, ("m", "min", "mins", "minute", "minutes")),
    (3600.0, ("h", "hr", "hrs", "hour", "hours")),
    (86400.0, ("d", "day", "days")),
    (604800.0, ("w", "wk", "wks", "week", "weeks")),
):
    for _word in _words:
        _UNITS[_word] = _seconds

_NUMBER = r"(\d+(?:\.\d+)?|\.\d+)"
_NUMBER_UNIT = re.compile(rf"^\s*{_NUMBER}\s*([a-zA-Z]*)\s*$")
# One term of a sum: a number and its unit, then an optional separator ("," or "and").
_TERM = re.compile(rf"\s*{_NUMBER}\s*([a-zA-Z]+)\.?\s*(?P<separator>(?:,|\band\b)\s*)?")
_ISO = re.compile(
    r"^P(?!$)(?:(?P<w>\d+(?:\.\d+)?)W)?(?:(?P<d>\d+(?:\.\d+)?)D)?"
    r"(?:T(?=\d)(?:(?P<h>\d+(?:\.\d+)?)H)?(?:(?P<m>\d+(?:\.\d+)?)M)?(?:(?P<s>\d+(?:\.\d+)?)S)?)?$",
    re.IGNORECASE,
)

# A duration longer than this is almost certainly a typo (and overflows Qt timers, ~24.8 days).
MAX_SECONDS = 366 * 86400.0


def parse_duration(text: str) -> float:
    """Return the duration in seconds; raise ValueError saying what is wrong."""
    if not isinstance(text, str):
        raise ValueError("a duration must be text such as '30 seconds'")
    raw = text.strip()
    if not raw:
        raise ValueError("a duration is empty; write for example '30 seconds'")
    seconds: float
    iso = _ISO.match(raw)
    if iso:
        parts = iso.groupdict()
        seconds = sum(
            float(parts[key]) * factor
            for key, factor in (
                ("w", 604800.0),
                ("d", 86400.0),
                ("h", 3600.0),
                ("m", 60.0),
                ("s", 1.0),
            )
            if parts[key] is not None
        )
    else:
        match = _NUMBER_UNIT.match(raw)
        terms = [match.groups()] if match else _terms(raw, text)
        seconds = 0.0
        for number, unit in terms:
            factor = _UNITS.get(unit.lower()) if unit else 1.0
            if factor is None:
                raise ValueError(
                    f"'{unit}' in '{text}' is not a unit of time; use seconds, minutes, hours, "
                    "days or weeks"
                )
            seconds += float(number) * factor
    if not math.isfinite(seconds) or seconds <= 0:
        raise ValueError(f"'{text}' is not a positive duration")
    if seconds > MAX_SECONDS:
        raise ValueError(f"'{text}' is longer than a year; is it a typo?")
    return seconds


def _terms(raw: str, text: str) -> list[tuple[str, str]]:
    """``1 hour 30 minutes``, ``1h30m``, ``1 week, 2 days and 3 hours``: (number, unit) pairs,
    each with its unit; anything else in the text refuses the whole."""
    terms: list[tuple[str, str]] = []
    position = 0
    while position < len(raw):
        term = _TERM.match(raw, position)
        if not term or term.end() == position:
            raise ValueError(
                f"'{text}' is not a duration; write a number and a unit such as "
                "'30 seconds', '2 minutes', '1 hour 30 minutes', '2 weeks' or 'PT30S'"
            )
        terms.append((term.group(1), term.group(2)))
        position = term.end()
        if position == len(raw) and term.group("separator"):
            raise ValueError(f"'{text}' ends with '{term.group('separator').strip()}'")
    return terms


def format_duration(seconds: float) -> str:
    """The inverse, for messages and serialisation: '30 seconds', '1.5 minutes'."""
    if seconds % 3600 == 0 and seconds >= 3600:
        value, unit = seconds / 3600, "hour"
    elif seconds % 60 == 0 and seconds >= 60:
        value, unit = seconds / 60, "minute"
    else:
        value, unit = seconds, "second"
    number = _plain_number(value)
    return f"{number} {unit}" + ("" if number == "1" else "s")


def _plain_number(value: float) -> str:
    """The shortest decimal that reads back as exactly ``value``, never in exponent form
    (``parse_duration`` does not read ``1e-05``), so format and parse round-trip."""
    text = format(Decimal(repr(float(value))), "f")
    if "." in text:
        text = text.rstrip("0").rstrip(".")
    return text

"""Durations as people write them in a `preferred-duration` (INTERFACE.md, Durations).

Accepted: a number and a unit word (``30 seconds``, ``2 minutes``, ``1 hour``, ``1.5 min``,
``45 s``), a bare number (seconds), or ISO 8601 (``PT30S``, ``PT1H30M``, ``P1D``).
Zero, negative and anything else are refused with a message a person can act on.
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
):
    for _word in _words:
        _UNITS[_word] = _seconds

_NUMBER_UNIT = re.compile(r"^\s*(\d+(?:\.\d+)?|\.\d+)\s*([a-zA-Z]*)\s*$")
_ISO = re.compile(
    r"^P(?!$)(?:(?P<d>\d+(?:\.\d+)?)D)?"
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
            for key, factor in (("d", 86400.0), ("h", 3600.0), ("m", 60.0), ("s", 1.0))
            if parts[key] is not None
        )
    else:
        match = _NUMBER_UNIT.match(raw)
        if not match:
            raise ValueError(
                f"'{text}' is not a duration; write a number and a unit such as "
                "'30 seconds', '2 minutes' or 'PT30S'"
            )
        number, unit = match.groups()
        factor = _UNITS.get(unit.lower()) if unit else 1.0
        if factor is None:
            raise ValueError(
                f"'{unit}' in '{text}' is not a unit of time; use seconds, minutes or hours"
            )
        seconds = float(number) * factor
    if not math.isfinite(seconds) or seconds <= 0:
        raise ValueError(f"'{text}' is not a positive duration")
    if seconds > MAX_SECONDS:
        raise ValueError(f"'{text}' is longer than a year; is it a typo?")
    return seconds


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

"""server.platform.validation's grammars: each pattern (the one the OpenAPI documents carry) accepts
exactly what the validator accepts, and what it accepts is safe for the code that uses it."""

from __future__ import annotations

import re
from urllib.parse import urlsplit

from hypothesis import example, given, settings
from hypothesis import strategies as st

from cds import durations
from cds.durations import MAX_SECONDS, parse_duration
from server.platform.validation import (
    DURATION_PATTERN,
    DURATION_UNITS,
    HTTP,
    HTTP_URI_PATTERN,
    LATITUDE_PATTERN,
    LONGITUDE_PATTERN,
    URI_PATTERN,
    check_uri,
    parse_coordinate,
    parse_duration_field,
)

# Strings built from the characters the grammars care about, and a few they do not.
COORDINATE_TEXT = st.text(alphabet="NSEWnsewx0123456789. \t+-\u00a0\u0665", max_size=14)
DURATION_TEXT = st.one_of(
    st.text(alphabet="PTDHMSptdhms0123456789. \t-x", max_size=12),
    st.builds(
        lambda n, space, unit: f"{n}{space}{unit}",
        st.from_regex(r"\A(?:[0-9]{1,4}(?:\.[0-9]{1,3})?|\.[0-9]{1,3})\Z"),
        st.sampled_from(["", " ", "\t", "  "]),
        st.sampled_from([*DURATION_UNITS, "SECONDS", "Min", "weeks", "x"]),
    ),
)
URI_TEXT = st.one_of(
    st.from_regex(r"\A(?:https?|HTTP|ftp|x)://[a-z0-9.:@\[\]%/?#-]{0,20}\Z"),
    st.text(max_size=20),
)


def ecma_search(pattern: str, text: str) -> bool:
    """JSON Schema's reading of ``pattern``: an ECMA-262 search, where ``$`` is the very end
    (Python's ``$`` also matches before a final newline; ``\\Z`` is ECMA's ``$``)."""
    if pattern.endswith("$"):
        pattern = pattern[:-1] + r"\Z"
    return re.search(pattern, text) is not None


def test_the_duration_units_are_the_parsers() -> None:
    assert set(DURATION_UNITS) == set(durations._UNITS)


@settings(max_examples=2000)
@given(COORDINATE_TEXT, st.sampled_from(["latitude", "longitude"]))
@example("N90.000000000000000001", "latitude")
@example("N 90 0.0000000000000001", "latitude")
@example("E180", "longitude")
@example("\tW 0180\t", "longitude")
@example("W 0180 0", "longitude")
@example("N 090 00", "latitude")
@example("W 179 59.9999999999999999", "longitude")
@example("N54.0104\n", "latitude")
def test_coordinate_pattern_is_the_parser(text: str, axis: str) -> None:
    pattern = LATITUDE_PATTERN if axis == "latitude" else LONGITUDE_PATTERN
    try:
        parse_coordinate(text, axis)
        parsed = True
    except ValueError:
        parsed = False
    assert ecma_search(pattern, text) == parsed


@settings(max_examples=2000)
@given(DURATION_TEXT)
@example("P")
@example("PT")
@example("P1DT")
@example("0.000 ms")
@example("99999999 days")
@example(" 30 seconds\n")
def test_duration_pattern_is_the_validator(text: str) -> None:
    matches = ecma_search(DURATION_PATTERN, text)
    try:
        seconds = parse_duration_field(text)
    except ValueError:
        assert not matches
        return
    assert matches
    assert 0 < seconds <= MAX_SECONDS
    try:
        assert parse_duration(text) == seconds
    except ValueError as error:
        assert "longer than a year" in str(error)


@settings(max_examples=2000)
@given(URI_TEXT)
@example("http://[::1]:8080/x")
@example("http://[::::]/")
@example("http://host:65536/")
@example("http://:80/")
@example("https://u:p@h/")
def test_uri_patterns_are_the_validator(text: str) -> None:
    http_ok = check_uri(text, HTTP) is None
    assert http_ok == ecma_search(HTTP_URI_PATTERN, text)
    assert (check_uri(text) is None) == ecma_search(URI_PATTERN, text)
    if http_ok:
        # What the segments do with an accepted URL must not fail.
        parts = urlsplit(text)
        assert parts.hostname
        parts.port  # noqa: B018

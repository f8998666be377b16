"""A small schema layer: each endpoint declares its fields once, in one place.

    SUBSCRIBE = Schema(Field("subscriber-uri", Uri(schemes=HTTP), required=True))
    fields = SUBSCRIBE.validate(read_json_object())   # -> dict, or ValidationError naming the field

Unknown fields are ignored (forward compatibility); wrong types and bad values are 400 with the
field's name. A field sent as ``null`` is a value like any other, refused unless its validator
takes it (only ``data`` of a sensor reading does: the spec makes it any JSON value). Validators
return the cleaned value (a parsed duration, a URI as given).

Each value grammar is one regular expression below, written in the subset where Python's ``re``
and ECMA-262 (JSON Schema ``pattern``) agree (ASCII classes spelled out, no class escapes).
The segments' OpenAPI documents carry the very same strings (``PATTERNS``), and
tests/server/platform/test_openapi.py keeps them equal, so a document says exactly what is accepted.

This module imports neither Flask nor ``server.platform.http`` (the display reads its configuration
with ``check_uri`` and ``parse_coordinate`` from here): a refusal is a ``ValidationError``, which
``server.platform.http`` answers with the usual JSON error body.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from cds.durations import MAX_SECONDS, parse_duration
from cds.layouts import ZONE_NAME_PATTERN
from server.platform.signing import SIGNING_SECRET_PATTERN, parse_secret

HTTP = ("http", "https")
#: What a display shows: a web address, or a live stream's (cds.streams).
CONTENT = (*HTTP, "rtsp", "rtsps", "srt")

Validator = Callable[[str, Any], Any]


class ValidationError(Exception):
    """A request value refused: the HTTP status, error code, message and field to answer with."""

    def __init__(self, status: int, error: str, message: str, *, field: str | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.error = error
        self.message = message
        self.field = field

    def body(self) -> dict[str, Any]:
        body: dict[str, Any] = {"error": self.error, "message": self.message}
        if self.field is not None:
            body["field"] = self.field
        return body


def invalid_field(field: str, message: str) -> ValidationError:
    return ValidationError(400, "invalid-field", message, field=field)


@dataclass(frozen=True)
class Field:
    name: str
    check: Validator
    required: bool = False


class Schema:
    def __init__(self, *fields: Field) -> None:
        self.fields = fields

    def validate(self, body: Mapping[str, Any]) -> dict[str, Any]:
        if not isinstance(body, Mapping):
            raise ValidationError(400, "invalid-json", "The body must be a JSON object.")
        cleaned: dict[str, Any] = {}
        for field in self.fields:
            if field.name not in body:
                if field.required:
                    raise invalid_field(field.name, f"'{field.name}' is required.")
                continue
            cleaned[field.name] = field.check(field.name, body[field.name])
        return cleaned


# The grammars. Character classes are spelled out: ``\s`` and ``\d`` mean different things in
# Python (Unicode) and ECMA-262, so neither is used; nor are flags (JSON Schema has none).

#: Not blank: has a character other than space, tab, CR and LF (a search, not anchored).
NOT_BLANK_PATTERN = "[^ \\t\\r\\n]"

# A URI character: anything but C0/C1 controls, DEL and whitespace (every character
# str.isspace() calls whitespace, and U+FEFF).
_URI_CHAR = (
    "[^\\x00-\\x20\\x7f-\\xa0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000\\ufeff]"
)
_H4 = "[0-9A-Fa-f]{1,4}"
# RFC 3986 IPv6address without the embedded-IPv4 forms: what urllib and ipaddress accept.
_IPV6 = (
    "(?:"
    + "|".join(
        [
            f"(?:{_H4}:){{7}}{_H4}",
            f"(?:{_H4}:){{1,7}}:",
            f"(?:{_H4}:){{1,6}}:{_H4}",
            f"(?:{_H4}:){{1,5}}(?::{_H4}){{1,2}}",
            f"(?:{_H4}:){{1,4}}(?::{_H4}){{1,3}}",
            f"(?:{_H4}:){{1,3}}(?::{_H4}){{1,4}}",
            f"(?:{_H4}:){{1,2}}(?::{_H4}){{1,5}}",
            f"{_H4}:(?::{_H4}){{1,6}}",
            f":(?:(?::{_H4}){{1,7}}|:)",
        ]
    )
    + ")"
)
_HOST = f"(?:\\[{_IPV6}\\]|[A-Za-z0-9._~!$&'()*+,;=%-]+)"
_PORT = "(?::(?:[0-9]{0,4}|[0-5][0-9]{4}|6[0-4][0-9]{3}|65[0-4][0-9]{2}|655[0-2][0-9]|6553[0-5]))?"

#: An absolute http or https URL: optional user info, a host (ASCII; an international name in
#: punycode; an IPv6 address in brackets), an optional port up to 65535, then any path, query
#: and fragment without spaces or control characters.
HTTP_URI_PATTERN = (
    f"^[Hh][Tt][Tt][Pp][Ss]?://(?:[A-Za-z0-9._~!$&'()*+,;=%:-]*@)?{_HOST}{_PORT}"
    f"(?:[/?#]{_URI_CHAR}*)?$"
)
#: An absolute address of content a display shows: as HTTP_URI_PATTERN, with the schemes of a
#: live stream besides http and https (rtsp, rtsps, srt).
CONTENT_URI_PATTERN = (
    "^(?:[Hh][Tt][Tt][Pp][Ss]?|[Rr][Tt][Ss][Pp][Ss]?|[Ss][Rr][Tt])://"
    f"(?:[A-Za-z0-9._~!$&'()*+,;=%:-]*@)?{_HOST}{_PORT}(?:[/?#]{_URI_CHAR}*)?$"
)
#: A server's address alone (an origin): http(s)://host[:port], at most a "/" after it, and no
#: user info, path, query or fragment (a content server's display-uri).
HTTP_ORIGIN_PATTERN = f"^[Hh][Tt][Tt][Pp][Ss]?://{_HOST}{_PORT}/?$"
#: An absolute URI of any scheme: a scheme, a colon, then no spaces or control characters.
URI_PATTERN = f"^[A-Za-z][A-Za-z0-9+.-]*:{_URI_CHAR}*$"
URI_MAX_LENGTH = 4096


def _any_case(text: str) -> str:
    return "".join(f"[{c.lower()}{c.upper()}]" if c.isalpha() else c for c in text)


#: The unit words of cds.durations (tests keep the two lists equal).
DURATION_UNITS = (
    "ms", "msec", "msecs", "millisecond", "milliseconds",
    "s", "sec", "secs", "second", "seconds",
    "m", "min", "mins", "minute", "minutes",
    "h", "hr", "hrs", "hour", "hours",
    "d", "day", "days",
    "w", "wk", "wks", "week", "weeks",
)  # fmt: skip
_SP = "[ \\t]*"
_ISO_NUMBER = "[0-9]+(?:\\.[0-9]+)?"
_ISO_DURATION = (
    f"{_any_case('p')}(?!{_SP}$)(?:{_ISO_NUMBER}{_any_case('w')})?"
    f"(?:{_ISO_NUMBER}{_any_case('d')})?"
    f"(?:{_any_case('t')}(?=[0-9])(?:{_ISO_NUMBER}{_any_case('h')})?"
    f"(?:{_ISO_NUMBER}{_any_case('m')})?(?:{_ISO_NUMBER}{_any_case('s')})?)?"
)
_UNIT = "(?:" + "|".join(_any_case(u) for u in sorted(DURATION_UNITS, key=len, reverse=True)) + ")"
#: A positive duration as text: ISO 8601 ('PT30S', 'P2W'), a number with an optional unit word
#: ('30 seconds', '1.5 min', '45'), or a sum of such terms each with its unit ('1 hour 30
#: minutes', '1h30m', '1 week, 2 days and 3 hours'); some digit is not zero. Any case.
_NUMBER = "(?:[0-9]+(?:\\.[0-9]+)?|\\.[0-9]+)"
_TERM = f"{_NUMBER}{_SP}{_UNIT}\\.?"
# Between the terms of a sum: nothing, spaces, a comma, or "and" with a space on each side.
_SEPARATOR = f"(?:{_SP},{_SP}|[ \\t]+{_any_case('and')}[ \\t]+|{_SP})"
DURATION_PATTERN = (
    f"^{_SP}(?=[^1-9]*[1-9])(?:{_ISO_DURATION}|{_NUMBER}{_SP}{_UNIT}?"
    f"|{_TERM}(?:{_SEPARATOR}{_TERM})+){_SP}$"
)
DURATION_MAX_LENGTH = 100

_FRACTION = "(?:\\.[0-9]+)?"
_ZEROS = "(?:\\.0+)?"
_MINUTES = "[0-5]?[0-9](?:\\.[0-9]+)?"  # under 60


def _coordinate_pattern(letters: str, below: str, limit: str) -> str:
    """Degrees in 1-3 digits up to ``limit``: ``below`` matches every whole degree under it."""
    top = ("0?" if len(limit) < 3 else "") + limit  # degrees have at most 3 digits
    decimal = f"(?:(?:{below}){_FRACTION}|{top}{_ZEROS})"
    deg_min = f"(?:(?:{below})[ \\t]+{_MINUTES}|{top}[ \\t]+0{{1,2}}{_ZEROS})"
    hemisphere = f"[{letters}{letters.lower()}]"
    return f"^{_SP}(?:{hemisphere}{_SP}(?:{decimal}|{deg_min})|[+-]?{decimal}){_SP}$"


#: 'N54.0104', 'N 54 00.624', '54.0104' or '-33.5': at most 90 degrees.
LATITUDE_PATTERN = _coordinate_pattern("NS", "0{0,2}[0-9]|0?[1-8][0-9]", "90")
#: 'E2.5', 'W 2 47.298' or '-2.5': at most 180 degrees.
LONGITUDE_PATTERN = _coordinate_pattern("EW", "0{0,2}[0-9]|0?[1-9][0-9]|1[0-7][0-9]", "180")


def _any_case_choice(*words: tuple[str, str]) -> str:
    """A pattern of any of ``words`` (each a head and an optional tail), in any case."""

    def any_case(text: str) -> str:
        return "".join(f"[{c.upper()}{c}]" for c in text)

    return "^(?:" + "|".join(f"{any_case(h)}(?:{any_case(t)})?" for h, t in words) + ")$"


#: The patterns as the OpenAPI documents name them (components/schemas/<name>/pattern).
#: A TLS certificate's fingerprint: sha256 and the lowercase hex of the DER certificate's hash.
FINGERPRINT_PATTERN = "^sha256:[0-9a-f]{64}$"

#: A controller's name when it pairs with a display (server.platform.pairing): it is also a path
# segment.
CONTROLLER_NAME_PATTERN = "^[A-Za-z0-9][A-Za-z0-9 ._@-]{0,99}$"

#: A SHA-256 as the media library keys its items: 64 lower-case hex digits.
SHA256_PATTERN = "^[0-9a-f]{64}$"

#: A time of day, HH:MM or HH:MM:SS on the 24-hour clock; 24:00 ends at midnight.
CLOCK_PATTERN = "^([01][0-9]|2[0-3]):([0-5][0-9])(:([0-5][0-9]))?$|^24:00(:00)?$"

#: A day in the calendar as YYYY-MM-DD (the schema adds ``format: date`` for the calendar).
CALENDAR_DAY_PATTERN = "^[0-9]{4}-[0-9]{2}-[0-9]{2}$"

#: A day of the week, in full or its first three letters, any case.
DAY_OF_WEEK_PATTERN = _any_case_choice(
    ("mon", "day"), ("tue", "sday"), ("wed", "nesday"), ("thu", "rsday"), ("fri", "day"),
    ("sat", "urday"), ("sun", "day"),
)  # fmt: skip

#: A URL that carries user information (a name or password before its host).
USERINFO_PATTERN = "^[^:]*://[^/?#]*@"

PATTERNS = {
    "ControllerName": CONTROLLER_NAME_PATTERN,
    "SigningSecret": SIGNING_SECRET_PATTERN,
    "Fingerprint": FINGERPRINT_PATTERN,
    "HttpUri": HTTP_URI_PATTERN,
    "ContentUri": CONTENT_URI_PATTERN,
    "HttpOrigin": HTTP_ORIGIN_PATTERN,
    "Uri": URI_PATTERN,
    "Duration": DURATION_PATTERN,
    "Latitude": LATITUDE_PATTERN,
    "Longitude": LONGITUDE_PATTERN,
    "NotBlank": NOT_BLANK_PATTERN,
    "Sha256": SHA256_PATTERN,
    "Clock": CLOCK_PATTERN,
    "CalendarDay": CALENDAR_DAY_PATTERN,
    "DayOfWeek": DAY_OF_WEEK_PATTERN,
    "UserInfo": USERINFO_PATTERN,
    "ZoneName": ZONE_NAME_PATTERN,
}

_NOT_BLANK = re.compile(NOT_BLANK_PATTERN)
_HTTP_URI = re.compile(HTTP_URI_PATTERN)
_CONTENT_URI = re.compile(CONTENT_URI_PATTERN)
_URI = re.compile(URI_PATTERN)
_DURATION = re.compile(DURATION_PATTERN)
_FINGERPRINT = re.compile(FINGERPRINT_PATTERN)
_ZONE_NAME = re.compile(ZONE_NAME_PATTERN)


def String(*, max_length: int = 1000) -> Validator:  # noqa: N802
    """A string of 1 to ``max_length`` characters that is not blank (NOT_BLANK_PATTERN)."""

    def check(name: str, value: Any) -> str:
        if not isinstance(value, str):
            raise invalid_field(name, f"'{name}' must be a string.")
        if not _NOT_BLANK.search(value):
            raise invalid_field(name, f"'{name}' must not be empty.")
        if len(value) > max_length:
            raise invalid_field(name, f"'{name}' is longer than {max_length} characters.")
        return value

    return check


def ZoneName() -> Validator:  # noqa: N802
    """The name of a zone of a layout (cds.layouts.ZONE_NAME_PATTERN): 1 to 40 lower-case
    letters, digits, '-' or '_', starting with a letter or a digit."""

    def check(name: str, value: Any) -> str:
        if not isinstance(value, str) or not _ZONE_NAME.fullmatch(value):
            raise invalid_field(
                name,
                f"'{name}' must be a zone's name: 1 to 40 lower-case letters, digits, '-' or "
                "'_', starting with a letter or a digit (like 'main' or 'ticker').",
            )
        return value

    return check


#: A zone of the screen, as a filter of plays names it (``zone=main``).
ZONE_NAME = ZoneName()


def SigningSecret() -> Validator:  # noqa: N802
    """A Standard Webhooks secret, ``whsec_<base64 of 24 to 64 bytes>``
    (``server.platform.signing``)."""

    def check(name: str, value: Any) -> str:
        if not isinstance(value, str):
            raise invalid_field(name, f"'{name}' must be a string 'whsec_<base64>'.")
        try:
            parse_secret(value)
        except ValueError as error:
            raise invalid_field(
                name, f"'{name}' is not a signing secret: {error} (whsec_<base64 of 24-64 bytes>)."
            ) from None
        return value

    return check


def Fingerprint() -> Validator:  # noqa: N802
    """A TLS certificate fingerprint, ``sha256:`` and 64 lowercase hex digits."""

    def check(name: str, value: Any) -> str:
        if not isinstance(value, str) or not _FINGERPRINT.match(value):
            raise invalid_field(name, f"'{name}' must be 'sha256:' and 64 lowercase hex digits.")
        return value

    return check


def Boolean() -> Validator:  # noqa: N802
    """A JSON true or false (in a body)."""

    def check(name: str, value: Any) -> bool:
        if isinstance(value, bool):
            return value
        raise invalid_field(name, f"'{name}' must be true or false.")

    return check


def QueryBoolean() -> Validator:  # noqa: N802
    """A query parameter's 'true' or 'false' (OpenAPI's text form of a boolean)."""

    def check(name: str, value: Any) -> bool:
        if value in ("true", "false"):
            return bool(value == "true")
        raise invalid_field(name, f"'{name}' must be true or false.")

    return check


def Object() -> Validator:  # noqa: N802
    def check(name: str, value: Any) -> dict[str, Any]:
        if not isinstance(value, dict):
            raise invalid_field(name, f"'{name}' must be a JSON object.")
        return value

    return check


def Anything() -> Validator:  # noqa: N802
    def check(name: str, value: Any) -> Any:
        return value

    return check


def check_uri(value: str, schemes: tuple[str, ...] | None = None) -> str | None:
    """The reason a URI is refused, or None when it is acceptable.

    ``schemes=None``: any absolute URI (URI_PATTERN). Otherwise an http(s) URL with a host
    (HTTP_URI_PATTERN), or a stream's (CONTENT_URI_PATTERN), further limited to ``schemes``.
    """
    if not isinstance(value, str) or not value:
        return "must be an absolute URI"
    if _URI.fullmatch(value) is None:
        if ":" not in value:
            return "must be an absolute URI (with a scheme such as http://)"
        return "must be an absolute URI without spaces or control characters"
    if schemes is None:
        return None
    scheme = value.split(":", 1)[0].lower()
    if scheme not in schemes:
        return f"must use {' or '.join(schemes)}, not {scheme}"
    if scheme not in HTTP:
        if _CONTENT_URI.fullmatch(value) is None:
            return f"must be {scheme}://host[:port][/path]: a host (ASCII), a port up to 65535"
        return None
    if _HTTP_URI.fullmatch(value) is None:
        return "must be http(s)://host[:port][/path]: a host (ASCII), a port up to 65535"
    return None


def Uri(*, schemes: tuple[str, ...] | None = None, max_length: int = URI_MAX_LENGTH) -> Validator:  # noqa: N802
    def check(name: str, value: Any) -> str:
        if not isinstance(value, str):
            raise invalid_field(name, f"'{name}' must be a URI string.")
        if len(value) > max_length:
            raise invalid_field(name, f"'{name}' is longer than {max_length} characters.")
        problem = check_uri(value, schemes)
        if problem:
            raise invalid_field(name, f"'{name}' {problem}.")
        return value

    return check


def parse_duration_field(value: str) -> float:
    """Seconds of a DURATION_PATTERN string; one longer than a year is capped at a year."""
    if len(value) > DURATION_MAX_LENGTH or _DURATION.fullmatch(value) is None:
        try:
            parse_duration(value)
        except ValueError as error:
            raise ValueError(str(error)) from None
        raise ValueError(f"'{value}' is not a duration; write e.g. '30 seconds' or 'PT30S'")
    try:
        return parse_duration(value)
    except ValueError:
        # The pattern admits only positive, finite durations of at most 100 characters: what
        # parse_duration refuses of them is longer than its limit. A preferred duration is a
        # preference (spec 2.5), so it is capped rather than refused.
        return MAX_SECONDS


def Duration() -> Validator:  # noqa: N802
    """A preferred-duration: DURATION_PATTERN text, or a JSON number of seconds above zero.

    Either is capped at a year (cds.durations.MAX_SECONDS).
    """

    def check(name: str, value: Any) -> float:
        if isinstance(value, bool) or not isinstance(value, str | int | float):
            raise invalid_field(name, f"'{name}' must be a duration such as '30 seconds'.")
        if not isinstance(value, str):
            if not value > 0:  # also NaN
                raise invalid_field(name, f"'{name}' must be a positive number of seconds.")
            return min(float(value), MAX_SECONDS)
        try:
            return parse_duration_field(value)
        except ValueError as error:
            raise invalid_field(name, f"'{name}': {error}.") from None

    return check


# The notations of parse_coordinate, each a part of LATITUDE_PATTERN / LONGITUDE_PATTERN.
_DECIMAL = re.compile(r"[ \t]*([NSEWnsew])[ \t]*([0-9]{1,3}(?:\.[0-9]+)?)[ \t]*")
_DEG_MIN = re.compile(r"[ \t]*([NSEWnsew])[ \t]*([0-9]{1,3})[ \t]+([0-9]{1,2}(?:\.[0-9]+)?)[ \t]*")
_SIGNED = re.compile(r"[ \t]*([+-]?[0-9]{1,3}(?:\.[0-9]+)?)[ \t]*")


def parse_coordinate(text: str, axis: str) -> float:
    """Signed decimal degrees from either notation; ValueError says what is wrong.

    Exactly the strings LATITUDE_PATTERN / LONGITUDE_PATTERN match (limits compared exactly,
    in decimal).
    """
    letters = "NS" if axis == "latitude" else "EW"
    limit = Decimal(90 if axis == "latitude" else 180)
    match = _DECIMAL.fullmatch(text) or _DEG_MIN.fullmatch(text)
    signed = _SIGNED.fullmatch(text)
    if match:
        hemisphere = match.group(1).upper()
        if hemisphere not in letters:
            raise ValueError(f"a {axis} starts with {' or '.join(letters)}, not {hemisphere}")
        degrees = Decimal(match.group(2))
        if match.re is _DEG_MIN:
            minutes = Decimal(match.group(3))
            if minutes >= 60:
                raise ValueError(f"minutes must be under 60 in '{text}'")
            degrees += minutes / 60
        value = -degrees if hemisphere in "SW" else degrees
    elif signed:
        value = Decimal(signed.group(1))
    else:
        example = letters[0]
        raise ValueError(
            f"'{text}' is not a {axis}; write e.g. '{example}54.0104' or '{example} 54 00.624'"
        )
    if abs(value) > limit:
        raise ValueError(f"'{text}' is beyond {limit} degrees")
    return float(value)


def Location() -> Validator:  # noqa: N802
    """A location object with latitude and longitude in either notation, kept as given."""

    def check(name: str, value: Any) -> dict[str, str]:
        if not isinstance(value, dict):
            raise invalid_field(name, f"'{name}' must be an object with latitude and longitude.")
        cleaned: dict[str, str] = {}
        for axis in ("latitude", "longitude"):
            text = value.get(axis)
            if not isinstance(text, str):
                raise invalid_field(f"{name}.{axis}", f"'{name}.{axis}' is required, as a string.")
            try:
                parse_coordinate(text, axis)
            except ValueError as error:
                raise invalid_field(f"{name}.{axis}", f"'{name}.{axis}': {error}.") from None
            cleaned[axis] = text
        return cleaned

    return check

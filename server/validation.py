"""A small schema layer: each endpoint declares its fields once, in one place.

    SUBSCRIBE = Schema(Field("subscriber-uri", Uri(schemes=HTTP), required=True))
    fields = SUBSCRIBE.validate(read_json_object())   # -> dict, or ValidationError naming the field

Unknown fields are ignored (forward compatibility); wrong types and bad values are 400 with the
field's name. Validators return the cleaned value (a parsed duration, a stripped URI).

This module imports neither Flask nor ``server.http`` (the display reads its configuration with
``check_uri`` and ``parse_coordinate`` from here): a refusal is a ``ValidationError``, which
``server.http`` answers with the usual JSON error body.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from cds.durations import parse_duration

HTTP = ("http", "https")

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
            if field.name not in body or body[field.name] is None:
                if field.required:
                    raise invalid_field(field.name, f"'{field.name}' is required.")
                continue
            cleaned[field.name] = field.check(field.name, body[field.name])
        return cleaned


def String(*, max_length: int = 1000, allow_empty: bool = False) -> Validator:  # noqa: N802
    def check(name: str, value: Any) -> str:
        if not isinstance(value, str):
            raise invalid_field(name, f"'{name}' must be a string.")
        if not allow_empty and not value.strip():
            raise invalid_field(name, f"'{name}' must not be empty.")
        if len(value) > max_length:
            raise invalid_field(name, f"'{name}' is longer than {max_length} characters.")
        return value

    return check


def Boolean() -> Validator:  # noqa: N802
    def check(name: str, value: Any) -> bool:
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.lower() in ("true", "false", "1", "0", "yes", "no"):
            return value.lower() in ("true", "1", "yes")
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
    """The reason a URI is refused, or None when it is an acceptable absolute URI."""
    if not value or value != value.strip() or any(ch.isspace() for ch in value):
        return "must be an absolute URI without spaces"
    try:
        parts = urlsplit(value)
        parts.port  # noqa: B018  (raises ValueError on a bad port)
    except ValueError:
        return "is not a valid URI"
    if not parts.scheme:
        return "must be an absolute URI (with a scheme such as http://)"
    if schemes is not None:
        if parts.scheme.lower() not in schemes:
            return f"must use {' or '.join(schemes)}, not {parts.scheme}"
        if not parts.hostname:
            return "must name a host"
    return None


def Uri(*, schemes: tuple[str, ...] | None = None, max_length: int = 4096) -> Validator:  # noqa: N802
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


def Duration() -> Validator:  # noqa: N802
    def check(name: str, value: Any) -> float:
        if isinstance(value, bool) or not isinstance(value, str | int | float):
            raise invalid_field(name, f"'{name}' must be a duration such as '30 seconds'.")
        try:
            return parse_duration(str(value))
        except ValueError as error:
            raise invalid_field(name, f"'{name}': {error}.") from None

    return check


# Location notations from the spec: "N54.0104" (hemisphere and decimal degrees) and
# "N 54 00.624" (hemisphere, degrees and decimal minutes). A signed decimal is also accepted.
_DECIMAL = re.compile(r"^\s*([NSEWnsew])\s*(\d{1,3}(?:\.\d+)?)\s*$")
_DEG_MIN = re.compile(r"^\s*([NSEWnsew])\s*(\d{1,3})\s+(\d{1,2}(?:\.\d+)?)\s*$")
_SIGNED = re.compile(r"^\s*([+-]?\d{1,3}(?:\.\d+)?)\s*$")


def parse_coordinate(text: str, axis: str) -> float:
    """Signed decimal degrees from either notation; ValueError says what is wrong."""
    letters = "NS" if axis == "latitude" else "EW"
    limit = 90.0 if axis == "latitude" else 180.0
    match = _DECIMAL.match(text) or _DEG_MIN.match(text)
    if match:
        hemisphere = match.group(1).upper()
        if hemisphere not in letters:
            raise ValueError(f"a {axis} starts with {' or '.join(letters)}, not {hemisphere}")
        degrees = float(match.group(2))
        if match.re is _DEG_MIN:
            minutes = float(match.group(3))
            if minutes >= 60:
                raise ValueError(f"minutes must be under 60 in '{text}'")
            degrees += minutes / 60
        value = -degrees if hemisphere in "SW" else degrees
    elif _SIGNED.match(text):
        value = float(text)
    else:
        example = letters[0]
        raise ValueError(
            f"'{text}' is not a {axis}; write e.g. '{example}54.0104' or '{example} 54 00.624'"
        )
    if abs(value) > limit:
        raise ValueError(f"'{text}' is beyond {limit:g} degrees")
    return value


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

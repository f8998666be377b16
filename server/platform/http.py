"""What every segment's Flask app shares: JSON errors, request bodies, the bearer token.

These hold for all four segments (docs/interface.md, "Every segment"):
- every 4xx/5xx is ``{"error": "<kebab-code>", "message": "...", ["field": ...]}``, never HTML;
- a body is JSON when ``Content-Type`` says ``application/json``, XML when it says
  ``text/xml`` or ``application/xml``; any other label (a form, text/plain) is 415, so a web
  page cannot send one without the browser asking first; a body with no ``Content-Type`` is
  judged by its content, unless it comes with a browser's ``Origin`` (then 415 too);
- JSON bodies over 1 MiB and XML bodies over 8 MiB get 413;
- JSON nested deeper than ``JSON_MAX_DEPTH`` arrays/objects gets 400 ``too-deep``, judged
  before parsing (Python's parser would fail with RecursionError, a 500);
- with an API token configured, state-changing requests need ``Authorization: Bearer``, and
  with reads protected (``protect_reads``) every request does; a 401 says
  ``WWW-Authenticate: Bearer``;
- ``GET /x/openapi.json`` serves the segment's OpenAPI document.

``server.platform.validation`` stays free of Flask: its ``ValidationError`` is answered here, by
the same handler as ``ApiError``.
"""

from __future__ import annotations

import hmac
import json
import logging
import re
from collections.abc import Callable
from importlib import resources
from typing import Any, Literal

from flask import Flask, Response, current_app, request
from werkzeug.exceptions import HTTPException

from cds.errors import CdsError
from server.platform.db import disk_full, note_disk_full
from server.platform.limits import SubscriptionLimitError, protect_reads_from_env
from server.platform.lockout import TOKEN_GUESSES, Lockout
from server.platform.signing import HEADERS
from server.platform.validation import ValidationError, invalid_field

__all__ = [
    "JSON_LIMIT",
    "JSON_MAX_DEPTH",
    "XML_LIMIT",
    "ApiError",
    "ValidationError",
    "body_kind",
    "create_base_app",
    "install_error_handlers",
    "invalid_field",
    "json_bytes",
    "json_response",
    "json_too_deep",
    "loads_bounded",
    "read_json_body",
    "read_json_object",
    "read_raw_body",
    "read_xml_body",
    "require_token",
    "too_many_attempts",
    "unsupported_media_type",
    "webhook_headers",
]

log = logging.getLogger("pdn.http")

JSON_LIMIT = 1 << 20
JSON_MAX_DEPTH = 64

# A JSON string (cut out whole, so brackets inside strings do not count).
_JSON_STRING = re.compile(rb'"(?:[^"\\]|\\.)*"')
_NOT_BRACKETS = bytes(b for b in range(256) if b not in b"[]{}")
XML_LIMIT = 8 << 20

BodyKind = Literal["json", "xml", "none", "other"]

_STATUS_CODES = {
    400: "bad-request",
    401: "unauthorized",
    403: "forbidden",
    404: "not-found",
    405: "method-not-allowed",
    406: "not-acceptable",
    409: "conflict",
    413: "payload-too-large",
    415: "unsupported-media-type",
    429: "too-many-requests",
    431: "request-header-fields-too-large",
    500: "internal-error",
    502: "bad-gateway",
    503: "unavailable",
    504: "gateway-timeout",
    507: "insufficient-storage",
}


class ApiError(Exception):
    """An error the client should see, as the JSON error body."""

    def __init__(
        self,
        status: int,
        error: str,
        message: str,
        *,
        field: str | None = None,
        extra: dict[str, Any] | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.error = error
        self.message = message
        self.field = field
        self.extra = extra or {}
        self.headers = headers or {}

    def body(self) -> dict[str, Any]:
        body: dict[str, Any] = {"error": self.error, "message": self.message}
        if self.field is not None:
            body["field"] = self.field
        body.update(self.extra)
        return body


def json_bytes(body: Any) -> bytes:
    """A JSON answer's bytes: compact, UTF-8 (not ASCII-escaped), ending in a newline."""
    return (json.dumps(body, ensure_ascii=False, separators=(",", ":")) + "\n").encode()


def json_response(body: Any, status: int = 200, headers: dict[str, str] | None = None) -> Response:
    response = current_app.response_class(
        json_bytes(body),
        status=status,
        mimetype="application/json",
    )
    for name, value in (headers or {}).items():
        response.headers[name] = value
    return response


def install_error_handlers(app: Flask) -> None:
    """Every error, including Flask's own 404/405 and unexpected exceptions, as JSON."""

    def _client_error(error: ApiError | ValidationError) -> Response:
        return json_response(error.body(), error.status, getattr(error, "headers", None))

    app.register_error_handler(ApiError, _client_error)
    app.register_error_handler(ValidationError, _client_error)

    @app.errorhandler(CdsError)
    def _invalid_cds(error: CdsError) -> Response:
        # A CDS body refused by cds.parser, wherever a segment takes one.
        first = error.problems[0]
        return json_response(
            {
                "error": "invalid-cds",
                "message": f"The CDS is not valid: {first}.",
                "line": first.line,
                "problems": [
                    {"line": p.line, "element": p.element, "message": p.message}
                    for p in error.problems
                ],
            },
            400,
        )

    @app.errorhandler(SubscriptionLimitError)
    def _too_many_subscriptions(error: SubscriptionLimitError) -> Response:
        return json_response(
            {
                "error": "too-many-subscriptions",
                "message": f"This resource has {error.limit} subscriptions, the most it takes;"
                " unsubscribe one first.",
            },
            429,
        )

    @app.errorhandler(HTTPException)
    def _http_error(error: HTTPException) -> Response:
        status = error.code or 500
        message = {
            404: f"There is no resource at {request.path}.",
            405: f"{request.method} is not allowed on {request.path}.",
            413: "The request body is too large.",
        }.get(status, error.description or "The request failed.")
        response = json_response({"error": _STATUS_CODES.get(status, "error"), "message": message})
        response.status_code = status
        if status == 405 and error.get_response().headers.get("Allow"):
            response.headers["Allow"] = error.get_response().headers["Allow"]
        return response

    @app.errorhandler(Exception)
    def _unexpected(error: Exception) -> Response:
        full = disk_full(error)
        if full is not None:
            note_disk_full(full)
            return json_response(
                {
                    "error": "insufficient-storage",
                    "message": "The disk is full, so nothing was changed; free space and try"
                    f" again. Cause: {full}.",
                },
                507,
            )
        log.exception("unexpected error serving %s %s", request.method, request.path)
        return json_response(
            {"error": "internal-error", "message": "The server failed; the error is logged."}, 500
        )


#: The media types a labelled body is read as. Every other label (a form, text/plain,
#: multipart) is 415: those are what a web page can send to any address without the browser
#: asking first (a CORS "simple request"), so reading them would let any page drive a segment on
#: loopback.
JSON_TYPES = frozenset(("application/json",))
XML_TYPES = frozenset(("text/xml", "application/xml"))


def body_kind() -> BodyKind:
    """Classify the request body: ``none`` when there is none, else by its Content-Type.

    A body with no Content-Type is judged by its content (the spec requires no header), but
    only from a client that is not a browser: a browser sends ``Origin`` with every POST, and a
    page can send an unlabelled body anywhere, so an unlabelled body with an ``Origin`` is 415."""
    mimetype = (request.mimetype or "").lower()
    if mimetype in JSON_TYPES:
        return "json"
    if mimetype in XML_TYPES:
        return "xml"
    if mimetype:
        return "other"
    data = _raw_body(XML_LIMIT).lstrip(b"\xef\xbb\xbf \t\r\n")
    if not data:
        return "none"
    if request.headers.get("Origin") is not None:
        return "other"
    if data.startswith(b"<"):
        return "xml"
    if len(data) > JSON_LIMIT:
        raise ApiError(413, "payload-too-large", f"The request body is over {JSON_LIMIT} bytes.")
    return "json"


def unsupported_media_type(accepts: str = "JSON") -> ApiError:
    """415 for a body of a type not read (see :data:`JSON_TYPES`), saying what to send."""
    given = request.mimetype or "a body with no Content-Type"
    send = "application/json" if accepts == "JSON" else "text/xml"
    return ApiError(
        415,
        "unsupported-media-type",
        f"This endpoint accepts {accepts}, not {given}; send 'Content-Type: {send}'.",
    )


def json_too_deep(data: bytes, limit: int = JSON_MAX_DEPTH) -> bool:
    """True when arrays and objects in ``data`` nest deeper than ``limit``, judged without
    parsing: strings are cut out, then everything but brackets, then innermost pairs are
    removed ``limit`` times; brackets left mean deeper nesting (or brackets that do not match,
    which is not JSON either). Linear in the size, at C speed."""
    if data.count(b"[") + data.count(b"{") <= limit:
        return False
    brackets = _JSON_STRING.sub(b"", data).translate(None, _NOT_BRACKETS)
    if re.search(rb"[\[{]{%d}" % (limit + 1), brackets):
        return True  # the usual attack, [[[[...: settled without the passes below
    for _ in range(limit):
        shorter = brackets.replace(b"[]", b"").replace(b"{}", b"")
        if len(shorter) == len(brackets):
            break
        brackets = shorter
    return bool(brackets)


def loads_bounded(data: bytes) -> Any:
    """``json.loads`` for untrusted bytes: ValueError when nested deeper than JSON_MAX_DEPTH."""
    if json_too_deep(data):
        raise ValueError(f"JSON nested deeper than {JSON_MAX_DEPTH} levels")
    return json.loads(data)


def _raw_body(limit: int) -> bytes:
    """The body, read once (bounded) and kept in the WSGI environ for later readers."""
    cached: bytes | None = request.environ.get("pdn.body")
    if cached is not None:
        return cached
    length = request.content_length
    if length is not None and length > limit:
        raise ApiError(413, "payload-too-large", f"The request body is over {limit} bytes.")
    data = request.stream.read(limit + 1)
    if len(data) > limit:
        raise ApiError(413, "payload-too-large", f"The request body is over {limit} bytes.")
    request.environ["pdn.body"] = data
    return data


def read_xml_body() -> bytes:
    return _raw_body(XML_LIMIT)


def webhook_headers() -> dict[str, str]:
    """The request's Standard Webhooks headers ("" for those missing), for a Verifier."""
    return {name: request.headers.get(name, "") for name in HEADERS}


def read_raw_body(limit: int = JSON_LIMIT) -> bytes:
    """The body's bytes as sent (413 over ``limit``), e.g. to check a signature over them."""
    return _raw_body(limit)


def read_json_body(*, required: bool = True) -> Any:
    """The request's JSON value; a missing body is ``{}`` unless ``required``."""
    kind = body_kind()
    if kind == "none":
        if required:
            raise ApiError(400, "missing-body", "The request needs a JSON body.")
        return {}
    if kind != "json":
        raise unsupported_media_type()
    data = _raw_body(JSON_LIMIT)
    if not data.strip():
        if required:
            raise ApiError(400, "missing-body", "The request needs a JSON body.")
        return {}
    if json_too_deep(data):
        raise ApiError(
            400,
            "too-deep",
            f"The JSON body nests arrays and objects deeper than {JSON_MAX_DEPTH} levels.",
        )
    try:
        return json.loads(data)
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise ApiError(400, "invalid-json", f"The body is not valid JSON: {error}.") from None


def read_json_object(*, required: bool = True) -> dict[str, Any]:
    value = read_json_body(required=required)
    if not isinstance(value, dict):
        raise ApiError(400, "invalid-json", "The body must be a JSON object.")
    return value


def require_token(
    app: Flask,
    token_getter: Callable[[], str | None],
    *,
    service: str,
    protect_reads: Callable[[], bool] | None = None,
    open_endpoints: frozenset[str] = frozenset(),
) -> None:
    """Demand ``Authorization: Bearer <token>`` on state-changing requests when a token is set,
    and on reads too when ``protect_reads()`` says so (default: ``PDN_PROTECT_READS``).

    ``service`` names the segment in the refusal: "This <service> needs ...". Every 401
    carries ``WWW-Authenticate: Bearer`` (RFC 6750). 10 wrong tokens from one address within
    a minute lock that address out (429, ``server.platform.lockout``), as on the display.
    ``open_endpoints``: endpoints open to anyone by design (the content segment's
    ``POST /<app>/schedule``).
    """
    reads_protected = protect_reads or protect_reads_from_env
    guard = Lockout(limit=TOKEN_GUESSES[0], window=TOKEN_GUESSES[1])
    app.extensions["pdn.token-guard"] = guard

    @app.before_request
    def _check_token() -> None:
        token = token_getter()
        if not token or request.method == "OPTIONS" or request.endpoint in open_endpoints:
            return
        reading = request.method in ("GET", "HEAD")
        if reading and not reads_protected():
            return
        address = request.remote_addr or ""
        wait = guard.retry_after(address)
        if wait is not None:
            raise too_many_attempts(wait, "tokens")
        header = request.headers.get("Authorization", "")
        scheme, _, given = header.partition(" ")
        if scheme.lower() == "bearer" and hmac.compare_digest(
            given.strip().encode(), token.encode()
        ):
            return
        if header:
            guard.failed(address)
        what = "for reading too" if reading else "for changes"
        raise ApiError(
            401,
            "unauthorized",
            f"This {service} needs 'Authorization: Bearer <token>' {what}.",
            headers={
                "WWW-Authenticate": f'Bearer realm="pdn {service}"'
                + (', error="invalid_token"' if header else "")
            },
        )


def too_many_attempts(wait: int, what: str) -> ApiError:
    """429 for an address locked out after wrong guesses (``server.platform.lockout``)."""
    return ApiError(
        429,
        "too-many-attempts",
        f"Too many wrong {what} from this address; try again in {wait} s.",
        headers={"Retry-After": str(wait)},
    )


def create_base_app(name: str, *, openapi: str | None = None) -> Flask:
    """A Flask app with the shared conventions installed.

    ``openapi`` names the segment's OpenAPI document, ``server/openapi/<openapi>.json``, which
    the app then serves at ``GET /x/openapi.json``, with a page showing it at ``GET /x/docs``.
    """
    app = Flask(name)
    app.config["MAX_CONTENT_LENGTH"] = XML_LIMIT + 1
    app.json.sort_keys = False  # type: ignore[attr-defined]
    app.url_map.strict_slashes = False
    install_error_handlers(app)
    if openapi is not None:
        document = resources.files("server").joinpath(f"openapi/{openapi}.json")

        @app.get("/x/openapi.json", endpoint="openapi")
        def _openapi() -> Response:
            return app.response_class(document.read_bytes(), mimetype="application/json")

        @app.get("/x/docs", endpoint="docs")
        def _docs() -> Response:
            return docs_response(app)

    return app


DOCS_POLICY = (
    "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline';"
    " connect-src 'self'; img-src 'self' data:; base-uri 'none'; form-action 'none'"
)


def docs_response(app: Flask) -> Response:
    """``GET /x/docs``: the API docs page shipped with the package (``openapi/docs.html``),
    which shows the segment's ``/x/openapi.json``; its policy forbids loading anything else."""
    page = resources.files("server").joinpath("openapi/docs.html").read_bytes()
    response = app.response_class(page, mimetype="text/html")
    response.headers["Content-Security-Policy"] = DOCS_POLICY
    response.headers["Cache-Control"] = "no-cache"
    return response

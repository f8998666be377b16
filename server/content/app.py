"""The Content Segment's HTTP API (spec 4.2; docs/interface.md, "Content Segment"):
hosted applications.

Every folder ``<apps dir>/<app>/`` with an ``index.html`` is an application at ``/<app>/``; the
built-in ``message`` application (``server/apps/message``) always exists.

    GET  /<app>/                 the application's page (what a display shows)
    GET  /<app>/<asset>          its files
    POST /<app>/schedule         ask the application to schedule itself onto a display
    POST /schedule               the same for the default application, ``message``
    GET  /x/apps                 extension: the applications hosted here

``POST /<app>/schedule`` is open to anyone and rate-limited per address. Its ``display-uri``
must name a display this server knows (``server.content.displays``: configured, or registered
with its scheduler; else 400 or 403). It builds the content-item URL
``<base>/<app>/?<application-params>`` and POSTs ``{"content-item", "preferred-duration"}`` to
that display's ``/schedule``, with that display's own token (``DisplayCredentials.bearer``),
then answers in its own words: 202 forwarded / rejected / failed (with a short reason of its
own), or 504 when the display cannot be reached within 5 seconds. What the display answered is
never passed on: it is the content server's answer to whoever asked, not the display's.
"""

from __future__ import annotations

import json
import logging
import re
import socket
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass
from http import HTTPStatus
from pathlib import Path
from typing import Any
from urllib.parse import urlencode, urlsplit

import requests
from flask import Flask, Response, redirect, request, send_from_directory

from cds.durations import format_duration
from server.content.displays import DisplayDirectory, Target
from server.platform.displaycreds import DisplayCredentials
from server.platform.http import (
    ApiError,
    create_base_app,
    invalid_field,
    json_response,
    read_json_object,
)
from server.platform.http import require_token as install_token_check
from server.platform.lockout import RateLimit
from server.platform.net import local_address, url_host
from server.platform.pins import PinningAdapter
from server.platform.validation import HTTP, Duration, Field, Object, Schema, Uri

log = logging.getLogger("pdn.content")

BUILTIN_APPS = Path(__file__).resolve().parent.parent / "apps"
DEFAULT_APP = "message"
APP_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$")
#: Displays must answer within this (docs/interface.md, "Content Segment": 504 within 5 s).
FORWARD_TIMEOUT = 4.5
MAX_URL_LENGTH = 8000

SCHEDULE_REQUEST = Schema(
    Field("application-params", Object(), required=True),
    Field("display-uri", Uri(schemes=HTTP), required=True),
    Field("preferred-duration", Duration()),
    Field("requestor", Object(), required=True),
)


class AppCatalog:
    """Applications by name: the operator's directory first, then the built-in ones."""

    def __init__(self, directories: Sequence[Path]) -> None:
        self.directories = list(directories)

    def find(self, name: str) -> Path | None:
        if not APP_NAME.match(name):
            return None
        for directory in self.directories:
            folder = directory / name
            if (folder / "index.html").is_file():
                return folder
        return None

    def names(self) -> list[str]:
        found: set[str] = set()
        for directory in self.directories:
            try:
                children = list(directory.iterdir())
            except OSError:
                continue
            found.update(
                child.name
                for child in children
                if APP_NAME.match(child.name) and (child / "index.html").is_file()
            )
        return sorted(found)


@dataclass(frozen=True)
class ForwardResult:
    status: str  # forwarded | rejected | failed | unreachable
    reason: str | None = None


class DisplayForwarder:
    """POSTs a scheduling request to a display, with a hard deadline on the whole exchange."""

    def __init__(
        self,
        *,
        timeout: float = FORWARD_TIMEOUT,
        credentials: DisplayCredentials | None = None,
    ) -> None:
        """``credentials``: each display's own token and pinned certificate, sent and checked
        for that display only (and the shared token for the listed displays)."""
        self._timeout = timeout
        self._credentials = credentials
        self._pool = ThreadPoolExecutor(max_workers=16, thread_name_prefix="forward")

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)

    def forward(self, display: Target, body: dict[str, Any]) -> ForwardResult:
        future = self._pool.submit(self._post, display, body)
        try:
            # requests' timeouts bound each socket wait, not the whole exchange: this does.
            return future.result(timeout=self._timeout + 0.3)
        except FutureTimeout:
            return ForwardResult("unreachable", f"{display.origin} did not answer within 5 seconds")

    def _post(self, display: Target, body: dict[str, Any]) -> ForwardResult:
        target = display.schedule_url
        headers = {"Accept": "application/json", "Content-Type": "application/json"}
        token = self._credentials.bearer(display.origin) if self._credentials else None
        if token:
            headers["Authorization"] = f"Bearer {token}"
        try:
            with requests.Session() as session:
                if self._credentials is not None:  # HTTPS displays paired: pinned
                    session.mount("https://", PinningAdapter(self._credentials.pin))
                response = session.post(
                    target,
                    data=json.dumps(body),
                    headers=headers,
                    timeout=(self._timeout, self._timeout),
                    allow_redirects=False,
                )
        except requests.RequestException as error:
            return ForwardResult("unreachable", f"cannot reach {display.origin}: {_short(error)}")
        try:
            answer = response.json()
        except ValueError:
            answer = None
        status = answer.get("request-status") if isinstance(answer, dict) else None
        if response.status_code == 202 and status == "scheduling":
            return ForwardResult("forwarded")
        if response.status_code == 202 and status == "rejected":
            return ForwardResult("rejected", "the display did not take the request")
        return ForwardResult("failed", _outcome(response.status_code, sent_token=bool(token)))


def _outcome(code: int, *, sent_token: bool) -> str:
    """The content server's own words for a display's answer (never the display's)."""
    try:
        phrase = HTTPStatus(code).phrase
    except ValueError:
        phrase = "an unknown status"
    said = f"the display answered {code} {phrase}"
    if code in (401, 403):
        if sent_token:
            return f"{said}: it does not take this content server's token for it"
        return (
            f"{said}: it takes requests only from paired controllers; pair this content"
            " server with it (pdn ctl pair, as the user it runs as)"
        )
    return said


def _short(error: Exception) -> str:
    text = str(error)
    return text if len(text) < 300 else text[:300] + "..."


def query_value(value: Any) -> str:
    """An application parameter as a query-string value (JSON for anything but text)."""
    if isinstance(value, str):
        return value
    if value is None:
        return ""
    return json.dumps(value, ensure_ascii=False)


def advertised_base(
    public_url: str | None, listen_host: str, listen_port: Callable[[], int]
) -> Callable[[str], str]:
    """How the content server names itself to a display: the base of content-item URLs.

    ``--public-url`` wins. A server bound to one address advertises that address. One bound to
    every address (0.0.0.0, ::) advertises its own address on the route to the display, which
    is the one the display can reach.
    """
    if public_url:
        fixed = public_url.rstrip("/")
        return lambda display_uri: fixed

    def base(display_uri: str) -> str:
        host = listen_host
        if host in ("0.0.0.0", "::", ""):
            display_host = urlsplit(display_uri).hostname or "127.0.0.1"
            try:
                display_ip = socket.getaddrinfo(display_host, None)[0][4][0]
            except OSError:
                display_ip = display_host
            host = local_address(str(display_ip))
        return f"http://{url_host(host)}:{listen_port()}"

    return base


#: Requests per client address to POST /<app>/schedule: 30 a minute (the endpoint is open).
SCHEDULE_RATE = (30, 60.0)


def create_app(
    catalog: AppCatalog,
    forwarder: DisplayForwarder,
    base_url_for: Callable[[str], str],
    *,
    displays: DisplayDirectory,
    token: str | None = None,
) -> Flask:
    """The content server's Flask app; ``displays``: where ``display-uri`` may go."""
    app = create_base_app("pdn.content", openapi="content")
    # POST /<app>/schedule stays open with a token set too (docs/interface.md, "Who may change
    # what"): rate-limited below.
    install_token_check(
        app,
        lambda: token,
        service="content server",
        open_endpoints=frozenset(("schedule", "schedule_default")),
    )
    # POST /<app>/schedule is open to anyone by design (a visitor's phone asks an app onto a
    # screen): so it is rate-limited per address instead (tests may swap the limiter).
    app.extensions["pdn.schedule-rate"] = RateLimit(limit=SCHEDULE_RATE[0], window=SCHEDULE_RATE[1])

    def app_folder(name: str) -> Path:
        folder = catalog.find(name)
        if folder is None:
            raise ApiError(
                404,
                "unknown-application",
                f"There is no application '{name}' here; "
                f"available: {', '.join(catalog.names()) or 'none'}.",
            )
        return folder

    @app.get("/x/apps")
    def list_apps() -> Response:
        return json_response(
            [{"name": name, "url": f"{request.host_url}{name}/"} for name in catalog.names()]
        )

    @app.post("/schedule")
    def schedule_default() -> Response:
        return schedule(DEFAULT_APP)

    @app.post("/<name>/schedule")
    def schedule(name: str) -> Response:
        rate: RateLimit = app.extensions["pdn.schedule-rate"]
        wait = rate.take(request.remote_addr or "")
        if wait is not None:
            raise ApiError(
                429,
                "too-many-requests",
                f"This address asked for {rate.limit} screens within {rate.window:g} s, the"
                f" most it may; try again in {wait} s.",
                headers={"Retry-After": str(wait)},
            )
        app_folder(name)
        body = read_json_object()
        fields = SCHEDULE_REQUEST.validate(body)
        requestor = fields["requestor"]
        for key in ("device-id", "user-id"):
            if key in requestor and not isinstance(requestor[key], str):
                raise invalid_field(f"requestor.{key}", f"'requestor.{key}' must be a string.")
        params = fields["application-params"]
        display = displays.target(fields["display-uri"])
        display_uri = display.origin
        query = urlencode([(str(key), query_value(value)) for key, value in params.items()])
        content_item = f"{base_url_for(display_uri)}/{name}/" + (f"?{query}" if query else "")
        if len(content_item) > MAX_URL_LENGTH:
            raise invalid_field(
                "application-params",
                f"'application-params' make a URL longer than {MAX_URL_LENGTH} characters.",
            )
        forwarded: dict[str, Any] = {"content-item": content_item}
        if "preferred-duration" in fields:
            given = body["preferred-duration"]
            # Text as the requestor wrote it; a number of seconds as text the display reads.
            forwarded["preferred-duration"] = (
                given if isinstance(given, str) else format_duration(fields["preferred-duration"])
            )
        result = forwarder.forward(display, forwarded)
        log.info(
            "%s for %s (requestor %s): %s%s",
            name,
            display_uri,
            json.dumps(requestor)[:200],
            result.status,
            f" ({result.reason})" if result.reason else "",
        )
        if result.status == "unreachable":
            return json_response(
                {
                    "request-status": "failed",
                    "error": "display-unreachable",
                    "message": result.reason or "The display could not be reached.",
                },
                504,
            )
        answer: dict[str, Any] = {"request-status": result.status}
        if result.reason:
            answer["reason"] = result.reason
        return json_response(answer, 202)

    @app.get("/<name>/")
    def app_index(name: str) -> Response:
        folder = app_folder(name)
        if not request.path.endswith("/"):
            # Relative asset paths in the page resolve against /<app>/, not /.
            query = request.query_string.decode("latin-1")
            target = f"/{name}/" + (f"?{query}" if query else "")
            return redirect(target, code=308)  # type: ignore[return-value]
        response = send_from_directory(folder, "index.html", max_age=0)
        response.headers["Cache-Control"] = "no-cache"
        return response

    @app.get("/<name>/<path:asset>")
    def app_asset(name: str, asset: str) -> Response:
        folder = app_folder(name)
        return send_from_directory(folder, asset, max_age=300)

    return app

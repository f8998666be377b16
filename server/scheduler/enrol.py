"""Who may change the scheduler, and how displays join it (docs/interface.md, "Who may change
what").

- **The operator token** (``PDN_API_TOKEN``; ``install.sh`` makes one) guards schedules,
  assignments, groups, broadcasts, approvals, adding displays and the console. A scheduler
  with no operator token that listens beyond loopback takes none of these (401, saying to set
  one); on loopback only with no token it is open, as the spec shows it (a developer's machine).
- **Registration** (``POST /displays``, ``server.scheduler.registration``) stays open, as in
  the spec, to register a URL not registered yet. With the *enrolment token*
  (``PDN_ENROLMENT_TOKEN``, or the operator token) as bearer, the display is approved at once;
  without one it is *pending* until an operator approves it (``POST /x/displays/approve``, the
  console, ``pdn ctl approve``), and nothing is pushed to it before; a wrong token is refused
  (401) and counted as a guess. An open scheduler approves every registration. A change to a
  registered display needs proof (a token, or the display's signature).
- **Schedule subscriptions** (``POST /schedule/<id>/subscribe/``, ``/unsubscribe/``): the
  operator or the enrolment token (a display following a schedule sends its
  ``scheduler_token``).
- **Reads** are open unless ``protect_reads`` (then either token), but for a display's
  thumbnail (``GET /x/displays/thumbnail``: the idle page shows the pairing code), which is
  the operator's.
- **Adding a display by its pairing code** (``POST /x/displays/pair``, the console's "Add a
  display"): the scheduler pairs with the display (``POST /x/pair``), pinning the certificate
  it presents when it serves HTTPS, keeps the token and pushes with it from then on.

Wrong tokens from one address lock that address out (``server.platform.lockout``), as on the
display.
"""

from __future__ import annotations

import hmac
import logging
import socket
import ssl
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import requests
from flask import Flask, Response, request

from server.platform.http import ApiError, json_response, read_json_object, too_many_attempts
from server.platform.limits import protect_reads_from_env
from server.platform.lockout import TOKEN_GUESSES, Lockout
from server.platform.pins import PinningAdapter, presented_fingerprint
from server.platform.validation import HTTP, Field, Fingerprint, Location, Schema, String, Uri
from server.scheduler.storage import SchedulerStorage

__all__ = ["SchedulerAccess", "add_display", "add_enrolment_routes", "approve", "pair_with_display"]

log = logging.getLogger("pdn.scheduler.enrol")

#: What a display (with the enrolment token) may do beyond reading: follow a schedule.
_ENROLLED = frozenset(("subscribe", "unsubscribe"))
#: Answered by the route itself (registration: open, pending without the enrolment token;
#: media bytes: server.scheduler.media.api decides who reads them).
_OPEN = frozenset(("register_display", "media_bytes"))
#: Reads for the operator only: a display's picture may show its pairing code.
_OPERATOR_READS = frozenset(("get_thumbnail",))
TIMEOUT = 5.0

APPROVE = Schema(Field("display", Uri(schemes=HTTP), required=True))
PAIR = Schema(
    Field("url", Uri(schemes=HTTP), required=True),
    Field("code", String(max_length=40), required=True),
    Field("pin", Fingerprint()),
    Field("location", Location()),
    Field("name", String(max_length=200)),
)


@dataclass
class SchedulerAccess:
    """The scheduler's tokens, and whether it is closed (a token, or listening beyond loopback)."""

    operator_token: str | None = None
    enrolment_token: str | None = None
    beyond_loopback: bool = False
    protect_reads: Callable[[], bool] = protect_reads_from_env
    guard: Lockout = field(
        default_factory=lambda: Lockout(limit=TOKEN_GUESSES[0], window=TOKEN_GUESSES[1])
    )

    @property
    def closed(self) -> bool:
        return self.beyond_loopback or bool(self.operator_token)

    def bearer(self) -> str | None:
        """Who the request's bearer token says the client is: "operator", "enrolment", or None
        when it sent none. A wrong token: 401 (and a guess counted); locked out: 429."""
        address = request.remote_addr or ""
        wait = self.guard.retry_after(address)
        if wait is not None:
            raise too_many_attempts(wait, "tokens")
        header = request.headers.get("Authorization", "")
        if not header:
            return None
        scheme, _, given = header.partition(" ")
        given = given.strip()
        if scheme.lower() == "bearer" and given:
            for who, token in (
                ("operator", self.operator_token),
                ("enrolment", self.enrolment_token),
            ):
                if token and hmac.compare_digest(given.encode(), token.encode()):
                    return who
        self.guard.failed(address)
        raise self.refusal(wrong=True)

    def enrolled(self) -> bool:
        """A registration is approved at once: an open scheduler, or either token sent."""
        who = self.bearer()
        return who is not None or not self.closed

    def check(self) -> None:
        """Flask ``before_request``: refuse what this client may not do (module docstring)."""
        if request.method == "OPTIONS" or request.endpoint in _OPEN:
            return
        reading = request.method in ("GET", "HEAD")
        if reading and not self.protect_reads() and request.endpoint not in _OPERATOR_READS:
            return
        if not self.closed:
            return
        who = self.bearer()
        enrolled = reading and request.endpoint not in _OPERATOR_READS
        if who == "operator" or (
            who == "enrolment" and (enrolled or request.endpoint in _ENROLLED)
        ):
            return
        raise self.refusal(wrong=who is not None, reading=reading)

    def refusal(self, *, wrong: bool, reading: bool = False) -> ApiError:
        challenge = 'Bearer realm="pdn scheduler"' + (', error="invalid_token"' if wrong else "")
        if self.operator_token is None:
            message = (
                "This scheduler listens beyond loopback and has no operator token, so it takes"
                " no changes: set PDN_API_TOKEN in its environment (install.sh makes one), then"
                " send 'Authorization: Bearer <token>'."
            )
        else:
            what = "for reading too" if reading else "for changes"
            given = "The token sent is not this scheduler's. " if wrong else ""
            message = (
                f"{given}This scheduler needs its operator token as"
                f" 'Authorization: Bearer <token>' {what}."
            )
        return ApiError(401, "unauthorized", message, headers={"WWW-Authenticate": challenge})


def pair_with_display(
    url: str, code: str, *, name: str, pin: str | None = None
) -> tuple[str, str | None, dict[str, Any]]:
    """Pair with the display at ``url`` using the code on its screen: ``(token, the pinned
    fingerprint or None for plain HTTP, its GET / answer)``. Over HTTPS the certificate it
    presents is pinned (``pin``: the one it must be). ApiError (409, 502) when it fails."""
    session = requests.Session()
    session.trust_env = False
    if urlsplit(url).scheme == "https":
        try:
            found = presented_fingerprint(url, TIMEOUT)
        except (OSError, ssl.SSLError) as error:
            raise ApiError(502, "display-unreachable", f"Cannot reach {url}: {error}.") from None
        if pin is not None and pin != found:
            raise ApiError(
                409,
                "certificate-changed",
                f"{url} presents the certificate {found}, not {pin}: not paired (someone may"
                " be in between).",
                field="pin",
            )
        pin = found
        session.mount("https://", PinningAdapter(lambda _url: pin))
    else:
        pin = None
    try:
        with session:
            response = session.post(
                url.rstrip("/") + "/x/pair",
                json={"code": code, "name": name},
                timeout=TIMEOUT,
                allow_redirects=False,
            )
            answer = _json(response)
            if response.status_code != 201 or not isinstance(answer.get("token"), str):
                message = answer.get("message") or f"it answered {response.status_code}"
                raise ApiError(
                    409 if response.status_code in (400, 401, 403, 404, 429) else 502,
                    "pairing-refused",
                    f"{url} refused the pairing: {message}",
                    field="code",
                )
            if pin is not None and answer.get("tls-fingerprint") != pin:
                raise ApiError(
                    502,
                    "certificate-changed",
                    f"{url} says its certificate is {answer.get('tls-fingerprint')}, but it"
                    f" presented {pin}: not paired (someone may be in between).",
                )
            info = _json(session.get(url, timeout=TIMEOUT, headers={"Accept": "application/json"}))
    except requests.RequestException as error:
        raise ApiError(502, "display-unreachable", f"Cannot reach {url}: {error}.") from None
    return str(answer["token"]), pin, info


def _json(response: requests.Response) -> dict[str, Any]:
    try:
        value = response.json()
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def scheduler_name() -> str:
    """How the scheduler names itself to a display it pairs with: ``scheduler@<host>``."""
    host = "".join(c if c.isalnum() or c in "._-" else "-" for c in socket.gethostname())
    return f"scheduler@{host}"[:100]


def add_enrolment_routes(
    app: Flask,
    storage: SchedulerStorage,
    *,
    on_approve: Callable[[str], None],
    on_paired: Callable[[str, str, str | None], None],
) -> None:
    """``POST /x/displays/approve`` and ``POST /x/displays/pair`` (the operator's)."""

    @app.post("/x/displays/approve")
    def approve_display() -> Response:
        url = approve(storage, APPROVE.validate(read_json_object())["display"], on_approve)
        return json_response({"display": url, "state": "approved"})

    @app.post("/x/displays/pair")
    def pair_display() -> Response:
        fields = PAIR.validate(read_json_object())
        url = fields["url"].rstrip("/")
        pin = add_display(
            storage,
            url,
            fields["code"],
            pin=fields.get("pin"),
            location=fields.get("location"),
            name=fields.get("name"),
            on_paired=on_paired,
        )
        body: dict[str, Any] = {"display": url, "state": "approved"}
        if pin is not None:
            body["tls-fingerprint"] = pin
        return json_response(body, 201)


def add_display(
    storage: SchedulerStorage,
    url: str,
    code: str,
    *,
    on_paired: Callable[[str, str, str | None], None],
    pin: str | None = None,
    location: dict[str, str] | None = None,
    name: str | None = None,
) -> str | None:
    """Pair with the display at ``url`` and register it, approved, with the token and the
    certificate pinned (``POST /x/displays/pair``, the console's "Add a display"); returns the
    pin (None over plain HTTP). Its location and name default to what its ``GET /`` says."""
    token, pin, info = pair_with_display(url, code, name=scheduler_name(), pin=pin)
    known = storage.display(url)
    if location is None:  # what the display says, else what it registered with
        given = info.get("location")
        if isinstance(given, dict) and given:
            location = given
        else:
            location = known.location if known is not None and not known.pending else {}
    if name is None and isinstance(info.get("name"), str):
        name = info["name"]
    if known is not None and known.pending:  # what a stranger may have declared for it
        storage.set_declared_groups(url, [])
    storage.upsert_display(url, location, name)
    storage.set_push_token(url, token)
    # Pushes go with this token now, unsigned: a signing secret the display gave before may be
    # one it no longer has (it was reinstalled), and a signed push is checked by its signature.
    storage.set_push_secret(url, None)
    if pin is not None:
        storage.set_tls_pin(url, pin)
    log.info("paired with display %s%s", url, f" (certificate {pin})" if pin else "")
    on_paired(url, token, pin)
    return pin


def approve(storage: SchedulerStorage, given: str, on_approve: Callable[[str], None]) -> str:
    """Approve a registered display (404 when unknown); returns its URL as registered."""
    display = storage.display(given)
    if display is None or not storage.approve(display.url):
        raise ApiError(
            404,
            "unknown-display",
            f"No display {given} is registered here (it registers itself with POST /displays).",
            field="display",
        )
    if display.pending:
        log.info("display %s approved", display.url)
        on_approve(display.url)
    return display.url

"""The Display Segment's HTTP endpoints (spec 4.1; docs/interface.md, "Display
Segment") and its /x/ extensions.

Each endpoint's input is declared once, in the schemas below; handlers only call the display
(a :class:`server.display.port.DisplayPort`).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Generator
from typing import Any

from flask import Blueprint, Response, current_app, request

from server.display.port import DisplayPort, SensorMessage, UnknownSensorError
from server.platform.eventstream import EventStream, comment, event, opening, stream_response
from server.platform.http import (
    ApiError,
    body_kind,
    invalid_field,
    json_response,
    read_json_object,
    read_xml_body,
    too_many_attempts,
)
from server.platform.lockout import client_key
from server.platform.pairing import NAME_PATTERN, ROLES, Pairing
from server.platform.validation import (
    CONTENT,
    HTTP,
    ZONE_NAME,
    Anything,
    Duration,
    Field,
    Schema,
    SigningSecret,
    String,
    Uri,
    ZoneName,
)

log = logging.getLogger("pdn.display.api")

# Each open event stream holds one of waitress's worker threads (8 in server.platform.wsgi) for as
# long as it is open; at most this many are served at once, so requests always find a thread. One
# client (an address, an IPv6 /64) holds at most one, and none longer than STREAM_LIFE: a client
# then reconnects and resumes with Last-Event-ID, so no one holds the slots for good.
MAX_EVENT_STREAMS = 3
HEARTBEAT = 15.0  # seconds between comments on a quiet stream (app.config["PDN_SSE_HEARTBEAT"])
STREAM_LIFE = 600.0  # seconds a stream lasts at most (app.config["PDN_SSE_LIFE"])
# Seconds between an open stream's looks at whether it should end (a newer stream of its client).
STREAM_POLL = 1.0
_streams_lock = threading.Lock()

api = Blueprint("display", __name__)

# Inputs, one place per endpoint.
SCHEDULE_ITEM = Schema(
    Field("content-item", Uri(schemes=CONTENT), required=True),
    Field("preferred-duration", Duration()),
    Field("zone", ZoneName()),
)
SENSING = Schema(
    Field("sensor-id", String(max_length=200), required=True),
    Field("sensor-type", String(max_length=200)),
    Field("data", Anything()),
    Field("data-source", Uri()),
)
# A subscriber that gives a signing secret gets signed updates (Standard Webhooks); a malformed
# one is 400 when unsubscribing too, as the document has one schema for both.
SUBSCRIBE = Schema(
    Field("subscriber-uri", Uri(schemes=HTTP), required=True),
    Field("signing-secret", SigningSecret()),
)
PAIR = Schema(
    Field("code", String(max_length=64), required=True),
    Field("name", String(max_length=100), required=True),
    Field("role", String(max_length=20)),
)


def validate_sensing(body: dict[str, Any]) -> dict[str, Any]:
    fields = SENSING.validate(body)
    if ("data" in fields) == ("data-source" in fields):
        which = "both" if "data" in fields else "neither"
        raise invalid_field(
            "data",
            f"A reading needs exactly one of 'data' and 'data-source'; this one has {which}.",
        )
    return fields


def display() -> DisplayPort:
    found: DisplayPort = current_app.extensions["pdn.display"]
    return found


@api.get("/")
def display_info() -> Response:
    return json_response(display().info())


@api.post("/schedule")
def schedule() -> Response:
    kind = body_kind()
    if kind == "xml":
        return _schedule_cds()
    if kind == "other":
        given = request.mimetype or "a body with no Content-Type"
        raise ApiError(
            415,
            "unsupported-media-type",
            f"POST /schedule takes JSON (a content-item) or a CDS as XML, not {given}; send"
            " 'Content-Type: application/json' or 'Content-Type: text/xml'.",
        )
    fields = SCHEDULE_ITEM.validate(read_json_object())
    rejected = display().request_item(
        fields["content-item"], fields.get("preferred-duration"), fields.get("zone")
    )
    if rejected is not None:
        return json_response({"request-status": "rejected", "reason": rejected.reason}, 202)
    return json_response({"request-status": "scheduling"}, 202)


def _schedule_cds() -> Response:
    target = display()
    if not target.accepts_cds:
        raise ApiError(
            415,
            "unsupported-media-type",
            "This display accepts single items only: send JSON with a content-item, not a CDS.",
        )
    data = read_xml_body()
    target.apply_cds(data)  # an invalid CDS: 400 invalid-cds (server.platform.http's error handler)
    return json_response({"request-status": "scheduling"}, 202)


@api.get("/sensing")
def list_sensors() -> Response:
    return json_response(display().sensors())


@api.post("/sensing")
def post_sensing() -> Response:
    fields = validate_sensing(read_json_object())
    try:
        display().record_sensing(
            SensorMessage(
                sensor_id=fields["sensor-id"],
                sensor_type=fields.get("sensor-type"),
                data=fields.get("data"),
                has_data="data" in fields,
                data_source=fields.get("data-source"),
            )
        )
    except UnknownSensorError:
        raise invalid_field(
            "sensor-type",
            f"Sensor '{fields['sensor-id']}' is new here: its first message needs 'sensor-type'.",
        ) from None
    return json_response({})


@api.get("/playback/")
def playback() -> Response:
    # GET requests normally take the fast path in server.display.PlaybackFastPath.
    return Response(display().playback_json(), mimetype="application/json")


@api.post("/playback/subscribe/")
def subscribe() -> Response:
    fields = SUBSCRIBE.validate(read_json_object())
    display().subscribe(fields["subscriber-uri"], fields.get("signing-secret"))
    return json_response({}, 201)


@api.post("/playback/unsubscribe/")
def unsubscribe() -> Response:
    fields = SUBSCRIBE.validate(read_json_object())  # a malformed signing-secret: 400 here too
    if not display().unsubscribe(fields["subscriber-uri"]):
        raise ApiError(
            404,
            "not-subscribed",
            f"{fields['subscriber-uri']} is not subscribed to this display's playback.",
        )
    return json_response({})


# Extensions (/x/)


@api.get("/x/health")
def health() -> Response:
    body = display().health()
    tls = current_app.extensions["pdn.security"].tls_fingerprint
    body["tls"] = {"fingerprint": tls} if tls else None
    return json_response(body, 200 if body["status"] == "ok" else 503)


#: GET /x/plays: how many plays one answer gives, unless ``limit`` says otherwise, and at most.
PLAYS_LIMIT = 1000
MAX_PLAYS_LIMIT = 10000


@api.get("/x/plays")
def plays() -> Response:
    """The display's play log, in sequence order, from just after ``since``."""
    since = _whole_number("since", 0, 0, 2**63 - 1)
    limit = _whole_number("limit", PLAYS_LIMIT, 1, MAX_PLAYS_LIMIT)
    zone = request.args.get("zone")
    if zone is not None:
        zone = ZONE_NAME("zone", zone)
    return json_response(display().plays(since, limit, zone))


def _whole_number(name: str, default: int, low: int, high: int) -> int:
    given = request.args.get(name)
    if given is None:
        return default
    text = given.strip()
    if not text.isascii() or not text.isdigit() or not low <= int(text) <= high:
        raise ApiError(
            400,
            "invalid-field",
            f"'{name}' must be a whole number from {low} to {high}, not {given[:40]!r}.",
            field=name,
        )
    return int(text)


@api.post("/x/pair")
def pair() -> Response:
    """A controller pairs with the code on the screen and gets a token of its own."""
    security = current_app.extensions["pdn.security"]
    address = request.remote_addr or ""
    wait = security.codes.retry_after(address)
    if wait is not None:
        raise too_many_attempts(wait, "pairing codes")
    fields = PAIR.validate(read_json_object())
    name = fields["name"]
    if not NAME_PATTERN.match(name):
        raise invalid_field(
            "name",
            "'name' must be 1 to 100 letters, digits, spaces or '._@-', starting with a letter"
            " or digit.",
        )
    role = fields.get("role", "control")
    if role not in ROLES:
        raise invalid_field(
            "role", f"'role' is one of {', '.join(ROLES)}, not {role!r} (default: control)."
        )
    token = _pairing().pair(fields["code"], name, role)
    if token is None:
        security.codes.failed(address)
        raise ApiError(
            403,
            "wrong-code",
            "That is not the pairing code this display shows now (a code works once, for 15"
            " minutes); read the code on its screen and try again.",
        )
    security.codes.succeeded(address)
    body = {"token": token, "role": role}
    if security.tls_fingerprint:
        body["tls-fingerprint"] = security.tls_fingerprint
    return json_response(body, 201)


@api.get("/x/pairings")
def pairings() -> Response:
    return json_response(_pairing().controllers())


@api.delete("/x/pairings/<name>")
def revoke_pairing(name: str) -> Response:
    if not _pairing().revoke(name):
        raise ApiError(404, "not-paired", f"No controller named {name!r} is paired here.")
    return json_response({})


def _pairing() -> Pairing:
    pairing: Pairing | None = current_app.extensions["pdn.security"].pairing
    if pairing is None:
        raise ApiError(
            404, "no-pairing", "This display does not pair controllers (it keeps no pairings)."
        )
    return pairing


@api.get("/x/screenshot")
def screenshot() -> Response:
    try:
        png = display().screenshot()
    except TimeoutError:
        raise ApiError(503, "screen-busy", "The screen did not answer within 5 s.") from None
    except RuntimeError as error:
        raise ApiError(503, "no-screen", f"No screenshot: {error}.") from None
    response = Response(png, mimetype="image/png")
    response.headers["Cache-Control"] = "no-store"
    return response


@api.get("/x/playback/events")
def playback_events() -> Response:
    """Server-sent events: the current record, then each change (``id:`` = its sequence).

    A client that reconnects with ``Last-Event-ID`` gets the records it missed (the last few
    dozen are kept), else the current one; a comment every ``HEARTBEAT`` seconds keeps proxies
    from closing a quiet stream and tells the server that a client has gone. A stream ends
    after ``STREAM_LIFE`` seconds (the client reconnects), and a client holds one at a time:
    its newer stream ends its older one (a client that lost its connection comes back at once)."""
    after = _last_event_id()
    heartbeat = float(current_app.config.get("PDN_SSE_HEARTBEAT", HEARTBEAT))
    life = float(current_app.config.get("PDN_SSE_LIFE", STREAM_LIFE))
    slots = _stream_slots()
    client = client_key(request.remote_addr or "")
    body = PlaybackStream(display(), after, heartbeat, life=life)
    body.on_close(lambda: slots.give(client, body))
    if not slots.take(client, body):
        raise ApiError(
            503,
            "too-many-streams",
            f"This display serves at most {MAX_EVENT_STREAMS} event streams at once;"
            " try again later, or poll GET /playback/.",
            headers={"Retry-After": str(max(1, round(heartbeat)))},
        )
    return stream_response(body)


def _last_event_id() -> int | None:
    given = request.headers.get("Last-Event-ID") or request.args.get("last-event-id")
    if given is None or not given.strip():
        return None
    try:
        value = int(given.strip())
    except ValueError:
        raise ApiError(
            400,
            "invalid-field",
            f"Last-Event-ID must be a playback sequence number, not {given!r}.",
            field="Last-Event-ID",
        ) from None
    return value if value >= 0 else None


class StreamSlots:
    """The event streams open now, per client: at most ``most`` in all, one per client."""

    def __init__(self, most: int) -> None:
        self.most = most
        self._lock = threading.Lock()
        self._streams: dict[str, PlaybackStream] = {}

    def take(self, client: str, stream: PlaybackStream) -> bool:
        """Give ``client``'s slot to ``stream`` (ending the client's older stream, if any);
        False when every slot is held by other clients."""
        with self._lock:
            older = self._streams.get(client)
            if older is None and len(self._streams) >= self.most:
                return False
            self._streams[client] = stream
        if older is not None:
            older.supersede()
        return True

    def give(self, client: str, stream: PlaybackStream) -> None:
        """``stream`` ended: its slot is free, unless a newer stream of the client has it."""
        with self._lock:
            if self._streams.get(client) is stream:
                del self._streams[client]


def _stream_slots() -> StreamSlots:
    with _streams_lock:
        slots: StreamSlots = current_app.extensions.setdefault(
            "pdn.event-streams", StreamSlots(MAX_EVENT_STREAMS)
        )
        return slots


class PlaybackStream(EventStream):
    """The playback events of one client: what it missed (or the current record), then each
    change; it ends when its time is up or a newer stream of its client takes its slot."""

    def __init__(
        self,
        port: DisplayPort,
        after: int | None,
        heartbeat: float,
        *,
        life: float = STREAM_LIFE,
    ) -> None:
        super().__init__()
        self._port = port
        self._after = after
        self._heartbeat = heartbeat
        self._ends = time.monotonic() + life
        self._superseded = False

    def supersede(self) -> None:
        """Another stream of the same client took this one's slot: end within STREAM_POLL."""
        self._superseded = True

    def events(self) -> Generator[bytes]:
        yield opening(f"playback events; heartbeat every {self._heartbeat:g} s")
        after = self._after
        beat = time.monotonic() + self._heartbeat
        while not self.closed:
            now = time.monotonic()
            if self._superseded:
                yield comment("a newer stream of this client took over")
                return
            if now >= self._ends:
                yield comment("this stream's time is up; reconnect (Last-Event-ID resumes it)")
                return
            if now >= beat:
                yield comment("heartbeat")
                beat = now + self._heartbeat
                continue
            wait = min(beat, self._ends, now + STREAM_POLL) - now
            updates = self._port.playback_updates(after, wait)
            if not updates:
                continue
            chunk = b""
            for sequence, record in updates:
                chunk += event("playback", sequence, record.strip())
                after = sequence
            beat = time.monotonic() + self._heartbeat
            yield chunk

"""Proof of play: every playback update of every registered display, stored and queried.

The scheduler subscribes to each registered display's playback updates (the display's
``POST /playback/subscribe/``, done by ``server.scheduler.registry`` each time it reads the
display) with a subscriber-uri of its own: ``<scheduler>/x/ingest/<secret>``, one secret per
display, made when it registers. The secret names the display (the update's own ``display``
field is not trusted), so the ingest path needs no bearer token: displays' outboxes send none.
It is served by a small app of its own (:func:`create_ingest_app`), mounted in front of the
scheduler's API (``SchedulerService``), outside the API token's reach.

An update is the change of one zone of the screen (its ``zone``; ``main`` on a screen without a
layout): the play stored is that zone's, with its ``zone`` and the ``layout`` (the record's
``zones`` go to the display's status, ``server.scheduler.fleetstatus``).

``GET /x/plays?display=&since=&until=&zone=`` answers JSON, or CSV for ``Accept: text/csv``. A jump
in a display's ``sequence`` (updates that never arrived) is filled from the display's own play
log (``server.scheduler.backfill``); while it cannot be, it is reported as a gap with
the reason, in the JSON (``gaps``, and ``gap-before`` on the update after it) and the CSV
(``gap_before``, ``gap_reason``). Without ``since``, the plays before a display's first stored
one are a gap too, until its play log has been read.
"""

from __future__ import annotations

import csv
import io
import logging
import re
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from flask import Flask, Response, request

from server.platform.http import (
    ApiError,
    create_base_app,
    json_response,
    read_json_object,
    read_raw_body,
    webhook_headers,
)
from server.platform.signing import SignatureError, Verifier, derived_secret, parse_secret
from server.platform.validation import HTTP, ZONE_NAME, Uri
from server.scheduler.storage import BackfillState, PlayRecord, SchedulerStorage, display_key

log = logging.getLogger("pdn.scheduler.plays")

INGEST_PREFIX = "/x/ingest"
CSV_COLUMNS = (
    "display",
    "sequence",
    "started",
    "ended",
    "content_item",
    "content_type",
    "set",
    "origin",
    "duration",
    "painted",
    "zone",
    "layout",
    "gap_before",
    "gap_reason",
)


#: RFC 3339 date-time (JSON Schema's ``format: date-time``), the form ``since`` and ``until`` take.
_RFC3339 = re.compile(
    r"^([0-9]{4}-[0-9]{2}-[0-9]{2})[Tt]([0-9]{2}:[0-9]{2}):([0-9]{2})(\.[0-9]+)?"
    r"([Zz]|[+-][0-9]{2}:[0-9]{2})$"
)


def parse_time(name: str, text: str) -> float:
    """An RFC 3339 date-time ('2026-05-01T08:00:00Z') as epoch seconds (400 otherwise)."""
    match = _RFC3339.match(text)
    value = None
    if match is not None:
        day, minutes, seconds, fraction, offset = match.groups()
        seconds = "59" if seconds == "60" else seconds  # a leap second
        offset = "+00:00" if offset in ("Z", "z") else offset
        fraction = (fraction or "")[:7]
        try:
            value = datetime.fromisoformat(f"{day}T{minutes}:{seconds}{fraction}{offset}")
        except ValueError:
            value = None
    if value is None:
        raise ApiError(
            400,
            "invalid-field",
            f"'{name}' must be an RFC 3339 date-time such as '2026-05-01T08:00:00Z'.",
            field=name,
        )
    return value.timestamp()


def _iso(timestamp: float) -> str:
    return datetime.fromtimestamp(timestamp, UTC).isoformat()


def play_json(play: PlayRecord, gap_before: int) -> dict[str, Any]:
    return {
        "display": play.display,
        "sequence": play.sequence,
        "content-item": play.item,
        "content-type": play.content_type,
        "set": play.set_name,
        "origin": play.origin,
        "started": play.started,
        "ended": play.ended,
        "duration": play.duration,
        "painted": play.painted,
        "zone": play.zone,
        "layout": play.layout,
        "received": _iso(play.received),
        "gap-before": gap_before,
    }


def with_gaps(
    plays: list[PlayRecord],
    states: dict[str, BackfillState] | None = None,
    *,
    from_start: bool = False,
) -> tuple[list[tuple[PlayRecord, int]], list[dict[str, Any]]]:
    """Each play with the number of updates missing right before it (in the answer's range),
    and the gaps themselves, each with the reason it is there (``states``: what the scheduler
    knows of each display's play log, by display key). ``from_start``: the answer starts at
    each display's first play, so the plays before the first one stored are a gap too, unless
    the display's play log does not have them (expired there, or made before its log)."""
    states = states or {}
    annotated: list[tuple[PlayRecord, int]] = []
    gaps: list[dict[str, Any]] = []
    previous: PlayRecord | None = None
    for play in plays:
        state = states.get(display_key(play.display), BackfillState())
        missing, after, since = 0, 0, None
        if previous is not None and previous.display == play.display:
            missing = max(0, play.sequence - previous.sequence - 1)
            after, since = previous.sequence, previous.started
        elif from_start and play.sequence - 1 > state.seen:
            missing, after = play.sequence - 1 - state.seen, state.seen
        if missing:
            gaps.append(
                {
                    "display": play.display,
                    "after-sequence": after,
                    "before-sequence": play.sequence,
                    "missing": missing,
                    "from": since,
                    "until": play.started,
                    **gap_reason(state, play.sequence - 1),
                }
            )
        annotated.append((play, missing))
        previous = play
    return annotated, gaps


def gap_reason(state: BackfillState, last_missing: int) -> dict[str, Any]:
    """Why plays up to ``last_missing`` are missing, and whether the scheduler still fills them
    (``filling``): they are read from the display's play log."""
    if last_missing > state.seen and state.error is not None:
        return {"reason": f"the display's play log cannot be read: {state.error}", "filling": True}
    if last_missing > state.seen and state.pending:
        return {"reason": "being read from the display's play log", "filling": True}
    return {"reason": "the display's play log does not have them", "filling": False}


def record_from_update(url: str, body: dict[str, Any]) -> PlayRecord:
    """A PlayRecord from a display's playback update, or an entry of its play log (400 when
    it is neither): the play of the update's ``zone``, from ``zones`` when it has them."""
    sequence = body.get("sequence")
    if not isinstance(sequence, int) or isinstance(sequence, bool) or sequence < 0:
        raise ApiError(400, "invalid-field", "'sequence' must be a whole number.", field="sequence")
    zone = _text(body, "zone") or "main"
    if len(zone) > 100:
        raise ApiError(400, "invalid-field", "'zone' is longer than 100 characters.", field="zone")
    layout = _text(body, "layout")
    zones = body.get("zones")
    if zones is not None:
        if (
            not isinstance(zones, dict)
            or len(zones) > MAX_ZONES
            or not all(isinstance(name, str) and isinstance(v, dict) for name, v in zones.items())
            or zone not in zones
        ):
            raise ApiError(
                400,
                "invalid-field",
                f"'zones' must be an object of at most {MAX_ZONES} zones, holding 'zone'.",
                field="zones",
            )
        zones = {name: _zone_entry(name, value) for name, value in zones.items()}
    fields = zones[zone] if zones is not None else body
    started = _text(fields, "started", required=True)
    assert started is not None
    duration = fields.get("duration")
    if duration is not None and (
        not isinstance(duration, int | float) or isinstance(duration, bool)
    ):
        raise ApiError(400, "invalid-field", "'duration' must be a number.", field="duration")
    return PlayRecord(
        display=url,
        sequence=sequence,
        item=_text(fields, "content-item"),
        content_type=_text(fields, "content-type"),
        set_name=_text(fields, "set"),
        origin=_text(fields, "origin", required=True) or "",
        started=started,
        started_at=_started(started),
        duration=None if duration is None else float(duration),
        ended=None,
        # A display sends an update only once its renderer confirmed the item painted
        # (player.playback); the field is there for displays that may not.
        painted=body.get("painted", True) is not False,
        received=time.time(),
        zone=zone,
        layout=layout,
        zones=zones,
    )


#: The most zones an update may name (a screen split finer is not a sign screen).
MAX_ZONES = 32
_ZONE_FIELDS = ("content-item", "content-type", "origin", "set", "started", "duration")


def _text(body: dict[str, Any], name: str, required: bool = False) -> str | None:
    value = body.get(name)
    if value is None and not required:
        return None
    if not isinstance(value, str) or len(value) > 8192:
        raise ApiError(400, "invalid-field", f"'{name}' must be a string.", field=name)
    return value


def _zone_entry(name: str, entry: dict[str, Any]) -> dict[str, Any]:
    """What the display's status keeps of one zone of an update (strings and a number)."""
    if len(name) > 100:
        raise ApiError(400, "invalid-field", "A zone's name is too long.", field="zones")
    kept: dict[str, Any] = {f: _text(entry, f) for f in _ZONE_FIELDS if f != "duration"}
    duration = entry.get("duration")
    kept["duration"] = duration if isinstance(duration, int | float) else None
    return kept


def now_playing(record: dict[str, Any]) -> dict[str, Any]:
    """The part of a playback record (or update) that says what is on screen: the main
    zone's item at the top and, while a layout splits the screen, ``layout`` and each zone's
    item (``zones``: None full screen). The display's status keeps it
    (``server.scheduler.fleetstatus``)."""
    layout = record.get("layout")
    zones = record.get("zones")
    shown = None
    if isinstance(layout, str) and isinstance(zones, dict) and len(zones) <= MAX_ZONES:
        shown = {
            name: {field: zone.get(field) for field in ("content-item", "set", "started")}
            for name, zone in zones.items()
            if isinstance(name, str) and isinstance(zone, dict)
        }
    return {
        "content-item": record.get("content-item"),
        "set": record.get("set"),
        "origin": record.get("origin"),
        "started": record.get("started"),
        "sequence": record.get("sequence"),
        "layout": layout if shown is not None else None,
        "zones": shown,
    }


def playing_of(play: PlayRecord) -> dict[str, Any]:
    """:func:`now_playing` of the update ``play`` came from: its zones, the main one's item
    at the top (the play's own, from a display without zones)."""
    main = (play.zones or {}).get("main") or {
        "content-item": play.item,
        "set": play.set_name,
        "origin": play.origin,
        "started": play.started,
    }
    return now_playing(
        {**main, "sequence": play.sequence, "layout": play.layout, "zones": play.zones}
    )


def _started(text: str) -> float:
    try:
        value = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise ApiError(
            400, "invalid-field", "'started' must be an ISO 8601 date-time.", field="started"
        ) from None
    return (value if value.tzinfo else value.replace(tzinfo=UTC)).timestamp()


def create_ingest_app(
    storage: SchedulerStorage, on_play: Callable[[PlayRecord], None] = lambda play: None
) -> Flask:
    """The receiver of the displays' playback updates, at ``/x/ingest/<secret>``."""
    app = create_base_app("pdn.scheduler.ingest")
    verifier = Verifier()

    # Mounted at INGEST_PREFIX (werkzeug's DispatcherMiddleware takes the prefix off).
    @app.post("/<secret>")
    def ingest(secret: str) -> Response:
        url = storage.display_for_secret(secret)
        if url is None:
            raise ApiError(404, "unknown-subscription", "No display receives updates here.")
        body = read_raw_body()
        try:
            fresh = verifier.verify(
                [parse_secret(ingest_signing_secret(secret))], webhook_headers(), body
            )
        except SignatureError as error:
            log.warning("refused a playback update for %s: %s", url, error)
            raise ApiError(
                401,
                "invalid-signature",
                str(error),
                headers={"WWW-Authenticate": 'Bearer realm="pdn webhook"'},
            ) from None
        if not fresh:  # taken before: a replay, or a retry whose answer was lost
            log.debug("dropped a repeated playback update of %s", url)
            return json_response({}, 200)
        play = record_from_update(url, read_json_object())
        if storage.record_play(play):
            on_play(play)
        return json_response({}, 200)

    return app


def ingest_signing_secret(secret: str) -> str:
    """The signing secret of a display's playback updates, made from its ingest secret (so
    nothing more is stored): the scheduler gives it when it subscribes, and checks with it."""
    return derived_secret(secret, "pdn playback ingest")


def add_plays_routes(app: Flask, storage: SchedulerStorage) -> None:
    @app.get("/x/plays")
    def list_plays() -> Response:
        display = request.args.get("display")
        if display is not None:
            display = Uri(schemes=HTTP)("display", display)
        since = request.args.get("since")
        until = request.args.get("until")
        zone = request.args.get("zone")
        if zone is not None:
            zone = ZONE_NAME("zone", zone)
        plays = storage.plays(
            display,
            None if since is None else parse_time("since", since),
            None if until is None else parse_time("until", until),
        )
        known = storage.backfill_states(display)
        states = {display_key(url): state for url, state in known.items()}
        # Gaps are in a display's sequence, which every zone's updates share: found in
        # all of them, then the plays of the zone asked for are kept.
        annotated, gaps = with_gaps(plays, states, from_start=since is None)
        if zone is not None:
            annotated = [(play, missing) for play, missing in annotated if play.zone == zone]
        accept = request.accept_mimetypes
        if accept["text/csv"] > accept["application/json"]:
            return Response(plays_csv(annotated, gaps), mimetype="text/csv")
        return json_response(
            {"plays": [play_json(play, missing) for play, missing in annotated], "gaps": gaps}
        )


def plays_csv(annotated: list[tuple[PlayRecord, int]], gaps: list[dict[str, Any]]) -> str:
    reasons = {(display_key(gap["display"]), gap["before-sequence"]): gap["reason"] for gap in gaps}
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\r\n")
    writer.writerow(CSV_COLUMNS)
    for play, missing in annotated:
        writer.writerow(
            [
                play.display,
                play.sequence,
                play.started,
                play.ended or "",
                play.item or "",
                play.content_type or "",
                play.set_name or "",
                play.origin,
                "" if play.duration is None else f"{play.duration:g}",
                "true" if play.painted else "false",
                play.zone,
                play.layout or "",
                missing,
                reasons.get((display_key(play.display), play.sequence), "") if missing else "",
            ]
        )
    return out.getvalue()

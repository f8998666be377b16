"""The broadcast: an urgent item on every display of a group, confirmed screen by screen.

``POST /x/broadcasts {"group", "content-item", "duration", "timeout"?}`` adds, for every display
of the group, a set ``broadcast-<id>`` at priority ``highest`` holding the one item (pushed like
an assigned schedule, ``server.scheduler.fleet``): it interrupts whatever plays and nothing
interrupts it, not even an ad-hoc request. After ``duration`` the set is pushed as removed and
the displays go back to their schedules. A scheduler restarted meanwhile removes it at start
(it pushes every display what it should hold, and a past broadcast is not part of that).

Confirmation comes from the screens themselves: the display's playback update for the item, in
the broadcast's set, which a display sends only once its renderer confirmed the item painted
(proof of play, ``server.scheduler.plays``). ``GET /x/broadcasts/<id>`` says, per display, when
its screen showed it, or that it did not within ``timeout`` seconds (default 30).
"""

from __future__ import annotations

import itertools
import logging
import threading
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any
from xml.sax.saxutils import quoteattr

from flask import Flask, Response

from server.platform.http import ApiError, json_response, read_json_object
from server.platform.validation import HTTP, Duration, Field, Schema, Uri, invalid_field
from server.scheduler.fleet import Document, Fleet
from server.scheduler.fleetapi import group_name
from server.scheduler.storage import PlayRecord, display_key

log = logging.getLogger("pdn.scheduler.broadcast")

DEFAULT_TIMEOUT = 30.0
KEEP_FINISHED = 100  # finished broadcasts kept for GET


def timeout_field(name: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value <= 3600:
        raise invalid_field(name, f"'{name}' must be a number of seconds from 0 to 3600.")
    return float(value)


BROADCAST = Schema(
    Field("group", group_name, required=True),
    Field("content-item", Uri(schemes=HTTP), required=True),
    Field("duration", Duration(), required=True),
    Field("timeout", timeout_field),
)


def _iso(timestamp: float | None) -> str | None:
    return None if timestamp is None else datetime.fromtimestamp(timestamp, UTC).isoformat()


@dataclass
class Broadcast:
    id: int
    group: str
    item: str
    duration: float
    timeout: float
    started: float
    displays: dict[str, float | None] = field(default_factory=dict)  # url -> confirmed at
    ended: bool = False

    @property
    def set_name(self) -> str:
        return f"broadcast-{self.id}"

    def document(self) -> Document:
        seconds = f"{self.duration:g}"
        body = (
            f'<?xml version="1.0" encoding="UTF-8"?>\n'
            f'<content-set name="{self.set_name}" type="inline"><constraints>'
            f'<scheduling-constraints><priority level="highest"/>'
            f"<preferred-duration>{seconds} seconds</preferred-duration>"
            f"</scheduling-constraints></constraints><content-item><requires-file><sources>"
            f"<uri>{_escape(self.item)}</uri></sources></requires-file></content-item>"
            f"</content-set>\n"
        )
        return Document(self.set_name, body.encode())

    def report(self, now: float) -> dict[str, Any]:
        displays = []
        for url, confirmed in self.displays.items():
            if confirmed is not None:
                status = "confirmed"
            elif now - self.started < self.timeout:
                status = "waiting"
            else:
                status = "not-confirmed"
            displays.append(
                {
                    "display": url,
                    "status": status,
                    "confirmed": _iso(confirmed),
                    "after": None if confirmed is None else round(confirmed - self.started, 3),
                }
            )
        return {
            "id": self.id,
            "group": self.group,
            "content-item": self.item,
            "duration": self.duration,
            "timeout": self.timeout,
            "started": _iso(self.started),
            "ends": _iso(self.started + self.duration),
            "ended": self.ended,
            "displays": displays,
        }


def _escape(text: str) -> str:
    return quoteattr(text)[1:-1]


class Broadcasts:
    """The broadcasts under way (and the last ones finished), in memory."""

    def __init__(self) -> None:
        self.fleet: Fleet | None = None
        self._lock = threading.Lock()
        self._ids = itertools.count(int(time.time()))
        self._all: dict[int, Broadcast] = {}
        self._timers: list[threading.Timer] = []

    def documents_for(self, url: str) -> list[Document]:
        """The broadcast sets a display should hold now (Fleet's ``extra``)."""
        key = display_key(url)
        with self._lock:
            return [
                b.document()
                for b in self._all.values()
                if not b.ended and any(display_key(u) == key for u in b.displays)
            ]

    def start(self, group: str, item: str, duration: float, timeout: float) -> Broadcast:
        assert self.fleet is not None
        # Displays waiting for an operator's approval get nothing, so none is waited for.
        displays = self.fleet.approved_members(group)
        if not displays:
            raise ApiError(404, "unknown-group", f"No display is in the group '{group}'.")
        with self._lock:
            broadcast = Broadcast(
                id=next(self._ids),
                group=group,
                item=item,
                duration=duration,
                timeout=timeout,
                started=time.time(),
                displays=dict.fromkeys(displays),
            )
            self._all[broadcast.id] = broadcast
            timer = threading.Timer(duration, self._end, args=(broadcast.id,))
            timer.daemon = True
            self._timers.append(timer)
        timer.start()
        log.info(
            "broadcast %d: %s to %d display(s) of %s for %g s",
            broadcast.id, item, len(displays), group, duration,
        )  # fmt: skip
        self.fleet.sync_displays(displays)
        return broadcast

    def _end(self, broadcast_id: int) -> None:
        with self._lock:
            broadcast = self._all.get(broadcast_id)
            if broadcast is None or broadcast.ended:
                return
            broadcast.ended = True
            finished = [b for b in self._all.values() if b.ended]
            for old in finished[:-KEEP_FINISHED]:
                self._all.pop(old.id, None)
        log.info("broadcast %d ended", broadcast_id)
        if self.fleet is not None:
            self.fleet.sync_displays(list(broadcast.displays))

    def get(self, broadcast_id: int) -> Broadcast | None:
        with self._lock:
            return self._all.get(broadcast_id)

    def all(self) -> list[Broadcast]:
        with self._lock:
            return list(self._all.values())

    def played(self, play: PlayRecord) -> None:
        """A playback update came in: is it a screen showing a broadcast?"""
        if not play.painted or not play.set_name or not play.set_name.startswith("broadcast-"):
            return
        key = display_key(play.display)
        with self._lock:
            for broadcast in self._all.values():
                if broadcast.set_name != play.set_name or play.item != broadcast.item:
                    continue
                for url, confirmed in broadcast.displays.items():
                    if display_key(url) == key and confirmed is None:
                        broadcast.displays[url] = play.received
                        log.info(
                            "broadcast %d: %s showed it after %.2f s",
                            broadcast.id, url, play.received - broadcast.started,
                        )  # fmt: skip

    def stop(self) -> None:
        with self._lock:
            timers, self._timers = self._timers, []
        for timer in timers:
            timer.cancel()


def add_broadcast_routes(app: Flask, broadcasts: Broadcasts) -> None:
    @app.post("/x/broadcasts")
    def start_broadcast() -> Response:
        fields = BROADCAST.validate(read_json_object())
        broadcast = broadcasts.start(
            fields["group"],
            fields["content-item"],
            fields["duration"],
            fields.get("timeout", DEFAULT_TIMEOUT),
        )
        response = json_response(broadcast.report(time.time()), 201)
        response.headers["Location"] = f"/x/broadcasts/{broadcast.id}"
        return response

    @app.get("/x/broadcasts")
    def list_broadcasts() -> Response:
        now = time.time()
        return json_response([b.report(now) for b in broadcasts.all()])

    @app.get("/x/broadcasts/<int:id>")
    def get_broadcast(id: int) -> Response:
        broadcast = broadcasts.get(id)
        if broadcast is None:
            raise ApiError(404, "unknown-broadcast", f"There is no broadcast {id}.")
        return json_response(broadcast.report(time.time()))

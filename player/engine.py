"""The playlist engine: what the screen shows now and next. No Qt; the clock is injected.

Inputs:
- CDS schedules, evaluated by a :class:`Schedule` (``cds.playlist.Playlist``): eligibility,
  priorities, playback order, the next time eligibility can change.
- Ad-hoc requests (Display ``POST /schedule``, JSON form): a first-come, first-served queue
  (``player.requestqueue``, up to 100), each shown for its duration. A request ranks as
  priority ``high``:
  when the queue is empty a new request interrupts the scheduled item at once; a scheduled item
  of priority ``highest`` is never interrupted, and the queue waits behind it (the request on
  screen, if any, keeps its remaining time for later).
- The renderer's reports (:class:`player.playitem.RendererListener`): an item is "on screen"
  only when the renderer says it painted it; the playback record follows those reports.

Zones: an engine plays one zone of the screen (``player.zones`` holds one per zone of the
layout on screen, each with its own schedule and queue); without a layout, the whole screen,
the zone ``main``.

Driving: whoever owns the renderer's thread calls :meth:`Engine.tick` when woken (the ``wake``
callback, called from any thread whenever something changed) and when :meth:`next_wakeup` is
due, and sleeps otherwise. Only ``tick`` calls the renderer, so the renderer is only ever used
from the driver's thread; every other method is safe from any thread.

Failures never leave the screen stuck: an item that fails (or does not paint within
:data:`LOAD_TIMEOUT`, or the ``load_timeout`` given) is skipped; a scheduled URL that
keeps failing is left out for a while, backing off from 5 s to 5 min; a failing request is
dropped from the queue.

Restart: the queue is stored (``EngineStore``); the request that was on screen when the
process died keeps the time it had left by the wall clock, so after ``kill -9`` the display
comes back to what it should show now.

Synchronised sets (``sync="wall-clock"``, ``cds.syncgrid``): the schedule says whose turn it
is on the grid and when that turn began and ends. The play ends when the turn does (not a
duration after it painted, and not at a video's own end); the next turn's item is prepared
:data:`PREPARE_LEAD` ahead and handed to the renderer :data:`SHOW_AHEAD` ahead with its
``due`` instant, so the switch waits on the renderer's own timer, not on this engine's tick. A
display that starts, restarts or comes back from an interruption asks the grid again and joins
the turn of now, at its offset (``PlayItem.due`` in the past).

Why one module: the engine is one state machine under one lock: the queue's head, the
scheduled play, the back-offs and the synchronised turns decide together, at each tick, what
is on screen. The request queue and its durable progress are ``player.requestqueue``; what it
plays is ``player.playitem``; what it stores, ``player.store``.
"""

from __future__ import annotations

import itertools
import logging
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, Protocol

from cds.syncgrid import DEFAULT_SECONDS
from player.playitem import Origin, PlayItem, Renderer

if TYPE_CHECKING:
    from cds.model import ContentItem, ContentSet
from player.requestqueue import Request, RequestQueue

log = logging.getLogger("pdn.engine")

REQUEST_DURATION = 30.0  # seconds, when a request names no preferred-duration
DEFAULT_DURATION = DEFAULT_SECONDS  # for a scheduled item with neither duration nor video length
REQUEST_PRIORITY = 3  # "high"
HIGHEST_PRIORITY = 4
LOAD_TIMEOUT = 20.0  # seconds for the renderer to paint an item before it counts as failed
PREPARE_LEAD = 3.0  # seconds before the switch that the renderer gets its "prepare" hint
# Seconds before its due instant that an item of a synchronised set is handed to the renderer,
# which switches to it on the instant by its own timer (an engine tick may come late).
SHOW_AHEAD = 1.0
# A video played for its own length ends at its end (item_ended), which comes later than the
# wall clock says when it started late or stalled; the clock ends it only this much later
# (and the next item is still prepared PREPARE_LEAD - this before the video's end).
NATURAL_END_GRACE = 1.0
BACKOFF_FIRST = 5.0
BACKOFF_CAP = 300.0


Available = Callable[["ContentItem"], bool]


class Schedule(Protocol):
    """The part of ``cds.playlist.Playlist`` the engine uses."""

    def set_documents(self, documents: list[ContentSet]) -> None: ...
    def eligible(self, now: datetime, available: Available) -> list[Any]: ...
    def next(self, now: datetime, available: Available) -> Any | None: ...
    def top_priority(self, now: datetime, available: Available) -> int | None: ...
    def next_change(self, now: datetime) -> datetime | None: ...


class EngineStore(Protocol):
    """Durable interrupt queue (``player.store.DisplayStore``)."""

    def queued_requests(self) -> list[Any]: ...
    def push_request(self, url: str, duration: float, received: float) -> int: ...
    def update_request(self, request_id: int, remaining: float, shown_at: float | None) -> None: ...
    def remove_request(self, request_id: int) -> None: ...


@dataclass(frozen=True)
class Playback:
    """What the screen shows now, as the playback record reports it (without ``sequence``)."""

    content_item: str | None
    content_type: str | None
    origin: Origin
    set_name: str | None
    started: datetime
    duration: float | None
    #: The zone this is the playback of ("main" on a screen without a layout).
    zone: str = "main"
    #: The name of the layout set the screen is split by, or None (full screen).
    layout: str | None = None

    def fields(self) -> dict[str, Any]:
        return {
            "content-item": self.content_item,
            "content-type": self.content_type,
            "origin": self.origin,
            "set": self.set_name,
            "started": self.started.isoformat(),
            "duration": self.duration,
        }


@dataclass
class _Play:
    """One play of an item: issued to the renderer, then (maybe) on screen."""

    item: PlayItem
    issued: datetime
    key: str  # the schedule's key for the item (cds.playlist.Selection), or "request:<id>"
    request_id: int | None = None
    shown_at: datetime | None = None
    end_at: datetime | None = None
    length: float | None = None
    #: a turn on a synchronised set's grid: it ends then, whenever it painted
    turn_end: datetime | None = None

    @property
    def ident(self) -> tuple[str, str]:
        return (self.key, self.item.source_url)


@dataclass
class _Backoff:
    failures: int = 0
    until: datetime | None = None


@dataclass
class _Upcoming:
    """The next item, chosen ahead of time so the renderer can prepare it."""

    play: _Play
    selection: Any | None = None  # the schedule's cds.playlist.Selection, for scheduled items


@dataclass
class EngineStatus:
    """A snapshot for health pages."""

    current: dict[str, Any] | None
    pending: dict[str, Any] | None
    queue_length: int
    idle: bool
    next_wakeup: datetime | None
    backed_off: list[str] = field(default_factory=list)


class Engine:
    """Decides what to show; thread-safe; drives a :class:`Renderer` from ``tick``."""

    def __init__(
        self,
        *,
        clock: Callable[[], datetime],
        schedule: Schedule,
        store: EngineStore,
        renderer: Renderer | None = None,
        available: Available | None = None,
        locate: Callable[[ContentItem], str] | None = None,
        on_playback: Callable[[Playback], None] | None = None,
        wake: Callable[[], None] | None = None,
        load_timeout: float = LOAD_TIMEOUT,
        zone: str = "main",
        tokens: Iterator[int] | None = None,
    ) -> None:
        self._clock = clock
        # The zone of the screen this engine plays (player.zones): its PlayItems name it, and
        # take their tokens from ``tokens`` when given (the engines of one screen share one).
        self._zone = zone
        self._load_timeout = load_timeout
        self._schedule = schedule
        self._renderer = renderer
        self._available = available or (lambda item: True)
        self._locate = locate or (lambda item: item.url)
        self._on_playback = on_playback
        self._wake = wake or (lambda: None)
        self._lock = threading.RLock()
        self._tokens = tokens if tokens is not None else itertools.count(1)
        self._queue = RequestQueue(store, clock())
        self._current: _Play | None = None
        self._pending: _Play | None = None
        self._upcoming: _Upcoming | None = None
        self._idle_shown = False
        self._idle_painted = False
        self._backoff: dict[str, _Backoff] = {}
        self._started = False

    # Inputs (any thread)

    def request(self, url: str, duration: float | None, zone: str | None = None) -> str | None:
        """Queue an ad-hoc request; None when accepted, else the reason it was rejected.
        ``zone``: the zone it names, if any; this engine plays one zone (``self.zone``)."""
        if zone is not None and zone != self._zone:
            return (
                f"the screen has no zone '{zone}' now: it plays full screen (zone '{self._zone}')"
            )
        seconds = REQUEST_DURATION if duration is None else float(duration)
        with self._lock:
            refused = self._queue.push(url, seconds, self._clock())
        if refused is not None:
            return refused
        self._wake()
        return None

    def queue_length(self) -> int:
        with self._lock:
            return len(self._queue)

    @property
    def zone(self) -> str:
        return self._zone

    def suspend(self) -> None:
        """The zone leaves the screen (its layout waits, or its window closed): what was on
        it is forgotten, so the next ``tick`` shows the zone's item again; a request on
        screen keeps the time it had left, as when a ``highest`` item interrupts it."""
        with self._lock:
            current = self._current
            if current is not None and current.request_id is not None:
                self._interrupt_request(current, self._clock())
            self._current = None
            self._pending = None
            self._upcoming = None
            self._idle_shown = False
            self._idle_painted = False

    def set_documents(self, documents: list[ContentSet]) -> None:
        """Replace the CDS content sets the schedule plays from."""
        with self._lock:
            self._schedule.set_documents(documents)
            self._upcoming = None
        self._wake()

    # Renderer reports (the renderer's thread)

    def idle_shown(self, at: datetime) -> None:
        with self._lock:
            if not self._idle_shown or self._idle_painted or self._pending is not None:
                log.debug("ignored a paint report for a superseded idle page")
                return
            self._idle_painted = True
            self._emit(Playback(None, None, "idle", None, at, None))

    def item_shown(self, token: int, at: datetime, natural_duration: float | None) -> None:
        with self._lock:
            play = self._pending
            if play is None or play.item.token != token:
                log.debug("ignored a paint report for a superseded item (%d)", token)
                return
            self._pending = None
            length = play.item.duration
            grace = 0.0
            if play.turn_end is not None:
                length = max(0.0, (play.turn_end - at).total_seconds())
            elif length is None:
                if natural_duration is not None and 0 < natural_duration < float("inf"):
                    length, grace = natural_duration, NATURAL_END_GRACE
                else:
                    length = DEFAULT_DURATION
            play.shown_at = at
            play.length = length
            play.end_at = play.turn_end or at + timedelta(seconds=length + grace)
            self._current = play
            self._idle_shown = False
            self._backoff.pop(play.item.url, None)
            if play.request_id is not None:
                self._queue.shown(play.request_id, length, at)
            log.info("on screen: %s (%s, %g s)", play.item.source_url, play.item.origin, length)
            self._emit(
                Playback(
                    content_item=play.item.source_url,
                    content_type=play.item.content_type,
                    origin=play.item.origin,
                    set_name=play.item.set_name,
                    started=at,
                    duration=length,
                )
            )
        self._wake()

    def item_failed(self, token: int, reason: str) -> None:
        with self._lock:
            now = self._clock()
            if self._pending is not None and self._pending.item.token == token:
                play = self._pending
                self._pending = None
            elif self._current is not None and self._current.item.token == token:
                play = self._current
                play.end_at = now  # it broke on screen: move on at once
            elif self._upcoming is not None and self._upcoming.play.item.token == token:
                play = self._upcoming.play
                self._upcoming = None
            else:
                return
            log.warning("could not show %s: %s", play.item.source_url, reason)
            if play.request_id is not None:
                self._queue.finish(play.request_id)
            else:
                self._back_off(play.item.url, now)
        self._wake()

    def item_ended(self, token: int) -> None:
        with self._lock:
            current = self._current
            if current is None or current.item.token != token:
                return
            if current.turn_end is not None:
                return  # a turn on the grid: its last frame stays until the turn ends
            current.end_at = min(current.end_at or self._clock(), self._clock())
        self._wake()

    # Driving (the renderer's thread)

    def tick(self) -> datetime | None:
        """Bring the screen in line with what should show now; call when woken or due.

        Returns when to call it again if nothing wakes the engine first (None: only on wake).
        """
        with self._lock:
            now = self._clock()
            actions = self._decide(now)
            wakeup = self._next_wakeup(now)
        for action in actions:
            try:
                action()
            except Exception:
                log.exception("the renderer failed")
        return wakeup

    def next_wakeup(self) -> datetime | None:
        """When ``tick`` is due next (None: only when woken)."""
        with self._lock:
            return self._next_wakeup(self._clock())

    def _next_wakeup(self, now: datetime) -> datetime | None:
        with self._lock:
            times: list[datetime | None] = [self._schedule.next_change(now)]
            if self._pending is not None:
                times.append(self._pending.issued + timedelta(seconds=self._load_timeout))
            current = self._current
            if current is not None and current.end_at is not None and self._pending is None:
                times.append(current.end_at)
                if self._upcoming is None:
                    times.append(current.end_at - timedelta(seconds=PREPARE_LEAD))
                else:
                    due = self._upcoming.play.item.due
                    if due is not None:
                        times.append(due - timedelta(seconds=SHOW_AHEAD))
            times.extend(b.until for b in self._backoff.values())
            # Only future times: what is due at `now` was decided by the tick at `now` (or
            # waits on the renderer's report, which wakes us), and a past time would spin.
            future = [t for t in times if t is not None and t > now]
            return min(future) if future else None

    def status(self) -> EngineStatus:
        with self._lock:
            current = self._current
            return EngineStatus(
                current=None if current is None else self._describe(current),
                pending=None if self._pending is None else self._describe(self._pending),
                queue_length=len(self._queue),
                idle=self._idle_shown,
                next_wakeup=self.next_wakeup(),
                backed_off=sorted(
                    url for url, b in self._backoff.items() if b.until and b.until > self._clock()
                ),
            )

    # The decision

    def _decide(self, now: datetime) -> list[Callable[[], None]]:
        actions: list[Callable[[], None]] = []
        if self._pending is not None and now >= self._pending.issued + timedelta(
            seconds=self._load_timeout
        ):
            stuck = self._pending
            self._pending = None
            log.warning(
                "%s did not paint within %g s; skipped", stuck.item.source_url, self._load_timeout
            )
            if stuck.request_id is not None:
                self._queue.finish(stuck.request_id)
            else:
                self._back_off(stuck.item.url, now)

        available = self._available_now(now)
        top = self._schedule.top_priority(now, available)
        queue_blocked = top is not None and top >= HIGHEST_PRIORITY

        # The request on screen: finished, or pushed aside by a `highest` item?
        current = self._current
        if current is not None and current.request_id is not None:
            if current.end_at is not None and now >= current.end_at:
                self._queue.finish(current.request_id)
                self._current_over(current)
            elif queue_blocked:
                self._interrupt_request(current, now)

        target = self._target_play(now, available, top, queue_blocked)
        if target is None:
            self._upcoming = None
            if self._pending is not None:
                self._pending = None
            if not self._idle_shown:
                self._idle_shown = True
                self._current = None
                log.info("nothing eligible: idle")
                renderer = self._renderer
                if renderer is None:
                    self._emit(Playback(None, None, "idle", None, now, None))
                else:
                    # The record changes once the renderer reports the idle page painted.
                    self._idle_painted = False
                    actions.append(renderer.show_idle)
            return actions
        if target is not self._current and target is not self._pending:
            self._issue(target, now, actions)
        self._hand_over_ahead(now, actions)
        self._maybe_prepare(now, available, top, queue_blocked, actions)
        return actions

    def _issue(self, play: _Play, now: datetime, actions: list[Callable[[], None]]) -> None:
        self._pending = play
        play.issued = now
        renderer = self._renderer
        if renderer is not None:
            actions.append(lambda item=play.item: renderer.show(item))  # type: ignore[misc]

    def _hand_over_ahead(self, now: datetime, actions: list[Callable[[], None]]) -> None:
        """The next turn of a synchronised set goes to the renderer :data:`SHOW_AHEAD` before
        it is due: the renderer switches on the instant, by its own timer."""
        current, upcoming = self._current, self._upcoming
        if self._pending is not None or current is None or current.end_at is None:
            return
        if upcoming is None or upcoming.selection is None:
            return
        due = upcoming.play.item.due
        if due is None or due < current.end_at or now < due - timedelta(seconds=SHOW_AHEAD):
            return
        self._upcoming = None
        self._issue(upcoming.play, now, actions)

    def _target_play(
        self, now: datetime, available: Available, top: int | None, queue_blocked: bool
    ) -> _Play | None:
        """The play that should be on screen (the current or pending one if it still should)."""
        if self._queue and not queue_blocked:
            head = next(iter(self._queue))
            for play in (self._current, self._pending):
                if play is not None and play.request_id == head.id:
                    return play
            upcoming = self._upcoming
            if upcoming is not None and upcoming.play.request_id == head.id:
                self._upcoming = None
                return upcoming.play
            return self._request_play(head, now)
        if top is None:
            return None
        # Keyed by (key, url): a replaced CDS may reuse a key for another item.
        keys = {
            (sel.key, sel.item.url)
            for sel in self._schedule.eligible(now, available)
            if sel.priority >= top
        }
        pending = self._pending
        if pending is not None and pending.request_id is None and pending.ident in keys:
            return pending
        current = self._current
        if (
            current is not None
            and current.request_id is None
            and current.ident in keys
            and (current.end_at is None or now < current.end_at)
            and current.item.priority >= top
        ):
            return current
        upcoming = self._upcoming
        self._upcoming = None
        if upcoming is not None and upcoming.selection is not None and upcoming.play.ident in keys:
            return upcoming.play
        selection = self._schedule.next(now, available)
        if selection is None:
            return None
        return self._scheduled_play(selection, now)

    def _maybe_prepare(
        self,
        now: datetime,
        available: Available,
        top: int | None,
        queue_blocked: bool,
        actions: list[Callable[[], None]],
    ) -> None:
        """Pick the next item shortly before the current one ends and hint the renderer."""
        current = self._current
        if (
            self._upcoming is not None
            or self._pending is not None
            or current is None
            or current.end_at is None
            or now < current.end_at - timedelta(seconds=PREPARE_LEAD)
        ):
            return
        upcoming: _Upcoming | None = None
        queue = list(self._queue)
        if current.request_id is not None:
            queue = [r for r in queue if r.id != current.request_id]
        if queue and not queue_blocked:
            upcoming = _Upcoming(self._request_play(queue[0], now))
        elif top is not None:
            selection = self._schedule.next(current.end_at, available)
            if selection is not None:
                upcoming = _Upcoming(self._scheduled_play(selection, now), selection)
        self._upcoming = upcoming
        renderer = self._renderer
        if upcoming is not None and renderer is not None:
            actions.append(lambda item=upcoming.play.item: renderer.prepare(item))  # type: ignore[misc]

    # Helpers (lock held)

    def _available_now(self, now: datetime) -> Available:
        def available(item: ContentItem) -> bool:
            backoff = self._backoff.get(item.url)
            if backoff is not None and backoff.until is not None and backoff.until > now:
                return False
            try:
                return self._available(item)
            except Exception:
                log.exception("availability check failed for %s", item.url)
                return False

        return available

    def _request_play(self, request: Request, now: datetime) -> _Play:
        item = PlayItem(
            token=next(self._tokens),
            url=request.url,
            source_url=request.url,
            content_type=None,
            duration=request.remaining,
            origin="request",
            set_name=None,
            priority=REQUEST_PRIORITY,
            zone=self._zone,
        )
        return _Play(item=item, issued=now, key=f"request:{request.id}", request_id=request.id)

    def _scheduled_play(self, selection: Any, now: datetime) -> _Play:
        content = selection.item
        duration = selection.duration
        slot = getattr(selection, "slot", None)
        if slot is not None:
            duration = slot.seconds
        elif duration is None and not (content.content_type or "").lower().startswith("video/"):
            duration = DEFAULT_DURATION
        item = PlayItem(
            token=next(self._tokens),
            url=self._locate(content),
            source_url=content.url,
            content_type=content.content_type,
            duration=duration,
            origin="schedule",
            set_name=selection.root_name,
            priority=int(selection.priority),
            due=slot.start if slot is not None else None,
            cut=selection.transition == "cut",
            zone=self._zone,
            refresh=content.files[0].sources[0].refresh
            if content.files and content.files[0].sources
            else None,
        )
        return _Play(
            item=item,
            issued=now,
            key=str(selection.key),
            turn_end=slot.end if slot is not None else None,
        )

    def _interrupt_request(self, play: _Play, now: datetime) -> None:
        """A `highest` item takes the screen: the request keeps the time it has left."""
        assert play.request_id is not None
        left = (play.end_at - now).total_seconds() if play.end_at else play.length or 0.0
        self._queue.pause(play.request_id, left)
        play.request_id = None  # no longer counts as the request's play
        play.end_at = now

    def _current_over(self, play: _Play) -> None:
        play.request_id = None

    def _back_off(self, url: str, now: datetime) -> None:
        backoff = self._backoff.setdefault(url, _Backoff())
        backoff.failures += 1
        delay = min(BACKOFF_CAP, BACKOFF_FIRST * 2 ** (backoff.failures - 1))
        backoff.until = now + timedelta(seconds=delay)
        log.info("%s left out for %g s after %d failure(s)", url, delay, backoff.failures)

    def _emit(self, playback: Playback) -> None:
        if self._on_playback is not None:
            try:
                self._on_playback(playback)
            except Exception:
                log.exception("could not record the playback change")

    @staticmethod
    def _describe(play: _Play) -> dict[str, Any]:
        return {
            "content-item": play.item.source_url,
            "origin": play.item.origin,
            "shown-at": play.shown_at.isoformat() if play.shown_at else None,
            "ends-at": play.end_at.isoformat() if play.end_at else None,
        }

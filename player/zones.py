"""Zones: the screen split by a layout, each zone a player of its own. No Qt; the clock is
injected.

A CDS document whose root set has a ``<layout>`` (``cds.layouts``) is a *layout document*; the
others are *full-screen documents*. :class:`ZoneEngine` holds one :class:`player.engine.Engine`
per zone, each with its own schedule (its own rotation, windows and priorities), request
queue, clock and renderer, and decides which layout, if any, splits the screen now:

- a layout document is eligible while any of its zones has an item that may play now; its
  priority is the highest level among those items (``priority`` on its root set counts for
  every zone, as any set's does for the items below it);
- the screen is split by the eligible layout of the highest priority (the first in document
  order among equals), unless a full-screen document has an item of a higher priority: then
  the whole screen is the main zone's and plays the full-screen documents (the layout waits);
- while a layout splits the screen, its main zone plays the main zone's set *and* the
  full-screen documents, which take turns with it as sibling sets do (so those of a lower
  priority play when the main zone's set has nothing to play); every other zone plays its
  own set alone;
- a JSON request goes to the main zone unless it names another zone of the layout on screen
  now; a zone the screen does not have now is rejected with the reason;
- with no layout document, the main engine plays the documents exactly as an engine without
  zones does.

The main zone's engine is the one engine of a screen without a layout: it keeps its durable
request queue (``EngineStore``) and its state whether the screen is split or not. The engines
of the other zones are made when their layout first splits the screen and kept while their
document is scheduled. Each keeps its request queue in the :class:`ZoneQueues` it is given,
by the layout's name and its own (the display's are durable: a request to a zone waits there
across a restart; those to a layout or zone no longer scheduled are forgotten). When a layout
leaves the screen, its zones are *suspended*: what they showed is forgotten (a request on
screen keeps the time it had left), and when the layout comes back each zone shows its next
item.

The interface to the screen (what the integrator wires into the renderer): a
:class:`ZoneScreen` with

- ``split(layout)``: the screen's regions change. ``layout`` is a :class:`ScreenLayout` (the
  layout set's name and each zone's box: fractions of the screen as people see it, and ``z``,
  higher in front; ``main`` always one of them), or None: one full-screen region, ``main``.
  Called on the driver's thread from :meth:`ZoneEngine.tick`, before any item of the new
  layout is handed over;
- ``renderer(zone)``: the :class:`player.playitem.Renderer` of one zone's region (``"main"`` is
  also the full-screen region). Every PlayItem it gets names its zone (``PlayItem.zone``);
  ``show_idle`` on a zone other than main means "nothing to show in this zone". The same
  object may serve a zone name in several layouts: the zone engine sets its listener (the
  zone's engine) each time that zone comes on screen. A zone that a ``split`` leaves out is
  not called again until a layout with it splits the screen again (what it showed goes with
  its region); its late reports are ignored.

:meth:`ZoneEngine.layout` answers the layout on screen now from any thread. Each zone's
changes reach ``on_playback`` as :class:`player.engine.Playback` with ``zone`` and ``layout``
set; at a change of layout the main zone's playback is given again with the new ``layout``
(its item may be the same), and the zones of the old layout are off screen from then on.

Driving is an engine's: call :meth:`ZoneEngine.tick` when woken or due. A zone's set holds no
remote set (the parser refuses one), so the display's own playlist, which the main zone plays
from, resolves every remote set there is.
"""

from __future__ import annotations

import itertools
import logging
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import TYPE_CHECKING, Any, Protocol

from cds.layouts import ZoneBox, zone_boxes, zone_document
from cds.model import MAIN_ZONE, ContentSet, Document
from player.engine import (
    LOAD_TIMEOUT,
    Available,
    Engine,
    EngineStatus,
    EngineStore,
    Playback,
    Schedule,
)
from player.playitem import Renderer

if TYPE_CHECKING:
    from cds.model import ContentItem

__all__ = [
    "MAIN_ZONE",
    "MemoryQueue",
    "MemoryQueues",
    "ScreenLayout",
    "ZoneEngine",
    "ZoneQueues",
    "ZoneScreen",
]

log = logging.getLogger("pdn.engine.zones")


@dataclass(frozen=True)
class ScreenLayout:
    """The screen split by a layout: the layout set's name and its zones, each with its box."""

    name: str | None
    zones: tuple[ZoneBox, ...]

    def zone(self, name: str) -> ZoneBox | None:
        return next((zone for zone in self.zones if zone.name == name), None)


class ZoneScreen(Protocol):
    """The screen as the zone engine drives it (implemented on the renderer's side)."""

    def split(self, layout: ScreenLayout | None) -> None:
        """Lay the screen out in these zones (None: one full-screen region, ``main``)."""

    def renderer(self, zone: str) -> Renderer:
        """The renderer of one zone's region (``main``: also the full-screen one)."""


@dataclass
class _Queued:
    id: int
    url: str
    duration: float
    remaining: float
    shown_at: float | None = None


class MemoryQueue:
    """A zone's request queue, in memory (an :class:`~player.engine.EngineStore`)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._ids = itertools.count(1)
        self._requests: dict[int, _Queued] = {}

    def queued_requests(self) -> list[Any]:
        with self._lock:
            return [replace(request) for request in self._requests.values()]

    def push_request(self, url: str, duration: float, received: float) -> int:
        with self._lock:
            request_id = next(self._ids)
            self._requests[request_id] = _Queued(request_id, url, duration, duration)
            return request_id

    def update_request(self, request_id: int, remaining: float, shown_at: float | None) -> None:
        with self._lock:
            request = self._requests.get(request_id)
            if request is not None:
                request.remaining, request.shown_at = remaining, shown_at

    def remove_request(self, request_id: int) -> None:
        with self._lock:
            self._requests.pop(request_id, None)


class ZoneQueues(Protocol):
    """Where the zones other than main keep their request queues (``player.store``)."""

    def queue(self, layout: str, zone: str) -> EngineStore:
        """The request queue of ``zone`` of the layout named ``layout``."""

    def keep(self, zones: set[tuple[str, str]]) -> None:
        """Forget the queues of every (layout, zone) but ``zones``."""


class MemoryQueues:
    """Request queues in memory, lost on a restart (tests, and a display without a store)."""

    def queue(self, layout: str, zone: str) -> EngineStore:
        return MemoryQueue()

    def keep(self, zones: set[tuple[str, str]]) -> None:
        pass  # a queue goes with the engine that holds it


@dataclass(eq=False)
class _Layout:
    """One layout document: its zones' boxes and documents, the schedule that tells whether
    it may play, and the engines of its zones other than main (made when first on screen)."""

    root: ContentSet
    screen: ScreenLayout
    documents: dict[str, ContentSet]
    probe: Schedule
    engines: dict[str, Engine]


class ZoneEngine:
    """The engines of a screen's zones, and which layout splits the screen; thread-safe.

    ``schedule`` and ``store`` are the main zone's (the display's playlist and durable queue);
    ``new_schedule`` makes the schedule of another zone, and of the checks of which layout may
    play (``cds.playlist.Playlist`` with the display's time zone and clock checks).
    """

    def __init__(
        self,
        *,
        clock: Callable[[], datetime],
        schedule: Schedule,
        store: EngineStore,
        screen: ZoneScreen,
        new_schedule: Callable[[], Schedule],
        available: Available | None = None,
        locate: Callable[[ContentItem], str] | None = None,
        on_playback: Callable[[Playback], None] | None = None,
        wake: Callable[[], None] | None = None,
        load_timeout: float = LOAD_TIMEOUT,
        zone_queues: ZoneQueues | None = None,
    ) -> None:
        self._clock = clock
        self._zone_queues = zone_queues or MemoryQueues()
        self._screen = screen
        self._new_schedule = new_schedule
        self._available = available or (lambda item: True)
        self._locate = locate
        self._on_playback = on_playback
        self._wake = wake or (lambda: None)
        self._load_timeout = load_timeout
        self._lock = threading.RLock()
        self._emit_lock = threading.Lock()
        # The tokens of every zone's PlayItems: unique on the whole screen.
        self._tokens = itertools.count(1)
        self._last_main: Playback | None = None
        self._layouts: list[_Layout] = []
        self._full: list[ContentSet] = []
        self._full_probe = new_schedule()
        self._active: _Layout | None = None
        self._split: ScreenLayout | None = None
        self._split_due = False
        main_renderer = screen.renderer(MAIN_ZONE)
        self._main = self._engine(MAIN_ZONE, schedule, store, main_renderer)

    def _engine(
        self, zone: str, schedule: Schedule, store: EngineStore, renderer: Renderer
    ) -> Engine:
        engine = Engine(
            clock=self._clock,
            schedule=schedule,
            store=store,
            renderer=renderer,
            available=self._available,
            locate=self._locate,
            on_playback=lambda playback: self._emit(zone, playback),
            wake=self._wake,
            load_timeout=self._load_timeout,
            zone=zone,
            tokens=self._tokens,
        )
        renderer.set_listener(engine)  # the loop of this zone: its renderer reports to it
        return engine

    # Inputs (any thread)

    def set_documents(self, documents: Sequence[ContentSet | Document]) -> None:
        """Replace the CDS documents: layout documents and full-screen ones, in order."""
        roots = [doc.root if isinstance(doc, Document) else doc for doc in documents]
        with self._lock:
            kept = {id(layout.root): layout for layout in self._layouts}
            by_name = {layout.root.name: layout for layout in self._layouts}
            layouts: list[_Layout] = []
            for root in roots:
                if root.layout is None:
                    continue
                layout = kept.get(id(root)) or self._renew(by_name.get(root.name), root)
                layouts.append(layout)
            self._layouts = layouts
            self._full = [root for root in roots if root.layout is None]
            self._full_probe.set_documents(self._full)
            if self._active is not None and self._active not in layouts:
                self._leave(self._active)
                self._active = None
                self._split, self._split_due = None, True
            self._main.set_documents(self._main_documents())
            scheduled = {
                (layout.root.name or "", zone)
                for layout in layouts
                for zone in layout.documents
                if zone != MAIN_ZONE
            }
        self._zone_queues.keep(scheduled)  # a write: not under the lock the screen's tick takes
        self._wake()

    def _renew(self, old: _Layout | None, root: ContentSet) -> _Layout:
        """A layout document, new or a new version of one (its zones' engines go on where
        they were, for the zones it still has)."""
        assert root.layout is not None
        boxes = zone_boxes(root.layout)
        documents: dict[str, ContentSet] = {}
        for box in boxes:
            document = zone_document(root, box.name)
            if document is not None:
                documents[box.name] = document
        probe = old.probe if old is not None else self._new_schedule()
        probe.set_documents(list(documents.values()))
        engines: dict[str, Engine] = {}
        if old is not None:
            for zone, engine in old.engines.items():
                if zone in documents:
                    engine.set_documents([documents[zone]])
                    engines[zone] = engine
                else:
                    engine.suspend()
        layout = _Layout(root, ScreenLayout(root.name, boxes), documents, probe, engines)
        if old is not None and old is self._active:
            # The same layout, a new version: it stays on screen, and so do its zones that
            # keep their boxes; the screen is laid out again if any box changed.
            self._active = layout
            self._enter(layout)
            if layout.screen != old.screen:
                self._split, self._split_due = layout.screen, True
        return layout

    def request(self, url: str, duration: float | None, zone: str | None = None) -> str | None:
        """Queue a request in a zone (default: main); None when accepted, else the reason."""
        if zone is None or zone == MAIN_ZONE:
            return self._main.request(url, duration)
        with self._lock:
            active = self._active
            engine = active.engines.get(zone) if active is not None else None
            zones = [box.name for box in active.screen.zones] if active is not None else []
        if engine is None:
            if active is None:
                return f"the screen has no zone '{zone}' now: it plays full screen (zone 'main')"
            return f"the screen has no zone '{zone}' now (its zones: {', '.join(zones)})"
        return engine.request(url, duration)

    def queue_length(self) -> int:
        return self._main.queue_length()

    def layout(self) -> ScreenLayout | None:
        """The layout that splits the screen now (None: full screen)."""
        with self._lock:
            return self._active.screen if self._active is not None else None

    @property
    def main(self) -> Engine:
        """The main zone's engine (the only one of a screen without a layout)."""
        return self._main

    # Driving (the renderer's thread)

    def tick(self) -> datetime | None:
        """Split the screen as it should be now and bring every zone on it in line; returns
        when to call it again if nothing wakes it first (None: only on wake)."""
        with self._lock:
            now = self._clock()
            if self._layouts or self._active is not None:
                self._choose(now)
            split = self._split if self._split_due else None
            changed = self._split_due
            self._split_due = False
            engines = [self._main]
            if self._active is not None:
                engines.extend(self._active.engines.values())
        if changed:
            try:
                self._screen.split(split)
            except Exception:
                log.exception("the screen could not be laid out")
        wakeups = [engine.tick() for engine in engines]
        with self._lock:
            wakeups.append(self._next_change(now))
        future = [t for t in wakeups if t is not None and t > now]
        return min(future) if future else None

    def next_wakeup(self) -> datetime | None:
        with self._lock:
            now = self._clock()
            times = [self._main.next_wakeup(), self._next_change(now)]
            if self._active is not None:
                times.extend(engine.next_wakeup() for engine in self._active.engines.values())
        future = [t for t in times if t is not None and t > now]
        return min(future) if future else None

    def status(self) -> EngineStatus:
        """The main zone's engine status (what health reports of a screen without zones)."""
        return self._main.status()

    def zones_status(self) -> dict[str, Any]:
        """The layout on screen and each of its zones' engine status, for health."""
        with self._lock:
            active = self._active
            if active is None:
                return {"layout": None, "zones": {MAIN_ZONE: _status(self._main.status())}}
            zones = {MAIN_ZONE: _status(self._main.status())}
            for zone, engine in active.engines.items():
                zones[zone] = _status(engine.status())
            return {"layout": active.root.name, "zones": zones}

    # The decision (lock held)

    def _choose(self, now: datetime) -> None:
        """Which layout splits the screen now; on a change, the zones are set up for it."""
        available = self._safe_available
        full_top = self._full_probe.top_priority(now, available) if self._full else None
        chosen: _Layout | None = None
        chosen_top = -1
        for layout in self._layouts:
            top = layout.probe.top_priority(now, available)
            if top is not None and top > chosen_top:
                chosen, chosen_top = layout, top
        if chosen is not None and full_top is not None and full_top > chosen_top:
            chosen = None  # a full-screen document of a higher priority takes the screen
        if chosen is self._active:
            return
        old = self._active
        if old is not None:
            self._leave(old)
        self._active = chosen
        if chosen is not None:
            self._enter(chosen)
        log.info(
            "screen: %s",
            f"layout '{chosen.root.name}'" if chosen is not None else "full screen",
        )
        self._main.set_documents(self._main_documents())
        self._split_due = True
        self._split = chosen.screen if chosen is not None else None
        self._replay_main()

    def _enter(self, layout: _Layout) -> None:
        for box in layout.screen.zones:
            if box.name == MAIN_ZONE or box.name not in layout.documents:
                continue
            engine = layout.engines.get(box.name)
            renderer = self._screen.renderer(box.name)
            if engine is None:
                schedule = self._new_schedule()
                schedule.set_documents([layout.documents[box.name]])
                queue = self._zone_queues.queue(layout.root.name or "", box.name)
                layout.engines[box.name] = self._engine(box.name, schedule, queue, renderer)
            else:
                renderer.set_listener(engine)

    @staticmethod
    def _leave(layout: _Layout) -> None:
        for engine in layout.engines.values():
            engine.suspend()

    def _main_documents(self) -> list[ContentSet]:
        active = self._active
        if active is None or MAIN_ZONE not in active.documents:
            return list(self._full)
        return [active.documents[MAIN_ZONE], *self._full]

    def _next_change(self, now: datetime) -> datetime | None:
        if not self._layouts:
            return None
        times = [layout.probe.next_change(now) for layout in self._layouts]
        times.append(self._full_probe.next_change(now))
        future = [t for t in times if t is not None and t > now]
        return min(future) if future else None

    def _safe_available(self, item: ContentItem) -> bool:
        try:
            return bool(self._available(item))
        except Exception:
            log.exception("availability check failed for %s", item.url)
            return False

    # The playback record

    def _emit(self, zone: str, playback: Playback) -> None:
        active = self._active
        named = replace(playback, zone=zone, layout=active.root.name if active else None)
        with self._emit_lock:
            if zone == MAIN_ZONE:
                self._last_main = named
            self._send(named)

    def _replay_main(self) -> None:
        """At a change of layout, the main zone's playback again, naming the new layout."""
        with self._emit_lock:
            last = self._last_main
            if last is None:
                return
            active = self._active
            self._last_main = replace(last, layout=active.root.name if active else None)
            self._send(self._last_main)

    def _send(self, playback: Playback) -> None:
        if self._on_playback is None:
            return
        try:
            self._on_playback(playback)
        except Exception:
            log.exception("could not record the playback change")


def _status(status: EngineStatus) -> dict[str, Any]:
    return {
        "idle": status.idle,
        "queue-length": status.queue_length,
        "current": status.current,
        "pending": status.pending,
    }

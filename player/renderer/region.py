"""One region of the screen and what it plays: its web slots, pictures, videos, still and
cover, and the :class:`~player.renderer.layerstack.LayerStack` that says which of them is in
front. A display's screen has one region per zone (``qml/Region.qml`` in ``qml/Stage.qml``):
the main zone's, filling the screen without a layout, and one for each other zone of the layout
on screen (``screenzones.py``); each region plays one item at a time with its own front, pending
item and cross-fades. Only the main zone's region plays sound and spools videos to the data
directory; the others' videos are silent and spool to a temporary one.

The incoming item loads in a slot that is not in front, underneath the one that is; when it has
painted, the stack raises it (faded in on the render thread when a cross-fade is set, the
outgoing item still playing under it), the region reports it shown, and the old layer is
cleared once it is covered.

With one web view (``options.views``, the low-memory profile) a page that follows a page loads
in place of the one in front: a still of the last frame (a texture copy on the GPU) covers the
screen until the new page has painted, so the screen never shows a blank view, only the last
frame standing still a moment.

What the region shows, cannot show or ends goes to the kiosk through :class:`RegionReports`.
"""

from __future__ import annotations

import logging
import time
from typing import Protocol

from PySide6.QtCore import QObject, QTimer, QUrl
from PySide6.QtQuick import QQuickItem

from cds.model import MAIN_ZONE
from player.playitem import PlayItem
from player.renderer.content import IDLE_TOKEN, Kind, classify
from player.renderer.duegate import SwitchTrace, due_timestamp
from player.renderer.imagelayer import ImageLayer
from player.renderer.layers import Cover, Still
from player.renderer.layerstack import LayerStack, Pending
from player.renderer.native import NATIVE, NativeMedia, ZoneItems
from player.renderer.options import RendererOptions
from player.renderer.recycler import Recycler
from player.renderer.stage import Stage
from player.renderer.videolayer import VideoLayer
from player.renderer.webslot import SlotState, WebSlot
from player.renderer.zonelayer import ZONE_ITEMS

log = logging.getLogger("pdn.renderer")

BEAT_MS = 1000  # how often the page in front is asked for a frame
FAILURE_MEMORY = 30.0  # seconds a prepared item's failure is remembered for its show()
CRASH_BACKOFF_MAX = 8.0  # a crash-looping item (the idle page too) is reloaded at most this often


class RegionReports(Protocol):
    """What a region tells the kiosk."""

    def item_shown(self, item: PlayItem, natural: float | None) -> None: ...
    def idle_shown(self) -> None: ...
    def item_failed(self, item: PlayItem, reason: str) -> None: ...
    def item_ended(self, item: PlayItem) -> None: ...
    def render_crashed(self, description: str) -> bool:
        """A render process died; False: the screen is given up, do nothing more."""
        ...

    def idle_wanted(self) -> None:
        """Show the idle page (this region has nothing else to show)."""
        ...


class RegionPlayer(QObject):
    """The layers of one region and the item each shows. GUI thread only."""

    def __init__(
        self,
        stage: Stage,
        item: QQuickItem,
        options: RendererOptions,
        web: tuple[QObject, str],
        recycler: Recycler,
        switch_trace: SwitchTrace,
        reports: RegionReports,
        parent: QObject | None = None,
        zone: str = MAIN_ZONE,
    ) -> None:
        """``item``: the region in the scene (``Region.qml``); ``web``: the web engine
        profile of the views and the secret prefix of their channel; ``zone``: the zone of
        the screen it plays."""
        super().__init__(parent)
        self.zone = zone
        main = zone == MAIN_ZONE
        self._options = options
        self._recycler = recycler
        self._reports = reports
        self._closed = False
        #: The item on screen, reported shown (None: the idle page, or nothing).
        self.current: PlayItem | None = None
        self._crashes: dict[int, int] = {}  # render process crashes, by item token
        self._failures: dict[str, tuple[str, float]] = {}  # prepared items', by URL
        self.item = item
        self.image_layer = ImageLayer(stage, item, options.decoded_images, zone)
        spool = options.data_dir / "video-spool" if options.data_dir and main else None
        self.video_layer = VideoLayer(
            stage,
            item,
            options.audio and main,
            options.page_load_timeout,
            spool,
            options.video_decoders,
            local_first_frame_s=options.video_first_frame,
            stalled_after=options.video_stalled_after,
        )
        self.cover = Cover(item, options.display_name, options.api_url)
        self.still = Still(stage, item)
        layers = (self.cover, self.still, self.image_layer, self.video_layer)
        self.stack = LayerStack(stage, layers, options.crossfade_ms, switch_trace, self)
        self.stack.fade_first = not main  # a zone that appears fades its first item in
        item.setProperty("stack", self.stack)  # Region.qml binds its layers and views to it
        profile, channel = web
        self.slots = [
            WebSlot(name, profile, stage, self.stack, channel, options.page_load_timeout)
            for name in ("a", "b")[: options.views]
        ]
        for slot in self.slots:
            slot.ready.connect(self._slot_ready)
            slot.failed.connect(self._slot_failed)
            slot.crashed.connect(self._slot_crashed)
        self.native = NativeMedia(self.stack, self.image_layer, self.video_layer, self, self)
        self.zone_items = ZoneItems(self.stack, options, self, self)  # tickers and clocks
        self._beat = QTimer(self)  # the region's own: it dies with it
        self._beat.setInterval(BEAT_MS)
        self._beat.timeout.connect(self._heartbeat)

    def start(self) -> None:
        """Begin the checks of what is in front (the kiosk starts its other timers with it)."""
        self._beat.start()

    # -- what the kiosk asks --------------------------------------------------------------

    def prepare(self, item: PlayItem) -> None:
        """Load ``item`` behind the screen, if a layer is free for it."""
        kind = classify(item)
        if kind in NATIVE:
            self.native.prepare(item, kind)
            return
        if kind in ZONE_ITEMS:
            return  # made when shown: a clock is at once, a ticker shows its stored lines
        if any(slot.holds(item) for slot in self.slots):
            return
        slot = self._free_slot(for_show=False)
        if slot is None:
            log.debug("no free view to prepare %s in", item.url)
            return
        log.debug("preparing %s in slot %s", item.url, slot.name)
        slot.load(item, kind)

    def show(self, item: PlayItem) -> None:
        """Bring ``item`` in front: as soon as it has painted, over what is there."""
        remembered = self._failures.pop(item.url, None)
        if remembered is not None and time.monotonic() - remembered[1] < FAILURE_MEMORY:
            self._reports.item_failed(item, remembered[0])
            return
        self.stack.abandon_pending()
        kind = classify(item)
        if kind in ZONE_ITEMS:
            self.zone_items.show(item, kind)  # its painted signal goes on
            return
        self.zone_items.abandon()
        if kind in NATIVE:
            self.native.show(item, kind)  # the layer's presenting/painted signals go on
            return
        slot = next((s for s in self.slots if s.holds(item) and s is not self.stack.layer), None)
        if slot is None:
            slot, behind_still = self._slot_to_show_in()
            slot.load(item, kind, keep_old_for_a_frame=behind_still)
        self.stack.pending = Pending(item, kind, slot=slot)
        if slot.state is SlotState.READY:
            self._commit_slot(slot)  # else once it is: _slot_ready

    def keep_idle(self) -> bool:
        """The idle page is in front (what was on its way to replace it is dropped), or on
        its way there."""
        if self.idle_in_front():
            self.stack.abandon_pending()
            return True
        pending = self.stack.pending
        return pending is not None and pending.item.token == IDLE_TOKEN

    def show_page(self, item: PlayItem, html: str, base: QUrl) -> None:
        """Bring a page of the display's own in front (the idle page; not reported shown)."""
        self.stack.abandon_pending()
        self.zone_items.abandon()
        slot, behind_still = self._slot_to_show_in()
        slot.load_html(html, base, item, keep_old_for_a_frame=behind_still)
        self.stack.pending = Pending(item, Kind.PAGE, slot=slot, report=False)

    def show_nothing(self) -> None:
        """Nothing in this region (a zone with nothing to play): what is in front fades out
        and is cleared."""
        self.stack.abandon_pending()
        self.zone_items.abandon()
        self.current = None
        self.stack.empty()

    def plays_video(self) -> bool:
        """A video is in front here, or on its way."""
        pending = self.stack.pending
        return self.stack.layer is self.video_layer or (
            pending is not None and pending.kind is Kind.VIDEO
        )

    def idle_slots(self) -> list[WebSlot]:
        return [s for s in self.slots if s.item is not None and s.item.token == IDLE_TOKEN]

    def idle_in_front(self) -> bool:
        slot = self.stack.front_slot()
        return slot is not None and slot.item is not None and slot.item.token == IDLE_TOKEN

    def forget_idle(self) -> None:
        """The idle page in front is loaded afresh at its next show."""
        slot = self.stack.front_slot()
        if slot is not None and self.idle_in_front():
            slot.item = None

    def set_context(self, script: str, update: str) -> None:
        """The context script of the views to come, and ``update`` run in the pages loaded."""
        for slot in self.slots:
            slot.context_script = script
            if slot.state is not SlotState.BLANK:
                slot.run_in_page(update)

    def answering(self, hang_timeout: float) -> bool:
        """The page in front (if one is) answered within ``hang_timeout`` seconds."""
        slot = self.stack.front_slot()
        return slot is None or time.monotonic() - slot.last_beat < hang_timeout

    def frame_swapped(self, last_swap: float | None) -> None:
        """A frame of the scene reached the screen at ``last_swap``."""
        if self.stack.layer is not None:  # a frame of something, not of the empty stage
            self.stack.last_frame = last_swap
        self.still.frame_swapped()
        for slot in self.slots:
            slot.frame_swapped()
        self.native.frame_swapped()

    def recover(self, problem: str) -> None:
        """Bring the region back: a fresh view, the item loaded again (or the idle page)."""
        slot = self.stack.front_slot()
        if slot is None:
            if self.stack.holding_still:
                self.stack.show_cover()
            if self.current is None and self.stack.pending is None:
                log.info("recovering the screen (%s): the idle page again", problem)
                self._reports.idle_wanted()
            return
        item = slot.item
        log.warning(
            "recovering the screen (%s): a fresh view for %s",
            problem,
            item.url if item is not None else "the slot",
        )
        self.stack.show_cover()
        slot.clear()  # its view goes: the item comes back in a fresh one
        if item is None or item.token == IDLE_TOKEN:
            if self.stack.pending is None:
                self._reports.idle_wanted()
            return
        if self.stack.pending is None:
            self.stack.pending = Pending(item, slot.kind, slot=slot, report=False)
            slot.load(item, slot.kind)

    def close(self) -> None:
        """Stop every timer and callback of the region and its layers."""
        self._closed = True
        self._beat.stop()
        self.stack.close()
        for slot in self.slots:
            slot.close()
        self.native.close()
        self.zone_items.close()

    # -- what the native media report (native.MediaReports) -------------------------------

    def now_showing(self, pending: Pending, natural: float | None) -> None:
        item = pending.item
        if item.token == IDLE_TOKEN:
            self.current = None
            self._crashes.pop(IDLE_TOKEN, None)
            log.info("on screen: the idle page")
            self._reports.idle_shown()
            return
        self.current = item
        if not pending.report:
            log.info("on screen again after a crash: %s", item.url)
            return
        self._crashes.pop(item.token, None)
        self._reports.item_shown(item, natural)

    def failed(self, item: PlayItem, reason: str, on_screen: bool = False) -> None:
        if on_screen:
            self.stack.show_cover()
            self.current = None
            self._reports.item_failed(item, reason)
            return
        self._reports.item_failed(item, reason)
        if self.stack.layer is None or self.stack.holding_still:
            self.stack.show_cover()

    def prepared_failed(self, item: PlayItem, reason: str) -> None:
        now = time.monotonic()
        self._failures = {
            url: entry for url, entry in self._failures.items() if now - entry[1] < FAILURE_MEMORY
        }
        self._failures[item.url] = (reason, now)
        self._reports.item_failed(item, reason)

    def ended(self, item: PlayItem) -> None:
        self._reports.item_ended(item)

    # -- the web slots --------------------------------------------------------------------

    def _free_slot(self, for_show: bool) -> WebSlot | None:
        """The slot to load into: never the one on screen, and for a hint never the one an
        item on its way to the screen is using."""
        stack = self.stack
        busy: set[object] = {stack.layer}
        if not for_show and stack.pending is not None and stack.pending.slot is not None:
            busy.add(stack.pending.slot)
        if not for_show and stack.outgoing is not None:
            busy.add(stack.outgoing)  # it plays on under the fade: a hint must not replace it
        if stack.holding_still:
            busy.update(s for s in self.slots if s.front_item() is stack.still_source)
        candidates = [s for s in self.slots if s not in busy]
        if not candidates:
            return None
        for state in (SlotState.BLANK, SlotState.READY, SlotState.LOADING, SlotState.SHOWN):
            for slot in candidates:
                if slot.state is state:
                    self._recycler.before_load(slot)  # memory given back when due
                    return slot
        return candidates[0]

    def _slot_to_show_in(self) -> tuple[WebSlot, bool]:
        """A slot for the item to show, and whether it loads behind a still: one not on
        screen, or with a single view (the low-memory profile) the one on screen, from now
        behind a still of it."""
        slot = self._free_slot(for_show=True)
        if slot is not None:
            return slot, False
        slot = self.stack.front_slot()
        if slot is None:  # the only view is already behind a still
            slot = self.slots[0]
            self._recycler.before_load(slot)
            return slot, False
        source = slot.front_item()
        assert source is not None  # a slot in front holds a view
        self.stack.hold_still_over(source)
        self._recycler.before_load(slot)
        return slot, True

    def _slot_ready(self, slot: WebSlot) -> None:
        pending = self.stack.pending
        if pending is not None and pending.slot is slot and slot.item is pending.item:
            self._commit_slot(slot)

    def _commit_slot(self, slot: WebSlot) -> None:
        pending = self.stack.pending
        assert pending is not None
        self.stack.pending = None
        self.stack.swap_to(slot, due_timestamp(pending.item), pending.item.cut)
        slot.start()
        self.now_showing(pending, None)

    def _slot_failed(self, slot: WebSlot, reason: str) -> None:
        item = slot.item
        if item is None:
            return
        pending = self.stack.pending
        log.warning("cannot show %s: %s", item.url, reason)
        if slot is self.stack.layer:
            # It broke on screen (an error page after a navigation, a video error): cover it.
            self.stack.show_cover()
            slot.clear()
            if item.token == IDLE_TOKEN:
                return
            self.current = None
            self._reports.item_failed(item, reason)
            return
        slot.clear()
        if pending is not None and pending.slot is slot:
            self.stack.pending = None
            if item.token == IDLE_TOKEN:
                self.stack.show_cover()
                self._reports.idle_shown()
                return
            self.failed(item, reason)
            return
        if item.token != IDLE_TOKEN:
            self.prepared_failed(item, reason)

    def _slot_crashed(self, slot: WebSlot, description: str) -> None:
        item = slot.item
        log.warning("slot %s: %s", slot.name, description)
        if not self._reports.render_crashed(description) or item is None:
            return
        crashes = self._crashes.get(item.token, 0) + 1
        self._crashes[item.token] = crashes
        stack = self.stack
        on_screen = slot is stack.layer
        if on_screen:
            stack.show_cover()
        pending = stack.pending
        retry = item.token == IDLE_TOKEN or crashes <= self._options.max_crash_retries
        if not retry:
            self._crashes.pop(item.token, None)
            slot.clear()
            if pending is not None and pending.slot is slot:
                stack.pending = None
                if stack.holding_still:
                    stack.show_cover()
            if on_screen:
                self.current = None
            self._reports.item_failed(item, f"{description}, {crashes} times")
            return
        if on_screen:
            if pending is not None:
                return  # the engine already wants something else; the cover bridges the gap
            stack.pending = Pending(item, slot.kind, slot=slot, report=False)
        elif pending is None or pending.slot is not slot:
            slot.clear()  # a hint: loaded again when shown
            return
        # Again at once after one crash; after more, with back-off: never a hot loop.
        delay = 0.0 if crashes <= 1 else min(CRASH_BACKOFF_MAX, 0.5 * 2 ** (crashes - 2))
        log.info(
            "reloading %s after a render process crash%s",
            item.url,
            f" in {delay:g} s" if delay else "",
        )
        if item.token == IDLE_TOKEN:
            slot.state = SlotState.BLANK
            stack.pending = None
            if stack.holding_still:
                stack.show_cover()
            if not delay:
                self._reports.idle_wanted()
                return

            def idle_again() -> None:
                if not self._closed and stack.pending is None and stack.layer is self.cover:
                    self._reports.idle_wanted()

            QTimer.singleShot(round(delay * 1000), self, idle_again)
            return
        if not delay:
            slot.load(item, slot.kind)
            return
        generation = slot.generation
        waiting = stack.pending

        def load_again() -> None:
            if self._closed or stack.pending is not waiting or slot.generation != generation:
                return
            slot.load(item, slot.kind)

        QTimer.singleShot(round(delay * 1000), self, load_again)

    def _heartbeat(self) -> None:
        stack = self.stack
        slot = stack.front_slot()
        now = time.monotonic()
        if stack.layer is self.video_layer:
            self.video_layer.check_stalled()
        if slot is None:
            if stack.layer is not None:
                stack.last_frame = now  # a native layer: the GUI thread is painting
            return
        if slot.state is not SlotState.SHOWN:
            return
        silent = now - slot.last_beat
        if silent > self._options.hang_timeout:
            slot.kill_render_process()
            slot.last_beat = now  # one kill per timeout
            return
        if stack.last_frame is None or slot.last_beat > stack.last_frame:
            stack.last_frame = slot.last_beat
        slot.probe_alive()

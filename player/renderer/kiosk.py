"""The kiosk renderer: what the engine's PlayItems become on the screen.

The screen is one Qt Quick scene (``stage.py``). Its layers, any of which can be in front: the
web views of two slots (one with the low-memory profile), the native pictures, the native idle
cover, and a still of a web view. The incoming item loads in a slot that is not in front,
underneath the one that is; when it has painted, it is raised (faded in on the render thread
when a cross-fade is set, the outgoing item still playing under it), reported shown, and the
old layer is cleared once it is covered.

With one web view (``options.views``, the low-memory profile) a page that follows a page loads
in place of the one in front: a still of the last frame (a texture copy on the GPU) covers the
screen until the new page has painted, so the screen never shows a blank view, only the last
frame standing still a moment.

An item of a synchronised set (``PlayItem.due``) comes ahead of its instant, prepared: it is
held by a :class:`~player.renderer.duegate.DueGate` and switched to on the instant.

Why one module: one class moves one scene's layers in step (which is in front, which loads,
what covers the screen, what crashed); every part that stands alone is beside it (``stage``,
``webslot``, ``layers``, ``native``, ``duegate``, ``watchdog``, ``idle``).
"""

from __future__ import annotations

import logging
import secrets
import time
from collections import deque
from collections.abc import Callable
from datetime import UTC, datetime

from PySide6.QtCore import QObject, QTimer, Signal
from PySide6.QtGui import QImage
from PySide6.QtQuick import QQuickItem

from player.playitem import PlayItem, RendererListener
from player.renderer.compositor import CompositorView
from player.renderer.content import IDLE_TOKEN, Kind, classify, context_script, update_script
from player.renderer.duegate import DueGate, SwitchTrace, due_timestamp
from player.renderer.engineprocs import ZygoteWatch
from player.renderer.idle import (
    addresses,
    idle_base_url,
    idle_html,
    pairing_script,
    progress_script,
)
from player.renderer.imagelayer import ImageLayer
from player.renderer.layers import Cover, Layer, Still
from player.renderer.native import NativeMedia, Pending
from player.renderer.options import RendererOptions, add_chromium_flags
from player.renderer.profile import make_profile
from player.renderer.recycler import MemoryPressure, Recycler
from player.renderer.stage import Stage, keep_screen_awake
from player.renderer.videolayer import VideoLayer
from player.renderer.watchdog import CRASH_WINDOW, WATCH_MS, VisualWatchdog
from player.renderer.webslot import SlotState, WebSlot

log = logging.getLogger("pdn.renderer")

CLEAR_DELAY_MS = 250  # the old layer is cleared this long after the swap (the new one is up)
COVER_POLL_MS = 50  # how often a layer waiting to be cleared asks whether the fade over it ended
BEAT_MS = 1000
FAILURE_MEMORY = 30.0  # seconds a prepared item's failure is remembered for its show()
LAUNCH_FAILED = "exit code 1002"  # Chromium could not start a render process at all
LAUNCH_FAILURES = 2  # ... this many times in CRASH_WINDOW: the web engine is lost
CRASH_BACKOFF_MAX = 8.0  # a crash-looping item (the idle page too) is reloaded at most this often


class KioskRenderer(NativeMedia, VisualWatchdog, QObject):
    """A :class:`player.playitem.Renderer` on a fullscreen Qt Quick scene.

    Construct it on the GUI thread after the application exists (call
    :func:`player.renderer.prepare_process` before creating the application).

    A visual watchdog checks every second that the screen shows what the renderer has said is
    on it (:meth:`screen_state`): no page whose render process stopped answering, no screen
    without a frame, no black screen where a page painted colour and stopped answering, no
    cover hiding an item for long, no storm of render process crashes. It reads the screen back
    at most once a minute, or at once when the scene stops swapping frames while it should be
    moving. A wrong screen is reloaded with back-off (``RECOVERY_STEPS``); one still wrong after
    ``options.recover_within`` seconds, or the loss of the web engine's zygote (no render
    process can be started again in this process), emits ``engine_lost`` with the reason: the
    display then exits non-zero and its service manager starts a new one (crash-only).
    """

    #: The screen cannot be brought back in this process: (reason).
    engine_lost = Signal(str)

    def __init__(
        self, options: RendererOptions | None = None, memory: MemoryPressure | None = None
    ) -> None:
        super().__init__()
        self.options = options = options or RendererOptions()
        add_chromium_flags()  # in case prepare_process was not called: before any profile
        self._listener: RendererListener | None = None
        self._channel = f"pdn-{secrets.token_hex(8)}:"
        self._readings: dict[str, object] = {}
        self._pending: Pending | None = None
        self._current: PlayItem | None = None  # on screen, reported shown
        self._front: Layer | None = None
        self._crashes: dict[int, int] = {}
        self._prepared_failures: dict[str, tuple[str, float]] = {}
        self._prepared_native: dict[str, PlayItem] = {}  # pictures and videos, by URL
        self._serial = 0  # of the native layers' shows
        self._last_frame: float | None = None
        self._idle_ips: list[str] = []
        self._idle_progress = ""
        self._idle_pairing = ""
        self._closed = False
        self._started = time.monotonic()
        self._crash_times: deque[float] = deque(maxlen=64)
        self._launch_failures: deque[float] = deque(maxlen=8)
        self._wrong_since: float | None = None
        self._problem: str | None = None
        self._recoveries = 0
        self._fatal: str | None = None
        self._frame_class = "content"  # of the last look at the screen
        self._frame_class_at: float | None = None
        # (frames swapped, time) when the compositor was first seen black against content
        self._black_suspect: tuple[int, float] | None = None
        self._watch_count = 0
        self._grab_owed = False
        self._fading_until = 0.0  # time.monotonic() the last fade ends: frames are due till then
        # The slot fading out under the one fading in: it stays live until it is cleared.
        self._outgoing: WebSlot | None = None
        self._deferred_hint: PlayItem | None = None  # a hint that waits for that slot
        self._still_source: object = None  # the view the still copied (one web view)
        self._zygotes = ZygoteWatch()
        # Items of a synchronised set wait here for their instant; how late switches came.
        self.switch_trace = SwitchTrace()
        self._due = DueGate(self, self._show_now, self.switch_trace.gate_opened)

        self.stage = Stage(
            rotation=options.rotation,
            screen_index=options.screen,
            fullscreen=options.fullscreen,
            window_size=options.window_size,
            wall=options.wall,
        )
        made = make_profile(options, self.stage.view.engine(), self)
        self.profile, self._profile_owner, self._guards = made  # guards: kept alive here
        self.recycler = Recycler(memory)
        self.slots = [
            WebSlot(name, self.profile, self.stage, self._channel, options.page_load_timeout)
            for name in ("a", "b")[: options.views]
        ]
        script = context_script(self._readings)
        for slot in self.slots:
            slot.context_script = script
            slot.ready.connect(self._slot_ready)
            slot.failed.connect(self._slot_failed)
            slot.crashed.connect(self._slot_crashed)
        self.image_layer = ImageLayer(self.stage, options.decoded_images)
        spool = options.data_dir / "video-spool" if options.data_dir is not None else None
        self.video_layer = VideoLayer(
            self.stage,
            options.audio,
            options.page_load_timeout,
            spool,
            options.video_decoders,
            local_first_frame_s=options.video_first_frame,
            stalled_after=options.video_stalled_after,
        )
        self._connect_native()
        self.cover = Cover(self.stage, options.display_name, options.api_url)
        self.still = Still(self.stage)
        self.stage.frame_swapped.connect(self._frame_swapped)
        self.stage.show_kiosk(options.fullscreen)
        # Every timer is the renderer's own (a child): it dies with it, and close() stops it.
        self._beat = self._timer(BEAT_MS, self._heartbeat)
        self._idle_refresh = self._timer(30_000, self._refresh_idle)
        self.compositor = CompositorView(
            self,
            options.compositor_check,
            window=self.stage.view,
            fullscreen=options.fullscreen,
        )
        self._watch = self._timer(WATCH_MS, self._check_screen)
        self._zygotes.lost()  # the zygotes are up once the profile and its views are
        if options.keep_screen_on:
            keep_screen_awake()
        self.show_idle()

    def _timer(self, interval_ms: int, callback: object) -> QTimer:
        timer = QTimer(self)
        timer.setInterval(interval_ms)
        timer.timeout.connect(callback)
        timer.start()
        return timer

    def _later(self, delay_ms: int, callback: object) -> None:
        """``callback`` after ``delay_ms``, unless the renderer is closed by then: the timer
        has the renderer as its context, so it cannot outlive it."""

        def fire() -> None:
            if not self._closed:
                callback()  # type: ignore[operator]

        QTimer.singleShot(delay_ms, self, fire)

    def _when_covered(self, item: QQuickItem, delay_ms: int, callback: Callable[[], None]) -> None:
        """``callback`` after ``delay_ms`` and once ``item``'s fade in is over: the fade runs
        on the render thread, whose time falls behind the GUI thread's clock when frames come
        late (a loaded board), and what it fades in over must stay until it is opaque."""

        def check() -> None:
            if self.stage.layers.fading(item):
                self._later(COVER_POLL_MS, check)
            else:
                callback()

        self._later(delay_ms, check)

    # -- the Renderer protocol ------------------------------------------------------------

    def set_listener(self, listener: RendererListener) -> None:
        self._listener = listener

    def prepare(self, item: PlayItem) -> None:
        if self._closed:
            return
        kind = classify(item)
        if kind in (Kind.NATIVE_IMAGE, Kind.VIDEO):
            self._prepare_native(item, kind)
            return
        if any(slot.holds(item) for slot in self.slots):
            return
        slot = self._free_slot(for_show=False)
        if slot is None:
            if self._outgoing is not None:
                self._deferred_hint = item  # loaded once the outgoing item is covered
            log.debug("no free view to prepare %s in", item.url)
            return
        log.debug("preparing %s in slot %s", item.url, slot.name)
        slot.load(item, kind)

    def show(self, item: PlayItem) -> None:
        if self._closed:
            return
        self._due.cancel()
        if self._due.hold(item):
            self.prepare(item)  # prepared already, as a rule: then this does nothing
            return
        self._show_now(item)

    def _show_now(self, item: PlayItem) -> None:
        if self._closed:
            return
        self._deferred_hint = None
        kind = classify(item)
        remembered = self._prepared_failures.pop(item.url, None)
        if remembered is not None and time.monotonic() - remembered[1] < FAILURE_MEMORY:
            self._report_failed(item, remembered[0])
            return
        self._abandon_pending()
        if kind in (Kind.NATIVE_IMAGE, Kind.VIDEO):
            self._show_native(item, kind)
            return
        slot = next((s for s in self.slots if s.holds(item) and s is not self._front), None)
        if slot is None:
            slot, behind_still = self._slot_to_show_in()
            slot.load(item, kind, keep_old_for_a_frame=behind_still)
        self._pending = Pending(item, kind, slot=slot)
        if slot.state is SlotState.READY:
            self._commit_slot(slot)

    def show_idle(self) -> None:
        if self._closed:
            return
        self._due.cancel()
        front_slot = self._front_slot()
        if (
            front_slot is not None
            and front_slot.item is not None
            and front_slot.item.token == IDLE_TOKEN
        ):
            self._abandon_pending()
            return
        if self._pending is not None and self._pending.item.token == IDLE_TOKEN:
            return
        self._abandon_pending()
        self._idle_ips = addresses()
        item = PlayItem(
            token=IDLE_TOKEN,
            url="pdn:idle",
            source_url="pdn:idle",
            content_type="text/html",
            duration=None,
            origin="idle",
        )
        slot, behind_still = self._slot_to_show_in()
        slot.load_html(
            idle_html(
                self.options.display_name,
                self.options.api_url,
                self._idle_ips,
                self._idle_progress,
                self._idle_pairing,
            ),
            idle_base_url(),
            item,
            keep_old_for_a_frame=behind_still,
        )
        self._pending = Pending(item, Kind.PAGE, slot=slot, report=False)

    # -- extensions -----------------------------------------------------------------------

    def set_idle_progress(self, text: str) -> None:
        """What the idle page says of downloads ("" for nothing); shown at once if it is up."""
        self._idle_progress = text
        for slot in (s for s in self.slots if s.item is not None and s.item.token == IDLE_TOKEN):
            slot.run_in_page(progress_script(text))

    def set_idle_pairing(self, text: str) -> None:
        """The pairing line of the idle page ("" for none); shown at once if it is up."""
        self._idle_pairing = text
        for slot in (s for s in self.slots if s.item is not None and s.item.token == IDLE_TOKEN):
            slot.run_in_page(pairing_script(text))

    def grab_png(self) -> bytes:
        """A PNG of what the window shows now (rotation included). GUI thread only."""
        return self.stage.grab_png()

    def grab_image(self) -> QImage:
        """What the window shows now, as an image (tests and benchmarks)."""
        return self.stage.grab()

    def set_context(self, readings: dict[str, object]) -> None:
        """Push the latest sensor readings to web content (see the package docstring)."""
        self._readings = dict(readings)
        script = context_script(self._readings)
        update = update_script(self._readings)
        for slot in self.slots:
            slot.context_script = script  # the views to come
            if slot.state is not SlotState.BLANK:
                slot.run_in_page(update)

    def last_frame_time(self) -> float | None:
        """``time.monotonic()`` of the last frame known painted (a swap of the scene, or a
        page's frame answering the liveness probe); None before the first one."""
        return self._last_frame

    @property
    def alive(self) -> bool:
        """The window is up and what is on screen answers (no hung render process)."""
        if self._closed or not self.stage.is_visible():
            return False
        slot = self._front_slot()
        if slot is None:
            return True
        return time.monotonic() - slot.last_beat < self.options.hang_timeout

    @property
    def screen_right(self) -> bool:
        """The visual watchdog found nothing wrong at its last check."""
        return self._fatal is None and self._wrong_since is None

    def screen_state(self) -> dict[str, object]:
        """The visual watchdog's verdict, for health: right or not, and why."""
        now = time.monotonic()
        state: dict[str, object] = {
            "right": self.screen_right,
            "showing": self._showing(),
            "frame": self._frame_class,
            "compositor": self.compositor.describe(now),
        }
        if self._front is self.video_layer:
            state["video"] = self.video_layer.describe()
        switches = self.switch_trace.describe()
        if switches is not None:
            state["sync"] = switches
        if self._fatal is not None:
            state["problem"] = f"giving up: {self._fatal}"
        elif self._problem is not None and self._wrong_since is not None:
            state["problem"] = self._problem
            state["wrong-for"] = round(now - self._wrong_since, 1)
        return state

    @property
    def current_token(self) -> int | None:
        return self._current.token if self._current is not None else None

    def close(self) -> None:
        """Take the window down and free Qt WebEngine in order (views before their profile).
        Every timer and callback of the renderer and its slots stops here."""
        if self._closed:
            return
        self._closed = True
        self._due.cancel()
        for timer in (self._beat, self._idle_refresh, self._watch):
            timer.stop()
        self.compositor.close()
        self.stage.frame_swapped.disconnect(self._frame_swapped)
        for slot in self.slots:
            slot.close()
        self.image_layer.close()
        self.video_layer.close()
        self.stage.close()
        from shiboken6 import delete

        delete(self._profile_owner)

    # -- internals ------------------------------------------------------------------------

    def _front_slot(self) -> WebSlot | None:
        front = self._front
        return front if isinstance(front, WebSlot) else None

    def _pending_slot(self) -> WebSlot | None:
        return self._pending.slot if self._pending is not None else None

    def _lost_zygote(self) -> str | None:
        return self._zygotes.lost()

    def _switch_imminent(self) -> bool:
        return self._due.held is not None

    def _free_slot(self, for_show: bool) -> WebSlot | None:
        """The slot to load into: never the one on screen, and for a hint never the one an
        item on its way to the screen is using."""
        busy: set[object] = {self._front}
        if not for_show and self._pending is not None and self._pending.slot is not None:
            busy.add(self._pending.slot)
        if not for_show and self._outgoing is not None:
            busy.add(self._outgoing)  # it plays on under the fade: a hint must not replace it
        if self._holding_still:
            busy.update(s for s in self.slots if s.front_item() is self._still_source)
        candidates = [s for s in self.slots if s not in busy]
        if not candidates:
            return None
        for state in (SlotState.BLANK, SlotState.READY, SlotState.LOADING, SlotState.SHOWN):
            for slot in candidates:
                if slot.state is state:
                    self.recycler.before_load(slot)  # memory given back when due
                    return slot
        return candidates[0]

    def _slot_to_show_in(self) -> tuple[WebSlot, bool]:
        """A slot for the item to show, and whether it loads behind a still: one not on
        screen, or with a single view (the low-memory profile) the one on screen, from now
        behind a still of it."""
        slot = self._free_slot(for_show=True)
        if slot is not None:
            return slot, False
        slot = self._front_slot()
        if slot is None:  # the only view is already behind a still
            slot = self.slots[0]
            self.recycler.before_load(slot)
            return slot, False
        source = slot.front_item()
        assert source is not None  # a slot in front holds a view
        self._hold_still_over(source)
        self.recycler.before_load(slot)
        return slot, True

    def _hold_still_over(self, source: QQuickItem) -> None:
        """Put a still of ``source`` (a view, or a video whose decoder must go) in front."""
        # An item still fading in would be copied half transparent: the engine has moved on,
        # so its fade ends here.
        self.stage.layers.stop_fade(source, 1.0)
        self.still.hold(source, time.monotonic())
        self._still_source = source
        self._front = self.still

    @property
    def _holding_still(self) -> bool:
        return self._front is self.still

    def _abandon_pending(self) -> None:
        """A new show supersedes the one on its way (the engine has moved on)."""
        pending = self._pending
        self._pending = None
        if pending is None:
            return
        if pending.kind is Kind.NATIVE_IMAGE:
            self.image_layer.cancel()
        elif pending.kind is Kind.VIDEO:
            self.video_layer.cancel()
        if pending.slot is not None and pending.item.token == IDLE_TOKEN:
            self._schedule_clear(pending.slot)

    def _slot_ready(self, slot: WebSlot) -> None:
        pending = self._pending
        if pending is not None and pending.slot is slot and slot.item is pending.item:
            self._commit_slot(slot)

    def _commit_slot(self, slot: WebSlot) -> None:
        pending = self._pending
        assert pending is not None
        self._pending = None
        self._swap_to(slot, due_timestamp(pending.item), pending.item.cut)
        slot.start()
        self._now_showing(pending, None)

    def _swap_to(self, layer: Layer, due: float | None = None, cut: bool = False) -> None:
        """Bring ``layer`` in front: raised, faded in over the outgoing layer (which stays
        live under it), or at once with ``cut``, and the outgoing layer cleared once covered.
        ``due``: the instant the item was due (a synchronised set's), for :attr:`switch_trace`."""
        old = self._front
        item = layer.front_item()
        if item is None:
            return
        on_the_instant = self.switch_trace.switching(due)
        fade_ms = self.options.crossfade_ms if old is not None else 0
        if cut or (old is layer and layer not in (self.image_layer, self.video_layer)):
            fade_ms = 0
        if self.stage.layers.bring_in(item, fade_ms):
            self._fading_until = time.monotonic() + fade_ms / 1000
        self._front = layer
        self._last_frame = time.monotonic()
        if on_the_instant:
            # Drawn now, not after what this thread does next (the engine's bookkeeping of
            # the item shown, the next item's preparation): Stage.draw_now.
            self.stage.draw_now()
        else:
            self.stage.request_frame()
        delay = CLEAR_DELAY_MS + fade_ms
        if isinstance(old, WebSlot) and old is not layer:
            self._outgoing = old if fade_ms else None
            self._schedule_clear(old, item)
        elif old in (self.image_layer, self.video_layer):
            self._after_native(old, layer, delay, item)
        elif old is self.cover and layer is not self.cover:
            self._when_covered(item, delay, self._clear_cover)
        elif old is self.still and layer is not self.still:
            self._release_still_after(delay, item)

    def _clear_cover(self) -> None:
        if self._front is not self.cover:
            self.cover.clear()

    def _release_still_after(self, delay_ms: int, covering: QQuickItem | None = None) -> None:
        holds = self.still.holds
        if covering is None:
            self._later(delay_ms, lambda: self._release_still(holds))
        else:
            self._when_covered(covering, delay_ms, lambda: self._release_still(holds))

    def _release_still(self, holds: int) -> None:
        """Let the still go once covered, unless it holds again since (a newer item with one
        web view: the release of the older one would hide it under the newer fade)."""
        if self._front is not self.still and self.still.holds == holds:
            self.still.release()
            self._still_source = None

    def _schedule_clear(self, slot: WebSlot, covering: QQuickItem | None = None) -> None:
        """Clear ``slot`` once the item fading in over it (``covering``) is opaque."""
        generation = slot.generation

        def clear() -> None:
            pending_slot = self._pending.slot if self._pending is not None else None
            if (
                slot.generation == generation
                and slot is not self._front
                and slot is not pending_slot
            ):
                slot.clear()

        delay = CLEAR_DELAY_MS + self.options.crossfade_ms
        if covering is None:
            self._later(delay, clear)
        else:
            self._when_covered(covering, delay, clear)

    def _frame_swapped(self) -> None:
        self.switch_trace.frame_swapped(self.stage.last_swap)
        if self._front is not None:  # a frame of something, not of the empty stage
            self._last_frame = self.stage.last_swap
        self.still.frame_swapped()
        for slot in self.slots:
            slot.frame_swapped()
        self.image_layer.frame_swapped()
        self.video_layer.frame_swapped()

    def _now_showing(self, pending: Pending, natural: float | None) -> None:
        item = pending.item
        if item.token == IDLE_TOKEN:
            self._current = None
            self._crashes.pop(IDLE_TOKEN, None)
            log.info("on screen: the idle page")
            self._report_idle()
            return
        self._current = item
        if not pending.report:
            log.info("on screen again after a crash: %s", item.url)
            return
        self._crashes.pop(item.token, None)
        if self._listener is not None:
            self._listener.item_shown(item.token, datetime.now(UTC), natural)

    def _slot_failed(self, slot: WebSlot, reason: str) -> None:
        item = slot.item
        if item is None:
            return
        pending = self._pending
        log.warning("cannot show %s: %s", item.url, reason)
        if slot is self._front:
            # It broke on screen (an error page after a navigation, a video error): cover it.
            self._show_cover()
            slot.clear()
            if item.token == IDLE_TOKEN:
                return
            self._current = None
            self._report_failed(item, reason)
            return
        slot.clear()
        if pending is not None and pending.slot is slot:
            self._pending = None
            if item.token == IDLE_TOKEN:
                self._show_cover()
                self._report_idle()
                return
            self._report_failed(item, reason)
            if self._front is None or self._holding_still:
                self._show_cover()
            return
        if item.token != IDLE_TOKEN:
            self._remember_failure(item, reason)
            self._report_failed(item, reason)

    def _slot_crashed(self, slot: WebSlot, description: str) -> None:
        item = slot.item
        log.warning("slot %s: %s", slot.name, description)
        now = time.monotonic()
        self._crash_times.append(now)
        if LAUNCH_FAILED in description:
            self._launch_failures.append(now)
            recent = sum(1 for t in self._launch_failures if now - t < CRASH_WINDOW)
            if recent >= LAUNCH_FAILURES:
                # Not the item's fault: nothing is reported failed, the display restarts.
                self._give_up(f"render processes cannot be started ({recent} launch failures)")
                return
        if self._fatal is not None:
            return
        if item is None:
            return
        crashes = self._crashes.get(item.token, 0) + 1
        self._crashes[item.token] = crashes
        on_screen = slot is self._front
        if on_screen:
            self._show_cover()
        pending = self._pending
        retry = item.token == IDLE_TOKEN or crashes <= self.options.max_crash_retries
        if not retry:
            self._crashes.pop(item.token, None)
            slot.clear()
            if pending is not None and pending.slot is slot:
                self._pending = None
                if self._holding_still:
                    self._show_cover()
            if on_screen:
                self._current = None
            self._report_failed(item, f"{description}, {crashes} times")
            return
        if on_screen:
            if pending is not None:
                return  # the engine already wants something else; the cover bridges the gap
            self._pending = Pending(item, slot.kind, slot=slot, report=False)
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
            self._pending = None
            if self._holding_still:
                self._show_cover()
            if not delay:
                self.show_idle()
                return

            def idle_again() -> None:
                if not self._closed and self._pending is None and self._front is self.cover:
                    self.show_idle()

            QTimer.singleShot(round(delay * 1000), idle_again)
            return
        if not delay:
            slot.load(item, slot.kind)
            return
        generation = slot.generation
        waiting = self._pending

        def load_again() -> None:
            if self._closed or self._pending is not waiting or slot.generation != generation:
                return
            slot.load(item, slot.kind)

        QTimer.singleShot(round(delay * 1000), load_again)

    def _report_idle(self) -> None:
        if self._listener is not None:
            self._listener.idle_shown(datetime.now(UTC))

    def _show_cover(self) -> None:
        """The native idle facts over everything, at once: never a crashed view or an error
        page."""
        old = self._front
        if old is self.cover:
            return
        self.cover.bring_up()
        item = self.cover.front_item()
        self.stage.layers.bring_in(item, 0, cut=True)
        self._front = self.cover
        self._last_frame = time.monotonic()
        self.stage.request_frame()
        if old is self.still:
            self._release_still_after(CLEAR_DELAY_MS)
        else:
            self._after_native(old, self.cover, CLEAR_DELAY_MS)

    def _report_failed(self, item: PlayItem, reason: str) -> None:
        if item.token == IDLE_TOKEN:
            return
        if self._listener is not None:
            self._listener.item_failed(item.token, reason)

    def _remember_failure(self, item: PlayItem, reason: str) -> None:
        now = time.monotonic()
        self._prepared_failures = {
            url: entry
            for url, entry in self._prepared_failures.items()
            if now - entry[1] < FAILURE_MEMORY
        }
        self._prepared_failures[item.url] = (reason, now)

    def _heartbeat(self) -> None:
        slot = self._front_slot()
        now = time.monotonic()
        if self._front is self.video_layer:
            self.video_layer.check_stalled()
        if slot is None:
            if self._front is not None:
                self._last_frame = now  # a native layer: the GUI thread is painting
            return
        if slot.state is not SlotState.SHOWN:
            return
        silent = now - slot.last_beat
        if silent > self.options.hang_timeout:
            slot.kill_render_process()
            slot.last_beat = now  # one kill per timeout
            return
        if self._last_frame is None or slot.last_beat > self._last_frame:
            self._last_frame = slot.last_beat
        slot.probe_alive()

    def _recover(self, problem: str) -> None:
        """Bring the screen back in this process: a fresh view, the item loaded again."""
        slot = self._front_slot()
        if slot is None:
            if self._holding_still:
                self._show_cover()
            if self._current is None and self._pending is None:
                log.info("recovering the screen (%s): the idle page again", problem)
                self.show_idle()
            return
        item = slot.item
        log.warning(
            "recovering the screen (%s): a fresh view for %s",
            problem,
            item.url if item is not None else "the slot",
        )
        self._show_cover()
        slot.clear()  # its view goes: the item comes back in a fresh one
        if item is None or item.token == IDLE_TOKEN:
            if self._pending is None:
                self.show_idle()
            return
        if self._pending is None:
            self._pending = Pending(item, slot.kind, slot=slot, report=False)
            slot.load(item, slot.kind)

    def _give_up(self, reason: str) -> None:
        if self._fatal is not None:
            return
        self._fatal = reason
        self._watch.stop()
        log.error("the screen cannot be brought back in this process: %s", reason)
        self.engine_lost.emit(reason)

    def _refresh_idle(self) -> None:
        slot = self._front_slot()
        if slot is None or slot.item is None or slot.item.token != IDLE_TOKEN:
            return
        if addresses() != self._idle_ips:
            log.info("addresses changed: refreshing the idle page")
            slot.item = None  # so show_idle loads it afresh
            self.show_idle()

"""The kiosk renderer: what the engine's PlayItems become on the screen.

Layers on the stage, bottom to top as needed: two recycled web views (slots), the native
image layer, the native idle cover, and the crossfade overlay. The incoming item is loaded into
the slot that is not on screen, underneath the one that is; when it reports painted, it is
raised, reported shown, and the old slot is blanked and kept for the next item.

With one web view (``options.views``, the low-memory profile) a page that follows a page loads
in the view on screen: the overlay holds a still of the screen over it until the new page has
painted, so the screen never shows a blank view, only the last frame standing still a moment.
"""

from __future__ import annotations

import logging
import secrets
import time
from collections import OrderedDict, deque
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from PySide6.QtCore import (
    QBuffer,
    QByteArray,
    QIODevice,
    QObject,
    Qt,
    QTimer,
    Signal,
)
from PySide6.QtGui import QImage
from PySide6.QtWebEngineCore import QWebEngineScript
from PySide6.QtWidgets import QWidget

from player.playitem import PlayItem, RendererListener
from player.renderer.content import (
    Kind,
    classify,
    local_path,
    media_type,
    update_script,
)
from player.renderer.engineprocs import ZygoteWatch
from player.renderer.fade import FadeOverlay
from player.renderer.idle import IdleCover, addresses, idle_base_url, idle_html, progress_script
from player.renderer.imagelayer import ImageError, ImageLayer, decode_image
from player.renderer.options import RendererOptions, add_chromium_flags
from player.renderer.profile import install_context_script, make_profile
from player.renderer.recycler import MemoryPressure, Recycler
from player.renderer.webslot import SlotState, WebSlot, classify_frame
from player.renderer.window import KioskWindow, Stage, keep_screen_awake

log = logging.getLogger("pdn.renderer")

IDLE_TOKEN = -1  # the idle page's own "item": never reported to the engine
CLEAR_DELAY_MS = 250  # the old view is blanked this long after the swap (the new one is up)
BEAT_MS = 1000
FAILURE_MEMORY = 30.0  # seconds a prepared item's failure is remembered for its show()
WATCH_MS = 1000  # the visual watchdog's period
GRAB_EVERY = 3  # ... and a grab of the screen every this many periods
BEAT_STALE = 3.0  # seconds without a page's answer that make a black screen suspect
CRASH_WINDOW = 30.0  # render process crashes counted over this many seconds ...
CRASH_STORM = 6  # ... this many of them mean the web engine cannot keep renderers
RECOVERY_STEPS = (2.0, 5.0, 11.0)  # seconds into a wrong screen: reload, with back-off
LAUNCH_FAILED = "exit code 1002"  # Chromium could not start a render process at all
LAUNCH_FAILURES = 2  # ... this many times in CRASH_WINDOW: the web engine is lost
CRASH_BACKOFF_MAX = 8.0  # a crash-looping item (the idle page too) is reloaded at most this often


@dataclass
class _Pending:
    """The item the renderer is bringing on screen."""

    item: PlayItem
    kind: Kind
    slot: WebSlot | None = None
    image_serial: int = 0
    report: bool = True  # False when re-showing after a crash (already reported shown)


class KioskRenderer(QObject):
    """A :class:`player.playitem.Renderer` on a fullscreen Qt WebEngine window.

    Construct it on the GUI thread after the QApplication exists (call
    :func:`player.renderer.prepare_process` before creating the QApplication).

    A visual watchdog checks every second that the screen shows what the renderer has said is
    on it (:meth:`screen_state`): no page whose render process stopped answering, no screen
    without a frame, no black screen where a page painted colour and stopped answering, no
    cover hiding an item for long, no storm of render process crashes. A wrong screen is
    reloaded with back-off (``RECOVERY_STEPS``); one still wrong after
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
        self._pending: _Pending | None = None
        self._current: PlayItem | None = None  # on screen, reported shown
        self._front: QWidget | None = None
        self._crashes: dict[int, int] = {}
        self._prepared_failures: dict[str, tuple[str, float]] = {}
        self._images: OrderedDict[str, QImage] = OrderedDict()
        self._image_serial = 0
        self._last_frame: float | None = None
        self._idle_ips: list[str] = []
        self._idle_progress = ""
        self._closed = False
        self._started = time.monotonic()
        self._crash_times: deque[float] = deque(maxlen=64)
        self._launch_failures: deque[float] = deque(maxlen=8)
        self._wrong_since: float | None = None
        self._problem: str | None = None
        self._recoveries = 0
        self._fatal: str | None = None
        self._still_since = 0.0  # when the overlay began to hold a still (one web view)
        self._frame_class = "content"  # of the last periodic grab
        self._frame_class_at: float | None = None
        self._watch_count = 0
        self._zygotes = ZygoteWatch()

        self.profile = make_profile(options, self, self._readings)
        self.recycler = Recycler(options.recycle_after_loads, memory)
        self.stage = Stage()
        self.slots = [
            WebSlot(name, self.profile, self.stage, self._channel, options.page_load_timeout)
            for name in ("a", "b")[: options.views]
        ]
        for slot in self.slots:
            slot.ready.connect(self._slot_ready)
            slot.failed.connect(self._slot_failed)
            slot.ended.connect(self._slot_ended)
            slot.crashed.connect(self._slot_crashed)
        self.image_layer = ImageLayer()
        self.stage.add_layer(self.image_layer)
        self.image_layer.painted.connect(self._image_painted, Qt.ConnectionType.QueuedConnection)
        self.cover = IdleCover(options.display_name, options.api_url)
        self.stage.add_layer(self.cover)
        self.overlay = FadeOverlay()
        self.stage.add_layer(self.overlay)
        self.window = KioskWindow(
            self.stage,
            rotation=options.rotation,
            screen_index=options.screen,
            fullscreen=options.fullscreen,
            window_size=options.window_size,
        )
        # The layout's "current" layer is raised and shown when the current one is removed
        # (QStackedLayout): make it the overlay, never removed, not a view that may be renewed.
        self.stage.stack.setCurrentWidget(self.overlay)
        self.overlay.hide()
        self.window.show_kiosk(options.fullscreen)
        self._beat = QTimer(self)
        self._beat.setInterval(BEAT_MS)
        self._beat.timeout.connect(self._heartbeat)
        self._beat.start()
        self._idle_refresh = QTimer(self)
        self._idle_refresh.setInterval(30_000)
        self._idle_refresh.timeout.connect(self._refresh_idle)
        self._idle_refresh.start()
        self._watch = QTimer(self)
        self._watch.setInterval(WATCH_MS)
        self._watch.timeout.connect(self._check_screen)
        self._watch.start()
        self._zygotes.lost()  # the zygotes are up once the profile and its views are
        if options.keep_screen_on:
            keep_screen_awake()
        self.show_idle()

    # -- set-up ---------------------------------------------------------------------------

    # -- the Renderer protocol ------------------------------------------------------------

    def set_listener(self, listener: RendererListener) -> None:
        self._listener = listener

    def prepare(self, item: PlayItem) -> None:
        if self._closed:
            return
        kind = classify(item)
        if kind is Kind.NATIVE_IMAGE:
            try:
                self._decoded(item)
            except ImageError as error:
                self._remember_failure(item, str(error))
                self._report_failed(item, str(error))
            return
        if any(slot.holds(item) for slot in self.slots):
            return
        slot = self._free_slot(for_show=False)
        if slot is None:
            log.debug("no free view to prepare %s in", item.url)
            return
        log.debug("preparing %s in slot %s", item.url, slot.name)
        slot.load(item, kind, media_type(item))

    def show(self, item: PlayItem) -> None:
        if self._closed:
            return
        kind = classify(item)
        remembered = self._prepared_failures.pop(item.url, None)
        if remembered is not None and time.monotonic() - remembered[1] < FAILURE_MEMORY:
            self._report_failed(item, remembered[0])
            return
        self._abandon_pending()
        if kind is Kind.NATIVE_IMAGE:
            try:
                image = self._decoded(item)
            except ImageError as error:
                self._report_failed(item, str(error))
                return
            self._image_serial += 1
            self._pending = _Pending(item, kind, image_serial=self._image_serial)
            if self._front is not self.image_layer:
                self._begin_fade()
            self.image_layer.set_image(image, self._image_serial)
            self.image_layer.raise_()
            self.overlay.raise_()
            return
        slot = next((s for s in self.slots if s.holds(item) and s.view is not self._front), None)
        if slot is None:
            slot = self._slot_to_show_in()
            slot.load(item, kind, media_type(item))
        self._pending = _Pending(item, kind, slot=slot)
        if slot.state is SlotState.READY:
            self._commit_slot(slot)

    def show_idle(self) -> None:
        if self._closed:
            return
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
        slot = self._slot_to_show_in()
        slot.load_html(
            idle_html(
                self.options.display_name, self.options.api_url, self._idle_ips, self._idle_progress
            ),
            idle_base_url(),
            item,
        )
        self._pending = _Pending(item, Kind.PAGE, slot=slot, report=False)

    # -- extensions -----------------------------------------------------------------------

    def set_idle_progress(self, text: str) -> None:
        """What the idle page says of downloads ("" for nothing); shown at once if it is up."""
        self._idle_progress = text
        for slot in (s for s in self.slots if s.item is not None and s.item.token == IDLE_TOKEN):
            slot.page.runJavaScript(progress_script(text))

    def grab_png(self) -> bytes:
        """A PNG of what the window shows now (rotation included). GUI thread only."""
        data = QByteArray()
        buffer = QBuffer(data)
        buffer.open(QIODevice.OpenModeFlag.WriteOnly)
        self.window.grab().save(buffer, "PNG")
        buffer.close()
        return bytes(data.data())

    def grab_image(self) -> QImage:
        """What the window shows now, as an image (tests and benchmarks)."""
        return self.window.grab().toImage()

    def set_context(self, readings: dict[str, object]) -> None:
        """Push the latest sensor readings to web content (see the package docstring)."""
        self._readings = dict(readings)
        install_context_script(self.profile, self._readings)
        script = update_script(self._readings)
        for slot in self.slots:
            if slot.state is not SlotState.BLANK:
                slot.page.runJavaScript(script, QWebEngineScript.ScriptWorldId.MainWorld)

    def last_frame_time(self) -> float | None:
        """``time.monotonic()`` of the last frame known painted (a swap, or a page's frame
        answering the liveness probe); None before the first one."""
        return self._last_frame

    @property
    def alive(self) -> bool:
        """The window is up and what is on screen answers (no hung render process)."""
        if self._closed or not self.window.isVisible():
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
        }
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
        """Take the window down and free Qt WebEngine in order (pages before their profile)."""
        if self._closed:
            return
        self._closed = True
        from shiboken6 import delete

        self._beat.stop()
        self._idle_refresh.stop()
        self._watch.stop()
        self.window.hide()
        for slot in self.slots:
            delete(slot.view)
        delete(self.window)
        delete(self.profile)

    # -- internals ------------------------------------------------------------------------

    def _front_slot(self) -> WebSlot | None:
        return next((s for s in self.slots if s.view is self._front), None)

    def _free_slot(self, for_show: bool) -> WebSlot | None:
        """The slot to load into: never the one on screen, and for a hint never the one an
        item on its way to the screen is using."""
        busy = {self._front}
        if not for_show and self._pending is not None and self._pending.slot is not None:
            busy.add(self._pending.slot.view)
        candidates = [s for s in self.slots if s.view not in busy]
        if not candidates:
            return None
        for state in (SlotState.BLANK, SlotState.READY, SlotState.LOADING, SlotState.SHOWN):
            for slot in candidates:
                if slot.state is state:
                    self.recycler.before_load(slot)  # renewed when due (recycler.py)
                    return slot
        return candidates[0]

    def _slot_to_show_in(self) -> WebSlot:
        """A slot for the item to show: one not on screen, or with a single view (the
        low-memory profile), the one on screen, from now behind a still of it."""
        slot = self._free_slot(for_show=True)
        if slot is not None:
            return slot
        slot = self._front_slot()
        assert slot is not None  # with two slots, one is never the front one
        self.overlay.hold(self.stage.grab())
        self._front = self.overlay
        self._still_since = time.monotonic()
        self.recycler.before_load(slot)
        return slot

    @property
    def _holding_still(self) -> bool:
        return self._front is self.overlay

    def _decoded(self, item: PlayItem) -> QImage:
        image = self._images.get(item.url)
        if image is None:
            image = decode_image(Path(local_path(item.url)), self.window.content_size())
            self._images[item.url] = image
            while len(self._images) > self.options.decoded_images:
                self._images.popitem(last=False)
        else:
            self._images.move_to_end(item.url)
        return image

    def _abandon_pending(self) -> None:
        """A new show supersedes the one on its way (the engine has moved on)."""
        pending = self._pending
        self._pending = None
        if pending is not None and pending.slot is not None and pending.item.token == IDLE_TOKEN:
            self._schedule_clear(pending.slot)

    def _slot_ready(self, slot: WebSlot) -> None:
        pending = self._pending
        if pending is not None and pending.slot is slot and slot.item is pending.item:
            self._commit_slot(slot)

    def _commit_slot(self, slot: WebSlot) -> None:
        pending = self._pending
        assert pending is not None
        self._pending = None
        self._swap_to(slot.view)
        slot.start()
        natural = slot.natural_duration if pending.item.duration is None else None
        self._now_showing(pending, natural)

    def _image_painted(self, serial: int) -> None:
        pending = self._pending
        if pending is None or pending.kind is not Kind.NATIVE_IMAGE:
            return
        if serial != pending.image_serial:
            return
        self._pending = None
        self._swap_to(self.image_layer, raised=True)
        self._now_showing(pending, None)

    def _begin_fade(self) -> None:
        if self._holding_still:
            self.overlay.release(self.options.crossfade_ms)
        elif self._front is not None and self.options.crossfade_ms > 0:
            self.overlay.fade(self.stage.grab(), self.options.crossfade_ms)

    def _swap_to(self, layer: QWidget, raised: bool = False) -> None:
        old = self._front
        if not raised:
            if old is not layer:
                self._begin_fade()
            layer.raise_()
        if self.overlay.isVisible():
            self.overlay.raise_()
        self._front = layer
        self._last_frame = time.monotonic()
        for slot in self.slots:
            if slot.view is old and old is not layer:
                self._schedule_clear(slot)
        if old is self.image_layer and layer is not self.image_layer:
            QTimer.singleShot(CLEAR_DELAY_MS + self.options.crossfade_ms, self._clear_image)

    def _clear_image(self) -> None:
        if not self._closed and self._front is not self.image_layer:
            self.image_layer.clear()

    def _schedule_clear(self, slot: WebSlot) -> None:
        generation = slot.generation

        def clear() -> None:
            if self._closed:
                return
            pending_slot = self._pending.slot if self._pending is not None else None
            if (
                slot.generation == generation
                and slot.view is not self._front
                and (slot is not pending_slot)
            ):
                slot.clear()

        QTimer.singleShot(CLEAR_DELAY_MS + self.options.crossfade_ms, clear)

    def _now_showing(self, pending: _Pending, natural: float | None) -> None:
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
        if slot.view is self._front:
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

    def _slot_ended(self, slot: WebSlot) -> None:
        item = slot.item
        listener = self._listener
        if item is None or listener is None or item.token == IDLE_TOKEN:
            return
        if slot.view is self._front:
            listener.item_ended(item.token)

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
        on_screen = slot.view is self._front
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
            self._pending = _Pending(item, slot.kind, slot=slot, report=False)
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
            slot.load(item, slot.kind, media_type(item))
            return
        generation = slot.generation
        waiting = self._pending

        def load_again() -> None:
            if self._closed or self._pending is not waiting or slot.generation != generation:
                return
            slot.load(item, slot.kind, media_type(item))

        QTimer.singleShot(round(delay * 1000), load_again)

    def _report_idle(self) -> None:
        if self._listener is not None:
            self._listener.idle_shown(datetime.now(UTC))

    def _show_cover(self) -> None:
        """The native idle facts over everything: never a crashed view or an error page."""
        if self._holding_still:
            self.overlay.release(0)
        self.cover.raise_()
        self._front = self.cover
        self._last_frame = time.monotonic()

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

    # -- the visual watchdog ----------------------------------------------------------------

    def _showing(self) -> str:
        front = self._front
        if front is None:
            return "nothing"
        if front is self.cover:
            return "the cover"
        if self._holding_still:
            current = self._current.url if self._current is not None else "the last item"
            return f"a still of {current} while the next item loads"
        if front is self.image_layer:
            return f"image {self._current.url}" if self._current is not None else "an image"
        slot = self._front_slot()
        if slot is None or slot.item is None:
            return "a blank view"
        return "the idle page" if slot.item.token == IDLE_TOKEN else f"page {slot.item.url}"

    def _check_screen(self) -> None:
        if self._closed or self._fatal is not None:
            return
        now = time.monotonic()
        lost = self._zygotes.lost()
        if lost is not None:
            self._give_up(f"{lost}: no render process can be started again in this process")
            return
        self._watch_count += 1
        if self._watch_count % GRAB_EVERY == 0 and self.window.isVisible():
            self._frame_class = classify_frame(self.window.grab().toImage())
            self._frame_class_at = now
        problem = self._screen_problem(now)
        if problem is None:
            if self._wrong_since is not None:
                log.info(
                    "the screen is right again after %.1f s (%s)",
                    now - self._wrong_since,
                    self._showing(),
                )
            self._wrong_since = None
            self._problem = None
            self._recoveries = 0
            return
        if self._wrong_since is None:
            self._wrong_since = now
            log.warning("the screen is wrong: %s", problem)
        elif problem != self._problem:
            log.warning("the screen is still wrong: %s", problem)
        self._problem = problem
        wrong_for = now - self._wrong_since
        if wrong_for >= self.options.recover_within:
            self._give_up(f"the screen has been wrong for {wrong_for:.0f} s: {problem}")
            return
        if self._recoveries < len(RECOVERY_STEPS) and wrong_for >= RECOVERY_STEPS[self._recoveries]:
            self._recoveries += 1
            self._recover(problem)

    def _screen_problem(self, now: float) -> str | None:
        """What is wrong with the screen now, or None (see the class docstring)."""
        crashes = sum(1 for t in self._crash_times if now - t < CRASH_WINDOW)
        if crashes >= CRASH_STORM:
            return f"{crashes} render process crashes in {CRASH_WINDOW:g} s"
        front = self._front
        if front is None:
            if now - self._started > self.options.page_load_timeout + 5:
                return "nothing has been painted since the start"
            return None
        if front is self.cover:
            current = self._current
            if current is not None and now - self._last_frame_or(now) > (
                self.options.page_load_timeout + 5
            ):
                return f"the cover has hidden {current.url} for too long"
            return None
        if self._holding_still and now - self._still_since > self.options.page_load_timeout + 5:
            return "a still has stood in for the screen for too long"
        slot = self._front_slot()
        if slot is None or slot.state is not SlotState.SHOWN or slot.item is None:
            return None
        what = "the idle page" if slot.item.token == IDLE_TOKEN else slot.item.url
        silent = now - slot.last_answer
        if silent > self.options.hang_timeout:
            return f"{what} has not produced a frame for {silent:.0f} s"
        fresh = self._frame_class_at is not None and self._frame_class_at > slot.last_answer - 60
        if fresh and self._frame_class == "unpainted":
            return f"the screen shows no frame of {what}"
        if (
            fresh
            and self._frame_class == "black"
            and slot.painted_as != "black"
            and silent > BEAT_STALE
        ):
            # Black content is legitimate; black where the page painted colour and whose render
            # process stopped answering is not.
            return f"the screen is black where {what} painted and stopped answering"
        return None

    def _last_frame_or(self, default: float) -> float:
        return self._last_frame if self._last_frame is not None else default

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
        slot.renew_view()
        slot.state = SlotState.BLANK
        slot.item = None
        if item is None or item.token == IDLE_TOKEN:
            if self._pending is None:
                self.show_idle()
            return
        if self._pending is None:
            self._pending = _Pending(item, slot.kind, slot=slot, report=False)
            slot.load(item, slot.kind, media_type(item))

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

"""The kiosk renderer: what the engine's PlayItems become on the screen.

The screen is one Qt Quick scene (``stage.py``, ``qml/Stage.qml``) with a region per zone
(``region.py``, ``qml/Region.qml``): the main zone's, which fills the screen without a layout,
and one for each other zone of the layout on screen (:meth:`KioskRenderer.set_layout`,
``screenzones.py``). A region plays the items, its layer stack (``layerstack.py``) says which
layer is in front, fades it in and clears what it covers. The kiosk coordinates: it makes the
parts, hands each the others it talks to, and passes each zone's requests on to its region and
the region's reports back to that zone's listener (the kiosk itself is the main zone's
renderer; :meth:`KioskRenderer.renderer` gives the others').

A show goes in a straight line: :meth:`KioskRenderer.show` → the due gate, for an item of a
synchronised set (``PlayItem.due``, held until its instant, ``duegate.py``) →
:meth:`RegionPlayer.show <player.renderer.region.RegionPlayer.show>` → a web slot
(``webslot.py``) or the native media (``native.py``) → once painted,
:meth:`LayerStack.swap_to <player.renderer.layerstack.LayerStack.swap_to>` → the region
reports it shown → :meth:`item_shown` here tells the engine.
"""

from __future__ import annotations

import logging
import secrets
import time
from collections import deque
from collections.abc import Sequence

import shiboken6
from PySide6.QtCore import QObject, QTimer, Signal
from PySide6.QtGui import QImage
from PySide6.QtQuick import QQuickItem

from cds.model import MAIN_ZONE
from player.playitem import PlayItem, Renderer, RendererListener
from player.renderer.compositor import CompositorView
from player.renderer.content import IDLE_TOKEN, context_script, update_script
from player.renderer.duegate import SwitchTrace
from player.renderer.idle import (
    addresses,
    idle_base_url,
    idle_html,
    pairing_script,
    progress_script,
)
from player.renderer.options import RendererOptions, add_chromium_flags
from player.renderer.profile import make_profile
from player.renderer.recycler import MemoryPressure, Recycler
from player.renderer.region import RegionPlayer, RegionReports
from player.renderer.screenzones import Box, Layout, ScreenZones
from player.renderer.stage import Stage, keep_screen_awake
from player.renderer.watchdog import CRASH_WINDOW, VisualWatchdog

log = logging.getLogger("pdn.renderer")

IDLE_REFRESH_MS = 30_000  # how often the idle page's addresses are compared with the host's
LAUNCH_FAILED = "exit code 1002"  # Chromium could not start a render process at all
LAUNCH_FAILURES = 2  # ... this many times in CRASH_WINDOW: the web engine is lost


class KioskRenderer(QObject):
    """A :class:`player.playitem.Renderer` on a fullscreen Qt Quick scene.

    Construct it on the GUI thread after the application exists (call
    :func:`player.renderer.prepare_process` before creating the application).

    A visual watchdog (``watchdog.py``) checks every second that the screen shows what the
    region says is on it (:meth:`screen_state`). A wrong screen is reloaded with back-off; one
    still wrong after ``options.recover_within`` seconds, or the loss of the web engine's
    zygote (no render process can be started again in this process), emits ``engine_lost``
    with the reason: the display then exits non-zero and its service manager starts a new one
    (crash-only).
    """

    #: The screen cannot be brought back in this process: (reason).
    engine_lost = Signal(str)

    def __init__(
        self, options: RendererOptions | None = None, memory: MemoryPressure | None = None
    ) -> None:
        super().__init__()
        self.options = options = options or RendererOptions()
        add_chromium_flags()  # in case prepare_process was not called: before any profile
        self._readings: dict[str, object] = {}
        self._idle_ips: list[str] = []
        self._idle_progress = ""
        self._idle_pairing = ""
        self._closed = False
        self._fatal: str | None = None
        self._launch_failures: deque[float] = deque(maxlen=8)
        # Items of a synchronised set wait here for their instant; how late switches came.
        self.switch_trace = SwitchTrace()

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
        self._web = (self.profile, f"pdn-{secrets.token_hex(8)}:")
        # The main zone's region (the whole screen without a layout), and every zone's.
        self.region = self._region(MAIN_ZONE, self.stage.region, self)
        self.zones = ScreenZones(
            self.stage,
            self.region,
            self._region,
            self.switch_trace,
            options.video_zones,
            self,
            self,
        )
        # The switch trace hears of each frame before the region (whose switch it may time).
        self.stage.frame_swapped.connect(self._frame_swapped)
        self.stage.show_kiosk(options.fullscreen)
        self.compositor = CompositorView(
            self,
            options.compositor_check,
            window=self.stage.view,
            fullscreen=options.fullscreen,
        )
        self.watchdog = VisualWatchdog(
            options,
            self.stage,
            self.region,
            self.compositor,
            self.zones.switch_imminent,
            self,
            zones=self.zones.watched,
            main_rect=self.zones.main_rect,
        )
        self.watchdog.wrong.connect(self.region.recover)
        self.watchdog.zone_wrong.connect(self.zones.recover)
        self.watchdog.lost.connect(self._give_up)
        # The once-a-second timers start together, to wake the GUI thread together.
        self.region.start()
        self._idle_refresh = QTimer(self)  # the kiosk's own: it dies with it
        self._idle_refresh.setInterval(IDLE_REFRESH_MS)
        self._idle_refresh.timeout.connect(self._refresh_idle)
        self._idle_refresh.start()
        self.watchdog.start()
        if options.keep_screen_on:
            keep_screen_awake()
        self.show_idle()

    # -- the Renderer protocol ------------------------------------------------------------

    def set_listener(self, listener: RendererListener) -> None:
        """The main zone's listener (the one of a screen without a layout)."""
        self.zones.set_zone_listener(MAIN_ZONE, listener)

    def prepare(self, item: PlayItem) -> None:
        self.zones.prepare_in(item.zone, item)

    def show(self, item: PlayItem) -> None:
        self.zones.show_in(item.zone, item)

    # -- zones ----------------------------------------------------------------------------

    def set_layout(self, name: str | None, zones: Sequence[Box] | None) -> None:
        """Split the screen into ``zones`` (boxes as ``cds.layouts.zone_boxes`` gives them,
        ``main`` one of them), or give it all to the main zone (None). The main zone's region
        moves to its box and plays on; the other zones' regions of the layout before go and
        the new ones come in the same frame, each empty until its zone's first item is shown.
        Raises ValueError for boxes outside the screen or a layout without ``main``."""
        self.zones.set_layout(name, zones)

    def split(self, layout: Layout | None) -> None:
        """The zone engine's ``ZoneScreen.split``: :meth:`set_layout` from a screen layout."""
        if layout is None:
            self.set_layout(None, None)
        else:
            self.set_layout(layout.name, layout.zones)

    def renderer(self, zone: str) -> Renderer:
        """The renderer of one zone (``main``: this one; the zone engine's
        ``ZoneScreen.renderer``)."""
        return self if zone == MAIN_ZONE else self.zones.renderer(zone)

    @property
    def regions(self) -> dict[str, RegionPlayer]:
        """The region of each zone on the screen now, by zone (``main`` always one)."""
        return self.zones.regions

    @property
    def layout_name(self) -> str | None:
        """The layout set splitting the screen (None: the main zone fills it)."""
        return self.zones.layout_name

    def show_idle(self) -> None:
        if self._closed:
            return
        self.zones.dues[MAIN_ZONE].cancel()
        if self.region.keep_idle():
            return
        self._idle_ips = addresses()
        page = idle_html(
            self.options.display_name,
            self.options.api_url,
            self._idle_ips,
            self._idle_progress,
            self._idle_pairing,
        )
        item = PlayItem(
            token=IDLE_TOKEN,
            url="pdn:idle",
            source_url="pdn:idle",
            content_type="text/html",
            duration=None,
            origin="idle",
        )
        self.region.show_page(item, page, idle_base_url())

    # -- what the region reports (region.RegionReports) -----------------------------------

    def item_shown(self, item: PlayItem, natural: float | None) -> None:
        self.zones.zone_item_shown(MAIN_ZONE, item, natural)

    def idle_shown(self) -> None:
        self.zones.zone_idle_shown(MAIN_ZONE)

    def item_failed(self, item: PlayItem, reason: str) -> None:
        self.zones.zone_item_failed(MAIN_ZONE, item, reason)

    def item_ended(self, item: PlayItem) -> None:
        self.zones.zone_item_ended(MAIN_ZONE, item)

    def render_crashed(self, description: str) -> bool:
        self.watchdog.crashed()
        if LAUNCH_FAILED in description:
            now = time.monotonic()
            self._launch_failures.append(now)
            recent = sum(1 for t in self._launch_failures if now - t < CRASH_WINDOW)
            if recent >= LAUNCH_FAILURES:
                # Not the item's fault: nothing is reported failed, the display restarts.
                self._give_up(f"render processes cannot be started ({recent} launch failures)")
        return self._fatal is None

    def idle_wanted(self) -> None:
        self.show_idle()

    # -- extensions -----------------------------------------------------------------------

    def set_idle_progress(self, text: str) -> None:
        """What the idle page says of downloads ("" for nothing); shown at once if it is up."""
        self._idle_progress = text
        for slot in self.region.idle_slots():
            slot.run_in_page(progress_script(text))

    def set_idle_pairing(self, text: str) -> None:
        """The pairing line of the idle page ("" for none); shown at once if it is up."""
        self._idle_pairing = text
        for slot in self.region.idle_slots():
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
        for region in self.regions.values():
            region.set_context(context_script(self._readings), update_script(self._readings))

    def last_frame_time(self) -> float | None:
        """``time.monotonic()`` of the last frame known painted (a swap of the scene, or a
        page's frame answering the liveness probe); None before the first one."""
        return self.region.stack.last_frame

    @property
    def alive(self) -> bool:
        """The window is up and what is on screen answers (no hung render process)."""
        if self._closed or not self.stage.is_visible():
            return False
        timeout = self.options.hang_timeout
        return all(region.answering(timeout) for region in self.regions.values())

    @property
    def screen_right(self) -> bool:
        """The visual watchdog found nothing wrong at its last check."""
        return self._fatal is None and self.watchdog.right

    def screen_state(self) -> dict[str, object]:
        """The visual watchdog's verdict, for health: right or not, and why."""
        state = self.watchdog.state()
        state["right"] = self.screen_right
        if self.layout_name is not None or len(self.regions) > 1:
            state["layout"] = self.layout_name
            state["zones"] = self.watchdog.zones()
        if self.region.stack.layer is self.region.video_layer:
            state["video"] = self.region.video_layer.describe()
        switches = self.switch_trace.describe()
        if switches is not None:
            state["sync"] = switches
        if self._fatal is not None:
            state["problem"] = f"giving up: {self._fatal}"
        else:
            state.update(self.watchdog.trouble())
        return state

    @property
    def current_token(self) -> int | None:
        current = self.region.current
        return current.token if current is not None else None

    def close(self) -> None:
        """Take the window down and free Qt WebEngine in order (views before their profile).
        Every timer and callback of the renderer and its parts stops here."""
        if self._closed:
            return
        self._closed = True
        self._idle_refresh.stop()
        self.watchdog.stop()
        self.compositor.close()
        self.stage.frame_swapped.disconnect(self._frame_swapped)
        self.zones.close()
        self.stage.close()
        shiboken6.delete(self._profile_owner)

    # -- internals ------------------------------------------------------------------------

    def _region(self, zone: str, item: QQuickItem, reports: RegionReports) -> RegionPlayer:
        region = RegionPlayer(
            self.stage,
            item,
            self.options,
            self._web,
            self.recycler,
            self.switch_trace,
            reports,
            self,
            zone=zone,
        )
        region.set_context(context_script(self._readings), "")
        return region

    def _frame_swapped(self) -> None:
        self.switch_trace.frame_swapped(self.stage.last_swap)
        for region in self.regions.values():
            region.frame_swapped(self.stage.last_swap)

    def _give_up(self, reason: str) -> None:
        if self._fatal is not None:
            return
        self._fatal = reason
        self.watchdog.stop()
        log.error("the screen cannot be brought back in this process: %s", reason)
        self.engine_lost.emit(reason)

    def _refresh_idle(self) -> None:
        if self.region.idle_in_front() and addresses() != self._idle_ips:
            log.info("addresses changed: refreshing the idle page")
            self.region.forget_idle()  # so show_idle loads it afresh
            self.show_idle()

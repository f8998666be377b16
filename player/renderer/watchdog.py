"""The visual watchdog: does the screen show what the renderer says is on it?

Every second it checks, from what the renderer knows (no read-back): no page whose render
process stopped answering, no screen without a frame, no cover hiding an item for long, no
still standing in for long, no storm of render process crashes. It reads the screen back at
most once a minute (``GRAB_EVERY``), or at once when the scene stops swapping frames while it
should be moving (a fade, an item waiting for its frames), to tell a black or unpainted screen
from content. Every ``[screen] compositor-check`` seconds it also asks the compositor or X
server what reaches the screen (:mod:`player.renderer.compositor`): black there while the
display paints content is a wrong screen too. What to do about a wrong screen (reload, give up)
is the kiosk's: the watchdog says so by its signals.

On a screen split into zones (``screenzones.py``) it checks each zone's region the same way,
against its own rectangle of the screen when it reads the screen back, and names the zone in
what it finds (``zone side: ...``). A zone is also wrong when it has stayed black while an item
was on its way to it (nothing in front of it for ``ZONE_BLACK_AFTER`` seconds): the item fails
by its own timeout, its zone's engine shows the next one, and the zone is right again (so a
zone black for that reason alone is never a reason to give the screen up).
"""

from __future__ import annotations

import logging
import time
from collections import deque
from collections.abc import Callable, Sequence

from PySide6.QtCore import QObject, QRect, QTimer, Signal
from PySide6.QtGui import QImage

from player.renderer.compositor import BLACK_RECHECK, CompositorView
from player.renderer.content import IDLE_TOKEN
from player.renderer.engineprocs import ZygoteWatch
from player.renderer.options import RendererOptions
from player.renderer.region import RegionPlayer
from player.renderer.stage import Stage
from player.renderer.webslot import SlotState, classify_frame
from player.renderer.zonelayer import ZoneItemLayer

log = logging.getLogger("pdn.renderer")

WATCH_MS = 1000  # the visual watchdog's period
GRAB_EVERY = 60  # ... and a look at the screen (a full read-back) every this many periods
STALLED_SCENE = 2.0  # seconds without a frame while the scene should be moving: look at once
BEAT_STALE = 3.0  # seconds without a page's answer that make a black screen suspect
CRASH_WINDOW = 30.0  # render process crashes counted over this many seconds ...
CRASH_STORM = 6  # ... this many of them mean the web engine cannot keep renderers
RECOVERY_STEPS = (2.0, 5.0, 11.0)  # seconds into a wrong screen: reload, with back-off
BLACK_SWAPS = 2  # frames swapped after the display saw its content, before a black look counts
ZONE_BLACK_AFTER = 4.0  # seconds a zone may stay black while its item is on its way

#: The zones of the screen besides the main one: each name, region, and rectangle of the grab.
Zones = Callable[[], Sequence[tuple[str, RegionPlayer, QRect]]]


class VisualWatchdog(QObject):
    """Checks every second that a region's screen shows what its stack says is in front.

    It is handed what it looks at (the stage, the region, the compositor's view, the zygotes of
    the web engine) and says what it finds by its signals: :attr:`wrong` (reload, with
    back-off) and :attr:`lost` (the screen cannot be brought back in this process)."""

    #: The screen has been wrong this long: bring it back (problem).
    wrong = Signal(str)
    #: A zone other than the main one has been wrong this long: bring it back (zone, problem).
    zone_wrong = Signal(str, str)
    #: The screen cannot be brought back in this process (reason).
    lost = Signal(str)

    def __init__(
        self,
        options: RendererOptions,
        stage: Stage,
        region: RegionPlayer,
        compositor: CompositorView,
        switch_imminent: Callable[[], bool],
        parent: QObject | None = None,
        *,
        zones: Zones | None = None,
        main_rect: Callable[[], QRect | None] | None = None,
    ) -> None:
        """``switch_imminent``: an item waits for its instant (a synchronised set's): a
        read-back now would hold the GUI thread as it comes, so the looks wait. ``zones``:
        the other zones of the layout on screen; ``main_rect``: the main zone's rectangle of
        the screen while a layout splits it (None: the whole screen)."""
        super().__init__(parent)
        self._zones: Zones = zones or (lambda: ())
        self._main_rect = main_rect or (lambda: None)
        # Each other zone's class at the last look, and since when it has been black while an
        # item was on its way to it.
        self._zone_frames: dict[str, str] = {}
        self._zone_blank: dict[str, float] = {}
        self._wrong_zone: str | None = None
        self._options = options
        self._stage = stage
        self._region = region
        self._compositor = compositor
        self._switch_imminent = switch_imminent
        self._zygotes = ZygoteWatch()
        self._zygotes.lost()  # the zygotes are up once the profile and its views are
        self._started = time.monotonic()
        self._crash_times: deque[float] = deque(maxlen=64)
        self._wrong_since: float | None = None
        self._problem: str | None = None
        self._recoveries = 0
        self._stopped = False
        self.frame_class = "content"  # of the last look at the screen
        self._frame_class_at: float | None = None
        # (frames swapped, time) when the compositor was first seen black against content
        self._black_suspect: tuple[int, float] | None = None
        self._watch_count = 0
        self._grab_owed = False  # the minute's look is due, and waits for no switch to be imminent
        self._timer = QTimer(self)  # the watchdog's own: it dies with it
        self._timer.setInterval(WATCH_MS)
        self._timer.timeout.connect(self._check_screen)

    def start(self) -> None:
        self._timer.start()

    def stop(self) -> None:
        """No check from now on (the screen is given up, or the renderer closes)."""
        self._stopped = True
        self._timer.stop()

    def crashed(self) -> None:
        """A render process died now (counted for a crash storm)."""
        self._crash_times.append(time.monotonic())

    @property
    def right(self) -> bool:
        """Nothing was wrong at the last check."""
        return self._wrong_since is None

    def state(self) -> dict[str, object]:
        """The verdict, for health: right or not, what is shown, and why."""
        state: dict[str, object] = {
            "right": self.right,
            "showing": self.showing(),
            "frame": self.frame_class,
            "compositor": self._compositor.describe(time.monotonic()),
        }
        return state

    def trouble(self) -> dict[str, object]:
        """What was wrong at the last check and for how long (empty: nothing)."""
        if self._problem is None or self._wrong_since is None:
            return {}
        wrong_for = round(time.monotonic() - self._wrong_since, 1)
        return {"problem": self._problem, "wrong-for": wrong_for}

    def showing(self) -> str:
        """What the main zone's region has in front, in words."""
        return describe(self._region)

    def zones(self) -> dict[str, str]:
        """What each other zone's region has in front, in words (empty: no layout)."""
        return {name: describe(region) for name, region, _ in self._zones()}

    def _check_screen(self) -> None:
        if self._stopped:
            return
        now = time.monotonic()
        lost = self._zygotes.lost()
        if lost is not None:
            self.lost.emit(f"{lost}: no render process can be started again in this process")
            return
        self._watch_count += 1
        if self._watch_count % GRAB_EVERY == 0:
            self._grab_owed = True
        looks = self._stage.is_visible() and not self._switch_imminent()
        if looks and (self._grab_owed or self._scene_stalled(now)):
            self._grab_owed = False
            self._look_at_the_screen(now)
        if looks and self._compositor.due(now):
            # grim answers later; the verdict uses the last answer
            self._compositor.look(now, self._stage.frames)
        zone, problem = self._problem_and_zone(now)
        if problem is None:
            if self._wrong_since is not None:
                log.info(
                    "the screen is right again after %.1f s (%s)",
                    now - self._wrong_since,
                    self.showing(),
                )
            self._wrong_since = None
            self._problem = None
            self._wrong_zone = None
            self._recoveries = 0
            return
        if self._wrong_since is None or zone != self._wrong_zone:
            if self._wrong_since is None:
                self._wrong_since = now
            self._recoveries = 0
            log.warning("the screen is wrong: %s", problem)
        elif problem != self._problem:
            log.warning("the screen is still wrong: %s", problem)
        self._problem = problem
        self._wrong_zone = zone
        wrong_for = now - self._wrong_since
        loading = zone is not None and zone in self._zone_blank
        if wrong_for >= self._options.recover_within and not loading:
            self.lost.emit(f"the screen has been wrong for {wrong_for:.0f} s: {problem}")
            return
        if self._recoveries < len(RECOVERY_STEPS) and wrong_for >= RECOVERY_STEPS[self._recoveries]:
            self._recoveries += 1
            if zone is None:
                self.wrong.emit(problem)
            else:
                self.zone_wrong.emit(zone, problem)

    def _problem_and_zone(self, now: float) -> tuple[str | None, str | None]:
        """What is wrong now and in which zone (None: the main zone, or the whole screen)."""
        problem = self._screen_problem(now)
        if problem is not None:
            return None, problem
        names = set()
        for name, region, _ in self._zones():
            names.add(name)
            found = self._zone_problem(name, region, now)
            if found is not None:
                return name, f"zone {name}: {found}"
        for gone in set(self._zone_blank) - names:
            del self._zone_blank[gone]
        return None, None

    def _zone_problem(self, name: str, region: RegionPlayer, now: float) -> str | None:
        stack = region.stack
        if stack.layer is None and stack.pending is not None:
            since = self._zone_blank.setdefault(name, now)
            if now - since > ZONE_BLACK_AFTER:
                return f"black ({stack.pending.item.url} not shown after {now - since:.0f} s)"
            return None
        self._zone_blank.pop(name, None)
        if stack.layer is None:
            return None  # nothing to show there
        return self._region_problem(region, self._zone_frames.get(name), now)

    def _scene_stalled(self, now: float) -> bool:
        """The scene should be moving (a fade, an item waiting for its frames, in any zone)
        and has swapped no frame for a while."""
        regions = [self._region, *(region for _, region, _ in self._zones())]
        waiting = any(_moving(region, now) for region in regions)
        last = self._stage.last_swap
        return (
            waiting
            and last is not None
            and now - last > STALLED_SCENE
            and (self._frame_class_at is None or now - self._frame_class_at > STALLED_SCENE)
        )

    def _look_at_the_screen(self, now: float) -> None:
        """Read the screen back (the one full grab the watchdog allows itself) and classify it:
        the main zone's rectangle (the whole screen without a layout) and each other zone's."""
        image = self._stage.grab()
        main = self._main_rect()
        self.frame_class = classify_frame(image if main is None else _part(image, main))
        self._frame_class_at = now
        _note_painted(self._region, self.frame_class, now)
        self._zone_frames = {}
        for name, region, rect in self._zones():
            frame = classify_frame(_part(image, rect))
            self._zone_frames[name] = frame
            _note_painted(region, frame, now)

    def _screen_problem(self, now: float) -> str | None:
        """What is wrong with the screen now, or None (see the class docstring)."""
        crashes = sum(1 for t in self._crash_times if now - t < CRASH_WINDOW)
        if crashes >= CRASH_STORM:
            return f"{crashes} render process crashes in {CRASH_WINDOW:g} s"
        front = self._region.stack.layer
        if front is None:
            if now - self._started > self._options.page_load_timeout + 5:
                return "nothing has been painted since the start"
            return None
        black = self._compositor_black(now)
        if black is not None:
            return black
        return self._region_problem(self._region, self.frame_class, now)

    def _region_problem(self, region: RegionPlayer, frame: str | None, now: float) -> str | None:
        """What is wrong with what ``region`` has in front (``frame``: its rectangle's class at
        the last look), or None."""
        options = self._options
        front = region.stack.layer
        if front is region.cover:
            current = region.current
            last_frame = region.stack.last_frame
            shown_at = last_frame if last_frame is not None else now
            if current is not None and now - shown_at > options.page_load_timeout + 5:
                return f"the cover has hidden {current.url} for too long"
            return None
        if region.stack.holding_still and now - region.still.since > options.page_load_timeout + 5:
            return "a still has stood in for the screen for too long"
        slot = region.stack.front_slot()
        if slot is None or slot.state is not SlotState.SHOWN or slot.item is None:
            return None
        what = "the idle page" if slot.item.token == IDLE_TOKEN else slot.item.url
        silent = now - slot.last_answer
        if silent > options.hang_timeout:
            return f"{what} has not produced a frame for {silent:.0f} s"
        fresh = self._frame_class_at is not None and self._frame_class_at > slot.last_answer - 60
        if fresh and frame == "unpainted":
            return f"the screen shows no frame of {what}"
        if fresh and frame == "black" and slot.painted_as != "black" and silent > BEAT_STALE:
            # Black content is legitimate; black where the page painted colour and whose render
            # process stopped answering is not.
            return f"the screen is black where {what} painted and stopped answering"
        return None

    def _compositor_black(self, now: float) -> str | None:
        """The compositor (or X server) shows black while the display paints content: what
        the display believes is on the screen is not.

        The display's own look renders its scene afresh: content there may not have reached
        the screen yet (a scene that has just turned from the black cover to the idle page,
        whose next frame is still on its way: seen for 11-18 s in an emulated Pi, a false
        "wrong" each start). So a black answer first makes the display suspect, and asks for
        frames; it is wrong once a look that began after ``BLACK_SWAPS`` more frames were
        swapped still shows black, or once ``compositor_settle`` seconds have passed without
        them (a covered window may be sent no frame callbacks)."""
        view = self._compositor
        if view.frame != "black" or view.at is None or now - view.at > 3 * BLACK_RECHECK:
            self._black_suspect = None
            return None
        if self._frame_class_at is None or self._frame_class_at < view.at:
            self._look_at_the_screen(now)  # the display's own view at the same moment
        if self.frame_class != "content":
            self._black_suspect = None
            return None  # black content, or nothing painted: not the compositor's doing
        if self._black_suspect is None:
            self._black_suspect = (self._stage.frames, now)
        frames, since = self._black_suspect
        if (
            view.frames_at_look - frames < BLACK_SWAPS
            and now - since < self._options.compositor_settle
        ):
            self._stage.request_frame()  # a frame of this content, for the next look to see
            return None
        return (
            f"the compositor shows a black screen ({view.note}) while the display paints "
            f"{self.showing()}"
        )


def describe(region: RegionPlayer) -> str:
    """What ``region`` has in front, in words."""
    front, current = region.stack.layer, region.current
    if front is None:
        return "nothing"
    if front is region.cover:
        return "the cover"
    if region.stack.holding_still:
        what = current.url if current is not None else "the last item"
        return f"a still of {what} while the next item loads"
    if front is region.image_layer:
        return f"image {current.url}" if current is not None else "an image"
    if front is region.video_layer:
        return f"video {current.url}" if current is not None else "a video"
    if isinstance(front, ZoneItemLayer):
        return front.describe()
    slot = region.stack.front_slot()
    if slot is None or slot.item is None:
        return "a blank view"
    return "the idle page" if slot.item.token == IDLE_TOKEN else f"page {slot.item.url}"


def _moving(region: RegionPlayer, now: float) -> bool:
    """``region`` is fading or has an item waiting for its frames."""
    stack = region.stack
    pending = stack.pending.slot if stack.pending is not None else None
    return now < stack.fading_until + STALLED_SCENE or (pending is not None and pending.confirming)


def _part(image: QImage, rect: QRect) -> QImage:
    """``rect`` of ``image`` (the zone's rectangle of a grab of the screen)."""
    return image.copy(rect.intersected(image.rect()))


def _note_painted(region: RegionPlayer, frame: str, now: float) -> None:
    """What the page in front of ``region`` looks like while it answers."""
    slot = region.stack.front_slot()
    if slot is not None and now - slot.last_answer < BEAT_STALE:
        slot.painted_as = frame

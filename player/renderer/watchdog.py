"""The visual watchdog: does the screen show what the renderer says is on it?

Every second it checks, from what the renderer knows (no read-back): no page whose render
process stopped answering, no screen without a frame, no cover hiding an item for long, no
still standing in for long, no storm of render process crashes. It reads the screen back at
most once a minute (``GRAB_EVERY``), or at once when the scene stops swapping frames while it
should be moving (a fade, an item waiting for its frames), to tell a black or unpainted screen
from content. Every ``[screen] compositor-check`` seconds it also asks the compositor or X
server what reaches the screen (:mod:`player.renderer.compositor`): black there while the
display paints content is a wrong screen too. What to do about a wrong screen (reload, give up)
is the kiosk's.
"""

from __future__ import annotations

import logging
import time
from collections import deque
from typing import TYPE_CHECKING

from player.renderer.compositor import BLACK_RECHECK, CompositorView
from player.renderer.content import IDLE_TOKEN
from player.renderer.webslot import SlotState, WebSlot, classify_frame

if TYPE_CHECKING:
    from player.playitem import PlayItem
    from player.renderer.imagelayer import ImageLayer
    from player.renderer.layers import Cover, Layer, Still
    from player.renderer.options import RendererOptions
    from player.renderer.stage import Stage
    from player.renderer.videolayer import VideoLayer

log = logging.getLogger("pdn.renderer")

WATCH_MS = 1000  # the visual watchdog's period
GRAB_EVERY = 60  # ... and a look at the screen (a full read-back) every this many periods
STALLED_SCENE = 2.0  # seconds without a frame while the scene should be moving: look at once
BEAT_STALE = 3.0  # seconds without a page's answer that make a black screen suspect
CRASH_WINDOW = 30.0  # render process crashes counted over this many seconds ...
CRASH_STORM = 6  # ... this many of them mean the web engine cannot keep renderers
RECOVERY_STEPS = (2.0, 5.0, 11.0)  # seconds into a wrong screen: reload, with back-off
BLACK_SWAPS = 2  # frames swapped after the display saw its content, before a black look counts


class VisualWatchdog:
    """The kiosk renderer's checks of its own screen (a mix-in of ``KioskRenderer``, whose
    state it reads: declared here)."""

    options: RendererOptions
    stage: Stage
    slots: list[WebSlot]
    image_layer: ImageLayer
    video_layer: VideoLayer
    cover: Cover
    still: Still
    _front: Layer | None
    _current: PlayItem | None
    _last_frame: float | None
    _started: float
    _closed: bool
    _fatal: str | None
    _wrong_since: float | None
    _problem: str | None
    _recoveries: int
    _frame_class: str
    _frame_class_at: float | None
    _black_suspect: tuple[int, float] | None
    _watch_count: int
    _grab_owed: bool  # the minute's look is due, and waits for no switch to be imminent
    _fading_until: float
    _crash_times: deque[float]
    compositor: CompositorView

    def _pending_slot(self) -> WebSlot | None:
        raise NotImplementedError

    def _front_slot(self) -> WebSlot | None:
        raise NotImplementedError

    @property
    def _holding_still(self) -> bool:
        raise NotImplementedError

    def _lost_zygote(self) -> str | None:
        raise NotImplementedError

    def _switch_imminent(self) -> bool:
        """An item waits for its instant (a synchronised set's): a read-back now would hold
        the GUI thread as it comes, so the looks wait for the next round."""
        raise NotImplementedError

    def _recover(self, problem: str) -> None:
        raise NotImplementedError

    def _give_up(self, reason: str) -> None:
        raise NotImplementedError

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
        if front is self.video_layer:
            return f"video {self._current.url}" if self._current is not None else "a video"
        slot = self._front_slot()
        if slot is None or slot.item is None:
            return "a blank view"
        return "the idle page" if slot.item.token == IDLE_TOKEN else f"page {slot.item.url}"

    def _check_screen(self) -> None:
        if self._closed or self._fatal is not None:
            return
        now = time.monotonic()
        lost = self._lost_zygote()
        if lost is not None:
            self._give_up(f"{lost}: no render process can be started again in this process")
            return
        self._watch_count += 1
        if self._watch_count % GRAB_EVERY == 0:
            self._grab_owed = True
        looks = self.stage.is_visible() and not self._switch_imminent()
        if looks and (self._grab_owed or self._scene_stalled(now)):
            self._grab_owed = False
            self._look_at_the_screen(now)
        if looks and self.compositor.due(now):
            # grim answers later; the verdict uses the last answer
            self.compositor.look(now, self.stage.frames)
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

    def _scene_stalled(self, now: float) -> bool:
        """The scene should be moving (a fade, an item waiting for its frames) and has swapped
        no frame for a while."""
        pending = self._pending_slot()
        waiting = now < self._fading_until + STALLED_SCENE or (
            pending is not None and pending.confirming
        )
        last = self.stage.last_swap
        return (
            waiting
            and last is not None
            and now - last > STALLED_SCENE
            and (self._frame_class_at is None or now - self._frame_class_at > STALLED_SCENE)
        )

    def _look_at_the_screen(self, now: float) -> None:
        """Read the screen back (the one full grab the watchdog allows itself) and classify it."""
        self._frame_class = classify_frame(self.stage.grab())
        self._frame_class_at = now
        slot = self._front_slot()
        if slot is not None and now - slot.last_answer < BEAT_STALE:
            slot.painted_as = self._frame_class  # what this page looks like while it answers

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
        black = self._compositor_black(now)
        if black is not None:
            return black
        if front is self.cover:
            current = self._current
            if current is not None and now - self._last_frame_or(now) > (
                self.options.page_load_timeout + 5
            ):
                return f"the cover has hidden {current.url} for too long"
            return None
        if self._holding_still and now - self.still.since > self.options.page_load_timeout + 5:
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
        view = self.compositor
        if view.frame != "black" or view.at is None or now - view.at > 3 * BLACK_RECHECK:
            self._black_suspect = None
            return None
        if self._frame_class_at is None or self._frame_class_at < view.at:
            self._look_at_the_screen(now)  # the display's own view at the same moment
        if self._frame_class != "content":
            self._black_suspect = None
            return None  # black content, or nothing painted: not the compositor's doing
        if self._black_suspect is None:
            self._black_suspect = (self.stage.frames, now)
        frames, since = self._black_suspect
        if (
            view.frames_at_look - frames < BLACK_SWAPS
            and now - since < self.options.compositor_settle
        ):
            self.stage.request_frame()  # a frame of this content, for the next look to see
            return None
        return (
            f"the compositor shows a black screen ({view.note}) while the display paints "
            f"{self._showing()}"
        )

    def _last_frame_or(self, default: float) -> float:
        return self._last_frame if self._last_frame is not None else default

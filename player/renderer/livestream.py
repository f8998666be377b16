"""A live stream's watch: it reopens a stream that is lost, and gives up on one that shows no
frame for too long.

A live source (HLS, RTSP, SRT) has no end: an error, an end of media or, once it has shown a
frame, a picture that stops moving all mean the connection (or its source) went away. Before
its first frame only an error counts: opening a stream (its playlist, a segment, the probe of
its format) may take longer than a stall, and reopening it then would start it over for ever.
The player reopens it at once; an open is let run to its end (a frame, or the player's error),
never cut short by the next one, and after a failed open the next waits, backing off
(``REOPEN_FIRST`` doubling to ``REOPEN_MAX``); every new frame resets the back-off. A stream
that has shown no new frame for ``give_up_after`` seconds, since it was opened or since its
last frame, is given up on: the player fails it, and the engine shows the next item and tries
the stream again later.

Each watch belongs to one :class:`~player.renderer.videoplayer.VideoPlayer`; its timer is its
own and dies with it.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from PySide6.QtCore import QObject, QTimer

log = logging.getLogger("pdn.renderer")

POLL_MS = 250  # how often a stream is looked at
SILENT_REOPEN = 1.5  # seconds without a new frame: the stream is taken as lost and reopened
REOPEN_FIRST = 0.25  # seconds before the first reopen after a loss; doubled at each one
REOPEN_MAX = 2.0


class LiveWatch(QObject):
    """Reopens a lost stream (``reopen()``) and gives up on a silent one (``give_up(reason)``)."""

    def __init__(
        self,
        parent: QObject,
        reopen: Callable[[], None],
        give_up: Callable[[str], None],
        give_up_after: float,
    ) -> None:
        super().__init__(parent)
        self._reopen = reopen
        self._give_up = give_up
        self.give_up_after = give_up_after
        self._timer = QTimer(self)
        self._timer.setInterval(POLL_MS)
        self._timer.timeout.connect(self._poll)
        self._last = 0.0  # time.monotonic() of the last new frame, or of the opening
        self._lost_at: float | None = None  # when it was found lost (None: it plays)
        self._next_reopen = 0.0
        self._delay = REOPEN_FIRST
        self.reopens = 0  # since it was opened
        self._played = False  # a frame came since it was opened
        self._opening = False  # a reopen runs: its frame or its error is awaited

    @property
    def watching(self) -> bool:
        return self._timer.isActive()

    def start(self) -> None:
        """The stream was just opened."""
        self._last = time.monotonic()
        self._lost_at = None
        self._delay = REOPEN_FIRST
        self.reopens = 0
        self._played = False
        self._opening = False
        self._timer.start()

    def stop(self) -> None:
        self._timer.stop()
        self._lost_at = None
        self._opening = False

    def frame(self) -> None:
        """A new frame came: it plays."""
        self._last = time.monotonic()
        self._played = True
        self._opening = False
        if self._lost_at is not None:
            log.info("live stream back after %.1f s", self._last - self._lost_at)
        self._lost_at = None
        self._delay = REOPEN_FIRST

    def lost(self, reason: str) -> None:
        """The player says the stream ended or broke: reopen it (after the back-off)."""
        if not self.watching:
            return
        now = time.monotonic()
        if self._lost_at is None:
            log.info("live stream lost (%s): reopening", reason)
            self._lost_at = now
            self._next_reopen = now  # at once the first time
        elif self._opening:  # the reopen failed: the next one after the back-off
            self._next_reopen = now + self._delay
            self._delay = min(REOPEN_MAX, self._delay * 2)
        self._opening = False
        self._poll()

    def _poll(self) -> None:
        now = time.monotonic()
        silent = now - self._last
        if silent > self.give_up_after:
            self.stop()
            self._give_up(f"live stream: no frame for {silent:.0f} s")
            return
        if self._lost_at is None and self._played and silent > SILENT_REOPEN:
            log.info("live stream silent for %.1f s: reopening", silent)
            self._lost_at = now
            self._next_reopen = now
        if self._lost_at is not None and not self._opening and now >= self._next_reopen:
            self.reopens += 1
            self._opening = True
            self._reopen()

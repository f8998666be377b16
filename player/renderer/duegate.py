"""Switching on the due instant: an item of a synchronised set comes to the renderer ahead of
its turn (``PlayItem.due``, ``player.engine.SHOW_AHEAD``) and goes on screen on that instant.

:class:`DueGate` holds the item until then on a precise timer of its own, so the switch waits
on this timer alone, not on the engine's tick nor on a load (the item is prepared by then).
:class:`SwitchTrace` notes, for each switch made on its instant, how late the gate let it
through (the timer: the GUI thread's promptness) and how late the first frame swapped after it
came (the drawing too), by this display's clock: the figures health reports and the benchmark
checks against the recorded screens.
"""

from __future__ import annotations

import logging
import math
import statistics
import time
from collections import deque
from collections.abc import Callable

from PySide6.QtCore import QObject, Qt, QTimer

from player.playitem import PlayItem

log = logging.getLogger("pdn.renderer")

EARLY_SLACK = 0.0005  # seconds: an item due sooner than this is shown at once
JOINED = 0.5  # seconds: an item shown this long after its instant joined its turn late


def due_timestamp(item: PlayItem) -> float | None:
    """The item's due instant as ``time.time()`` seconds (None: not a synchronised item)."""
    return item.due.timestamp() if item.due is not None else None


class DueGate(QObject):
    """Holds one item handed over ahead of its instant; releases it on the instant."""

    def __init__(
        self,
        parent: QObject,
        release: Callable[[PlayItem], None],
        fired: Callable[[float], None] | None = None,
    ) -> None:
        super().__init__(parent)
        self._release = release
        self._fired = fired or (lambda late: None)
        self._item: PlayItem | None = None
        self._timer = QTimer(self)  # the gate's own: it dies with it
        self._timer.setSingleShot(True)
        self._timer.setTimerType(Qt.TimerType.PreciseTimer)
        self._timer.timeout.connect(self._fire)

    @property
    def held(self) -> PlayItem | None:
        return self._item

    def hold(self, item: PlayItem) -> bool:
        """Keep ``item`` until its due instant (True), or not: due now or past (False)."""
        due = due_timestamp(item)
        if due is None or due - time.time() <= EARLY_SLACK:
            return False
        self._item = item
        self._arm(due)
        return True

    def cancel(self) -> None:
        self._item = None
        self._timer.stop()

    def _arm(self, due: float) -> None:
        self._timer.start(max(0, math.floor((due - time.time()) * 1000)))

    def _fire(self) -> None:
        item = self._item
        if item is None:
            return
        due = due_timestamp(item)
        if due is not None and due - time.time() > EARLY_SLACK:
            self._arm(due)  # woken early (the timer counts whole milliseconds): the rest
            return
        self._item = None
        if due is not None:
            self._fired(time.time() - due)
        self._release(item)


class SwitchTrace:
    """How late each on-the-instant switch reached the screen, by this display's clock."""

    def __init__(self, keep: int = 200) -> None:
        self._waiting: float | None = None  # the due instant of a switch made, not yet swapped
        self._late: deque[float] = deque(maxlen=keep)
        self._gate: deque[float] = deque(maxlen=keep)
        self.switches = 0

    def gate_opened(self, late: float) -> None:
        """The gate let an item through ``late`` seconds after its instant."""
        self._gate.append(late)

    def switching(self, due: float | None) -> bool:
        """A layer with an item due at ``due`` was raised now: True if that is a switch on its
        instant (not an item of no synchronised set, nor one joining its turn late)."""
        if due is None or time.time() - due > JOINED:
            return False
        self._waiting = due
        return True

    def frame_swapped(self, swap_monotonic: float | None) -> None:
        """A frame of the scene reached the screen at ``swap_monotonic``."""
        due = self._waiting
        if due is None or swap_monotonic is None:
            return
        self._waiting = None
        swapped = time.time() - (time.monotonic() - swap_monotonic)
        self._late.append(swapped - due)
        self.switches += 1
        log.debug("switched on the instant %+.1f ms", (swapped - due) * 1000)

    def describe(self) -> dict[str, object] | None:
        if not self._late:
            return None
        return {
            "switches": self.switches,
            "late-ms": _figures(self._late),  # the first frame swapped after the switch
            "gate-ms": _figures(self._gate),  # the switch itself (the timer)
        }


def _figures(values: deque[float]) -> dict[str, float] | None:
    if not values:
        return None
    ordered = sorted(values)
    return {
        "last": round(values[-1] * 1000, 1),
        "p50": round(statistics.median(ordered) * 1000, 1),
        "p95": round(ordered[min(len(ordered) - 1, math.ceil(0.95 * len(ordered)) - 1)] * 1000, 1),
        "max": round(ordered[-1] * 1000, 1),
    }

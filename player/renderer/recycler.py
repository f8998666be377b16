"""What the renderer does at an item boundary when the display is over its memory budget
(``player.memory.MemoryWatch``).

Every navigation already gets a fresh web view (``webslot.py``): whatever Chromium kept for a
view, and the view's render process, go with it when the item leaves the screen, so there is no
view to renew. What is left to give back at a boundary is this process's free heap: glibc keeps
freed memory for reuse, and Chromium's browser side, Qt and Python allocate and free a lot per
item. The kiosk asks just before it loads the next item into a slot, so the trim never lands in
the middle of a transition.
"""

from __future__ import annotations

from typing import Protocol

from player.memory import release_free_heap
from player.renderer.webslot import WebSlot


class MemoryPressure(Protocol):
    """What the renderer needs of the memory watch."""

    def recycle_due(self) -> bool:
        """The display is over its budget, measured since the last recycle."""

    def note_recycle(self, what: str) -> None:
        """Memory was given back for the budget (logged there, with the figures)."""


class Recycler:
    """Gives memory back at the item boundary when the budget asks for it."""

    def __init__(self, pressure: MemoryPressure | None = None) -> None:
        self._pressure = pressure
        self.memory_recycles = 0

    def before_load(self, slot: WebSlot) -> None:
        """Called for the slot about to load an item (its old view is about to go)."""
        # A slot that loaded nothing yet has nothing to give back.
        if self._pressure is None or slot.loads == 0 or not self._pressure.recycle_due():
            return
        # Measured after 30 items (docs/memory.md): visited links and Python's
        # gc gave nothing back; glibc's free heap did. The profile's HTTP cache is left alone:
        # the load started right after clearHttpCache() never finished (PySide6 6.11.3).
        release_free_heap()
        self.memory_recycles += 1
        self._pressure.note_recycle(f"view {slot.name}")

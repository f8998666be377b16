"""When a web view is renewed: after so many loads, and when the display is over its memory
budget (``player.memory.MemoryWatch``).

Always at an item boundary and never a view the public sees: the kiosk asks just before it loads
the next item into a slot that is not on screen (``KioskRenderer._free_slot``), or, with one
view, into the view on screen once a still of it covers the screen, so a renewal is never seen.
A fresh view brings a fresh page and, once the old page is gone, a fresh render process; with
it go whatever Chromium kept for the old view.
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
        """A view was renewed for memory (logged there, with the figures)."""


class Recycler:
    """Renews the slot about to load the next item when it is due."""

    def __init__(self, recycle_after_loads: int, pressure: MemoryPressure | None = None) -> None:
        self._after_loads = recycle_after_loads
        self._pressure = pressure
        self.memory_recycles = 0

    def before_load(self, slot: WebSlot) -> None:
        """Called for the hidden slot about to load an item."""
        if slot.loads >= self._after_loads > 0:
            slot.renew_view()
            return
        # A view that loaded nothing since its renewal has nothing to give back.
        if self._pressure is None or slot.loads == 0 or not self._pressure.recycle_due():
            return
        slot.renew_view()
        # Measured after 30 items (README "Memory"): the profile's visited links and Python's
        # gc gave nothing back; glibc's free heap did. The profile's HTTP cache is left alone:
        # the load started right after clearHttpCache() never finished (PySide6 6.11.3).
        release_free_heap()
        self.memory_recycles += 1
        self._pressure.note_recycle(f"view {slot.name}")

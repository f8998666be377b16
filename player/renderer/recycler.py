"""When a web view is renewed: after so many loads, and when the display is over its memory
budget (``player.memory.MemoryWatch``).

Always at an item boundary and always the hidden view: the kiosk asks just before it loads the
next item into a slot that is not on screen (``KioskRenderer._free_slot``), so a renewal is
never seen. A fresh view brings a fresh page and, once the old page is gone, a fresh render
process; with it go whatever Chromium kept for the old view.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import logging
from typing import Protocol

from PySide6.QtWebEngineCore import QWebEngineProfile

from player.renderer.webslot import WebSlot

log = logging.getLogger("pdn.renderer")


class MemoryPressure(Protocol):
    """What the renderer needs of the memory watch."""

    def recycle_due(self) -> bool:
        """The display is over its budget, measured since the last recycle."""

    def note_recycle(self, what: str) -> None:
        """A view was renewed for memory (logged there, with the figures)."""


def _malloc_trim() -> None:
    """Hand the browser process's free heap pages back to the kernel (glibc keeps them)."""
    name = ctypes.util.find_library("c")
    if name is None:
        return
    try:
        trim = ctypes.CDLL(name).malloc_trim
    except (OSError, AttributeError):
        return  # not glibc
    trim(0)


class Recycler:
    """Renews the slot about to load the next item when it is due."""

    def __init__(
        self,
        profile: QWebEngineProfile,
        recycle_after_loads: int,
        pressure: MemoryPressure | None = None,
    ) -> None:
        self._profile = profile
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
        self._release_shared()
        self.memory_recycles += 1
        self._pressure.note_recycle(f"view {slot.name}")

    def _release_shared(self) -> None:
        """What the browser process keeps for all views that a fresh view does not drop."""
        # Not clearHttpCache(): measured, the load started right after it never finished
        # (PySide6 6.8, memory cache), and a display's cache is on disk anyway.
        self._profile.clearAllVisitedLinks()
        _malloc_trim()

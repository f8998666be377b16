"""The Qt binding must not corrupt the interpreter over months of signal traffic.

PySide6 6.12.0 on Python 3.11 dropped a reference to ``True`` on every signal emission, so a
display aborted ("bool_dealloc") after a few hundred transitions; pyproject excludes it. This
guards the range: a binding with a reference leak on emission fails here, not on a screen.
"""

from __future__ import annotations

import sys

from PySide6.QtCore import QObject, Signal
from PySide6.QtWidgets import QApplication


class Emitter(QObject):
    with_object = Signal(object)
    bare = Signal()
    with_bool = Signal(bool)


def test_signal_emission_keeps_reference_counts(qapp: QApplication) -> None:
    # pytest-qt's shared QApplication: the renderer tests need a QApplication, not a core one.
    emitter = Emitter()
    received: list[object] = []
    emitter.with_object.connect(received.append)
    emitter.bare.connect(lambda: received.append(None))
    emitter.with_bool.connect(received.append)
    emissions = 50  # few enough that a leaking binding cannot free True within the test
    before = sys.getrefcount(True), sys.getrefcount(False), sys.getrefcount(None)
    for _ in range(emissions):
        emitter.with_object.emit({"item": 1})
        emitter.bare.emit()
        emitter.with_bool.emit(True)
    received.clear()
    after = sys.getrefcount(True), sys.getrefcount(False), sys.getrefcount(None)
    assert all(abs(a - b) < emissions for a, b in zip(after, before, strict=True)), (before, after)

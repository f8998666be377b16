"""A black fullscreen window on a compositor: covers the display (test_wayland), or is what
the compositor shows (bench_compositor_check). Started by ``compositor.black_window``.

    python -m tests.support.black_window

Prints ``SHOWN`` once its first frame is out; exits when its standard input closes.
"""

from __future__ import annotations

import sys

from PySide6.QtCore import QSocketNotifier
from PySide6.QtGui import QColor, QGuiApplication
from PySide6.QtQuick import QQuickView


def main() -> int:
    app = QGuiApplication(["black-window"])
    view = QQuickView()
    view.setColor(QColor(0, 0, 0))

    def swapped() -> None:
        print("SHOWN", flush=True)
        view.frameSwapped.disconnect(swapped)

    view.frameSwapped.connect(swapped)
    view.showFullScreen()
    closed = QSocketNotifier(sys.stdin.fileno(), QSocketNotifier.Type.Read, app)
    closed.activated.connect(app.quit)  # only end of input is ever sent
    return app.exec()


if __name__ == "__main__":
    sys.exit(main())

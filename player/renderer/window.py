"""The kiosk window: frameless, black, no cursor, on one screen, content turned by 0/90/180/270.

No window manager is assumed: the window sets its own geometry to the screen's. Rotation is
done by Qt, not by the display server, so it works the same under X, ``cage`` and ``eglfs``:
the stage (every layer the renderer draws) lives in a ``QGraphicsProxyWidget`` turned in a
``QGraphicsView``. With no rotation the stage is a plain child widget (the faster path).
"""

from __future__ import annotations

import logging

from PySide6.QtCore import QRect, QSize, Qt
from PySide6.QtGui import QColor, QPainter, QPalette, QResizeEvent, QScreen
from PySide6.QtWidgets import (
    QApplication,
    QFrame,
    QGraphicsProxyWidget,
    QGraphicsScene,
    QGraphicsView,
    QStackedLayout,
    QVBoxLayout,
    QWidget,
)

from player.power import x_screen_power

log = logging.getLogger("pdn.renderer")


def paint_black(widget: QWidget) -> None:
    """Black behind everything, so nothing ever shows the platform's default grey or white."""
    palette = widget.palette()
    for role in (QPalette.ColorRole.Window, QPalette.ColorRole.Base):
        palette.setColor(role, QColor(0, 0, 0))
    widget.setPalette(palette)
    widget.setAutoFillBackground(True)


class Stage(QWidget):
    """The layers, all rendered at once (``StackAll``); the top one is what the public sees.
    Views underneath stay visible to Chromium, so a preloaded page is never throttled."""

    def __init__(self) -> None:
        super().__init__()
        paint_black(self)
        self.stack = QStackedLayout(self)
        self.stack.setStackingMode(QStackedLayout.StackingMode.StackAll)
        self.stack.setContentsMargins(0, 0, 0, 0)

    def add_layer(self, layer: QWidget) -> None:
        self.stack.addWidget(layer)
        layer.lower()

    def raise_layer(self, layer: QWidget) -> None:
        layer.raise_()

    def top_layer(self) -> QWidget | None:
        children = [w for w in self.children() if isinstance(w, QWidget)]
        return children[-1] if children else None


class KioskWindow(QWidget):
    """The top-level window holding the stage, turned as configured."""

    def __init__(
        self,
        stage: Stage,
        *,
        rotation: int,
        screen_index: int,
        fullscreen: bool,
        window_size: tuple[int, int],
    ) -> None:
        super().__init__()
        self.stage = stage
        self.rotation = rotation
        self.setWindowTitle("pdn-display")
        self.setWindowFlags(Qt.WindowType.FramelessWindowHint | Qt.WindowType.Window)
        self.setCursor(Qt.CursorShape.BlankCursor)
        paint_black(self)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        self._view: QGraphicsView | None = None
        self._proxy: QGraphicsProxyWidget | None = None
        if rotation == 0:
            layout.addWidget(stage)
        else:
            scene = QGraphicsScene(self)
            scene.setBackgroundBrush(QColor(0, 0, 0))
            view = QGraphicsView(scene)
            view.setFrameShape(QFrame.Shape.NoFrame)
            view.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
            view.setVerticalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
            view.setBackgroundBrush(QColor(0, 0, 0))
            view.setRenderHint(QPainter.RenderHint.SmoothPixmapTransform, False)
            view.setViewportUpdateMode(QGraphicsView.ViewportUpdateMode.FullViewportUpdate)
            view.setCursor(Qt.CursorShape.BlankCursor)
            self._proxy = scene.addWidget(stage)
            self._proxy.setRotation(rotation)
            self._view = view
            layout.addWidget(view)
        self._screen = self._choose_screen(screen_index)
        if fullscreen:
            self._follow_screen(self._screen)
        else:
            self.resize(QSize(*window_size))

    @staticmethod
    def _choose_screen(index: int) -> QScreen | None:
        screens = QApplication.screens()
        if not screens:
            log.warning("no screen reported by Qt; the window keeps its default size")
            return None
        if not 0 <= index < len(screens):
            log.warning("no screen %d (there are %d): using screen 0", index, len(screens))
            index = 0
        screen = screens[index]
        log.info(
            "screen %d: %s %dx%d at (%d,%d)",
            index,
            screen.name(),
            screen.geometry().width(),
            screen.geometry().height(),
            screen.geometry().x(),
            screen.geometry().y(),
        )
        return screen

    def _follow_screen(self, screen: QScreen | None) -> None:
        if screen is None:
            return
        self.setScreen(screen)
        self.setGeometry(screen.geometry())
        # A screen that changes mode (a new monitor, a hot-plugged HDMI) keeps being filled.
        screen.geometryChanged.connect(self._screen_geometry_changed)

    def _screen_geometry_changed(self, geometry: QRect) -> None:
        log.info("screen geometry changed to %dx%d", geometry.width(), geometry.height())
        self.setGeometry(geometry)

    def show_kiosk(self, fullscreen: bool) -> None:
        if not fullscreen:
            self.show()
            return
        platform = QApplication.platformName()
        if platform in ("xcb", "offscreen"):
            # No window manager to obey a fullscreen request: the geometry set above is it.
            # Where a window manager runs, the fullscreen state also hides its panels.
            self.show()
            self.setWindowState(Qt.WindowState.WindowFullScreen)
            if self._screen is not None:
                self.setGeometry(self._screen.geometry())
        else:
            self.showFullScreen()

    def resizeEvent(self, event: QResizeEvent) -> None:  # noqa: N802
        super().resizeEvent(event)
        self._layout_stage()

    def _layout_stage(self) -> None:
        if self._view is None or self._proxy is None:
            return
        width, height = self.width(), self.height()
        turned = self.rotation in (90, 270)
        stage_w, stage_h = (height, width) if turned else (width, height)
        self.stage.resize(stage_w, stage_h)
        self._proxy.resize(stage_w, stage_h)
        # Rotation is about the proxy's origin: move that corner to where it lands.
        position = {90: (width, 0), 180: (width, height), 270: (0, height)}[self.rotation]
        self._proxy.setPos(*position)
        scene = self._view.scene()
        scene.setSceneRect(0, 0, width, height)
        self._view.setSceneRect(0, 0, width, height)

    def content_size(self) -> QSize:
        """The size content is laid out at (the stage's size, turned back)."""
        if self.rotation in (90, 270):
            return QSize(self.height(), self.width())
        return QSize(self.width(), self.height())


def keep_screen_awake() -> None:
    """Screen saver and DPMS off on X (best effort); elsewhere it is not ours to change."""
    platform = QApplication.platformName()
    if platform == "xcb":
        x_screen_power().keep_awake()
    elif platform not in ("offscreen", "minimal"):
        log.info("screen blanking on %s is left to the compositor or console settings", platform)

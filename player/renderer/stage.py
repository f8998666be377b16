"""The screen: one Qt Quick scene (``qml/Stage.qml``) in a frameless, black, cursorless window.

Qt Quick draws it on its render thread; the GUI thread only decides. Every layer the renderer
shows (web views, pictures, videos, the idle cover, a still) is a layer of a region
``qml/Region.qml`` declares (the main zone's, and one per other zone of a layout:
``screenzones.py``); only web views are made at run time, by their region, when its
layer stack asks (``layerstack.py``). Rotation is the panel's transform (``qml/Stage.qml``), so
it works the same under X, ``cage`` and ``eglfs`` and costs the GPU nothing extra. Fades are opacity
animations on the render thread (``qml/Fade.qml``): nothing is read back to the CPU but
:meth:`Stage.grab` (screenshots, thumbnails, the watchdog's occasional look).

No window manager is assumed: the window sets its own geometry to the screen's.

A video wall's tile (``[screen] wall``, :class:`player.wall.Wall`): the regions are laid out on
the whole wall (a layout's boxes are fractions of it) and moved so this panel shows its part;
the idle cover and the idle page are laid over this panel's tile alone (``own``), siblings of
the other layers all the same.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path

from PySide6.QtCore import (
    QBuffer,
    QByteArray,
    QCoreApplication,
    QEvent,
    QIODevice,
    QObject,
    QRect,
    QSize,
    Qt,
    QUrl,
    Signal,
)
from PySide6.QtGui import QColor, QCursor, QGuiApplication, QImage, QScreen
from PySide6.QtQuick import QQuickItem, QQuickView

from player.power import x_screen_power
from player.wall import Wall

log = logging.getLogger("pdn.renderer")

QML_DIR = Path(__file__).resolve().parent / "qml"


class StageError(RuntimeError):
    """A QML file of the stage cannot be loaded (a broken install)."""


class Stage(QObject):
    """The kiosk window and its scene. Construct on the GUI thread."""

    #: A frame of the scene reached the screen (emitted on the GUI thread).
    frame_swapped = Signal()

    def __init__(
        self,
        *,
        rotation: int,
        screen_index: int,
        fullscreen: bool,
        window_size: tuple[int, int],
        wall: Wall | None = None,
    ) -> None:
        super().__init__()
        self.rotation = rotation
        self.wall = wall
        self.frames = 0  # frames swapped since the window opened
        # Each zone's image provider (imagelayer.py), kept for the zone's regions to come.
        self.image_providers: dict[str, object] = {}
        self.last_swap: float | None = None  # time.monotonic() of the last one
        view = QQuickView()
        self.view = view
        view.setTitle("pdn-display")
        view.setFlags(Qt.WindowType.FramelessWindowHint | Qt.WindowType.Window)
        view.setColor(QColor(0, 0, 0))
        view.setCursor(QCursor(Qt.CursorShape.BlankCursor))
        view.setResizeMode(QQuickView.ResizeMode.SizeRootObjectToView)
        view.setSource(QUrl.fromLocalFile(str(QML_DIR / "Stage.qml")))
        root = view.rootObject()
        if root is None:
            raise StageError(f"cannot load the stage: {view.errors()}")
        self.root = root
        root.setProperty("turn", rotation)
        if wall is not None:
            for name, value in (
                ("wallColumns", wall.columns),
                ("wallRows", wall.rows),
                ("wallColumn", wall.column),
                ("wallRow", wall.row),
                ("wallBezel", wall.bezel),
            ):
                root.setProperty(name, value)
            log.info("video wall: this display is %s", wall.describe())
        region = root.property("region")
        if not isinstance(region, QQuickItem):
            raise StageError("Stage.qml has no region")
        self.region = region  # the main zone's, filling the screen without a layout
        # Emitted by the render thread; queued to this (GUI-thread) object.
        view.frameSwapped.connect(self._swapped)
        self._screen = self._choose_screen(screen_index)
        if fullscreen:
            self._follow_screen(self._screen)
        else:
            view.resize(QSize(*window_size))

    # -- layers ---------------------------------------------------------------------------

    def request_frame(self) -> None:
        """Ask for a frame even if nothing changed (a check waits for one)."""
        self.view.update()

    def draw_now(self) -> None:
        """Start the frame of the scene as it is now at once, for a switch due on an instant.

        :meth:`request_frame` (``update()``) has the window's update request delivered by a
        timer of the platform (Qt's ``QT_QPA_UPDATE_IDLE_TIME``, 5 ms) through this thread's
        event loop, so the frame waits for that timer and then for whatever this thread does
        first: after a switch, the engine's bookkeeping of the item shown and the preparation
        of the next one (a new web view, a decode), tens of milliseconds on a small board.
        Delivering the update request here synchronises the scene with the render thread now
        (the threaded render loop: this thread waits for that alone; the drawing and the swap
        go on on the render thread while this one carries on)."""
        QCoreApplication.sendEvent(self.view, QEvent(QEvent.Type.UpdateRequest))

    def _swapped(self) -> None:
        self.frames += 1
        self.last_swap = time.monotonic()
        self.frame_swapped.emit()

    # -- the window -----------------------------------------------------------------------

    def grab(self) -> QImage:
        """What the window shows now (rotation included): a read-back, so only for
        screenshots, tests and the watchdog's occasional look."""
        return self.view.grabWindow()

    def grab_png(self) -> bytes:
        """:meth:`grab`, as a PNG. GUI thread only."""
        data = QByteArray()
        buffer = QBuffer(data)
        buffer.open(QIODevice.OpenModeFlag.WriteOnly)
        self.grab().save(buffer, "PNG")  # type: ignore[call-overload]  # the stub is wrong: str works, bytes does not
        buffer.close()
        return bytes(data.data())

    def content_size(self) -> QSize:
        """The size of this panel's content (the window's, turned back)."""
        size = self.view.size()
        if self.rotation in (90, 270):
            return QSize(size.height(), size.width())
        return size

    def layout_size(self) -> QSize:
        """The size items are laid out at: the panel's, or a video wall's."""
        panel = self.content_size()
        if self.wall is None:
            return panel
        width, height = self.wall.size(panel.width(), panel.height())
        return QSize(round(width), round(height))

    def is_visible(self) -> bool:
        return self.view.isVisible()

    @staticmethod
    def _choose_screen(index: int) -> QScreen | None:
        screens = QGuiApplication.screens()
        if not screens:
            log.warning("no screen reported by Qt; the window keeps its default size")
            return None
        if not 0 <= index < len(screens):
            log.warning("no screen %d (there are %d): using screen 0", index, len(screens))
            index = 0
        screen = screens[index]
        geometry = screen.geometry()
        log.info(
            "screen %d: %s %dx%d at (%d,%d)",
            index,
            screen.name(),
            geometry.width(),
            geometry.height(),
            geometry.x(),
            geometry.y(),
        )
        return screen

    def _follow_screen(self, screen: QScreen | None) -> None:
        if screen is None:
            return
        self.view.setScreen(screen)
        self.view.setGeometry(screen.geometry())
        # A screen that changes mode (a new monitor, a hot-plugged HDMI) keeps being filled.
        screen.geometryChanged.connect(self._screen_geometry_changed)

    def _screen_geometry_changed(self, geometry: QRect) -> None:
        log.info("screen geometry changed to %dx%d", geometry.width(), geometry.height())
        self.view.setGeometry(geometry)

    def show_kiosk(self, fullscreen: bool) -> None:
        view = self.view
        if not fullscreen:
            view.show()
            return
        if QGuiApplication.platformName() in ("xcb", "offscreen"):
            # No window manager to obey a fullscreen request: the geometry set above is it.
            # Where a window manager runs, the fullscreen state also hides its panels.
            view.show()
            view.setWindowState(Qt.WindowState.WindowFullScreen)
            if self._screen is not None:
                view.setGeometry(self._screen.geometry())
        else:
            view.showFullScreen()

    def close(self) -> None:
        """Close the window; the scene and every layer in it go with the view, now (not at
        some later garbage collection, when Qt WebEngine may be gone)."""
        self.view.frameSwapped.disconnect(self._swapped)
        self.view.hide()
        self.view.setSource(QUrl())  # the scene and its layers end here
        self.view.deleteLater()


def region_layer(region: QQuickItem, name: str) -> QQuickItem:
    """One of a region's fixed layers, as ``Region.qml`` declares it (``cover``, ``still``,
    ``pictureA``, ``pictureB``, ``videoA``, ``videoB``): behind, not drawn until raised. Qt owns
    it; it ends with the scene."""
    item = region.property(name)
    if not isinstance(item, QQuickItem):
        raise StageError(f"Region.qml declares no layer {name!r}")
    return item


def keep_screen_awake() -> None:
    """Screen saver and DPMS off on X (best effort); elsewhere it is not ours to change."""
    platform = QGuiApplication.platformName()
    if platform == "xcb":
        x_screen_power().keep_awake()
    elif platform not in ("offscreen", "minimal"):
        log.info("screen blanking on %s is left to the compositor or console settings", platform)

"""A bare Qt Quick scene showing what the stage shows: bench_stage's baseline, in the same run.

One ``QQuickView`` on an X server, full screen, holding one ``Image`` and one ``WebEngineView``
and nothing else: no display, no engine, no HTTP API, no fade, no Python deciding anything.
It is told what to show on its standard input, one line at a time (a page's URL, or
``image:PATH`` for a picture): a picture shows as soon as it is read, a page as soon as it has
loaded (what was on the screen stays until then). It is turned the way the stage turns its
scene. What bench_stage measures of the stage (CPU of the process tree, time from an order to
the pixels on the screen) it measures of this scene on the same content, so each figure of the
stage is read against what a Qt Quick scene costs on this machine at all. fade_ceiling and
video_ceiling start their bare viewers with :func:`start_view` too.

:class:`BareScene` starts the scene as a process of its own (its CPU is its tree's, as the
display's is) and sends it the lines.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

from tests.bench.memory_tools import XServer

SCENE_QML = """
import QtQuick
import QtWebEngine
Item {
    id: root
    property string source: ""
    property int turn: 0
    property string picture: ""
    property bool showPicture: true
    // A picture at once; a page once it has loaded, the picture before it kept until then.
    onSourceChanged: {
        if (source.startsWith("image:")) {
            picture = "file://" + source.substring(6)
            showPicture = true
        } else {
            web.url = source
        }
    }
    Item {
        anchors.centerIn: parent
        rotation: root.turn
        width: root.turn % 180 === 0 ? root.width : root.height
        height: root.turn % 180 === 0 ? root.height : root.width
        Image {
            anchors.fill: parent
            visible: root.showPicture
            source: root.picture
        }
        WebEngineView {
            id: web
            anchors.fill: parent
            visible: !root.showPicture
            onLoadingChanged: (request) => {
                if (request.status === WebEngineView.LoadSucceededStatus
                        && request.url == root.source)
                    root.showPicture = false
            }
        }
    }
}
"""

# The start of every bare viewer: a full-screen QQuickView of the scene file argv[1], at the
# size argv[2] x argv[3], on black; {setup} runs before the application is made. What follows
# is the viewer's own (argv[4:] are its arguments).
VIEW = """
import sys, time
from PySide6.QtCore import QSocketNotifier, QTimer, QUrl
from PySide6.QtGui import QColor, QGuiApplication
from PySide6.QtQuick import QQuickView
{setup}
app = QGuiApplication(sys.argv)
view = QQuickView()
view.setColor(QColor(0, 0, 0))
view.setResizeMode(QQuickView.ResizeMode.SizeRootObjectToView)
view.setSource(QUrl.fromLocalFile(sys.argv[1]))
view.setGeometry(0, 0, int(sys.argv[2]), int(sys.argv[3]))
view.show()
"""


def start_view(
    server: XServer,
    workdir: Path,
    name: str,
    qml: str,
    code: str,
    size: tuple[int, int],
    arguments: list[str],
    *,
    setup: str = "",
    **popen: Any,
) -> subprocess.Popen[Any]:
    """A bare viewer process on ``server``: the scene ``qml`` and the viewer's own ``code``
    after :data:`VIEW`, written to ``workdir`` as ``name``.qml and ``name``_viewer.py."""
    workdir.mkdir(parents=True, exist_ok=True)
    scene, viewer = workdir / f"{name}.qml", workdir / f"{name}_viewer.py"
    scene.write_text(qml)
    viewer.write_text(VIEW.format(setup=setup) + textwrap.dedent(code))
    env = dict(os.environ, DISPLAY=server.display, QT_QPA_PLATFORM="xcb")
    if os.geteuid() == 0:  # Chromium refuses its sandbox as root
        env["QTWEBENGINE_DISABLE_SANDBOX"] = "1"
    command = [sys.executable, str(viewer), str(scene), *map(str, size), *arguments]
    return subprocess.Popen(command, env=env, cwd=workdir, **popen)


SWITCHER = """
view.rootObject().setProperty("turn", int(sys.argv[4]))

def read() -> None:
    line = sys.stdin.readline()
    if not line:
        app.quit()
    elif line.strip():
        view.rootObject().setProperty("source", line.strip())

notifier = QSocketNotifier(sys.stdin.fileno(), QSocketNotifier.Type.Read)
notifier.activated.connect(read)
sys.exit(app.exec())
"""
WEB_ENGINE = "from PySide6.QtWebEngineQuick import QtWebEngineQuick\nQtWebEngineQuick.initialize()"


class BareScene:
    """The bare scene as a process on ``server``, at ``size`` and ``rotation``."""

    def __init__(
        self, server: XServer, workdir: Path, size: tuple[int, int], rotation: int, log: Path
    ) -> None:
        self.log_path = log
        with log.open("ab") as out:
            self.process = start_view(
                server,
                workdir,
                "bare_scene",
                SCENE_QML,
                SWITCHER,
                size,
                [str(rotation)],
                setup=WEB_ENGINE,
                stdin=subprocess.PIPE,
                stdout=out,
                stderr=subprocess.STDOUT,
            )

    def show(self, source: str | Path) -> None:
        """A page's URL, or a picture's path: on the screen as soon as Qt has drawn it."""
        line = f"image:{source}" if isinstance(source, Path) else source
        assert self.process.stdin is not None
        self.process.stdin.write(line.encode() + b"\n")
        self.process.stdin.flush()

    def alive(self) -> bool:
        return self.process.poll() is None

    def stop(self) -> None:
        if self.process.poll() is None:
            assert self.process.stdin is not None
            self.process.stdin.close()  # the scene quits at the end of its input
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


def wait_until_alive(scene: BareScene, seconds: float) -> None:
    """Give the scene ``seconds`` to start; it must still be running after them."""
    time.sleep(seconds)
    if not scene.alive():
        raise RuntimeError(f"the bare Qt Quick scene exited; see {scene.log_path}")

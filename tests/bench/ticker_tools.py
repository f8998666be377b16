"""The ticker's benchmark piece: its frame times and the frames where it did not move, read
from the X screen (tests/support/tickerscreen.py), for a ticker in a display measured from
outside its process (:func:`measure_ticker`).

``python -m tests.bench.ticker_tools`` measures a ticker alone (``qml/Ticker.qml`` in a
bare window of its own process on an Xvfb of its own) and prints the figures as JSON, with
the viewer's CPU, the recorder's and the machine's load.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict
from pathlib import Path

from tests.support.tickerscreen import Box, StripGrab, TickerFigures, analyse


def measure_ticker(
    x_display: str, box: Box, seconds: float, work_dir: Path, fps: int = 150
) -> tuple[TickerFigures, float]:
    """Record ``box`` for ``seconds`` (the display runs in another process) and analyse it:
    the figures and the recorder's CPU seconds."""
    grab = StripGrab(x_display, box, work_dir / "ticker.nut", fps)
    before = _cpu(grab.process.pid)
    time.sleep(seconds)
    used = _cpu(grab.process.pid) - before
    grab.stop()
    return analyse(grab.frames()), used


# -- a ticker alone ---------------------------------------------------------------------------

VIEWER = """
import sys
from PySide6.QtCore import QUrl
from PySide6.QtGui import QColor, QGuiApplication
from PySide6.QtQuick import QQuickView
from player.renderer.zoneitems import Ticker
app = QGuiApplication(sys.argv)
scene, width, height = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
ticker = Ticker()
ticker.set_lines(sys.argv[4:])
view = QQuickView()
view.setColor(QColor(0, 0, 0))
view.setResizeMode(QQuickView.ResizeMode.SizeRootObjectToView)
view.setInitialProperties({"ticker": ticker})
view.setSource(QUrl.fromLocalFile(scene))
view.setPosition(0, 0)
view.resize(width, height)
view.show()
ticker.painted.connect(lambda: print("painted", flush=True))
sys.exit(app.exec())
"""

HEADLINES = (
    "Trains to the city run every ten minutes until midnight",
    "The library opens late on Thursdays",
    "Lunch today: soup, bread and an apple",
    "Mind the wet floor by the east doors",
)


def main() -> int:
    from tests.support.xvfb import xvfb

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--width", type=int, default=1920)
    parser.add_argument("--height", type=int, default=108)
    args = parser.parse_args()
    qml = Path(__file__).resolve().parents[2] / "player" / "renderer" / "qml"
    with tempfile.TemporaryDirectory() as work, xvfb(args.width, 1080) as display:
        environment = {**os.environ, "DISPLAY": display, "QT_QPA_PLATFORM": "xcb"}
        viewer = subprocess.Popen(
            [
                sys.executable,
                "-c",
                VIEWER,
                str(qml / "Ticker.qml"),
                str(args.width),
                str(args.height),
                *HEADLINES,
            ],
            env=environment,
            cwd=Path(__file__).resolve().parents[2],
            stdout=subprocess.PIPE,
            text=True,
        )
        try:
            assert viewer.stdout is not None
            if viewer.stdout.readline().strip() != "painted":
                raise SystemExit("the ticker viewer never painted")
            time.sleep(1.0)
            before = _cpu(viewer.pid)
            load = os.getloadavg()
            figures, grab_cpu = measure_ticker(
                display, (0, 0, args.width, args.height), args.seconds, Path(work)
            )
            viewer_cpu = _cpu(viewer.pid) - before
        finally:
            viewer.terminate()
            viewer.wait(10)
    print(
        json.dumps(
            {
                **asdict(figures),
                "viewer_cpu_percent": round(100 * viewer_cpu / args.seconds, 1),
                "recorder_cpu_percent": round(100 * grab_cpu / args.seconds, 1),
                "loadavg_1m_before": load[0],
                "cores": os.cpu_count(),
                "box": [args.width, args.height],
                "qml": str(qml / "Ticker.qml"),
            },
            indent=2,
        )
    )
    return 0


def _cpu(pid: int) -> float:
    """CPU seconds of process ``pid`` so far (/proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


if __name__ == "__main__":
    raise SystemExit(main())

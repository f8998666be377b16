"""Whether a ticker moves in every frame, read from the X screen: for tests and benchmarks.

:class:`StripGrab` records a ticker's box with ``ffmpeg -f x11grab`` at a rate above the
display's (so every frame the display paints is seen at least once), each frame averaged down
to one row of grey (a column's brightness: the text's profile). :func:`analyse` then finds
the frames the screen showed: a recorded frame that differs from the one before is a new
frame; how far the profile moved between two (the shift that matches them best) says that it
moved, and which way. From the times of the new frames:

- the frame times (between two new frames) and their p95;
- the frames where the ticker did not move: each gap between new frames longer than one
  frame's interval (the mean of the ordinary gaps, or the display's refresh when given)
  counts the frames it held the same picture, and a new frame whose text did not move to the
  left counts too.

Times are the recording's, so they come in its ticks (6.7 ms at 150 fps): a p95 reads
"within one tick".

``python -m tests.bench.ticker_tools`` measures a ticker alone (``qml/Ticker.qml`` in a
bare window of its own process on an Xvfb of its own) and prints the figures as JSON, with
the viewer's CPU and the machine's load.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from itertools import pairwise
from pathlib import Path

from tests.bench.signage_content import require_ffmpeg
from tests.bench.stats import percentile
from tests.bench.video_tools import stop_recording

Box = tuple[int, int, int, int]  # x, y, width, height on the screen


@dataclass(frozen=True)
class StripFrame:
    at: float  # seconds into the recording
    profile: bytes  # one grey level per column


@dataclass(frozen=True)
class TickerFigures:
    seconds: float  # from the first new frame to the last
    recorded: int  # frames recorded
    frames: int  # new frames: the screen changed
    fps: float
    frame_ms_p50: float
    frame_ms_p95: float
    frame_ms_max: float
    not_moved: int  # frames where the text did not move (held, or moved the wrong way)
    held: int  # of which: frames the screen held the same picture
    wrong_way: int  # of which: new frames whose text did not move to the left
    px_per_second: float  # how far the text moved, over the time it took
    interval_ms: float  # one frame's interval the gaps were counted in


class StripGrab:
    """``ffmpeg -f x11grab`` of ``box`` on ``x_display`` at ``fps``, each frame averaged to one
    grey row, stored raw (with each frame's time) in ``path``. Runs until :meth:`stop`; the
    caller keeps the display going meanwhile (its own Qt event loop, say)."""

    def __init__(self, x_display: str, box: Box, path: Path, fps: int = 150) -> None:
        x, y, width, height = box
        self.path = path
        self.width = width
        self.cpu_s = 0.0
        self.process = subprocess.Popen(
            [require_ffmpeg("to record the screen (x11grab)"), "-v", "error", "-y",
             "-f", "x11grab", "-framerate", str(fps), "-video_size", f"{width}x{height}",
             "-draw_mouse", "0", "-i", f"{x_display}.0+{x},{y}",
             "-vf", f"scale={width}:1:flags=area,format=gray",
             "-c:v", "rawvideo", "-f", "nut", str(path)],
            stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
        )  # fmt: skip
        # Ahead of the display when both want the cores (as root), so it misses fewer frames.
        with contextlib.suppress(OSError):
            os.setpriority(os.PRIO_PROCESS, self.process.pid, -10)

    def stop(self) -> None:
        self.cpu_s = stop_recording(self.process, 20)
        errors = b""
        if self.process.stderr is not None:
            errors = self.process.stderr.read()
            self.process.stderr.close()
        if not self.path.exists() or self.path.stat().st_size == 0:
            raise RuntimeError(f"ffmpeg x11grab failed: {errors.decode(errors='replace')[-500:]}")

    def frames(self) -> list[StripFrame]:
        ffmpeg = require_ffmpeg("to read the recording back")
        probe = subprocess.run(
            [ffmpeg.removesuffix("ffmpeg") + "ffprobe", "-v", "error",
             "-show_entries", "frame=pts_time", "-of", "csv=p=0", str(self.path)],
            capture_output=True, text=True, timeout=120, check=True,
        )  # fmt: skip
        times = [float(value) for value in probe.stdout.split() if value.strip()]
        raw = subprocess.run(
            [ffmpeg, "-v", "error", "-i", str(self.path), "-fps_mode", "passthrough",
             "-f", "rawvideo", "-pix_fmt", "gray", "-"],
            capture_output=True, timeout=120, check=True,
        ).stdout  # fmt: skip
        w = self.width
        rows = [raw[at : at + w] for at in range(0, len(raw) - w + 1, w)]
        return [StripFrame(at, row) for at, row in zip(times, rows, strict=False)]


def shift_between(before: bytes, after: bytes, most: int) -> int:
    """How many columns the profile moved to the left from ``before`` to ``after`` (negative:
    to the right), among -``most``..``most``: the shift with the least mean difference over
    the middle of the strip."""
    width = len(before)
    lo, hi = most, width - most
    best, best_cost = 0, float("inf")
    for shift in range(-most, most + 1):
        a = before[lo + shift : hi + shift]
        cost = sum(abs(p - q) for p, q in zip(a, after[lo:hi], strict=True))
        if cost < best_cost:
            best, best_cost = shift, cost
    return best


def analyse(
    frames: list[StripFrame], interval_ms: float | None = None, most: int = 24
) -> TickerFigures:
    """The figures of a recording (see the module's docstring). ``interval_ms``: the
    display's frame interval (its refresh); without it, the median time between new frames."""
    new = [frames[0]] if frames else []
    for previous, frame in pairwise(frames):
        if frame.profile != previous.profile:
            new.append(frame)
    gaps = [(b.at - a.at) * 1000 for a, b in pairwise(new)]
    if not gaps:
        raise ValueError("the ticker's box did not change once: nothing moves there")
    median_gap = percentile(gaps, 0.5)
    # The recording's clock ticks at its own rate, so a gap is a whole number of its ticks:
    # one frame's interval is the mean of the ordinary gaps (under twice the median).
    ordinary = [gap for gap in gaps if gap < 2 * median_gap]
    interval = interval_ms or sum(ordinary) / len(ordinary)
    held = sum(max(0, round(gap / interval) - 1) for gap in gaps)
    shifts = [shift_between(a.profile, b.profile, most) for a, b in pairwise(new)]
    wrong_way = sum(1 for shift in shifts if shift <= 0)
    return TickerFigures(
        seconds=round(new[-1].at - new[0].at, 3),
        recorded=len(frames),
        frames=len(new),
        fps=round(len(gaps) / (new[-1].at - new[0].at), 2),
        frame_ms_p50=round(median_gap, 2),
        frame_ms_p95=round(percentile(gaps, 0.95), 2),
        frame_ms_max=round(max(gaps), 2),
        not_moved=held + wrong_way,
        held=held,
        wrong_way=wrong_way,
        px_per_second=round(sum(shifts) / (new[-1].at - new[0].at), 1),
        interval_ms=round(interval, 2),
    )


def measure_ticker(
    x_display: str, box: Box, seconds: float, work_dir: Path, fps: int = 150
) -> tuple[TickerFigures, float]:
    """Record ``box`` for ``seconds`` (the display runs in another process) and analyse it:
    the figures and the recorder's CPU seconds."""
    grab = StripGrab(x_display, box, work_dir / "ticker.nut", fps)
    time.sleep(seconds)
    grab.stop()
    return analyse(grab.frames()), grab.cpu_s


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

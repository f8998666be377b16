"""Whether a ticker moves in every frame, read back from the X screen (the zone tests and the
ticker's benchmark, tests/bench/ticker_tools.py).

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
"within one tick". No Qt is imported here.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
from dataclasses import dataclass
from itertools import pairwise
from pathlib import Path

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
        self.process = subprocess.Popen(
            [ffmpeg(), "-v", "error", "-y",
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
        """End the recording (``q`` on ffmpeg's input, so the file is complete)."""
        try:
            _, errors = self.process.communicate(input=b"q", timeout=20)
        except subprocess.TimeoutExpired:
            self.process.kill()
            _, errors = self.process.communicate()
        if not self.path.exists() or self.path.stat().st_size == 0:
            raise RuntimeError(f"ffmpeg x11grab failed: {errors.decode(errors='replace')[-500:]}")

    def frames(self) -> list[StripFrame]:
        probe = subprocess.run(
            [ffmpeg().removesuffix("ffmpeg") + "ffprobe", "-v", "error",
             "-show_entries", "frame=pts_time", "-of", "csv=p=0", str(self.path)],
            capture_output=True, text=True, timeout=120, check=True,
        )  # fmt: skip
        times = [float(value) for value in probe.stdout.split() if value.strip()]
        raw = subprocess.run(
            [ffmpeg(), "-v", "error", "-i", str(self.path), "-fps_mode", "passthrough",
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
    median_gap = _rank(gaps, 0.5)
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
        frame_ms_p95=round(_rank(gaps, 0.95), 2),
        frame_ms_max=round(max(gaps), 2),
        not_moved=held + wrong_way,
        held=held,
        wrong_way=wrong_way,
        px_per_second=round(sum(shifts) / (new[-1].at - new[0].at), 1),
        interval_ms=round(interval, 2),
    )


def ffmpeg() -> str:
    found = shutil.which("ffmpeg")
    if found is None:
        raise RuntimeError("ffmpeg is needed to record the screen: apt-get install -y ffmpeg")
    return found


def _rank(values: list[float], fraction: float) -> float:
    """The value at ``fraction`` of the sorted values (nearest rank)."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(fraction * (len(ordered) - 1))))]

"""What the stage benchmark (bench_stage.py) needs besides memory_tools: the two stages' trees,
the playback record, the CPU time of a process tree and of Xvfb read from /proc, solid-colour
and calm signage pages on loopback, and a recording of the X screen with ffmpeg (x11grab)
decoded back to a colour per frame.

Like memory_tools, no Qt is imported here (the measured processes' PSS would shrink by the
share this process took of Qt's pages).
"""

from __future__ import annotations

import contextlib
import io
import os
import statistics
import struct
import subprocess
import tarfile
import threading
import time
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from itertools import pairwise
from pathlib import Path
from typing import Any

from player.framepoints import sample_points
from tests.bench.bench_memory import commit_of, snapshot
from tests.bench.loopback import Answer, LoopbackSite
from tests.bench.memory_tools import Display, XServer, while_alive
from tests.bench.proctree import process_cpu, tree_cpu
from tests.bench.signage_content import lavfi_image, page
from tests.bench.signage_content import require_ffmpeg as require_ffmpeg_for
from tests.support.waiting import wait_for_value

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("cds", "server", "player", "pyproject.toml")  # what a display runs from
RGB = tuple[int, int, int]


def require_ffmpeg() -> str:
    return require_ffmpeg_for(
        "to record the screen (x11grab) and make the stage benchmark's images"
    )


# -- the stages and their playback record ---------------------------------------------------


@dataclass(frozen=True)
class Stage:
    name: str  # old, new
    source: str  # where it was copied from
    commit: str
    tree: Path  # the copy that runs


def old_stage(commit: str, target: Path) -> Stage:
    """The packages of ``commit``, extracted from ``git archive`` (no work tree touched)."""
    archive = subprocess.run(
        ["git", "-C", str(ROOT), "archive", "--format=tar", commit, *PACKAGES],
        capture_output=True,
        check=True,
    )
    target.mkdir(parents=True)
    with tarfile.open(fileobj=io.BytesIO(archive.stdout)) as tar:
        tar.extractall(target, filter="data")
    full = subprocess.run(
        ["git", "-C", str(ROOT), "rev-parse", "--short", commit],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    return Stage("old", f"git archive {commit}", full, target)


def new_stage(checkout: Path, target: Path) -> Stage:
    commit = commit_of(checkout) or "not a git checkout"
    return Stage("new", str(checkout), commit, snapshot(checkout, target))


def started_at(record: dict[str, Any]) -> float:
    return datetime.fromisoformat(str(record["started"])).timestamp()


def wait_record(
    display: Display, test: Callable[[dict[str, Any]], bool], timeout: float, poll: float = 0.1
) -> dict[str, Any]:
    """The first playback record ``test`` accepts; fails at once if the display exits."""
    return wait_for_value(
        while_alive(display, display.playback), test, timeout, "a playback record as wanted", poll
    )


def shows(url: str) -> Callable[[dict[str, Any]], bool]:
    return lambda record: record.get("content-item") == url


def on_base(record: dict[str, Any]) -> bool:
    return record.get("origin") == "schedule"


def xvfb_pid(server: XServer) -> int | None:
    """The Xvfb process behind ``server``: the one whose command line names its -fbdir."""
    fbdir = str(server.framebuffer.parent).encode()
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as stream:
                arguments = stream.read().split(b"\0")
        except OSError:
            continue
        if arguments and arguments[0].endswith(b"Xvfb") and fbdir in arguments:
            return int(entry)
    return None


class CpuTrace(threading.Thread):
    """Reads the CPU seconds of the display's tree and of Xvfb every ``interval`` s (from
    /proc: nothing is asked of the display), so the CPU of any stretch of wall-clock time can
    be read afterwards, by interpolation."""

    def __init__(self, root: int, xvfb: int | None, interval: float = 0.2) -> None:
        super().__init__(daemon=True)
        self.root, self.xvfb, self.interval = root, xvfb, interval
        self.samples: list[tuple[float, float, float]] = []  # (time.time(), tree, Xvfb)
        self._lock = threading.Lock()
        self._stop_event = threading.Event()
        self._take()

    def _take(self) -> None:
        sample = (time.time(), tree_cpu(self.root), process_cpu(self.xvfb))
        with self._lock:
            self.samples.append(sample)

    def run(self) -> None:
        while not self._stop_event.wait(self.interval):
            self._take()

    def stop(self) -> None:
        self._stop_event.set()
        self.join(5)

    def at(self, when: float) -> tuple[float, float]:
        """(tree, Xvfb) CPU seconds at wall-clock time ``when``; waits for a sample after it."""
        deadline = time.monotonic() + 5
        while self.samples[-1][0] < when and time.monotonic() < deadline:
            time.sleep(self.interval / 2)
        with self._lock:
            samples = list(self.samples)
        after = next((i for i, s in enumerate(samples) if s[0] >= when), len(samples) - 1)
        if after == 0:
            return samples[0][1], samples[0][2]
        (t0, a0, x0), (t1, a1, x1) = samples[after - 1], samples[after]
        share = 0.0 if t1 <= t0 else min(1.0, max(0.0, (when - t0) / (t1 - t0)))
        return a0 + (a1 - a0) * share, x0 + (x1 - x0) * share

    def between(self, start: float, end: float) -> tuple[float, float]:
        """(tree, Xvfb) CPU seconds used from ``start`` to ``end`` (wall clock)."""
        tree0, x0 = self.at(start)
        tree1, x1 = self.at(end)
        return tree1 - tree0, x1 - x0


# -- pages -----------------------------------------------------------------------------------


def hex_of(colour: RGB) -> str:
    return "".join(f"{value:02x}" for value in colour)


# signage_content's page, calm: its ticker stands still and its canvas chart is drawn once a
# second instead of at every frame, so what moves is what a clock page moves, once a second.
CALM = (
    "<style>.ticker span{animation:none!important}</style><script>"
    "window.requestAnimationFrame = (draw) => setTimeout(() => draw(performance.now()), 1000);"
    "</script></head>"
)


def calm_page(n: int) -> bytes:
    """signage_content's page ``n`` (DOM, a table, an SVG chart, a clock ticking each second,
    a script allocating every second) without its animations at 60 frames a second."""
    text = page(n).decode()
    if text.count("</head>") != 1 or "requestAnimationFrame" not in text:
        raise SystemExit("signage_content.page changed: bench_stage's calm_page needs a look")
    return text.replace("</head>", CALM).encode()


class LocalPages:
    """On 127.0.0.1: ``/solid/<rrggbb>.html``, a page of one colour and nothing else, and
    ``/calm/<n>.html``, :func:`calm_page`."""

    def __init__(self) -> None:
        self.site = LoopbackSite(self._answer)
        self.base = self.site.base

    @staticmethod
    def _answer(path: str) -> Answer | None:
        name = path.rsplit("/", 1)[-1].removesuffix(".html")
        if path.startswith("/solid/") and len(name) == 6:
            body = (
                "<!doctype html><html><head><meta charset='utf-8'><title>solid</title>"
                f"</head><body style='margin:0;height:100vh;background:#{name}'>"
                "</body></html>"
            ).encode()
        elif path.startswith("/calm/") and name.isdigit():
            body = calm_page(int(name))
        else:
            return None
        return Answer(body, "text/html; charset=utf-8")

    def solid(self, colour: RGB, tag: object = "") -> str:
        """The page of ``colour``; ``tag`` makes the URL of each request its own."""
        return f"{self.base}/solid/{hex_of(colour)}.html" + (f"?n={tag}" if tag != "" else "")

    def calm(self, n: int) -> str:
        return f"{self.base}/calm/{n}.html"

    def stop(self) -> None:
        self.site.stop()


def make_still(directory: Path, name: str, colour: RGB, size: str = "1920x1080") -> Path:
    """A PNG of one colour (for a base between items that is never blank), made once."""
    path = directory / name
    if not path.exists():
        directory.mkdir(parents=True, exist_ok=True)
        lavfi_image(f"color=c=0x{hex_of(colour)}:size={size}", path)
    return path


def near(a: RGB, b: RGB, tolerance: int) -> bool:
    return all(abs(p - q) <= tolerance for p, q in zip(a, b, strict=True))


# -- recording the screen --------------------------------------------------------------------


@dataclass(frozen=True)
class Recording:
    path: Path
    width: int
    height: int
    seconds: float
    started: float  # time.time() when ffmpeg was started (its first frame comes later)
    frame_times: list[float]  # each frame's time in the recording, seconds (ffprobe)

    def fps(self) -> float | None:
        times = self.frame_times
        return (len(times) - 1) / (times[-1] - times[0]) if len(times) > 1 else None

    def longest_gap_ms(self) -> float | None:
        gaps = [b - a for a, b in pairwise(self.frame_times)]
        return max(gaps) * 1000 if gaps else None


def record_screen(
    server: XServer,
    path: Path,
    seconds: float,
    screen: tuple[int, int],
    region: tuple[int, int] = (640, 360),
    fps: int = 60,
) -> Recording:
    """``seconds`` of the X screen at ``fps`` (ffmpeg x11grab), stored losslessly (FFV1):
    the ``region`` at the centre of the ``screen``, at its own size (no scaling, so every
    colour recorded is one the screen showed). A region, not the whole screen: grabbing all of
    a 1920x1080 screen at 60 fps takes ffmpeg about 0.75 of a core, the centre's 640x360 less
    than half that, and the display measured runs on the same cores. Blocks until done."""
    width, height = region
    left, top = (screen[0] - width) // 2, (screen[1] - height) // 2
    started = time.time()
    recorder = subprocess.Popen(
        [require_ffmpeg(), "-v", "error", "-y", "-f", "x11grab", "-framerate", str(fps),
         "-video_size", f"{width}x{height}", "-draw_mouse", "0",
         "-i", f"{server.display}.0+{left},{top}", "-t", f"{seconds:g}",
         "-c:v", "ffv1", "-pix_fmt", "bgr0", str(path)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )  # fmt: skip
    # Ahead of the display when it wakes (as root), so it misses fewer frames on two busy
    # cores; it is as much work either way.
    with contextlib.suppress(OSError):
        os.setpriority(os.PRIO_PROCESS, recorder.pid, -10)
    try:
        _, errors = recorder.communicate(timeout=seconds + 30)
    except subprocess.TimeoutExpired:
        recorder.kill()
        recorder.wait()
        raise RuntimeError("ffmpeg x11grab did not end") from None
    if recorder.returncode != 0:
        raise RuntimeError(f"ffmpeg x11grab failed: {errors.decode(errors='replace')}")
    probe = subprocess.run(
        [require_ffmpeg().removesuffix("ffmpeg") + "ffprobe", "-v", "error",
         "-show_entries", "frame=pts_time", "-of", "csv=p=0", str(path)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )  # fmt: skip
    times = [float(value) for value in probe.stdout.split() if value.strip()]
    return Recording(path, width, height, seconds, started, times)


def decode_frames(recording: Recording) -> list[bytes]:
    """Every frame recorded, as raw RGB24 (width * height * 3 bytes)."""
    done = subprocess.run(
        [
            require_ffmpeg(),
            "-v",
            "error",
            "-i",
            str(recording.path),
            "-fps_mode",
            "passthrough",
            "-f",
            "rawvideo",
            "-pix_fmt",
            "rgb24",
            "-",
        ],
        capture_output=True,
        timeout=120,
        check=True,
    )
    size = recording.width * recording.height * 3
    data = done.stdout
    return [data[at : at + size] for at in range(0, len(data) - size + 1, size)]


def frame_colour(frame: bytes, width: int, height: int) -> tuple[RGB, bool]:
    """The frame's colour: the per-channel median of the 9 grid points of ``sample_points``,
    and whether they all agree within 2 levels (a frame that caught the screen half
    repainted does not)."""
    points = []
    for x, y in sample_points(width, height)[:9]:
        at = (y * width + x) * 3
        points.append((frame[at], frame[at + 1], frame[at + 2]))
    colour = (
        int(statistics.median(p[0] for p in points)),
        int(statistics.median(p[1] for p in points)),
        int(statistics.median(p[2] for p in points)),
    )
    return colour, all(near(point, colour, 2) for point in points)


def fade_steps(colours: list[RGB], start: RGB, end: RGB, tolerance: int = 6) -> dict[str, Any]:
    """The distinct in-between colours of one cross-fade from ``start`` to ``end`` in the
    colours of consecutive frames: those between the last frame of ``start`` and the first of
    ``end`` (within ``tolerance`` per channel) that are neither. ``complete`` says the
    recording shows the start colour first and the end colour last (else it missed part of
    the fade)."""
    first_end = next((i for i, c in enumerate(colours) if near(c, end, tolerance)), None)
    before = colours[:first_end] if first_end is not None else colours
    last_start = max((i for i, c in enumerate(before) if near(c, start, tolerance)), default=None)
    complete = (
        bool(colours)
        and near(colours[0], start, tolerance)
        and near(colours[-1], end, tolerance)
        and first_end is not None
        and last_start is not None
    )
    middle = colours[(last_start or 0) + 1 : first_end] if complete else []
    distinct: list[RGB] = []
    for colour in middle:
        between = not near(colour, start, tolerance) and not near(colour, end, tolerance)
        if between and colour not in distinct:
            distinct.append(colour)
    return {
        "complete": complete,
        "frames": len(colours),
        "fade_frames": len(middle),
        "steps": len(distinct) if complete else None,
        "colours": [hex_of(colour) for colour in distinct],
        "first_end_frame": first_end,
        "last_start_frame": last_start,
    }


def write_png(path: Path, frame: bytes, width: int, height: int) -> None:
    """An RGB24 frame as a PNG (zlib, no filter), without Qt or any imaging library."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))

    rows = b"".join(b"\0" + frame[y * width * 3 : (y + 1) * width * 3] for y in range(height))
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    path.write_bytes(
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(rows, 6))
        + chunk(b"IEND", b"")
    )

"""A fine reading of what the screens show, for the synchronised-screens benchmark
(bench_sync.py): one process that reads a row of pixels from each Xvfb's framebuffer in turn,
every ``--period-ms`` (1 ms by default), each reading stamped with the wall clock.

Each Xvfb keeps its screen in a file (``-fbdir``, :class:`tests.bench.memory_tools.XServer`),
which this process maps read-only: a reading is a few memory loads, costs the X server nothing
and is stamped within microseconds of being made, so an instant a screen changed is known to
within the spacing of two readings of that screen (its period, plus whatever this process is
late waking). The pixels read are the centres of the 16 cells of the screen's top row
(sync_tools.py's grid): a solid page or picture is 16 cells of one colour of ``PALETTE``, the
video's top row is its frame number's code (white where a bit is 1, black where it is 0).

Written as records of ``<Bdh``: the screen's index, the time (``time.time()``) and what it
showed (0 black, 1 other, 2 + the index of a ``PALETTE`` colour, 100 + a video frame number).

``control``: the check of the probe. A tiny X client that paints the root window of one Xvfb
red or blue (``XSetWindowBackground``, ``XClearWindow``, ``XSync``) every ``--every`` seconds,
noting the wall clock just before its request and just after the server's answer: the instant
the screen changed lies between the two. The probe, reading that screen as it reads the
others, must place each change within its stated resolution of that instant.

    python -m tests.bench.screen_probe probe --out FILE --period-ms 1 FB [FB ...]
    python -m tests.bench.screen_probe control --display :N --out FILE [--every 0.5]

Both run until their standard input closes or SIGTERM.
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import ctypes.util
import itertools
import json
import os
import random
import select
import signal
import struct
import subprocess
import sys
import time
from pathlib import Path

from tests.bench.memory_tools import Framebuffer
from tests.bench.sync_tools import COLUMNS, FRAME_BITS, PALETTE, RGB, ROWS, VIDEO_NUMBER, Seen
from tests.bench.video_tools import reap

RECORD = struct.Struct("<Bdh")
BLACK, OTHER, COLOUR, VIDEO = 0, 1, 2, 100
NAMES = list(PALETTE)
CONTROL_COLOURS = {"red": 0xFF0000, "blue": 0x0000FF}


def row_points(width: int, height: int) -> list[tuple[int, int]]:
    """The centres of the top row's 16 cells."""
    cell_w, cell_h = width // COLUMNS, height // ROWS
    return [(cell_w * i + cell_w // 2, cell_h // 2) for i in range(COLUMNS)]


def code_of(cells: list[RGB]) -> int:
    """What a top row of cells shows, as a record's code."""
    if all(max(c) < 24 for c in cells):
        return BLACK
    for index, colour in enumerate(PALETTE.values()):
        if all(all(abs(p - q) < 40 for p, q in zip(c, colour, strict=True)) for c in cells):
            return COLOUR + index
    if all(min(c) >= 200 or max(c) <= 55 for c in cells):
        value = sum(1 << i for i, c in enumerate(cells) if min(c) >= 200)
        if value >> FRAME_BITS == VIDEO_NUMBER:
            return VIDEO + (value & ((1 << FRAME_BITS) - 1))
    return OTHER


def seen_of(code: int) -> Seen:
    if code >= VIDEO:
        return Seen("video", code - VIDEO)
    if code >= COLOUR:
        return Seen(NAMES[code - COLOUR])
    return Seen("black" if code == BLACK else "other")


class Stop:
    """Set by SIGTERM or by the standard input's end."""

    def __init__(self) -> None:
        self.now = False
        signal.signal(signal.SIGTERM, self._set)

    def _set(self, *_: object) -> None:
        self.now = True

    def check(self) -> bool:
        if not self.now and select.select([sys.stdin], [], [], 0)[0]:
            self.now = not os.read(sys.stdin.fileno(), 1)
        return self.now


def probe(paths: list[Path], out: Path, period: float) -> None:
    screens = []
    for path in paths:
        sizing = Framebuffer(path)
        points = row_points(sizing.width, sizing.height)
        sizing.close()
        screens.append(Framebuffer(path, points))
    stop = Stop()
    last: list[tuple[RGB, ...] | None] = [None] * len(screens)
    codes = [OTHER] * len(screens)
    with out.open("wb") as stream:
        next_at = time.monotonic()
        rounds = 0
        while True:
            rounds += 1
            if rounds % 256 == 0 and stop.check():
                break
            for index, screen in enumerate(screens):
                cells = tuple(screen.pixels())
                at = time.time()
                if cells != last[index]:
                    last[index] = cells
                    codes[index] = code_of(list(cells))
                stream.write(RECORD.pack(index, at, codes[index]))
            next_at += period
            wait = next_at - time.monotonic()
            if wait > 0:
                time.sleep(wait)
            else:
                next_at = time.monotonic()  # late: no burst to catch up
    for screen in screens:
        screen.close()


def control(display: str, out: Path, every: float) -> None:
    x11 = ctypes.CDLL(ctypes.util.find_library("X11") or "libX11.so.6")
    x11.XOpenDisplay.restype = ctypes.c_void_p
    x11.XOpenDisplay.argtypes = [ctypes.c_char_p]
    x11.XDefaultRootWindow.restype = ctypes.c_ulong
    x11.XDefaultRootWindow.argtypes = [ctypes.c_void_p]
    x11.XSetWindowBackground.argtypes = [ctypes.c_void_p, ctypes.c_ulong, ctypes.c_ulong]
    x11.XClearWindow.argtypes = [ctypes.c_void_p, ctypes.c_ulong]
    x11.XSync.argtypes = [ctypes.c_void_p, ctypes.c_int]
    x11.XCloseDisplay.argtypes = [ctypes.c_void_p]
    connection = x11.XOpenDisplay(display.encode())
    if not connection:
        raise SystemExit(f"cannot open {display}")
    root = x11.XDefaultRootWindow(connection)
    stop = Stop()
    changes = []
    colours = list(CONTROL_COLOURS)
    turn = 0
    start = time.time() + every
    while not stop.check():
        # On no grid of the probe's: a random phase each time.
        due = start + turn * every + random.uniform(0, every / 2)
        time.sleep(max(0.0, due - time.time()))
        name = colours[turn % 2]
        before = time.time()
        x11.XSetWindowBackground(connection, root, CONTROL_COLOURS[name])
        x11.XClearWindow(connection, root)
        x11.XSync(connection, 0)
        after = time.time()
        changes.append({"to": name, "before": before, "after": after})
        turn += 1
    x11.XCloseDisplay(connection)
    out.write_text(json.dumps(changes))


def read_probe(
    path: Path, screens: int
) -> tuple[list[list[tuple[float, Seen]]], list[list[float]]]:
    """Per screen: its readings where what it showed changed (the last reading before each
    change and the first after it; enough for bench_sync's switches, state_at and
    first_showings), and the spacing of all its readings in ms."""
    data = path.read_bytes()
    seen: dict[int, Seen] = {}
    raw: list[list[tuple[float, int]]] = [[] for _ in range(screens)]
    for index, at, code in RECORD.iter_unpack(data[: len(data) - len(data) % RECORD.size]):
        raw[index].append((at, code))
    kept: list[list[tuple[float, Seen]]] = []
    spacing: list[list[float]] = []
    for readings in raw:
        frames = []
        for i, (at, code) in enumerate(readings):
            changes = i == 0 or code != readings[i - 1][1]
            changes = changes or i == len(readings) - 1 or readings[i + 1][1] != code
            if changes:
                if code not in seen:
                    seen[code] = seen_of(code)
                frames.append((at, seen[code]))
        kept.append(frames)
        spacing.append([(b[0] - a[0]) * 1000 for a, b in itertools.pairwise(readings)])
    return kept, spacing


class Running:
    """One of the commands above run as a process of its own, at the benchmark's priority;
    :meth:`stop` ends it (its standard input closed) and notes the CPU it used."""

    def __init__(self, *arguments: str, nice: int = 0) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-m", "tests.bench.screen_probe", *arguments],
            stdin=subprocess.PIPE,
            cwd=Path(__file__).resolve().parents[2],
        )
        if nice:
            # The probe above the displays it watches (when allowed): what it costs them is a
            # few microseconds a reading, and a probe that waits for the CPU at a switch, when
            # every display and X server wakes at once, reads that switch coarsely.
            with contextlib.suppress(PermissionError):
                os.setpriority(os.PRIO_PROCESS, self.process.pid, nice)
        self.nice = os.getpriority(os.PRIO_PROCESS, self.process.pid)
        self.cpu_s = 0.0

    def stop(self) -> None:
        with contextlib.suppress(OSError):
            assert self.process.stdin is not None
            self.process.stdin.close()
        self.cpu_s = reap(self.process, 30)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    reading = commands.add_parser("probe")
    reading.add_argument("--out", type=Path, required=True)
    reading.add_argument("--period-ms", type=float, default=1.0)
    reading.add_argument("framebuffers", type=Path, nargs="+")
    painting = commands.add_parser("control")
    painting.add_argument("--display", required=True)
    painting.add_argument("--out", type=Path, required=True)
    painting.add_argument("--every", type=float, default=0.5)
    args = parser.parse_args()
    if args.command == "probe":
        probe(args.framebuffers, args.out, args.period_ms / 1000)
    else:
        control(args.display, args.out, args.every)
    return 0


if __name__ == "__main__":
    sys.exit(main())

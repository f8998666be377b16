"""What bench_stage measures the same way of the stage and of its bare baseline: CPU over a
steady window and per page change, and the time from an order to the pixels on the screen."""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from itertools import pairwise
from pathlib import Path
from typing import Any

from tests.bench.memory_tools import Framebuffer
from tests.bench.signage_content import ContentServer, Image
from tests.bench.stage_tools import RGB, CpuTrace, LocalPages, near
from tests.bench.stats import percentile
from tests.bench.wakeups import difference, print_threads, snapshot

RED: RGB = (255, 0, 0)
BLUE: RGB = (0, 0, 255)
GREY: RGB = (128, 128, 128)


@dataclass
class Bench:
    """What every session shares."""

    args: argparse.Namespace
    workdir: Path
    content: ContentServer
    pages: LocalPages
    picture: Image  # the still of the cpu part
    picture_path: Path  # ... as a file, for the bare scene
    grey: Image  # the base between the latency part's items
    grey_path: Path  # ... as a file, for the bare scene


def steady(
    trace: CpuTrace,
    settle: float,
    window: float,
    sequence: Callable[[], object] | None,
    poll: bool = True,
) -> dict[str, Any]:
    """CPU per second over ``window`` s, after ``settle`` s, and second by second, and the
    tree's wake-ups (every thread's context switches, tests/bench/wakeups.py) over the same
    window. For the display, its playback record is read once a second (``sequence``), as
    during the page changes, so that cost is in both; the bare scene has none. Without
    ``poll`` (a still picture: no change to subtract it from) the record is read at the two
    ends of the window alone, so what is measured is the display's own (its sequence counts
    every change, so a change in the window is still seen)."""
    before = sequence() if sequence else None
    time.sleep(settle)
    start = time.time()
    threads = snapshot(trace.root)
    changed = False
    while time.time() < start + window:
        time.sleep(1)
        if poll:
            changed |= sequence is not None and sequence() != before
    end = time.time()
    wakeups = difference(threads, snapshot(trace.root), end - start)
    changed |= sequence is not None and sequence() != before
    tree, xserver = trace.between(start, end)
    seconds = [trace.at(start + k)[0] for k in range(int(end - start) + 1)]
    return {
        "seconds": round(end - start, 2),
        "cpu_s_per_s": round(tree / (end - start), 4),
        "xvfb_cpu_s_per_s": round(xserver / (end - start), 4),
        "per_second": [round(b - a, 3) for a, b in pairwise(seconds)],
        "wakeups": wakeups,
        "screen_changed": changed,  # an item change in the window spoils it
    }


def change_cost(
    trace: CpuTrace,
    urls: list[str],
    starts: dict[str, float],
    before: dict[str, Any],
    after: dict[str, Any],
) -> dict[str, Any]:
    """CPU per change: the CPU from the first change's start to the last's (whole periods)
    minus the steady cost (the mean of ``before`` and ``after``) over that time, per change."""
    seen = [i for i, url in enumerate(urls) if url in starts]
    begin, end = starts[urls[seen[0]]], starts[urls[seen[-1]]]
    changes = seen[-1] - seen[0]
    if changes < 1:
        raise RuntimeError(f"too few page changes seen: {starts}")
    tree, xserver = trace.between(begin, end)
    elapsed = end - begin
    rate = [(before[key] + after[key]) / 2 for key in ("cpu_s_per_s", "xvfb_cpu_s_per_s")]
    return {
        "before": before,
        "after": after,
        "changes": changes,
        "missed_records": len(urls) - 1 - len(seen),  # never seen on the record (read at 1 Hz)
        "seconds": round(elapsed, 2),
        "period_s": round(elapsed / changes, 3),
        "cpu_s": round(tree, 3),
        "cpu_s_per_s": round(rate[0], 4),
        "xvfb_cpu_s_per_s": round(rate[1], 4),
        "cpu_s_per_change": round((tree - rate[0] * elapsed) / changes, 4),
        "xvfb_cpu_s_per_change": round((xserver - rate[1] * elapsed) / changes, 4),
        "per_second": [
            round(trace.between(begin + k, begin + k + 1)[0], 3) for k in range(int(elapsed))
        ],
    }


def cpu_part(
    bench: Bench,
    trace: CpuTrace,
    first: int,
    show: Callable[[str], None],
    changes: Callable[[], dict[str, Any]],
    sequence: Callable[[], object] | None,
) -> dict[str, Any]:
    """The still picture (already on the screen), the signage page animated, then the page
    changes; ``show`` puts a page on the screen and returns once it is there."""
    args = bench.args
    still = steady(trace, args.settle, args.still_window, sequence, poll=False)
    print(
        f"  still picture: {still['cpu_s_per_s'] * 100:.2f} % of a core (Xvfb "
        f"{still['xvfb_cpu_s_per_s'] * 100:.2f} %), {still['wakeups']['wakeups_per_s']:.1f} "
        f"wake-ups/s; the threads that woke most:",
        flush=True,
    )
    print_threads(still["wakeups"], top=8)
    show(f"{bench.content.url}/page/{first}.html")
    animated = steady(trace, args.settle, args.window, sequence)
    print(
        f"  signage page animated at 60 fps: {animated['cpu_s_per_s']:.3f} CPU s/s (Xvfb "
        f"{animated['xvfb_cpu_s_per_s']:.3f})",
        flush=True,
    )
    found = changes()
    print(
        f"  calm signage page: {found['before']['cpu_s_per_s']:.3f} CPU s/s before the "
        f"changes, {found['after']['cpu_s_per_s']:.3f} after; {found['changes']} changes "
        f"every {found['period_s']:.2f} s: {found['cpu_s_per_change']:.3f} CPU s per "
        f"change beyond the page's own (Xvfb {found['xvfb_cpu_s_per_change']:.3f})",
        flush=True,
    )
    return {"still": still, "animated": animated, "page": found}


def to_screen(
    framebuffer: Framebuffer, colour: RGB, sent: float
) -> tuple[float | None, float | None]:
    """Seconds from ``sent`` (monotonic) to the first pixel that left the grey, and to all
    13 points at ``colour``, read on the framebuffer every millisecond (None: not in 10 s)."""
    first = full = None
    while time.monotonic() < sent + 10 and full is None:
        pixels = framebuffer.pixels()
        now = time.monotonic()
        if first is None and not near(pixels[4], GREY, 3):
            first = now - sent
        if first is not None and all(near(p, colour, 12) for p in pixels):
            full = now - sent
        time.sleep(0.001)
    return first, full


def back_to_grey(framebuffer: Framebuffer) -> None:
    deadline = time.monotonic() + 10
    while not all(near(p, GREY, 12) for p in framebuffer.pixels()):
        if time.monotonic() > deadline:
            break
        time.sleep(0.01)
    time.sleep(0.5)


def switches(bench: Bench) -> list[tuple[RGB, str]]:
    """The latency part's pages: red and blue in turn, each a new document."""
    colours = [(RED, BLUE)[n % 2] for n in range(bench.args.switches)]
    return [(c, bench.pages.solid(c, f"s{n}")) for n, c in enumerate(colours)]


@dataclass
class Latencies:
    """The switches of a latency part: ms to the first pixel and to all of it, and how many
    never got there in full."""

    firsts: list[float] = field(default_factory=list)
    fulls: list[float] = field(default_factory=list)
    missed: int = 0

    def add(self, first: float | None, full: float | None) -> None:
        """One switch, in seconds (None: not seen in time)."""
        if first is None or full is None:
            self.missed += 1
        else:
            self.firsts.append(first * 1000)
            self.fulls.append(full * 1000)

    def figures(self) -> dict[str, Any]:
        firsts, fulls = self.firsts, self.fulls
        return {
            "switches": len(firsts) + self.missed,
            "never_in_full": self.missed,
            "first_pixel_p50_ms": round(percentile(firsts, 0.5), 1) if firsts else None,
            "first_pixel_p95_ms": round(percentile(firsts, 0.95), 1) if firsts else None,
            "full_p50_ms": round(percentile(fulls, 0.5), 1) if fulls else None,
            "full_p95_ms": round(percentile(fulls, 0.95), 1) if fulls else None,
        }


def print_latency(result: dict[str, Any]) -> None:
    print(
        f"  schedule to first pixel p50/p95 {result['first_pixel_p50_ms']}/"
        f"{result['first_pixel_p95_ms']} ms, in full {result['full_p50_ms']}/"
        f"{result['full_p95_ms']} ms"
        + (
            f"; the record's start {result['record_started_p50_ms']}/"
            f"{result['record_started_p95_ms']} ms"
            if "record_started_p50_ms" in result
            else ""
        ),
        flush=True,
    )

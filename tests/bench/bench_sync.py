"""Screens that change together, measured from the screens: real ``pdn display``
processes, each on an Xvfb of its own, playing one synchronised set, each screen recorded by
``ffmpeg -f x11grab`` at 60 fps.

    .venv/bin/python -m tests.bench.bench_sync [--displays 3] [--switches 50] [--size 640x360]
        [--parts sync,wall] [--output tests/bench/figures/sync.json]
        [--montage tests/bench/figures/sync_wall_montage.png] [--work DIR]
        [--probe-ms 1] [--probe-nice -10] [--no-rejoin] [--checkout DIR]

**sync** (``--displays`` screens): the set ``bench-sync`` with ``<playback sync="wall-clock"/>``
is a solid red page, a yellow picture, a green page, a magenta picture (2 s each), a blue page
(2 s) and an H.264 video with its frame numbers drawn in (its own length, 12 s: 30 fps, made by
Debian's ffmpeg, drawtext, and a code of its frame number in its top rows that the analysis
reads); 22 s a cycle, six switches. Pages are served live from 127.0.0.1, the pictures and the
video come from each display's cache (sha256 in the CDS). Cross-fade 0 (a cut), so that a
switch is an instant. Measured (sync_tools.py says how the recordings are read):

- **switch skew**: for each due instant of the grid, the spread (latest minus earliest) of the
  instants the screens changed, p50/p95/max over ``--switches`` switches; beside it, each
  screen's lateness against the due instant (recording included), and each display's own
  account (``/x/health`` ``renderer.screen.sync``: the first frame swapped after the switch, by
  its clock). A switch is located on each screen to +-8.3 ms (between two recorded frames),
  so the skew of two perfect screens reads up to 16.7 ms: the resolution of 60 fps.
- **the fine reading** (``screen_probe.py``): the same switches read from each Xvfb's
  framebuffer every ``--probe-ms`` by one process, each switch located to about +-0.5 ms; and
  its control, a further Xvfb whose root is painted at instants known to within a millisecond,
  which the probe must place where they were made (``fine`` in the figures).
- **video frames**: at every recorded frame of a screen during the video, the frame number it
  shows minus the one each other screen shows at that instant; and the time between two
  screens' first showing of the same frame number; and each display's own figure
  (``renderer.screen.video.sync``: the lag behind its turn, rate nudges, seeks).
- **rejoin**: one display killed (SIGKILL) 1 s into the video's turn and started again 1 s
  later: the time from its start to its API answering, to its first frame of content, whether
  that was the item of the grid's turn then (not the set's top), and to being back in step (its
  item the others' item and, in the video, at most one frame off theirs, for 3 s on end).

**wall**: four displays as a 2x2 wall (``[screen] wall``, bezel 0.03), one synchronised set of a
picture-rich video (testsrc2 with a grid and its frame number); 5 s into the video the four
screens are read from their Xvfb framebuffers one after the other (each copy stamped: about a
millisecond for the four) and put side by side with the bezels' gap, as ``--montage``.

``--checkout`` runs the displays of another checkout (a copy of an earlier commit), for a
before-and-after in one sitting; ``--no-rejoin`` leaves the kill and restart out.

The machine's load is part of the figures: its load average and how busy its CPUs were
(/proc/stat) during the run, the displays' CPU, the recorders'. Prints the figures and writes
them as JSON (``--output``).
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from tests.bench.memory_tools import Display, Framebuffer, XServer, process_tree, xvfb
from tests.bench.screen_probe import Running, read_probe
from tests.bench.stats import percentile
from tests.bench.sync_setup import (
    SET,
    VIDEO_S,
    Grid,
    Turn,
    autogroup,
    busiest_others,
    cpu_busy,
    make_media,
    sha256,
    tree_cpu,
)
from tests.bench.sync_tools import (
    FPS,
    ScreenRecorder,
    Seen,
    picture_video,
)
from tests.bench.video_tools import MediaSite

REPO = Path(__file__).resolve().parents[2]
HOLD_S = 3.0  # in step this long on end counts as back in step
AFTER_RESTART_S = 60.0  # recorded this long after the restart
EDGE_S = 0.04  # around a due instant either item counts as in step


# -- what the recordings say ---------------------------------------------------------------------


Frames = list[tuple[float, Seen]]


@dataclass
class Switch:
    old: str
    new: str
    last_old: float
    first_new: float

    @property
    def at(self) -> float:
        return (self.last_old + self.first_new) / 2


def switches(frames: Frames) -> list[Switch]:
    """Every change of item on a screen (frames that show no item are skipped)."""
    found: list[Switch] = []
    last: tuple[float, str] | None = None
    for at, seen in frames:
        item = seen.item
        if item is None:
            continue
        if last is not None and item != last[1]:
            found.append(Switch(last[1], item, last[0], at))
        last = (at, item)
    return found


def state_at(frames: Frames, when: float) -> Seen | None:
    """What the screen showed at ``when``: its last recorded frame at or before it."""
    lo, hi = 0, len(frames)
    while lo < hi:
        mid = (lo + hi) // 2
        if frames[mid][0] <= when:
            lo = mid + 1
        else:
            hi = mid
    return frames[lo - 1][1] if lo else None


def first_showings(frames: Frames, start: float, end: float) -> dict[int, float]:
    """When each video frame number first appeared (midpoint of the two recorded frames)."""
    shown: dict[int, float] = {}
    previous: float | None = None
    for at, seen in frames:
        frame = seen.frame
        if start <= at < end and frame is not None and frame not in shown and previous is not None:
            shown[frame] = (previous + at) / 2
        previous = at
    return shown


def summary(values: list[float], digits: int = 1) -> dict[str, Any]:
    if not values:
        return {"count": 0}
    return {
        "count": len(values),
        "min": round(min(values), digits),
        "p50": round(percentile(values, 0.5), digits),
        "p95": round(percentile(values, 0.95), digits),
        "max": round(max(values), digits),
    }


# -- the run -----------------------------------------------------------------------------------


@contextlib.contextmanager
def screens(count: int, size: tuple[int, int]) -> Iterator[list[XServer]]:
    with contextlib.ExitStack() as stack:
        yield [stack.enter_context(xvfb(*size)) for _ in range(count)]


def start_display(
    server: XServer, work: Path, name: str, config: str, checkout: Path = REPO
) -> Display:
    return Display(server, checkout, work, config, name)


def wait_for(what: Callable[[], bool], timeout: float, message: str) -> None:
    deadline = time.monotonic() + timeout
    while not what():
        if time.monotonic() > deadline:
            raise SystemExit(f"gave up waiting: {message}")
        time.sleep(0.5)


def playing(display: Display, prefix: str) -> bool:
    with contextlib.suppress(OSError, ValueError):
        health = display.health()
        record = health.get("playback") or {}
        waiting = any("waiting" in entry for entry in health.get("sync") or [])
        return record.get("set") == prefix and not waiting
    return False


@dataclass
class Phase:
    start: float = 0.0
    end: float = 0.0
    kill: float | None = None
    restart: float | None = None
    api: float | None = None
    killed: int | None = None
    health: list[dict[str, Any]] = field(default_factory=list)
    video_health: list[dict[str, Any]] = field(default_factory=list)


def run_sync(args: argparse.Namespace, work: Path) -> dict[str, Any]:
    size = args.size
    media = make_media(work, size)
    grid = Grid(media)
    cds = media.cds()
    config = "[screen]\ncrossfade = 0\n"
    load_before = os.getloadavg()
    with screens(args.displays, size) as servers, xvfb(*size) as control_server:
        displays = [
            start_display(s, work, f"sync{i}", config, args.checkout) for i, s in enumerate(servers)
        ]
        started: list[ScreenRecorder] = []
        helpers: list[Running] = []
        try:
            for display in displays:
                display.schedule_cds(cds)
            wait_for(
                lambda: all(playing(d, SET) for d in displays), 180, "every display on the set"
            )
            # Steady: a whole cycle on the set before recording.
            time.sleep(grid.cycle)
            own = {p for d in displays for p, _ in process_tree(d.process.pid)}
            others = busiest_others(own | {os.getpid()})
            recorders = [
                ScreenRecorder(s.display, size, work / f"screen{i}.nut")
                for i, s in enumerate(servers)
            ]
            started = recorders
            helpers = [
                Running(
                    "probe",
                    "--out",
                    str(work / "probe.bin"),
                    "--period-ms",
                    str(args.probe_ms),
                    *(str(s.framebuffer) for s in [*servers, control_server]),
                    nice=args.probe_nice,
                ),
                Running(
                    "control",
                    "--display",
                    control_server.display,
                    "--out",
                    str(work / "control.json"),
                    nice=args.probe_nice,
                ),
            ]
            time.sleep(1.0)
            phase = Phase(start=time.time())
            load_start = os.getloadavg()
            cpu0 = [tree_cpu(d.process.pid) for d in displays]
            busy0 = cpu_busy()
            cycles = math.ceil(args.switches / 6)
            main_end = phase.start + cycles * grid.cycle + 2
            # Each display's own account of the video, sampled in the middle of its turns.
            while time.time() < main_end:
                middle = grid.next_start("video", time.time()) + VIDEO_S / 2
                if middle > main_end:
                    break
                time.sleep(max(0.0, middle - time.time()))
                phase.video_health.append(
                    {
                        f"display{i}": d.health()["renderer"].get("screen", {}).get("video")
                        for i, d in enumerate(displays)
                    }
                )
            time.sleep(max(0.0, main_end - time.time()))
            phase.end = time.time()
            load_end = os.getloadavg()
            busy1 = cpu_busy()
            cpu1 = [tree_cpu(d.process.pid) for d in displays]
            phase.health = [d.health()["renderer"].get("screen", {}).get("sync") for d in displays]
            rejoin_health: dict[str, Any] = {}
            if args.rejoin:
                rejoin_health = rejoin(grid, servers, displays, work, config, phase, args.checkout)
        finally:
            for recorder in started:
                recorder.stop()
            for helper in helpers:
                helper.stop()
            for display in displays:
                display.stop()
    load_after = os.getloadavg()
    media.site.stop()
    frames = [recorder.frames() for recorder in started]
    figures = analyse(grid, frames, phase)
    figures["fine"] = analyse_fine(
        grid, work / "probe.bin", args.displays, work / "control.json", phase
    )
    busy = (busy1[0] - busy0[0]) / max(1.0, busy1[1] - busy0[1])
    seconds = phase.end - phase.start
    figures["machine"] = {
        "cores": os.cpu_count(),
        "load-average-before": [round(v, 2) for v in load_before],
        "load-average-after": [round(v, 2) for v in load_after],
        "load-average-at-the-start-and-end-of-the-switches": [
            [round(v, 2) for v in load_start],
            [round(v, 2) for v in load_end],
        ],
        "cpu-busy-percent-during": round(busy * 100, 1),
        "displays-cpu-cores": [
            round((b - a) / seconds, 2) for a, b in zip(cpu0, cpu1, strict=True)
        ],
        "recorders-cpu-s": [round(r.cpu_s, 1) for r in started],
        "probe-and-control-cpu-s": [round(h.cpu_s, 1) for h in helpers],
        "probe-and-control-nice": [h.nice for h in helpers],
        "run-s": round(seconds, 1),
        "priority": f"nice {os.nice(0)}",
        # With the kernel's autogroups the CPU is shared between sessions first, whatever
        # the niceness of processes in other sessions: the session's own weight is this.
        "autogroup": autogroup(),
        "busiest-other-processes-at-start": others,
    }
    figures["displays-own-account"] = {
        "switch-lateness": phase.health,
        "video-in-the-middle-of-its-turns": phase.video_health,
        "rejoined-display-at-the-end": rejoin_health.get("video") or rejoin_health.get("sync"),
    }
    figures["setup"] = {
        "displays": args.displays,
        "screen": f"{size[0]}x{size[1]}",
        "recording": "ffmpeg x11grab 60 fps, 16x9 cells",
        "fine-probe": f"each Xvfb's framebuffer (mapped), top row's 16 cells, every "
        f"{args.probe_ms:g} ms; control: the root of a further Xvfb painted at known instants",
        "cross-fade": 0,
        "checkout": str(args.checkout),
        "environment": {
            name: os.environ[name]
            for name in ("QSG_RENDER_LOOP", "QT_QPA_UPDATE_IDLE_TIME", "QSG_INFO")
            if name in os.environ
        },
        "cycle-s": grid.cycle,
        "items": [name for name, *_ in media.items],
        "video": f"H.264 {size[0]}x{size[1]} {FPS} fps, {VIDEO_S:g} s, frame numbers drawn in",
    }
    return figures


@dataclass
class Switched:
    """The screens' switches at the grid's due instants."""

    skews: list[float] = field(default_factory=list)  # ms, the spread of the screens' instants
    within: list[float] = field(default_factory=list)  # +- ms each screen's switch is known to
    late: list[list[float]] = field(default_factory=list)  # ms after its due instant, by screen
    by_change: dict[str, list[float]] = field(default_factory=dict)  # the same, by old>new
    first_and_last: list[tuple[int, int]] = field(default_factory=list)  # screens' order
    # +- ms each skew is known to: the earliest and the latest screen's located-to-within
    skew_within: list[float] = field(default_factory=list)

    def figures(self) -> dict[str, Any]:
        first = [f for f, _ in self.first_and_last]
        last = [lst for _, lst in self.first_and_last]
        screens = range(len(self.late))
        return {
            "switch-skew-ms": {**summary(self.skews), "switches": len(self.skews)},
            "switch-skew-known-to-within-ms": summary(self.skew_within),
            "switch-skew-within-17-ms-share": round(
                sum(skew <= 1000 / 60 for skew in self.skews) / max(1, len(self.skews)), 3
            ),
            "each-switch-located-to-within-ms": summary(self.within),
            "switch-lateness-vs-due-ms": [summary(values) for values in self.late],
            "switch-lateness-by-change-ms": {k: summary(v) for k, v in self.by_change.items()},
            "screen-first-to-switch-counts": [first.count(i) for i in screens],
            "screen-last-to-switch-counts": [last.count(i) for i in screens],
        }


def switched(turns: list[Turn], frames: list[Frames]) -> Switched:
    """Each screen's change nearest each due instant, to the item of that turn."""
    per_screen = [switches(f) for f in frames]
    result = Switched(late=[[] for _ in frames])
    for before, after in itertools.pairwise(turns):
        due = after.start
        instants = []
        halves = []
        for index, found in enumerate(per_screen):
            near = [
                s
                for s in found
                if s.new == after.item and s.old == before.item and abs(s.at - due) < 1.0
            ]
            if near:
                instants.append(near[0].at)
                halves.append((near[0].first_new - near[0].last_old) / 2 * 1000)
                late = (near[0].at - due) * 1000
                result.late[index].append(late)
                result.by_change.setdefault(f"{before.item}>{after.item}", []).append(late)
                result.within.append((near[0].first_new - near[0].last_old) / 2 * 1000)
        if len(instants) == len(frames):
            result.skews.append((max(instants) - min(instants)) * 1000)
            first, last = instants.index(min(instants)), instants.index(max(instants))
            result.first_and_last.append((first, last))
            result.skew_within.append(halves[first] + halves[last])
    return result


def video_apart(turns: list[Turn], frames: list[Frames]) -> list[float]:
    """For each video frame number, how far apart two screens first showed it (ms)."""
    offsets: list[float] = []
    for turn in (t for t in turns if t.item == "video"):
        shown = [first_showings(f, turn.start, turn.end) for f in frames]
        for a, b in itertools.combinations(range(len(frames)), 2):
            offsets.extend(abs(shown[a][n] - shown[b][n]) * 1000 for n in shown[a] if n in shown[b])
    return offsets


def analyse_fine(
    grid: Grid, probe: Path, screens: int, control: Path, phase: Phase
) -> dict[str, Any]:
    """The probe's reading of the switches (screen_probe.py), and its check: the control's
    changes, made at known instants on a screen of their own, as the probe placed them."""
    frames, spacing = read_probe(probe, screens + 1)
    main = [[(t, s) for t, s in f if phase.start <= t < phase.end] for f in frames[:screens]]
    turns = grid.turns(phase.start + 1, phase.end - 1)
    figures = switched(turns, main).figures()
    apart = video_apart(turns, main)
    changes = json.loads(control.read_text())
    errors: list[float] = []
    tight: list[float] = []  # of the changes whose instant is known to within 1 ms
    outside: list[float] = []  # how far the probe's instant lies outside the made interval
    brackets: list[float] = []
    inside = 0
    found = switches(frames[screens])
    for change in changes:
        known = (change["before"] + change["after"]) / 2
        near = [s for s in found if s.new == change["to"] and abs(s.at - known) < 0.2]
        if not near:
            continue
        brackets.append((change["after"] - change["before"]) * 1000)
        errors.append((near[0].at - known) * 1000)
        if change["after"] - change["before"] <= 0.001:
            tight.append(abs(near[0].at - known) * 1000)
        outside.append(max(0.0, change["before"] - near[0].at, near[0].at - change["after"]) * 1000)
        # The probe's interval (last old reading, first new) meets the control's (request
        # sent, answer back): the change happened in both.
        inside += near[0].last_old <= change["after"] and near[0].first_new >= change["before"]
    return {
        "reading-interval-ms": [summary(values, 2) for values in spacing],
        **figures,
        "video-same-frame-first-shown-apart-ms": summary(apart),
        "control": {
            "changes-made": len(changes),
            "changes-found": len(errors),
            "found-minus-made-ms": summary(errors, 2),
            "found-minus-made-abs-ms": summary([abs(e) for e in errors], 2),
            "made-between-request-and-answer-ms": summary(brackets, 2),
            "found-minus-made-abs-ms-of-changes-made-within-1-ms": summary(tight, 2),
            "found-outside-the-made-interval-by-ms": summary(outside, 2),
            "probe-interval-meets-the-made-interval": inside,
        },
    }


def rejoin(
    grid: Grid,
    servers: list[XServer],
    displays: list[Display],
    work: Path,
    config: str,
    phase: Phase,
    checkout: Path,
) -> dict[str, Any]:
    """The last display killed (SIGKILL) 1 s into a video turn, started again 1 s later."""
    victim = len(displays) - 1
    video_start = grid.next_start("video", time.time() + 2)
    time.sleep(max(0.0, video_start + 1.0 - time.time()))
    phase.kill, phase.killed = time.time(), victim
    displays[victim].process.kill()
    displays[victim].process.wait()
    displays[victim].stop()
    time.sleep(1.0)
    phase.restart = time.time()
    displays[victim] = start_display(servers[victim], work, f"sync{victim}", config, checkout)
    phase.api = time.time()
    time.sleep(max(0.0, phase.restart + AFTER_RESTART_S - time.time()))
    screen: dict[str, Any] = displays[victim].health()["renderer"].get("screen", {})
    return screen


def analyse(grid: Grid, frames: list[Frames], phase: Phase) -> dict[str, Any]:
    main = [[(t, s) for t, s in f if phase.start <= t < phase.end] for f in frames]
    turns = grid.turns(phase.start + 1, phase.end - 1)
    # Video: frame numbers at the same instant, and the same frame's first showing.
    diffs: list[int] = []
    offsets = video_apart(turns, main)
    lag_vs_grid: list[list[float]] = [[] for _ in frames]
    for turn in (t for t in turns if t.item == "video"):
        shown = [first_showings(f, turn.start, turn.end) for f in main]
        for index, screen in enumerate(shown):
            lag_vs_grid[index].extend(
                (at - (turn.start + n / FPS)) * 1000 for n, at in screen.items()
            )
        for a, b in itertools.permutations(range(len(frames)), 2):
            for at, seen in main[a]:
                if not (turn.start + 0.1 <= at < turn.end - 0.1) or seen.kind != "video":
                    continue
                other = state_at(main[b], at)
                if other is not None and other.kind == "video" and seen.frame is not None:
                    assert other.frame is not None
                    diffs.append(seen.frame - other.frame)
    counts = {"0": 0, "1": 0, "2 or more": 0}
    for diff in diffs:
        counts["0" if diff == 0 else "1" if abs(diff) == 1 else "2 or more"] += 1
    intervals = [(b[0] - a[0]) * 1000 for f in main for a, b in itertools.pairwise(f)]
    figures: dict[str, Any] = {
        "recording-interval-ms": summary(intervals),
        **switched(turns, main).figures(),
        "video": {
            "frame-difference-at-the-same-instant": {
                "samples": len(diffs),
                "counts": counts,
                "max": max((abs(d) for d in diffs), default=None),
            },
            "same-frame-first-shown-apart-ms": summary(offsets),
            "lag-behind-the-grid-ms": [summary(values) for values in lag_vs_grid],
        },
    }
    if phase.killed is not None:
        figures["rejoin"] = analyse_rejoin(grid, frames, phase)
    return figures


def analyse_rejoin(grid: Grid, frames: list[Frames], phase: Phase) -> dict[str, Any]:
    assert phase.killed is not None and phase.restart is not None and phase.kill is not None
    mine = [(t, s) for t, s in frames[phase.killed] if t >= phase.restart]
    reference = frames[0]
    content = next(((t, s) for t, s in mine if s.item is not None), None)
    result: dict[str, Any] = {
        "killed": f"display{phase.killed} (SIGKILL), 1 s into the video's turn",
        "restart-to-api-s": round((phase.api or 0) - phase.restart, 2),
    }
    if content is None:
        result["restart-to-in-step-s"] = None
        return result
    first_at, first = content
    result["restart-to-first-content-s"] = round(first_at - phase.restart, 2)
    result["first-item"] = first.item
    result["first-item-is-the-turn-of-then"] = first.item == grid.turn(first_at).item
    if first.kind == "video" and first.frame is not None:
        turn = grid.turn(first_at)
        result["first-video-frame"] = first.frame
        result["first-video-frame-expected-by-the-grid"] = int((first_at - turn.start) * FPS)

    def in_step(at: float, seen: Seen, reference: Frames) -> bool:
        if seen.item is None:
            return False  # black (no window yet), the idle page, a torn frame
        turn = grid.turn(at)
        if min(at - turn.start, turn.end - at) < EDGE_S:
            return True
        other = state_at(reference, at)
        if other is None or seen.item != other.item:
            return False
        if seen.kind == "video":
            return (
                other.frame is not None
                and seen.frame is not None
                and abs(seen.frame - other.frame) <= 1
            )
        return True

    first_in_step = next(
        (at for at, seen in mine if at >= first_at and in_step(at, seen, reference)), None
    )
    result["restart-to-in-step-s"] = (
        None if first_in_step is None else round(first_in_step - phase.restart, 2)
    )
    result["kill-to-in-step-s"] = (
        None if first_in_step is None else round(first_in_step - phase.kill, 2)
    )
    if first_in_step is not None:
        # How well it keeps step afterwards, beside two displays that never stopped.
        window = (first_in_step, first_in_step + 10.0)
        after = [(t, s) for t, s in mine if window[0] <= t < window[1]]
        pair = [(t, s) for t, s in frames[1] if window[0] <= t < window[1]]
        result["in-step-share-10-s-after"] = round(
            sum(in_step(t, s, reference) for t, s in after) / max(1, len(after)), 3
        )
        result["in-step-share-of-two-unkilled-displays-then"] = round(
            sum(in_step(t, s, reference) for t, s in pair) / max(1, len(pair)), 3
        )
    since: float | None = None
    for at, seen in mine:
        if at < first_at:
            continue
        if in_step(at, seen, reference):
            since = at if since is None else since
            if at - since >= HOLD_S:
                break
        else:
            since = None
    result[f"restart-to-in-step-{HOLD_S:g}-s-on-end-s"] = (
        None if since is None else round(since - phase.restart, 2)
    )
    return result


# -- the wall ----------------------------------------------------------------------------------


def run_wall(args: argparse.Namespace, work: Path) -> dict[str, Any]:
    tile = (args.size[0] * 3 // 4, args.size[1] * 3 // 4)  # four screens: smaller ones
    bezel = 0.03
    gap = round(bezel * tile[0])
    wall_size = (2 * tile[0] + gap, 2 * tile[1] + gap)
    video = picture_video(work / "wall.mp4", (wall_size[0] // 2 * 2, wall_size[1] // 2 * 2), 10.0)
    site = MediaSite({video.name: (video.read_bytes(), "video/mp4")})
    cds = (
        '<content-set name="bench-wall"><constraints><scheduling-constraints>'
        '<playback sync="wall-clock"/></scheduling-constraints></constraints>'
        '<content-item content-type="video/mp4"><requires-file><hashes>'
        f'<hash type="sha256">{sha256(video)}</hash></hashes><sources>'
        f"<uri>{site.base}/media/{video.name}</uri></sources></requires-file></content-item>"
        "</content-set>"
    ).encode()
    places = list(itertools.product(range(2), range(2)))  # (row, column)
    result: dict[str, Any] = {"tile": f"{tile[0]}x{tile[1]}", "bezel": bezel, "gap-px": gap}
    with screens(4, tile) as servers:
        displays = [
            start_display(
                s,
                work,
                f"wall{i}",
                f"[screen]\ncrossfade = 0\nwall = {{columns = 2, rows = 2, column = {c}, "
                f"row = {r}, bezel = {bezel}}}\n",
            )
            for i, (s, (r, c)) in enumerate(zip(servers, places, strict=True))
        ]
        try:
            for display in displays:
                display.schedule_cds(cds)
            wait_for(lambda: all(playing(d, "bench-wall") for d in displays), 180, "the wall")
            time.sleep(5.0)  # into the video, in step
            # The four screens read from their framebuffers one after the other, each copy
            # stamped: one instant to within a millisecond or so (x11grab recorders, used
            # before, drifted apart by 0.6-2 s on this loaded machine).
            buffers = [Framebuffer(s.framebuffer, points=[]) for s in servers]
            taken: list[tuple[float, bytes]] = []
            for buffer in buffers:
                raw = buffer.snapshot()
                taken.append((time.time(), raw))
        finally:
            for display in displays:
                display.stop()
    site.stop()
    shots = [work / f"tile{i}.ppm" for i in range(4)]
    for buffer, shot, (_, raw) in zip(buffers, shots, taken, strict=True):
        shot.write_bytes(buffer.to_ppm(raw))
        buffer.close()
    stamps = [at for at, _ in taken]
    result["read-apart-ms"] = round((max(stamps) - min(stamps)) * 1000, 2)
    montage = args.montage
    montage.parent.mkdir(parents=True, exist_ok=True)
    convert = shutil.which("convert")
    if convert is None:
        raise SystemExit("ImageMagick's convert is missing (dev.sh installs imagemagick)")
    command = [convert, "-size", f"{wall_size[0]}x{wall_size[1]}", "xc:black"]
    for shot, (r, c) in zip(shots, places, strict=True):
        command += [
            str(shot),
            "-geometry",
            f"+{c * (tile[0] + gap)}+{r * (tile[1] + gap)}",
            "-composite",
        ]
    subprocess.run([*command, str(montage)], check=True, timeout=60)
    result["montage"] = str(montage)
    result["instant"] = datetime.fromtimestamp(min(stamps), UTC).isoformat()
    return result


def size_of(text: str) -> tuple[int, int]:
    width, height = (int(v) for v in text.lower().split("x"))
    return width, height


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--displays", type=int, default=3)
    parser.add_argument("--switches", type=int, default=50)
    parser.add_argument("--size", type=size_of, default=(640, 360))
    parser.add_argument("--parts", default="sync,wall")
    parser.add_argument("--probe-ms", type=float, default=1.0, help="the fine probe's period")
    parser.add_argument(
        "--probe-nice", type=int, default=-10, help="the probe's niceness (when allowed)"
    )
    parser.add_argument(
        "--rejoin",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="kill and restart a display after the switches (a minute more)",
    )
    parser.add_argument("--output", type=Path, default=Path("tests/bench/figures/sync.json"))
    parser.add_argument(
        "--montage", type=Path, default=Path("tests/bench/figures/sync_wall_montage.png")
    )
    parser.add_argument("--work", type=Path, help="keep the recordings and logs here")
    parser.add_argument(
        "--checkout",
        type=Path,
        default=REPO,
        help="run the displays of this checkout (a copy of another commit: before and after)",
    )
    args = parser.parse_args()
    parts = set(args.parts.split(","))
    work = args.work or Path(tempfile.mkdtemp(prefix="pdn-bench-sync-"))
    work.mkdir(parents=True, exist_ok=True)
    figures: dict[str, Any] = {}
    for part, run in (("sync", run_sync), ("wall", run_wall)):
        if part in parts:
            when = datetime.now(UTC).isoformat(timespec="seconds")
            figures[part] = {"when": when, **run(args, work)}
    text = json.dumps(figures, indent=2)
    print(text)
    args.output.parent.mkdir(parents=True, exist_ok=True)
    previous = json.loads(args.output.read_text()) if args.output.exists() else {}
    args.output.write_text(json.dumps({**previous, **figures}, indent=2) + "\n")
    if args.work is None:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

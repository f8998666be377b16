"""The renderer's stage, old against new, in one run: CPU, cross-fade steps, memory, latency.

    .venv/bin/python -m tests.bench.bench_stage [--stages old,new] [--parts cpu,fade,memory,latency]
        [--old-commit 136a1ed] [--new PATH] [--transitions 100] [--output FILE]

Two stages: *old* is the QWidget stage, a copy of ``git archive <--old-commit>`` (136a1ed, the
commit before the rewrite to one Qt Quick scene); *new* is ``--new PATH`` (default: this
checkout), copied at the start (bench_memory.snapshot), so both are run from a tree nobody edits
meanwhile. Every ``pdn display`` runs on an Xvfb of its own at 1920x1080 and is measured from the
outside: the CPU time of its whole process tree (the Python process, which hosts Chromium's
browser, and every QtWebEngineProcess; /proc/PID/stat, reaped children included), and Xvfb's
own CPU beside it (not in the tree's figure). Parts, each for each stage:

- cpu, at rotation 0 and at ``[screen] rotation = 90``: CPU seconds per second of the tree with
  a still picture on screen (a cached 1920x1080 JPEG of a CDS, drawn natively), over
  ``--window`` s after ``--settle`` s; the same with a realistic signage page: signage_content's
  page (DOM, a departures table, an SVG chart, a clock ticking each second, a script allocating
  every second) made *calm* (its ticker stands, its canvas is drawn once a second), so what it
  costs does not bend to how busy the machine is; then ``--changes`` changes of such pages, one
  every ``--interval`` s: CPU from the first change's ``started`` to the last's (whole
  periods) minus the calm page's steady cost (the mean of a window before the changes and one
  after them) over that time, per change. Beside: the page as signage_content has it, with
  its ticker and canvas animated at 60 fps (a frame-rate-bound load: where a stage's cost per
  frame shows; not used for the cost of a change, as it gives way to it).
  Target: CPU per change rotated / unrotated < 1.25x.
- fade, at rotation 0 and 90: ``--fades`` cross-fades (``[screen] crossfade = 0.3``) from a
  pure red page to a pure blue one, recorded with ``ffmpeg -f x11grab -framerate 60`` for
  ``--fade-record`` s around the switch (the centre 640x360 of the screen, at its size, stored
  losslessly; grabbing the whole screen took ffmpeg 0.75 of a core, on the cores the display
  fades on, the centre less than half that), decoded to RGB24; a frame's colour is the median
  of 9 points; the distinct colours between the last red frame and the first blue one that
  are neither (6 levels of tolerance) are the fade's steps. Target: median >= 12 steps. The
  recording's frame rate and its longest gap within the fade are kept; a PNG of one
  in-between frame is saved beside the JSON. Beside the stages, the same recording of a bare
  Qt Quick scene (fade_ceiling.py: two full-screen pictures, and two rectangles) gives what
  this machine's GL can show at all.
- memory: PSS of the tree after ``--transitions`` changes of calm signage pages of 1 s (two
  requests queued ahead), against the floor: the median of three bare-view processes showing
  one page (bench_memory.measure_floor, on an Xvfb of its own, before the stages). Both run Qt
  from a private copy of PySide6 (memory_tools.private_qt). Target: <= 1.25x the floor.
- latency (before the memory part, on the same display): ``--switches`` times, from a still
  grey picture, POST /schedule of a red or blue page and read Xvfb's framebuffer (-fbdir,
  mapped; nothing asked of the X server) every millisecond: *first pixel* is the first sample
  whose centre left the grey (by more than 3 levels), *full* the first with all 13 points at
  the colour; the playback record's ``started`` (stamped by the renderer) is kept beside.
  Target (for a page): first pixel p95 < 300 ms.
  Blank frames (all 13 points near black or near white; bench_memory.ScreenWatch, every 5 ms)
  are counted during the memory transitions and these switches. Target: 0.

Prints a side-by-side table (stage columns, new/old, target, pass per stage) and writes
``bench-results/bench_stage.json``, after every session. A default run (both stages, all
parts) took 21 minutes on a 2-core machine; ``--parts fade --stages new`` takes about 1.
Needs Xvfb and ffmpeg (apt-get install -y xvfb ffmpeg). Network: 127.0.0.1 only.
"""

from __future__ import annotations

import argparse
import json
import operator
import os
import shutil
import signal
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import partial
from hashlib import sha256
from itertools import pairwise
from pathlib import Path
from typing import Any

from tests.bench.bench_memory import (
    ScreenWatch,
    low_memory_supported,
    measure_floor,
    memory_point,
    pooled_floor,
)
from tests.bench.fade_ceiling import ceiling
from tests.bench.memory_tools import Display, Framebuffer, XServer, private_qt, xvfb
from tests.bench.signage_content import ContentServer, Image, make_media
from tests.bench.stage_tools import (
    RGB,
    CpuTrace,
    LocalPages,
    Stage,
    decode_frames,
    fade_steps,
    frame_colour,
    make_still,
    near,
    new_stage,
    old_stage,
    on_base,
    record_screen,
    require_ffmpeg,
    shows,
    started_at,
    wait_record,
    write_png,
    xvfb_pid,
)
from tests.bench.stats import percentile

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "bench-results"
OLD_COMMIT = "136a1ed"
SIZE = (1920, 1080)
PARTS = ("cpu", "fade", "memory", "latency")
RED: RGB = (255, 0, 0)
BLUE: RGB = (0, 0, 255)
GREY: RGB = (128, 128, 128)
RED_SECONDS = 4.0  # the fade's first page; the second page comes after it
ROTATED_RATIO_TARGET = 1.25
FADE_STEPS_TARGET = 12
PSS_RATIO_TARGET = 1.25
FIRST_PIXEL_P95_TARGET_MS = 300.0


@dataclass
class Bench:
    """What every session shares."""

    args: argparse.Namespace
    workdir: Path
    content: ContentServer
    pages: LocalPages
    picture: Image  # the still of the cpu part
    grey: Image  # the base between the latency part's items


def display_config(bench: Bench, stage: Stage, rotation: int) -> str:
    config = f"[screen]\nrotation = {rotation}\ncrossfade = {bench.args.crossfade:g}\n"
    if low_memory_supported(stage.tree, bench.workdir):
        config += 'low-memory = "off"\n'  # the default profile, whatever the machine's RAM
    return config


@contextmanager
def running(
    bench: Bench, stage: Stage, rotation: int, name: str
) -> Iterator[tuple[XServer, Display]]:
    """An Xvfb of its own and ``pdn display`` of ``stage`` on it."""
    with xvfb(*SIZE) as server:
        config = display_config(bench, stage, rotation)
        # Made in two steps so that a display that never answers is still stopped.
        display = Display.__new__(Display)
        try:
            Display.__init__(
                display, server, stage.tree, bench.workdir, config, name, bench.args.qt
            )
        except BaseException:
            if hasattr(display, "process"):
                display.stop()
            raise
        print(
            f"[{name}] pdn display of {stage.source} ({stage.commit}), pid "
            f"{display.process.pid}, {config.strip().replace(chr(10), '; ')}",
            flush=True,
        )
        try:
            yield server, display
        finally:
            display.stop()


def show_base(bench: Bench, display: Display, image: Image) -> None:
    """The cached ``image`` as the schedule (lowest priority): what shows between requests."""
    display.schedule_cds(bench.content.image_schedule([image], 3600))
    wait_record(display, on_base, 120)


# -- cpu ---------------------------------------------------------------------------------------


def steady(display: Display, trace: CpuTrace, settle: float, window: float) -> dict[str, Any]:
    """CPU per second over ``window`` s, after ``settle`` s, and second by second. The playback
    record is read once a second, as during the page changes, so that cost is in both."""
    before = display.playback()
    time.sleep(settle)
    start = time.time()
    changed = False
    while time.time() < start + window:
        time.sleep(1)
        changed |= display.playback().get("sequence") != before.get("sequence")
    end = time.time()
    tree, xserver = trace.between(start, end)
    seconds = [trace.at(start + k)[0] for k in range(int(end - start) + 1)]
    return {
        "seconds": round(end - start, 2),
        "cpu_s_per_s": round(tree / (end - start), 4),
        "xvfb_cpu_s_per_s": round(xserver / (end - start), 4),
        "per_second": [round(b - a, 3) for a, b in pairwise(seconds)],
        "screen_changed": changed,  # an item change in the window spoils it
    }


def page_changes(bench: Bench, display: Display, trace: CpuTrace, first: int) -> dict[str, Any]:
    """The steady cost of a calm page (before: the page that precedes the changes; after: the
    last one), and ``--changes`` changes of calm pages, one every ``--interval`` s, between.
    CPU per change: the CPU from the first change's ``started`` to the last's (whole periods)
    minus the steady cost (the mean of before and after) over that time, per change."""
    args = bench.args
    hold = args.settle + args.window + 4
    urls = [bench.pages.calm(first + i) for i in range(args.changes + 2)]
    display.schedule_json(urls[0], hold)
    wait_record(display, shows(urls[0]), 60)
    before = steady(display, trace, args.settle, args.window)
    for url in urls[1:-1]:
        display.schedule_json(url, args.interval)
    display.schedule_json(urls[-1], hold)
    starts: dict[str, float] = {}
    deadline = time.monotonic() + len(urls) * args.interval * 3 + 60
    while urls[-1] not in starts:
        record = display.playback()
        if record.get("content-item") in urls[1:]:
            starts.setdefault(str(record["content-item"]), started_at(record))
        if time.monotonic() > deadline or not display.alive():
            raise RuntimeError(f"the page changes did not end; see {display.log_path}")
        time.sleep(1)
    after = steady(display, trace, args.settle, args.window)
    seen = [i for i, url in enumerate(urls) if url in starts]
    begin, end = starts[urls[seen[0]]], starts[urls[seen[-1]]]
    changes = seen[-1] - seen[0]
    if changes < 1:
        raise RuntimeError(f"too few page changes seen on the record: {starts}")
    tree, xserver = trace.between(begin, end)
    elapsed = end - begin
    rate = [(before[key] + after[key]) / 2 for key in ("cpu_s_per_s", "xvfb_cpu_s_per_s")]
    wait_record(display, on_base, 60)
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


def cpu_part(bench: Bench, display: Display, trace: CpuTrace, first: int) -> dict[str, Any]:
    args = bench.args
    still = steady(display, trace, args.settle, args.window)
    print(
        f"  still picture: {still['cpu_s_per_s']:.3f} CPU s/s (Xvfb "
        f"{still['xvfb_cpu_s_per_s']:.3f})",
        flush=True,
    )
    url = f"{bench.content.url}/page/{first}.html"
    display.schedule_json(url, args.settle + args.window + 4)
    wait_record(display, shows(url), 60)
    animated = steady(display, trace, args.settle, args.window)
    print(
        f"  signage page animated at 60 fps: {animated['cpu_s_per_s']:.3f} CPU s/s (Xvfb "
        f"{animated['xvfb_cpu_s_per_s']:.3f})",
        flush=True,
    )
    changes = page_changes(bench, display, trace, first + 1)
    print(
        f"  calm signage page: {changes['before']['cpu_s_per_s']:.3f} CPU s/s before the "
        f"changes, {changes['after']['cpu_s_per_s']:.3f} after; {changes['changes']} changes "
        f"every {changes['period_s']:.2f} s: {changes['cpu_s_per_change']:.3f} CPU s per "
        f"change beyond the page's own (Xvfb {changes['xvfb_cpu_s_per_change']:.3f})",
        flush=True,
    )
    return {"still": still, "animated": animated, "page": changes}


# -- fade --------------------------------------------------------------------------------------


def one_fade(
    bench: Bench, server: XServer, display: Display, tag: str, png: Path | None
) -> dict[str, Any]:
    """Red, then blue after RED_SECONDS, recorded around the switch."""
    args = bench.args
    red, blue = bench.pages.solid(RED, tag), bench.pages.solid(BLUE, tag)
    display.schedule_json(red, RED_SECONDS)
    record = wait_record(display, shows(red), 60, poll=0.05)
    display.schedule_json(blue, 1.5)
    # The switch is due RED_SECONDS after red's start; ffmpeg takes ~0.2 s to its first frame.
    time.sleep(max(0.0, started_at(record) + RED_SECONDS - args.fade_lead - 0.2 - time.time()))
    path = bench.workdir / f"fade-{tag}.mkv"
    recording = record_screen(server, path, args.fade_record, SIZE)
    frames = decode_frames(recording)
    colours = [frame_colour(frame, recording.width, recording.height) for frame in frames]
    found = fade_steps([colour for colour, _ in colours], RED, BLUE)
    found["torn_frames"] = sum(not agree for _, agree in colours)
    fps, gap, times = recording.fps(), recording.longest_gap_ms(), recording.frame_times
    found["recorded_fps"] = round(fps, 1) if fps else None
    found["recorded_longest_gap_ms"] = round(gap, 1) if gap else None
    if found["complete"] and len(times) == len(frames):
        # The fade as recorded: from the last red frame to the first blue one, and the
        # longest time the recording did not look in between (a step could hide there).
        fade = times[found["last_start_frame"] : found["first_end_frame"] + 1]
        found["fade_ms"] = round((fade[-1] - fade[0]) * 1000)
        found["gap_in_fade_ms"] = round(max(b - a for a, b in pairwise(fade)) * 1000)
    if png is not None and found["complete"] and found["fade_frames"]:
        middle = (found["last_start_frame"] + found["first_end_frame"]) // 2
        write_png(png, frames[middle], recording.width, recording.height)
        found["png"] = str(png)
    path.unlink()
    wait_record(display, on_base, 60)
    return found


def fade_part(bench: Bench, server: XServer, display: Display, name: str) -> dict[str, Any]:
    fades: list[dict[str, Any]] = []
    tries = 0
    while (
        len([f for f in fades if f["complete"]]) < bench.args.fades and tries < 2 * bench.args.fades
    ):
        tries += 1
        png = bench.args.output.parent / f"bench_stage-{name}-fade.png" if tries == 1 else None
        found = one_fade(bench, server, display, f"{name}-{tries}", png)
        fades.append(found)
        print(
            f"  fade {tries}: {found['steps']} steps "
            f"{' '.join(found['colours'])} ({found['frames']} frames at "
            f"{found['recorded_fps']} fps, "
            f"fade {found.get('fade_ms')} ms, longest gap in it {found.get('gap_in_fade_ms')} ms"
            f"{'' if found['complete'] else '; the recording missed part of it'})",
            flush=True,
        )
    steps = sorted(f["steps"] for f in fades if f["complete"])
    return {
        "fades": fades,
        "steps": steps,
        "median_steps": percentile([float(s) for s in steps], 0.5) if steps else None,
    }


def view_session(bench: Bench, stage: Stage, rotation: int, parts: list[str]) -> dict[str, Any]:
    """One display at ``rotation``: the fade part, then the cpu part."""
    name = f"{stage.name}-r{rotation}"
    result: dict[str, Any] = {"rotation": rotation}
    with running(bench, stage, rotation, name) as (server, display):
        trace = CpuTrace(display.process.pid, xvfb_pid(server))
        trace.start()
        try:
            show_base(bench, display, bench.picture)
            if "fade" in parts:  # first: nothing that played before may weigh on it
                result["fade"] = fade_part(bench, server, display, name)
            if "cpu" in parts:
                result["cpu"] = cpu_part(bench, display, trace, 1000 + 100 * rotation)
        finally:
            trace.stop()
    return result


# -- memory and latency ------------------------------------------------------------------------


def memory_part(bench: Bench, display: Display, watch: ScreenWatch) -> dict[str, Any]:
    """``--transitions`` changes of calm signage pages of 1 s, two queued ahead; PSS points
    every 50 transitions (median of 5 readings 0.4 s apart, taken while the pages go on)."""
    args = bench.args
    pending: list[str] = []
    sent = 0
    sequence = int(display.playback().get("sequence") or 0)
    first = sequence
    points: list[dict[str, Any]] = []
    sampler: threading.Thread | None = None
    started = time.monotonic()
    deadline = started + args.transitions * 10 + 120
    marks = sorted({*range(50, args.transitions, 50), args.transitions})

    def take_point(label: int) -> None:
        points.append(memory_point(display.process.pid, 5, 0.4, label, started))

    while True:
        record = display.playback()
        if int(record.get("sequence") or 0) != sequence:
            sequence = int(record.get("sequence") or 0)
            watch.context = str(record.get("content-item"))
            if record.get("content-item") in pending:
                del pending[: pending.index(str(record["content-item"])) + 1]
        done = sequence - first
        if marks and done >= marks[0] and (sampler is None or not sampler.is_alive()):
            sampler = threading.Thread(target=take_point, args=(marks.pop(0),), daemon=True)
            sampler.start()
        if not marks and sampler is not None and not sampler.is_alive():
            break
        if time.monotonic() > deadline or not display.alive():
            raise RuntimeError(f"the memory part did not finish; see {display.log_path}")
        if len(pending) < 2:
            url = bench.pages.calm(5000 + sent)
            display.schedule_json(url, 1)
            pending.append(url)
            sent += 1
        time.sleep(0.05)
    last = points[-1]
    print(
        f"  {last['transitions']} transitions in {time.monotonic() - started:.0f} s: PSS "
        f"{last['pss_mb']:.0f} MB, RSS {last['rss_mb']:.0f} MB",
        flush=True,
    )
    wait_record(display, on_base, 60)
    return {
        "transitions": last["transitions"],
        "seconds": round(time.monotonic() - started, 1),
        "pss_mb": last["pss_mb"],
        "rss_mb": last["rss_mb"],
        "points": points,
    }


def latency_part(bench: Bench, display: Display, framebuffer: Framebuffer) -> dict[str, Any]:
    """From the grey still, a red or blue page: ms from POST to its first pixel and to all of
    it, read on the framebuffer."""
    firsts: list[float] = []
    fulls: list[float] = []
    swaps: list[float] = []
    missed = 0
    for n in range(bench.args.switches):
        colour, url = (RED, BLUE)[n % 2], bench.pages.solid((RED, BLUE)[n % 2], f"s{n}")
        sent, sent_wall = time.monotonic(), time.time()
        display.schedule_json(url, 2)  # long enough to read its record after it is in full
        first = full = None
        while time.monotonic() < sent + 10 and full is None:
            pixels = framebuffer.pixels()
            now = time.monotonic()
            if first is None and not near(pixels[4], GREY, 3):
                first = now - sent
            if first is not None and all(near(p, colour, 12) for p in pixels):
                full = now - sent
            time.sleep(0.001)
        if first is None or full is None:
            missed += 1
        else:
            firsts.append(first * 1000)
            fulls.append(full * 1000)
        # The renderer's own word: the record's start is stamped when it saw the pixels.
        record = wait_record(display, shows(url), 30, poll=0.05)
        swaps.append((started_at(record) - sent_wall) * 1000)
        wait_record(display, on_base, 30)
        deadline = time.monotonic() + 10
        while not all(near(p, GREY, 12) for p in framebuffer.pixels()):
            if time.monotonic() > deadline:
                break
            time.sleep(0.01)
        time.sleep(0.5)
    result = {
        "switches": bench.args.switches,
        "never_in_full": missed,
        "first_pixel_p50_ms": round(percentile(firsts, 0.5), 1),
        "first_pixel_p95_ms": round(percentile(firsts, 0.95), 1),
        "full_p50_ms": round(percentile(fulls, 0.5), 1),
        "full_p95_ms": round(percentile(fulls, 0.95), 1),
        "record_started_p50_ms": round(percentile(swaps, 0.5), 1),
        "record_started_p95_ms": round(percentile(swaps, 0.95), 1),
    }
    print(
        f"  schedule to first pixel p50/p95 {result['first_pixel_p50_ms']}/"
        f"{result['first_pixel_p95_ms']} ms, in full {result['full_p50_ms']}/"
        f"{result['full_p95_ms']} ms; the record's start {result['record_started_p50_ms']}/"
        f"{result['record_started_p95_ms']} ms",
        flush=True,
    )
    return result


def play_session(bench: Bench, stage: Stage, parts: list[str]) -> dict[str, Any]:
    """One display, unrotated: the latency part, then the memory part; blank frames in both."""
    result: dict[str, Any] = {}
    with running(bench, stage, 0, f"{stage.name}-play") as (server, display):
        show_base(bench, display, bench.grey)
        time.sleep(2)
        framebuffer = Framebuffer(server.framebuffer)
        watch = ScreenWatch(framebuffer, 0.005)
        watch.start()
        try:
            if "latency" in parts:  # first, on a display that has not been busy
                result["latency"] = latency_part(bench, display, framebuffer)
            if "memory" in parts:
                result["memory"] = memory_part(bench, display, watch)
        finally:
            watch.stop()
            framebuffer.close()
        result["blank"] = watch.summary()
        print(
            f"  blank frames: {result['blank']['blank_frames']} in "
            f"{result['blank']['samples']} samples",
            flush=True,
        )
    return result


def floor_part(bench: Bench) -> dict[str, Any]:
    """The bare-view floor of the memory part, as bench_memory measures it."""
    with xvfb(*SIZE) as server:
        floors = [
            measure_floor(server, bench.content, bench.args, bench.workdir)
            for _ in range(bench.args.floor_processes)
        ]
    floor = pooled_floor(floors)
    print(
        f"floor: PSS {floor['pss_mb']:.0f} MB (median of {len(floors)} bare views: "
        f"{floor['per_process_pss_mb']})",
        flush=True,
    )
    return floor


# -- the table ---------------------------------------------------------------------------------


def dig(data: Any, *keys: str) -> Any:
    for key in keys:
        if not isinstance(data, dict) or key not in data:
            return None
        data = data[key]
    return data


def ratio(top: Any, bottom: Any) -> float | None:
    if not isinstance(top, int | float) or not isinstance(bottom, int | float):
        return None
    if top <= 0 or bottom <= 0:  # a ratio of a figure at or below nothing means nothing
        return None
    return round(float(top) / float(bottom), 3)


CHECKS: dict[str, Callable[[float, float], bool]] = {
    "<": operator.lt,
    "<=": operator.le,
    ">=": operator.ge,
    "==": operator.eq,
}


@dataclass(frozen=True)
class Row:
    label: str
    path: tuple[str, ...]  # into one stage's results
    digits: int
    target: tuple[str, float] | None = None  # (one of CHECKS, the value)

    def passes(self, value: Any) -> bool | None:
        if self.target is None or not isinstance(value, int | float):
            return None
        return CHECKS[self.target[0]](float(value), self.target[1])


def derive(found: dict[str, Any], floor: dict[str, Any] | None) -> dict[str, Any]:
    """The figures made of two others: rotated over unrotated, PSS over the floor."""
    per_change = ("cpu", "page", "cpu_s_per_change")
    derived = {
        "rotated_ratio": ratio(dig(found, "r90", *per_change), dig(found, "r0", *per_change)),
        "pss_ratio": ratio(dig(found, "play", "memory", "pss_mb"), dig(floor, "pss_mb")),
        "floor_pss_mb": dig(floor, "pss_mb") if dig(found, "play", "memory") else None,
    }
    return {**found, "derived": derived}


def table_rows(args: argparse.Namespace) -> list[Row]:
    rows: list[Row] = []
    for rotation in (0, 90):
        turn, cpu = f"{rotation}°", (f"r{rotation}", "cpu")
        rows += [
            Row(f"still picture, CPU s/s, {turn}", (*cpu, "still", "cpu_s_per_s"), 3),
            Row(f"signage page, CPU s/s, {turn}", (*cpu, "page", "cpu_s_per_s"), 3),
            Row(f"CPU s per page change, {turn}", (*cpu, "page", "cpu_s_per_change"), 3),
            Row(f"animated page (60 fps), CPU s/s, {turn}", (*cpu, "animated", "cpu_s_per_s"), 3),
            Row(f"  Xvfb: still CPU s/s, {turn}", (*cpu, "still", "xvfb_cpu_s_per_s"), 3),
            Row(f"  Xvfb: page CPU s/s, {turn}", (*cpu, "page", "xvfb_cpu_s_per_s"), 3),
            Row(f"  Xvfb: CPU s per change, {turn}", (*cpu, "page", "xvfb_cpu_s_per_change"), 3),
            Row(f"  Xvfb: animated CPU s/s, {turn}", (*cpu, "animated", "xvfb_cpu_s_per_s"), 3),
        ]
    latency = ("play", "latency")
    return [
        *rows,
        Row("CPU per change, rotated / unrotated", ("derived", "rotated_ratio"), 2,
            ("<", ROTATED_RATIO_TARGET)),
        Row("fade steps (median), 0°", ("r0", "fade", "median_steps"), 0,
            (">=", FADE_STEPS_TARGET)),
        Row("fade steps (median), 90°", ("r90", "fade", "median_steps"), 0,
            (">=", FADE_STEPS_TARGET)),
        Row(f"PSS MB after {args.transitions} transitions", ("play", "memory", "pss_mb"), 0),
        Row("  floor: bare view PSS MB", ("derived", "floor_pss_mb"), 0),
        Row("PSS / floor", ("derived", "pss_ratio"), 2, ("<=", PSS_RATIO_TARGET)),
        Row("schedule to first pixel p50 ms", (*latency, "first_pixel_p50_ms"), 0),
        Row("schedule to first pixel p95 ms", (*latency, "first_pixel_p95_ms"), 0,
            ("<", FIRST_PIXEL_P95_TARGET_MS)),
        Row("schedule to item in full p50 ms", (*latency, "full_p50_ms"), 0),
        Row("schedule to item in full p95 ms", (*latency, "full_p95_ms"), 0),
        Row("blank frames (memory, latency parts)", ("play", "blank", "blank_frames"), 0,
            ("==", 0)),
    ]  # fmt: skip


def table(args: argparse.Namespace, results: dict[str, Any]) -> list[dict[str, Any]]:
    """The rows as data (for the JSON), and printed: one column per stage, new/old, the
    target, and pass or fail per stage."""
    stages = {
        name: derive(found, results.get("floor")) for name, found in results["stages"].items()
    }
    out: list[dict[str, Any]] = []
    print(
        f"\n{'':<40}"
        + "".join(f"{name:>10}" for name in stages)
        + f"{'new/old':>9}  {'target':<8} pass ({'/'.join(stages)})"
    )
    for row in table_rows(args):
        values = {name: dig(found, *row.path) for name, found in stages.items()}
        if all(value is None for value in values.values()):
            continue
        cells = ["-" if v is None else f"{v:.{row.digits}f}" for v in values.values()]
        passes = {name: row.passes(value) for name, value in values.items()}
        target = "" if row.target is None else f"{row.target[0]} {row.target[1]:g}"
        change = ratio(values.get("new"), values.get("old"))
        verdict = "/".join("-" if p is None else "PASS" if p else "FAIL" for p in passes.values())
        print(
            f"{row.label:<40}"
            + "".join(f"{cell:>10}" for cell in cells)
            + f"{'' if change is None else f'{change:.2f}x':>9}  {target:<8} "
            + (verdict if row.target else "")
        )
        out.append(
            {
                "metric": row.label,
                "values": values,
                "new_over_old": change,
                "target": target or None,
                "pass": passes if row.target else None,
            }
        )
    return out


# -- main --------------------------------------------------------------------------------------


def arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    add = parser.add_argument
    add("--stages", default="old,new", help="which stages, comma-separated: old, new")
    add("--parts", default=",".join(PARTS), help=f"which parts: {', '.join(PARTS)}")
    add("--old-commit", default=OLD_COMMIT, help="the old stage's commit (git archive)")
    add("--new", type=Path, default=ROOT, help="the new stage's checkout (copied at the start)")
    add("--rotations", default="0,90", help="rotations of the cpu and fade parts")
    add("--crossfade", type=float, default=0.3, help="[screen] crossfade, seconds")
    add("--settle", type=float, default=5.0, help="seconds before a steady CPU window")
    add("--window", type=float, default=15.0, help="seconds of a steady CPU window")
    add("--changes", type=int, default=20, help="page changes of the cpu part")
    add("--interval", type=float, default=3.0, help="seconds between those page changes")
    add("--fades", type=int, default=4, help="recorded cross-fades per rotation")
    add("--fade-record", type=float, default=1.6, help="seconds recorded around a switch")
    add("--fade-lead", type=float, default=0.6, help="of which before the switch is due")
    add("--transitions", type=int, default=100, help="of the memory part (500: a longer run)")
    add("--switches", type=int, default=20, help="of the latency part")
    add("--floor-processes", type=int, default=3)
    add("--floor-settle", type=float, default=30.0, help="seconds before the floor is read")
    add("--shared-qt", action="store_true", help="the venv's Qt, not a private copy")
    add("--output", type=Path, default=RESULTS / "bench_stage.json")
    args = parser.parse_args()
    args.samples, args.spacing = 5, 0.4  # what bench_memory.measure_floor reads
    return args


def main() -> int:
    args = arguments()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # finally clauses still run
    signal.signal(signal.SIGINT, signal.default_int_handler)
    parts = [part for part in args.parts.split(",") if part]
    names = [name for name in args.stages.split(",") if name]
    rotations = [int(value) for value in args.rotations.split(",") if value]
    if set(parts) - set(PARTS) or set(names) - {"old", "new"} or not parts or not names:
        raise SystemExit(f"--parts is a list of {', '.join(PARTS)}; --stages of old, new")
    require_ffmpeg()
    begun = time.monotonic()
    workdir = Path(tempfile.mkdtemp(prefix="pdn-bench-stage-"))
    args.qt = None if args.shared_qt else private_qt(workdir / "qt")
    media = RESULTS / "bench_memory_media"
    images, _ = make_media(media)
    grey_path = make_still(media, "grey-1080p.png", GREY)
    grey = Image(grey_path.name, "image/png", sha256(grey_path.read_bytes()).hexdigest())
    bench = Bench(
        args,
        workdir,
        ContentServer(media),
        LocalPages(),
        next(image for image in images if image.name == "bars.jpg"),
        grey,
    )
    stages = [
        old_stage(args.old_commit, workdir / "old")
        if name == "old"
        else new_stage(args.new.resolve(), workdir / "new")
        for name in names
    ]
    results: dict[str, Any] = {
        "stages": {stage.name: {} for stage in stages},
        "sources": {
            s.name: {"source": s.source, "commit": s.commit, "ran_from": str(s.tree)}
            for s in stages
        },
        "parts": parts,
        "rotations": rotations,
        "options": {key: str(value) for key, value in vars(args).items()},
        "cpus": os.cpu_count(),
        "load_average_start": list(os.getloadavg()),
        "workdir": str(workdir),
    }
    args.output.parent.mkdir(parents=True, exist_ok=True)

    def save() -> None:
        results["elapsed_s"] = round(time.monotonic() - begun, 1)
        args.output.write_text(json.dumps(results, indent=1) + "\n")

    def session(stage: Stage, key: str, run: Callable[[], dict[str, Any]]) -> None:
        print(f"== {stage.name} stage ({stage.commit}): {key}", flush=True)
        try:
            results["stages"][stage.name][key] = run()
        except (Exception, SystemExit) as error:  # one failed session must not end the run
            if isinstance(error, SystemExit) and error.code == 143:
                raise
            print(f"  FAILED: {error}", flush=True)
            results["stages"][stage.name][key] = {"error": str(error)}
        save()

    print(
        f"bench_stage: stages {', '.join(f'{s.name} = {s.source} ({s.commit})' for s in stages)}"
        f"; parts {', '.join(parts)}; logs in {workdir}",
        flush=True,
    )
    try:
        if "memory" in parts:
            results["floor"] = floor_part(bench)
            save()
        view_parts = [part for part in parts if part in ("cpu", "fade")]
        for rotation in rotations if view_parts else []:
            for stage in stages:
                run = partial(view_session, bench, stage, rotation, view_parts)
                session(stage, f"r{rotation}", run)
        if "fade" in parts:  # the machine's own limit, for the fade rows (no stage in it)
            print("== the fade's ceiling on this machine", flush=True)
            results["fade_ceiling"] = ceiling(
                workdir / "ceiling", args.fades, round(args.crossfade * 1000)
            )
            save()
        play_parts = [part for part in parts if part in ("memory", "latency")]
        for stage in stages if play_parts else []:
            session(stage, "play", partial(play_session, bench, stage, play_parts))
    finally:
        bench.content.stop()
        bench.pages.stop()
        if args.qt is not None:
            shutil.rmtree(args.qt.parent, ignore_errors=True)
    results["table"] = table(args, results)
    for kind, found in results.get("fade_ceiling", {}).items():
        if isinstance(found, dict):
            label = f"  ceiling: bare Qt Quick, two {kind}"
            print(f"{label:<40}{found['median_steps']!s:>10}  (no stage: what this GL can show)")
    save()
    print(
        f"\n{results['elapsed_s'] / 60:.1f} minutes; written to {args.output}; logs in {workdir}",
        flush=True,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())

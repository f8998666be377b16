"""The renderer's stage against a bare Qt Quick scene, in one run: CPU, cross-fade steps,
memory, latency.

    .venv/bin/python -m tests.bench.bench_stage [--parts cpu,fade,memory,latency]
        [--checkout PATH] [--transitions 100] [--output FILE]

Two columns. *stage* is ``pdn display`` of ``--checkout`` (default: this checkout), copied at
the start (bench_memory.snapshot), so it runs from a tree nobody edits meanwhile. *bare* is the
baseline, measured in the same run on the same content: a bare Qt Quick scene with one picture
and one web view and nothing else (bare_scene.py), told what to show on its standard input and
switching at once; for the fade, the same recording of a bare scene's fade (fade_ceiling.py);
for memory, the bare-view floor (bench_memory.measure_floor). Each stage figure is printed with
its ratio to the bare one. Every process runs on an Xvfb of its own at 1920x1080 and is
measured from the outside: the CPU time of its whole process tree (the Python process, which
hosts Chromium's browser, and every QtWebEngineProcess; /proc/PID/stat, reaped children
included), and Xvfb's own CPU beside it (not in the tree's figure). Parts:

- cpu, at rotation 0 and at ``[screen] rotation = 90``: CPU seconds per second of the tree with
  a still picture on screen (a cached 1920x1080 JPEG of a CDS, drawn natively), over
  ``--still-window`` s after ``--settle`` s, and its wake-ups per second: every thread's
  context switches over the window (wakeups.py; a count, which the machine's load does not
  bend as it bends a nearly idle process's CPU time), the threads that woke most printed.
  Target: under 1 % of a core. The display's record is read at the window's two ends only
  (the other windows read it every second). Then, over ``--window`` s, the same with a
  realistic signage page: signage_content's
  page (DOM, a departures table, an SVG chart, a clock ticking each second, a script allocating
  every second) made *calm* (its ticker stands, its canvas is drawn once a second), so what it
  costs does not bend to how busy the machine is; then ``--changes`` changes of such pages, one
  every ``--interval`` s: CPU from the first change's ``started`` to the last's (whole
  periods) minus the calm page's steady cost (the mean of a window before the changes and one
  after them) over that time, per change. Beside: the page as signage_content has it, with
  its ticker and canvas animated at 60 fps (a frame-rate-bound load: where a stage's cost per
  frame shows; not used for the cost of a change, as it gives way to it).
  The bare scene is measured the same way at the same rotation: the still, the calm page,
  and the same changes, each sent on its input at the same interval.
  Target: CPU per change rotated / unrotated < 1.25x.
- fade, at rotation 0 and 90: ``--fades`` cross-fades (``[screen] crossfade = 0.3``) from a
  pure red page to a pure blue one, recorded with ``ffmpeg -f x11grab -framerate 60`` for
  ``--fade-record`` s around the switch (the centre 640x360 of the screen, at its size, stored
  losslessly; grabbing the whole screen took ffmpeg 0.75 of a core, on the cores the display
  fades on, the centre less than half that), decoded to RGB24; a frame's colour is the median
  of 9 points; the distinct colours between the last red frame and the first blue one that
  are neither (6 levels of tolerance) are the fade's steps. Target: the median within 2 steps
  of the bare scene's fade of two pictures in the same run (and, on a GPU, >= 12 steps). The
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
  the colour; the playback record's ``started`` (stamped by the renderer) is kept beside. The
  bare scene gets the same switches from the same grey picture on its input: its p50 and p95
  are what a Qt Quick scene needs to put that page on the screen at all.
  Target for a page: first pixel p95 < 300 ms.
  Blank frames (all 13 points near black or near white; bench_memory.ScreenWatch, every 5 ms)
  are counted during the memory transitions and these switches. Target: 0.

Prints a table (stage, bare, stage / bare, target, pass) and writes
``bench-results/bench_stage.json`` (``--output``), after every session. The shortest run:
``--parts latency --switches 2``.
Needs Xvfb and ffmpeg (apt-get install -y xvfb ffmpeg). Network: 127.0.0.1 only.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import partial
from hashlib import sha256
from itertools import pairwise
from pathlib import Path
from typing import Any

from tests.bench.bare_scene import BareScene, wait_until_alive
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
from tests.bench.stage_measure import (
    BLUE,
    GREY,
    RED,
    Bench,
    Latencies,
    back_to_grey,
    change_cost,
    cpu_part,
    print_latency,
    steady,
    switches,
    to_screen,
)
from tests.bench.stage_table import dig, table
from tests.bench.stage_tools import (
    CpuTrace,
    LocalPages,
    Stage,
    decode_frames,
    fade_steps,
    frame_colour,
    make_still,
    new_stage,
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
SIZE = (1920, 1080)
PARTS = ("cpu", "fade", "memory", "latency")
COLUMNS = ("stage", "bare")
RED_SECONDS = 4.0  # the fade's first page; the second page comes after it


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
        # A display that never answers is stopped by wait_ready.
        display = Display(server, stage.tree, bench.workdir, config, name, bench.args.qt)
        print(
            f"[{name}] pdn display of {stage.source} ({stage.commit}), pid "
            f"{display.pid}, {config.strip().replace(chr(10), '; ')}",
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


def display_sequence(display: Display) -> Callable[[], object]:
    """What says the display's screen changed: its playback record's sequence."""
    return lambda: display.playback().get("sequence")


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
    before = steady(trace, args.settle, args.window, display_sequence(display))
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
    after = steady(trace, args.settle, args.window, display_sequence(display))
    wait_record(display, on_base, 60)
    return change_cost(trace, urls, starts, before, after)


def bare_page_changes(
    bench: Bench, scene: BareScene, trace: CpuTrace, first: int
) -> dict[str, Any]:
    """:func:`page_changes` of the bare scene: the same pages, each sent on its input at the
    same interval; a change starts when it is sent (the scene has no record to read)."""
    args = bench.args
    urls = [bench.pages.calm(first + i) for i in range(args.changes + 2)]
    scene.show(urls[0])
    before = steady(trace, args.settle, args.window, None)
    starts: dict[str, float] = {}
    for url in urls[1:]:
        starts[url] = time.time()
        scene.show(url)
        time.sleep(args.interval)
    after = steady(trace, args.settle, args.window, None)
    scene.show(bench.picture_path)
    return change_cost(trace, urls, starts, before, after)


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
        trace = CpuTrace(display.pid, xvfb_pid(server))
        trace.start()
        try:
            show_base(bench, display, bench.picture)
            if "fade" in parts:  # first: nothing that played before may weigh on it
                result["fade"] = fade_part(bench, server, display, name)
            if "cpu" in parts:
                hold = bench.args.settle + bench.args.window + 4

                def show(url: str) -> None:
                    display.schedule_json(url, hold)
                    wait_record(display, shows(url), 60)

                first = 1000 + 100 * rotation
                result["cpu"] = cpu_part(
                    bench,
                    trace,
                    first,
                    show,
                    partial(page_changes, bench, display, trace, first + 1),
                    display_sequence(display),
                )
        finally:
            trace.stop()
    return result


@contextmanager
def bare_running(bench: Bench, rotation: int, name: str) -> Iterator[tuple[XServer, BareScene]]:
    """An Xvfb of its own and the bare Qt Quick scene on it, showing the still picture."""
    with xvfb(*SIZE) as server:
        scene = BareScene(
            server, bench.workdir / name, SIZE, rotation, bench.workdir / f"{name}.log"
        )
        print(f"[{name}] bare Qt Quick scene, pid {scene.process.pid}", flush=True)
        try:
            scene.show(bench.picture_path)
            wait_until_alive(scene, 5)
            yield server, scene
        finally:
            scene.stop()


def bare_view_session(bench: Bench, rotation: int) -> dict[str, Any]:
    """The cpu part of the bare scene at ``rotation``; a page is on its screen once the
    scene has had ``--bare-load`` s for it."""
    name = f"bare-r{rotation}"
    with bare_running(bench, rotation, name) as (server, scene):
        trace = CpuTrace(scene.process.pid, xvfb_pid(server))
        trace.start()

        def show(url: str) -> None:
            scene.show(url)
            time.sleep(bench.args.bare_load)

        first = 1000 + 100 * rotation
        try:
            found = cpu_part(
                bench,
                trace,
                first,
                show,
                partial(bare_page_changes, bench, scene, trace, first + 1),
                None,
            )
        finally:
            trace.stop()
    return {"rotation": rotation, "cpu": found}


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
        points.append(memory_point(display.pid, 5, 0.4, label, started))

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
    latencies = Latencies()
    swaps: list[float] = []
    for colour, url in switches(bench):
        sent, sent_wall = time.monotonic(), time.time()
        display.schedule_json(url, 2)  # long enough to read its record after it is in full
        latencies.add(*to_screen(framebuffer, colour, sent))
        # The renderer's own word: the record's start is stamped when it saw the pixels.
        record = wait_record(display, shows(url), 30, poll=0.05)
        swaps.append((started_at(record) - sent_wall) * 1000)
        wait_record(display, on_base, 30)
        back_to_grey(framebuffer)
    result = {
        **latencies.figures(),
        "record_started_p50_ms": round(percentile(swaps, 0.5), 1),
        "record_started_p95_ms": round(percentile(swaps, 0.95), 1),
    }
    print_latency(result)
    return result


def bare_latency_part(bench: Bench, scene: BareScene, framebuffer: Framebuffer) -> dict[str, Any]:
    """The same switches on the bare scene: each page sent on its input, then the grey."""
    latencies = Latencies()
    for colour, url in switches(bench):
        sent = time.monotonic()
        scene.show(url)
        latencies.add(*to_screen(framebuffer, colour, sent))
        time.sleep(max(0.0, sent + 2 - time.monotonic()))  # as long as the display's item
        scene.show(bench.grey_path)
        back_to_grey(framebuffer)
    result = latencies.figures()
    print_latency(result)
    return result


def bare_play_session(bench: Bench) -> dict[str, Any]:
    """The latency part of the bare scene, unrotated, from the same grey picture."""
    with bare_running(bench, 0, "bare-play") as (server, scene):
        scene.show(bench.grey_path)
        time.sleep(2)
        framebuffer = Framebuffer(server.framebuffer)
        try:
            return {"latency": bare_latency_part(bench, scene, framebuffer)}
        finally:
            framebuffer.close()


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


# -- main --------------------------------------------------------------------------------------


def arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    add = parser.add_argument
    add("--parts", default=",".join(PARTS), help=f"which parts: {', '.join(PARTS)}")
    add("--checkout", type=Path, default=ROOT, help="the stage's checkout (copied at the start)")
    add("--rotations", default="0,90", help="rotations of the cpu and fade parts")
    add("--crossfade", type=float, default=0.3, help="[screen] crossfade, seconds")
    add("--settle", type=float, default=5.0, help="seconds before a steady CPU window")
    add("--window", type=float, default=15.0, help="seconds of a steady CPU window")
    add("--still-window", type=float, default=60.0, help="... of the still picture's")
    add("--changes", type=int, default=20, help="page changes of the cpu part")
    add("--interval", type=float, default=3.0, help="seconds between those page changes")
    add("--bare-load", type=float, default=3.0, help="seconds the bare scene gets for a page")
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
    rotations = [int(value) for value in args.rotations.split(",") if value]
    if set(parts) - set(PARTS) or not parts:
        raise SystemExit(f"--parts is a list of {', '.join(PARTS)}")
    require_ffmpeg()
    begun = time.monotonic()
    workdir = Path(tempfile.mkdtemp(prefix="pdn-bench-stage-"))
    args.qt = None if args.shared_qt else private_qt(workdir / "qt")
    media = RESULTS / "bench_memory_media"
    images, _ = make_media(media)
    grey_path = make_still(media, "grey-1080p.png", GREY)
    grey = Image(grey_path.name, "image/png", sha256(grey_path.read_bytes()).hexdigest())
    picture = next(image for image in images if image.name == "bars.jpg")
    bench = Bench(
        args,
        workdir,
        ContentServer(media),
        LocalPages(),
        picture,
        media / picture.name,
        grey,
        grey_path,
    )
    stage = new_stage(args.checkout.resolve(), workdir / "stage")
    results: dict[str, Any] = {
        "stage": {},
        "bare": {},
        "source": {"source": stage.source, "commit": stage.commit, "ran_from": str(stage.tree)},
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

    def session(column: str, key: str, run: Callable[[], dict[str, Any]]) -> None:
        print(f"== {column}: {key}", flush=True)
        try:
            results[column][key] = run()
        except (Exception, SystemExit) as error:  # one failed session must not end the run
            if isinstance(error, SystemExit) and error.code == 143:
                raise
            print(f"  FAILED: {error}", flush=True)
            results[column][key] = {"error": str(error)}
        save()

    print(
        f"bench_stage: the stage of {stage.source} ({stage.commit}) against a bare Qt Quick "
        f"scene; parts {', '.join(parts)}; logs in {workdir}",
        flush=True,
    )
    try:
        if "memory" in parts:
            results["floor"] = floor_part(bench)
            save()
        view_parts = [part for part in parts if part in ("cpu", "fade")]
        for rotation in rotations if view_parts else []:
            session(
                "stage", f"r{rotation}", partial(view_session, bench, stage, rotation, view_parts)
            )
            if "cpu" in parts:
                session("bare", f"r{rotation}", partial(bare_view_session, bench, rotation))
        if "fade" in parts:  # the bare scene's fade, for the fade rows
            print("== bare: the fade of two pictures and of two rectangles", flush=True)
            results["fade_ceiling"] = ceiling(
                workdir / "ceiling", args.fades, round(args.crossfade * 1000)
            )
            save()
        play_parts = [part for part in parts if part in ("memory", "latency")]
        if play_parts:
            session("stage", "play", partial(play_session, bench, stage, play_parts))
        if "latency" in parts:
            session("bare", "play", partial(bare_play_session, bench))
    finally:
        bench.content.stop()
        bench.pages.stop()
        if args.qt is not None:
            shutil.rmtree(args.qt.parent, ignore_errors=True)
    results["table"] = table(args, results)
    rectangles = dig(results, "fade_ceiling", "rectangles", "median_steps")
    if rectangles is not None:
        label = "  bare: two rectangles' fade steps"
        print(f"{label:<40}{'':>10}{rectangles!s:>10}  (what this GL shows with no texture)")
    save()
    print(
        f"\n{results['elapsed_s'] / 60:.1f} minutes; written to {args.output}; logs in {workdir}",
        flush=True,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Memory of a real display over thousands of transitions, against the floor of one bare view.

    .venv/bin/python -m tests.bench.bench_memory [--transitions 2000] [--profile both]
        [--item-seconds 1] [--checkout PATH] [--plot-also OTHER.json]

The memory benchmark. On an Xvfb of its own (1920x1080, no window manager) it first measures the
*floor*: one bare ``QWebEngineView`` in a process of its own, fullscreen, showing one of the
signage pages below. Then, per profile, a real ``pdn display`` (of this checkout or of
``--checkout PATH``, run from a copy of its packages taken at the start unless ``--live``, with
``[screen] low-memory = "off"`` or ``"on"`` in its config file) plays the mix: signage pages
(DOM and script that allocates, every URL a new document) and videos (WebM VP8/VP9 and MP4
H.264/HEVC, made by ffmpeg) sent as queued JSON requests of ``--item-seconds`` each, two queued
ahead of the screen, and, whenever the driver lets the queue run dry, the cached 1920x1080
JPEG/PNG images of a CDS (hashes given, so the display's cache downloads and verifies them;
lowest priority, so they fill the moments between requests). The mix is pages 60%, images 20%,
videos 20%; ``--mix video`` makes it videos 70%, pages 20%, images 10%. A
transition is one change of the playback record (``sequence``), whatever its origin.

Memory: every ``--sample-every`` transitions, a point is the median of ``--samples`` readings
``--spacing`` seconds apart (taken while the display goes on playing) of the PSS and RSS of the
display's whole process tree (/proc/PID/smaps_rollup of the Python process, which hosts
Chromium's browser, and of each QtWebEngineProcess: render, gpu, zygote, utility by their
--type=), with the display's own /x/health "memory" (null where the checkout has none). The
floor is measured the same way in ``--floor-processes`` fresh bare-view processes (5 points each
after 30 s of settling) before the first profile and as many after the last; the floor is the
median of their medians (one process alone can settle 200 MB away from the next). Role figures
are medians per role, so they need not add up to the total exactly.

Figures: *steady* PSS is the median of the points from transition 100 on; its ratio to the
floor; *growth* is the median of the last 5 points minus the median of the first 5 from
transition 100 (fewer, not overlapping, in a short run), and a Theil-Sen slope in MB per 1000
transitions; *peak* is the highest single reading. Targets (printed PASS/FAIL, not asserted):
steady <= 1.25x the floor (default profile), <= 1.1x (low-memory); growth < 10 MB; 0 blank frames.

Blank frames: Xvfb keeps its screen in a file (-fbdir), mapped here read-only, so the screen is
sampled every ``--frame-ms`` milliseconds at the 13 points of webslot.classify_frame at no cost
to the X server or the display (no grab, no screenshot request). None of the content is ever
near black or near white at all 13 points at once, so such a sample, during an item or in the
middle of a transition (when the screen must show the outgoing item, a cross-fade of the two,
or the incoming one), is a black/white/unpainted frame the viewer would see. Consecutive blank
samples count as one blank frame; their duration is kept too.

PSS divides a file's pages among all the processes mapping it. So the display and the floor run
Qt from a private copy of PySide6 (made for each run in its work directory, removed at the end:
a copy shared between runs was soon mapped by another benchmark's displays; --shared-qt to
use the virtual environment's), which other programs running Qt WebEngine on the machine (tests,
other benchmarks) do not map, and this process imports no Qt until the end (the plot). Each point
still records how many foreign QtWebEngineProcess processes ran, and the load average.
Needs Xvfb and ffmpeg (apt-get install -y xvfb ffmpeg). Writes bench-results/bench_memory.json
and bench-results/bench_memory.png.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.bench.memory_driver import MIXES, Driver
from tests.bench.memory_tools import (
    ROLES,
    BareView,
    Display,
    Framebuffer,
    XServer,
    classify,
    foreign_engine_processes,
    private_qt,
    run_bare_view,
    tree_memory,
    xvfb,
)
from tests.bench.signage_content import ContentServer, Image, make_media

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "bench-results"
TARGETS = {"default": 1.25, "low-memory": 1.1}
GROWTH_TARGET_MB = 10.0
WINDOW_POINTS = 5
STEADY_FROM = 100


# -- sampling -------------------------------------------------------------------------------


def median_of(values: list[float]) -> float:
    return float(statistics.median(values)) if values else float("nan")


def memory_point(
    root: int, samples: int, spacing: float, label: int, started: float
) -> dict[str, Any]:
    """``samples`` readings of the tree, ``spacing`` s apart; the point is their median."""
    readings = []
    for index in range(samples):
        if index:
            time.sleep(spacing)
        readings.append(tree_memory(root))
    roles = sorted({role for reading in readings for role in reading["by_role"]})
    return {
        "transitions": label,
        "seconds": round(time.monotonic() - started, 1),
        "pss_mb": round(median_of([r["pss_mb"] for r in readings]), 1),
        "rss_mb": round(median_of([r["rss_mb"] for r in readings]), 1),
        "readings_pss_mb": [round(r["pss_mb"], 1) for r in readings],
        "readings_rss_mb": [round(r["rss_mb"], 1) for r in readings],
        "processes": median_of([float(r["processes"]) for r in readings]),
        "by_role": {
            role: {
                key: round(
                    median_of([r["by_role"].get(role, {}).get(key, 0.0) for r in readings]), 1
                )
                for key in ("count", "pss_mb", "rss_mb", "anon_mb")
            }
            for role in roles
        },
        "foreign_engine_processes": foreign_engine_processes(root),
        "load_average": [round(value, 2) for value in os.getloadavg()],
    }


class ScreenWatch(threading.Thread):
    """Samples the X screen's 13 points every ``interval`` s; counts blank frames."""

    def __init__(self, framebuffer: Framebuffer, interval: float) -> None:
        super().__init__(daemon=True)
        self.framebuffer = framebuffer
        self.interval = interval
        self.samples = 0
        self.changes = 0
        self.blank_samples: dict[str, int] = {"black": 0, "white": 0}
        self.episodes: list[dict[str, Any]] = []  # one per run of blank samples
        self.context = ""  # what the driver last saw on screen, kept with each blank frame
        self._stop_event = threading.Event()

    def run(self) -> None:
        current: dict[str, Any] | None = None
        started = time.monotonic()
        previous: list[tuple[int, int, int]] = []
        while not self._stop_event.wait(self.interval):
            pixels = self.framebuffer.pixels()
            kind = classify(pixels)
            self.samples += 1
            # The screen must be seen changing: a framebuffer that is not updated would show
            # one still frame and no blank frame at all.
            self.changes += pixels != previous
            previous = pixels
            now = time.monotonic()
            if kind == "content":
                current = None
                continue
            self.blank_samples[kind] += 1
            if current is None:
                current = {
                    "at_s": round(now - started, 3),
                    "kind": kind,
                    "samples": 0,
                    "during": self.context,
                    "pixels": pixels[:5],
                }
                self.episodes.append(current)
            current["samples"] += 1
            current["ms"] = round((now - started - current["at_s"]) * 1000 + self.interval * 1000)

    def stop(self) -> None:
        self._stop_event.set()
        self.join(5)

    def summary(self) -> dict[str, Any]:
        return {
            "interval_ms": round(self.interval * 1000, 1),
            "samples": self.samples,
            "screen_changes": self.changes,
            "blank_samples": self.blank_samples,
            "blank_frames": len(self.episodes),
            "longest_ms": max((e.get("ms", 0) for e in self.episodes), default=0),
            "examples": self.episodes[:20],
        }


# -- one display run -------------------------------------------------------------------------


def low_memory_supported(checkout: Path, workdir: Path) -> bool:
    """Whether the checkout's config knows ``[screen] low-memory``."""
    probe = workdir / "probe.toml"
    probe.write_text('[screen]\nlow-memory = "off"\n')
    done = subprocess.run(
        [sys.executable, "-m", "server.cli", "display", "--check-config", "--config", str(probe)],
        cwd=checkout,
        env=dict(os.environ, PYTHONPATH=str(checkout)),
        capture_output=True,
        timeout=60,
        check=False,
    )
    return done.returncode == 0


def run_display(
    server: XServer,
    args: argparse.Namespace,
    profile: str,
    content: ContentServer,
    images: list[Image],
    videos: list[str],
    workdir: Path,
    progress: Callable[[dict[str, Any]], None],
) -> dict[str, Any]:
    """One profile's run; ``progress`` gets the run so far at every point (to be saved)."""
    config = ""
    if low_memory_supported(args.tree, workdir):
        config = f'[screen]\nlow-memory = "{"on" if profile == "low-memory" else "off"}"\n'
        if args.memory_budget:
            config += f'memory-budget = "{args.memory_budget}"\n'
    elif profile == "low-memory":
        raise SystemExit(f"{args.checkout} has no [screen] low-memory: no low-memory profile")
    display = Display(server, args.tree, workdir, config, f"display-{profile}", args.qt)
    print(
        f"[{profile}] pdn display of {args.checkout} on {display.url}, pid "
        f"{display.process.pid}, config: {config.strip() or '(none)'}",
        flush=True,
    )
    framebuffer = Framebuffer(server.framebuffer)
    watch = ScreenWatch(framebuffer, args.frame_ms / 1000)
    points: list[dict[str, Any]] = []
    health: list[dict[str, Any]] = []
    sampler: threading.Thread | None = None
    driver = Driver(display, content, videos, args.item_seconds, MIXES[args.mix])
    try:
        display.schedule_cds(content.image_schedule(images, args.item_seconds))
        deadline = time.monotonic() + 120
        while driver.record.get("origin") != "schedule":  # images downloaded and playing
            driver.observe()
            if time.monotonic() > deadline or not display.alive():
                raise SystemExit(f"the cached images never played; see {display.log_path}")
            time.sleep(0.1)
        first = driver.observe()
        started = time.monotonic()
        watch.start()
        next_point = 0

        def take_point(label: int) -> None:
            point = memory_point(display.process.pid, args.samples, args.spacing, label, started)
            try:
                body = display.health()
                point["health_memory"] = body.get("memory")
                health.append({"transitions": label, "memory": body.get("memory")})
            except (OSError, ValueError) as error:
                point["health_memory"] = None
                point["health_error"] = str(error)
            points.append(point)
            progress({"profile": profile, "config": config, "driver": driver.summary(),
                      "blank": watch.summary(), "points": points})  # fmt: skip
            print(
                f"[{profile}] {label} transitions ({point['seconds']:.0f} s): PSS "
                f"{point['pss_mb']:.0f} MB, RSS {point['rss_mb']:.0f} MB; "
                + ", ".join(
                    f"{role} x{f['count']:.0f} {f['pss_mb']:.0f}"
                    for role, f in sorted(point["by_role"].items())
                )
                + f"; blank frames so far {len(watch.episodes)}; load "
                f"{point['load_average'][0]}",
                flush=True,
            )

        transitions = 0
        while True:
            transitions = driver.observe() - first
            if transitions >= next_point and (sampler is None or not sampler.is_alive()):
                sampler = threading.Thread(target=take_point, args=(transitions,), daemon=True)
                sampler.start()
                next_point = (transitions // args.sample_every + 1) * args.sample_every
            if transitions >= args.transitions:
                break
            if not display.alive():
                raise SystemExit(f"the display exited; see {display.log_path}")
            watch.context = driver.transition
            driver.feed()
            time.sleep(0.05)
        if sampler is not None:
            sampler.join()
        elapsed = time.monotonic() - started
    finally:
        watch.stop()
        display.stop()
        framebuffer.close()
    return {
        "profile": profile,
        "config": config,
        "item_seconds": args.item_seconds,
        "transitions": transitions,
        "seconds": round(elapsed, 1),
        "driver": driver.summary(),
        "blank": watch.summary(),
        "points": points,
    }


def pooled_floor(floors: list[dict[str, Any]]) -> dict[str, Any]:
    """One floor from several bare-view processes: the median of their medians. One process
    can settle far from the others (its browser's heap read 145 MB in one, 382 MB in the next,
    same page), so a single process is not a floor."""
    ordered = sorted(floors, key=lambda floor: float(floor["pss_mb"]))
    middle = ordered[len(ordered) // 2]
    return {
        "pss_mb": median_of([floor["pss_mb"] for floor in floors]),
        "rss_mb": median_of([floor["rss_mb"] for floor in floors]),
        "processes": len(floors),
        "per_process_pss_mb": [round(floor["pss_mb"], 1) for floor in floors],
        "per_process_rss_mb": [round(floor["rss_mb"], 1) for floor in floors],
        "by_role": middle["by_role"],
        "points": [point for floor in floors for point in floor["points"]],
    }


def measure_floor(
    server: XServer, content: ContentServer, args: argparse.Namespace, workdir: Path
) -> dict[str, Any]:
    view = BareView(server, f"{content.url}/page/1000000.html", workdir, args.qt)
    try:
        time.sleep(args.floor_settle)
        framebuffer = Framebuffer(server.framebuffer)
        screen = {"kind": classify(framebuffer.pixels()), "centre": framebuffer.pixels()[4]}
        framebuffer.close()
        started = time.monotonic()
        points = []
        for index in range(5):
            if index:
                time.sleep(2)
            points.append(
                memory_point(view.process.pid, args.samples, args.spacing, index, started)
            )
    finally:
        view.stop()
    pss = [p["pss_mb"] for p in points]
    rss = [p["rss_mb"] for p in points]
    floor = {
        "pss_mb": median_of(pss),
        "rss_mb": median_of(rss),
        "pss_range_mb": [min(pss), max(pss)],
        "rss_range_mb": [min(rss), max(rss)],
        "by_role": points[len(points) // 2]["by_role"],
        "screen": screen,
        "points": points,
    }
    print(
        f"floor process (one bare QWebEngineView): PSS {floor['pss_mb']:.0f} MB "
        f"({min(pss):.0f}-{max(pss):.0f}), RSS {floor['rss_mb']:.0f} MB; the screen showed "
        f"{screen['kind']} (centre {screen['centre']})",
        flush=True,
    )
    return floor


# -- figures ---------------------------------------------------------------------------------


def theil_sen_per_1000(points: list[tuple[float, float]]) -> float | None:
    """The median of the slopes between every pair of points (robust to a few outliers, such
    as a point that caught a recycle), in MB per 1000 transitions."""
    slopes = [
        (y2 - y1) / (x2 - x1)
        for index, (x1, y1) in enumerate(points)
        for x2, y2 in points[index + 1 :]
        if x2 != x1
    ]
    return float(statistics.median(slopes)) * 1000 if slopes else None


def point_near(points: list[dict[str, Any]], transitions: int) -> dict[str, Any]:
    return min(points, key=lambda p: abs(int(p["transitions"]) - transitions))


def figures(run: dict[str, Any], floor: dict[str, Any]) -> dict[str, Any]:
    points = run["points"]
    steady_points = [p for p in points if p["transitions"] >= STEADY_FROM] or points
    # Windows of up to WINDOW_POINTS points that do not overlap (a short run has small ones).
    window = max(1, min(WINDOW_POINTS, len(steady_points) // 2))
    first, last = steady_points[:window], steady_points[-window:]
    steady = median_of([p["pss_mb"] for p in steady_points])
    result: dict[str, Any] = {
        "steady_pss_mb": round(steady, 1),
        "steady_rss_mb": round(median_of([p["rss_mb"] for p in steady_points]), 1),
        "steady_points": len(steady_points),
        "pss_ratio_to_floor": round(steady / floor["pss_mb"], 3),
        # Against the leanest bare-view process: the strictest reading of the target.
        "pss_ratio_to_lowest_floor": round(
            steady / min(floor.get("per_process_pss_mb") or [floor["pss_mb"]]), 3
        ),
        "rss_ratio_to_floor": round(
            median_of([p["rss_mb"] for p in steady_points]) / floor["rss_mb"], 3
        ),
        "growth_windows": [[p["transitions"] for p in first], [p["transitions"] for p in last]],
        "growth_pss_mb": round(
            median_of([p["pss_mb"] for p in last]) - median_of([p["pss_mb"] for p in first]), 1
        ),
        "growth_rss_mb": round(
            median_of([p["rss_mb"] for p in last]) - median_of([p["rss_mb"] for p in first]), 1
        ),
        "slope_pss_mb_per_1000": theil_sen_per_1000(
            [(p["transitions"], p["pss_mb"]) for p in steady_points]
        ),
        "peak_pss_mb": max(max(p["readings_pss_mb"]) for p in points),
        "peak_rss_mb": max(max(p["readings_rss_mb"]) for p in points),
        "by_role": {
            "floor": floor["by_role"],
            **{
                f"at {p['transitions']}": p["by_role"]
                for p in (points[0], point_near(points, STEADY_FROM), points[-1])
            },
        },
    }
    health = [p.get("health_memory") for p in points if p.get("health_memory")]
    result["display_says_last"] = health[-1] if health else None
    return result


def verdicts(run: dict[str, Any]) -> list[tuple[str, bool]]:
    found = run["figures"]
    ratio_target = TARGETS.get(run["profile"], 1.25)
    return [
        (
            f"steady PSS {found['steady_pss_mb']:.0f} MB = {found['pss_ratio_to_floor']:.2f}x the "
            f"floor (target <= {ratio_target}x; {found['pss_ratio_to_lowest_floor']:.2f}x the "
            "leanest bare-view process)",
            found["pss_ratio_to_floor"] <= ratio_target,
        ),
        (
            f"PSS growth from transition {STEADY_FROM} to {run['transitions']}: "
            f"{found['growth_pss_mb']:+.1f} MB (target < {GROWTH_TARGET_MB:g} MB)",
            found["growth_pss_mb"] < GROWTH_TARGET_MB,
        ),
        (
            f"blank frames: {run['blank']['blank_frames']} in {run['blank']['samples']} samples "
            "(target 0)",
            run["blank"]["blank_frames"] == 0,
        ),
    ]


def print_run(run: dict[str, Any]) -> None:
    found, floor = run["figures"], run["floor"]
    print(
        f"== {run['profile']}: {run['transitions']} transitions in {run['seconds']:.0f} s; "
        f"shown {run['driver']['shown']}; floor PSS {floor['pss_mb']:.0f} MB, RSS "
        f"{floor['rss_mb']:.0f} MB",
        flush=True,
    )
    slope = found["slope_pss_mb_per_1000"]
    print(
        f"steady PSS {found['steady_pss_mb']:.0f} MB, RSS {found['steady_rss_mb']:.0f} MB; "
        f"peak PSS {found['peak_pss_mb']:.0f} MB, RSS {found['peak_rss_mb']:.0f} MB; "
        f"growth PSS {found['growth_pss_mb']:+.1f} MB, RSS {found['growth_rss_mb']:+.1f} MB "
        f"(windows {found['growth_windows']}); Theil-Sen slope "
        + (f"{slope:+.1f} MB/1000" if slope is not None else "n/a")
    )
    between = run["driver"].get("seconds_between_records", {})
    print(
        "seconds from one item to the next (items of "
        f"{run.get('item_seconds', '?')} s; p50/p95): "
        + ", ".join(f"{pair} {f['p50']}/{f['p95']} (n={f['n']})" for pair, f in between.items())
    )
    header = f"{'PSS (RSS) MB':<14}" + "".join(f"{role:>16}" for role in ROLES)
    print(header)
    for when, roles in found["by_role"].items():
        cells = "".join(
            f"{roles[r]['pss_mb']:>7.0f} ({roles[r]['rss_mb']:>4.0f}) x{roles[r]['count']:.0f}"
            if r in roles
            else f"{'-':>16}"
            for r in ROLES
        )
        print(f"{when:<14}{cells}")
    print(f"the display's own figure (last /x/health memory): {found['display_says_last']}")
    for text, passed in verdicts(run):
        print(f"{'PASS' if passed else 'FAIL'}  {text}")


def print_comparison(results: list[dict[str, Any]]) -> None:
    """Where the memory goes, per run side by side: PSS (RSS) MB by role at each run's last
    point, with the floor, the steady figure and its ratio."""
    runs = [(f"{run['profile']} {result['commit']}", run) for result in results
            for run in result["runs"] if run.get("figures")]  # fmt: skip
    if len(runs) < 2:
        return
    print("where the memory goes, PSS (RSS) MB at each run's last point:")
    print(f"{'':<12}" + "".join(f"{label:>32}" for label, _ in runs))
    for role in ROLES:
        cells = []
        for _, run in runs:
            found = run["points"][-1]["by_role"].get(role)
            cells.append(f"{found['pss_mb']:.0f} ({found['rss_mb']:.0f}) x{found['count']:.0f}"
                         if found else "-")  # fmt: skip
        if any(cell != "-" for cell in cells):
            print(f"{role:<12}" + "".join(f"{cell:>32}" for cell in cells))
    rows: dict[str, Callable[[dict[str, Any]], str]] = {
        "total": lambda run: (
            f"{run['points'][-1]['pss_mb']:.0f} ({run['points'][-1]['rss_mb']:.0f})"
        ),
        "at": lambda run: f"transition {run['points'][-1]['transitions']}",
        "steady": lambda run: (
            f"{run['figures']['steady_pss_mb']:.0f} ({run['figures']['steady_rss_mb']:.0f})"
        ),
        "floor": lambda run: f"{run['floor']['pss_mb']:.0f} ({run['floor']['rss_mb']:.0f})",
        "ratio": lambda run: f"{run['figures']['pss_ratio_to_floor']:.2f}x",
        "growth": lambda run: f"{run['figures']['growth_pss_mb']:+.1f}",
    }
    for name, cell in rows.items():
        print(f"{name:<12}" + "".join(f"{cell(run):>32}" for _, run in runs))


def snapshot(checkout: Path, target: Path) -> Path:
    """A copy of the checkout's packages, taken at the start: a run of hours must measure one
    version of the code (others may commit to a shared checkout meanwhile), and the second
    profile's display must run the same code as the first's."""
    for package in ("cds", "server", "player"):
        shutil.copytree(checkout / package, target / package,
                        ignore=shutil.ignore_patterns("__pycache__"))  # fmt: skip
    shutil.copy2(checkout / "pyproject.toml", target / "pyproject.toml")
    return target


def commit_of(checkout: Path) -> str:
    done = subprocess.run(
        ["git", "-C", str(checkout), "rev-parse", "--short", "HEAD"],
        capture_output=True,
        text=True,
        check=False,
    )
    dirty = subprocess.run(
        ["git", "-C", str(checkout), "status", "--porcelain", "--", "player", "server", "cds"],
        capture_output=True,
        text=True,
        check=False,
    )
    return done.stdout.strip() + ("+uncommitted" if dirty.stdout.strip() else "")


# -- main --------------------------------------------------------------------------------------


def arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    add = parser.add_argument
    add("--transitions", type=int, default=2000)
    add("--profile", choices=("default", "low-memory", "both"), default="both")
    add("--item-seconds", type=float, default=1.0, help="preferred duration of every item")
    add("--mix", choices=sorted(MIXES), default="signage", help="signage, or video-heavy")
    add("--checkout", type=Path, default=ROOT, help="run this tree's pdn display")
    add("--memory-budget", help='[screen] memory-budget for the display, e.g. "600 MB"')
    add("--size", default="1920x1080")
    add("--sample-every", type=int, default=50, help="transitions between memory points")
    add("--samples", type=int, default=5, help="readings per point (their median)")
    add("--spacing", type=float, default=0.4, help="seconds between readings of a point")
    add("--frame-ms", type=float, default=5.0, help="screen sampling interval")
    add("--floor-settle", type=float, default=30.0, help="seconds before the floor is read")
    add(
        "--floor-processes",
        type=int,
        default=3,
        help="bare-view processes measured before the first profile and after the last",
    )
    add("--output", type=Path, default=RESULTS / "bench_memory.json")
    add("--plot", type=Path, help="default: the output's name with .png")
    add(
        "--plot-also",
        type=Path,
        action="append",
        default=[],
        help="earlier results to draw beside these (e.g. a run of an older checkout)",
    )
    add("--replot", action="store_true", help="only draw the plot of --output (and --plot-also)")
    add(
        "--shared-qt",
        action="store_true",
        help="run Qt from the virtual environment, not from a private copy (see memory_tools)",
    )
    add(
        "--live",
        action="store_true",
        help="run the checkout's files as they are, not a copy taken at the start",
    )
    add("--floor-child", metavar="URL", help=argparse.SUPPRESS)
    return parser.parse_args()


def draw(args: argparse.Namespace, results: dict[str, Any]) -> Path:
    from tests.bench.memory_plot import plot

    target: Path = args.plot or args.output.with_suffix(".png")
    others = [json.loads(path.read_text()) for path in args.plot_also]
    print_comparison([*others, results])
    plot([results, *others], target)
    print(f"plot written to {target}", flush=True)
    return target


def main() -> int:
    args = arguments()
    # Stopped by a signal, still stop the display and the X server (finally clauses): nohup'd
    # from a script, SIGINT arrives ignored, and SIGTERM would end Python on the spot.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    signal.signal(signal.SIGINT, signal.default_int_handler)
    if args.floor_child:
        return run_bare_view(args.floor_child)
    if args.replot:
        draw(args, json.loads(args.output.read_text()))
        return 0
    args.checkout = args.checkout.resolve()
    width, height = (int(v) for v in args.size.split("x"))
    profiles = ["default", "low-memory"] if args.profile == "both" else [args.profile]
    workdir = Path(tempfile.mkdtemp(prefix="pdn-bench-memory-"))
    args.qt = None if args.shared_qt else private_qt(workdir / "qt")
    args.tree = args.checkout if args.live else snapshot(args.checkout, workdir / "tree")
    media = RESULTS / "bench_memory_media"
    images, videos = make_media(media)
    content = ContentServer(media)
    results: dict[str, Any] = {
        "checkout": str(args.checkout),
        "ran_from": str(args.tree),
        "commit": commit_of(args.checkout),
        "size": args.size,
        "item_seconds": args.item_seconds,
        "transitions_asked": args.transitions,
        "mix": {
            "name": args.mix,
            "pages": MIXES[args.mix].count("P") / len(MIXES[args.mix]),
            "cached_images": MIXES[args.mix].count("I") / len(MIXES[args.mix]),
            "videos": MIXES[args.mix].count("V") / len(MIXES[args.mix]),
            "videos_files": videos,
            "images_files": [image.name for image in images],
        },
        "method": {
            "point": f"median of {args.samples} readings {args.spacing} s apart, every "
            f"{args.sample_every} transitions, display playing on",
            "steady": f"median of the points from transition {STEADY_FROM} on",
            "growth": f"median of the last {WINDOW_POINTS} points minus median of the first "
            f"{WINDOW_POINTS} from transition {STEADY_FROM}",
            "blank": f"X framebuffer read every {args.frame_ms} ms at 13 points; all near "
            "black or all near white is blank; consecutive blank samples are one frame",
        },
        "qt": str(args.qt or "shared (the virtual environment's)"),
        "cpus": os.cpu_count(),
        "load_average_start": [round(v, 2) for v in os.getloadavg()],
        "workdir": str(workdir),
        "runs": [],
    }
    print(
        f"bench_memory: {args.checkout} at {results['commit']}, profiles {profiles}, "
        f"{args.transitions} transitions of {args.item_seconds:g} s, load "
        f"{results['load_average_start']}; logs in {workdir}",
        flush=True,
    )
    args.output.parent.mkdir(parents=True, exist_ok=True)
    try:
        with xvfb(width, height) as server:
            floors = [measure_floor(server, content, args, workdir)
                      for _ in range(args.floor_processes)]  # fmt: skip

            def save(run_so_far: dict[str, Any]) -> None:
                results["in_progress"] = run_so_far
                args.output.write_text(json.dumps(results, indent=1) + "\n")

            for profile in profiles:
                run = run_display(server, args, profile, content, images, videos, workdir, save)
                results.pop("in_progress", None)
                run["floor"] = pooled_floor(floors)
                run["figures"] = figures(run, run["floor"])
                results["runs"].append(run)
                print_run(run)
                results["load_average_end"] = [round(v, 2) for v in os.getloadavg()]
                args.output.write_text(json.dumps(results, indent=1) + "\n")
            # The floor again, after the display runs: how far it drifts is the noise of the
            # measure; the figures use the median of all its points.
            floors += [measure_floor(server, content, args, workdir)
                       for _ in range(args.floor_processes)]  # fmt: skip
            results["floors"] = floors
            for run in results["runs"]:
                run["floor"] = pooled_floor(floors)
                run["figures"] = figures(run, run["floor"])
            print(f"floor, the median of {len(floors)} bare-view processes: PSS "
                  f"{results['runs'][0]['floor']['pss_mb']:.0f} MB, RSS "
                  f"{results['runs'][0]['floor']['rss_mb']:.0f} MB; final verdicts:")  # fmt: skip
            for run in results["runs"]:
                for text, passed in verdicts(run):
                    print(f"{'PASS' if passed else 'FAIL'}  [{run['profile']}] {text}")
            args.output.write_text(json.dumps(results, indent=1) + "\n")
    finally:
        content.stop()
        if args.qt is not None:
            shutil.rmtree(args.qt.parent, ignore_errors=True)
    print(f"written to {args.output}", flush=True)
    draw(args, results)
    return 0


if __name__ == "__main__":
    sys.exit(main())

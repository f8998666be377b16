"""Renderer benchmark: schedule-to-pixel, blank frames, memory over thousands of transitions,
cold start. Real Qt WebEngine (offscreen unless QT_QPA_PLATFORM says otherwise), content
served on 127.0.0.1, pixels read back from the window.

    .venv/bin/python -m tests.bench.bench_renderer [--transitions 2000] [--size 1920x1080]

Prints the figures and writes them to ``bench-results/renderer.json``. Targets:
page p95 < 300 ms, cached image p95 < 150 ms, 0 blank frames per transition, resident memory
growth (process tree) < 30 MB between transition 100 and 2000, cold start < 3 s.

Memory is sampled every ``--sample-every`` transitions (RSS, PSS and anonymous memory of every
process of the tree, by role); the figures at 100 and 2000 are medians of the samples near
them, and the trend is fitted over the second half. PSS splits pages shared with other
processes, so run nothing else that maps the same libraries (a second benchmark) meanwhile.
``--memory-only`` runs just that part.

The functions take a renderer and are reusable (the end-to-end POST /schedule benchmark
measures from the HTTP request instead of from ``show``).
"""

from __future__ import annotations

import argparse
import dataclasses
import gc
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from itertools import count
from pathlib import Path
from typing import TYPE_CHECKING

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
os.environ.setdefault("QTWEBENGINE_DISABLE_SANDBOX", "1")

from player.renderer.options import prepare_process
from tests.bench.loopback import Answer, LoopbackSite
from tests.bench.stats import percentile

if TYPE_CHECKING:
    from player.renderer import KioskRenderer

ROOT = Path(__file__).resolve().parents[2]
PALETTE = [(255, 0, 0), (0, 255, 0), (0, 0, 255), (255, 255, 0), (255, 0, 255), (0, 255, 255)]
_tokens = count(1)


# -- loopback content ---------------------------------------------------------------------


def _colour_page(path: str) -> Answer:
    colour = path.strip("/").split("/")[-1][:6] or "000000"
    body = (
        "<!doctype html><html><head><title>bench</title></head>"
        f"<body style='margin:0;background:#{colour}'><h1 style='color:#{colour}'>x</h1>"
        "</body></html>"
    ).encode()
    return Answer(body, "text/html")


def serve_colour_pages() -> tuple[str, Callable[[], None]]:
    """A loopback server: ``/<rrggbb>[?n]`` is a page of that colour. Returns (base, stop)."""
    site = LoopbackSite(_colour_page)
    return site.base, site.stop


def hex_colour(rgb: tuple[int, int, int]) -> str:
    return "{:02x}{:02x}{:02x}".format(*rgb)


def write_images(directory: Path, size: tuple[int, int]) -> list[tuple[str, tuple[int, int, int]]]:
    from PySide6.QtGui import QColor, QImage

    made = []
    for rgb in PALETTE:
        image = QImage(size[0], size[1], QImage.Format.Format_RGB32)
        image.fill(QColor(*rgb))
        path = directory / f"{hex_colour(rgb)}.jpg"
        assert image.save(str(path))
        made.append((path.as_uri(), rgb))
    return made


# -- measurements -------------------------------------------------------------------------


def play(url: str, content_type: str | None = None) -> object:
    from player.playitem import PlayItem

    return PlayItem(next(_tokens), url, url, content_type, 10.0, "request")


def schedule_to_pixel(
    renderer: object, items: list[tuple[object, tuple[int, int, int]]], timeout: float = 10.0
) -> list[float]:
    """Seconds from ``show`` to the item's colour on every probe point of the screen."""
    from tests.support.pixels import near, uniform_colour, wait_until

    latencies = []
    for item, colour in items:
        started = time.monotonic()
        renderer.show(item)  # type: ignore[attr-defined]

        def on_screen(colour: tuple[int, int, int] = colour) -> bool:
            found = uniform_colour(renderer.grab_image())  # type: ignore[attr-defined]
            return found is not None and near(found, colour)

        if not wait_until(on_screen, timeout, step=0.001):
            raise RuntimeError(f"{item} never reached the screen")
        latencies.append(time.monotonic() - started)
    return latencies


class Transitions:
    """Drives transitions the way the engine does (prepare ahead, then show) and waits for
    each to be reported shown."""

    def __init__(self, renderer: object, base: str, images: list[tuple[str, object]]) -> None:
        from tests.player.conftest import Reports

        self.renderer = renderer
        self.base = base
        self.images = images
        self.reports = Reports()
        renderer.set_listener(self.reports)  # type: ignore[attr-defined]
        self.done = 0

    def item(self, n: int) -> tuple[object, tuple[int, int, int]]:
        if n % 3 == 2:
            url, rgb = self.images[n % len(self.images)]
            return play(url, "image/jpeg"), rgb  # type: ignore[return-value]
        rgb = PALETTE[n % len(PALETTE)]
        # A query string per load: every page is a new document, as in real schedules.
        return play(f"{self.base}/{hex_colour(rgb)}?n={n}"), rgb

    def run(self, count_: int, dwell: float = 0.02) -> None:
        from tests.support.pixels import process_for, wait_until

        for _ in range(count_):
            n = self.done
            item, _ = self.item(n)
            self.renderer.prepare(item)  # type: ignore[attr-defined]
            process_for(dwell)
            self.renderer.show(item)  # type: ignore[attr-defined]
            token: int = item.token  # type: ignore[attr-defined]

            def reported(token: int = token) -> bool:
                done = self.reports.shown_tokens() + self.reports.failed_tokens()
                return token in done

            if not wait_until(reported, 20):
                raise RuntimeError(f"transition {n} never completed")
            self.done += 1


def _chromium_type(pid: int) -> str:
    """The ``--type`` a QtWebEngineProcess was started with ("" for none)."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as stream:
            arguments = stream.read().split(b"\0")
    except OSError:
        return ""
    for argument in arguments:
        if argument.startswith(b"--type="):
            return argument[len(b"--type=") :].decode(errors="replace")
    return ""


def _process_role(pid: int, parent: int, root: int) -> str:
    """What a process of the tree is: the browser (our own Python process, which also runs
    Chromium's GPU/compositor thread here), a render process (forked by the zygote, whose
    command line it keeps), or another of Chromium's helpers by its ``--type``."""
    if pid == root:
        return "browser"
    kind = _chromium_type(pid)
    if kind == "zygote" and _chromium_type(parent) == "zygote":
        return "renderer"
    return kind or "other"


MEMORY_KEYS = ("rss_mb", "pss_mb", "anon_mb")


@dataclasses.dataclass
class ProcessMemory:
    pid: int
    role: str
    rss_mb: float
    pss_mb: float
    anon_mb: float


@dataclasses.dataclass
class MemorySample:
    """The process tree's memory after ``transitions`` transitions."""

    transitions: int
    seconds: float
    processes: list[ProcessMemory]
    # Python's own share of the browser process: memory blocks allocated, objects tracked.
    python_blocks: int = 0
    python_objects: int = 0

    def total(self, key: str, role: str | None = None) -> float:
        return sum(float(getattr(p, key)) for p in self.processes if role is None or p.role == role)

    def roles(self) -> dict[str, dict[str, float]]:
        """Figures summed per process role (browser, renderer, gpu-process, ...)."""
        found: dict[str, dict[str, float]] = {}
        for process in self.processes:
            role = found.setdefault(process.role, dict.fromkeys(("count", *MEMORY_KEYS), 0.0))
            role["count"] += 1
            for key in MEMORY_KEYS:
                role[key] += float(getattr(process, key))
        return found

    def as_json(self) -> dict[str, object]:
        return {
            "transitions": self.transitions,
            "seconds": round(self.seconds, 1),
            "python_blocks": self.python_blocks,
            "python_objects": self.python_objects,
            "rss_mb": round(self.total("rss_mb"), 1),
            "pss_mb": round(self.total("pss_mb"), 1),
            "per_process": [
                {
                    "pid": p.pid,
                    "role": p.role,
                    **{key: round(float(getattr(p, key)), 1) for key in MEMORY_KEYS},
                }
                for p in self.processes
            ],
        }


def process_tree(root: int) -> list[tuple[int, int]]:
    """``root`` and all its descendants, as (pid, parent pid)."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as stream:
                fields = stream.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        children.setdefault(int(fields[1]), []).append(int(entry))
    tree, todo = [], [(root, 0)]
    while todo:
        pid, parent = todo.pop()
        tree.append((pid, parent))
        todo.extend((child, pid) for child in children.get(pid, []))
    return tree


def process_tree_memory(root: int) -> list[ProcessMemory]:
    """RSS, PSS and anonymous memory (MB) of ``root`` and each of its descendants
    (Chromium's processes too), from /proc/PID/smaps_rollup."""
    found = []
    for pid, parent in process_tree(root):
        figures = {"Rss:": 0, "Pss:": 0, "Anonymous:": 0}
        try:
            with open(f"/proc/{pid}/smaps_rollup") as stream:
                for line in stream:
                    parts = line.split()
                    if parts and parts[0] in figures:
                        figures[parts[0]] += int(parts[1])
        except OSError:
            continue  # it ended meanwhile
        found.append(
            ProcessMemory(
                pid,
                _process_role(pid, parent, root),
                figures["Rss:"] / 1024,
                figures["Pss:"] / 1024,
                figures["Anonymous:"] / 1024,
            )
        )
    return found


def slope_per_1000(points: list[tuple[int, float]]) -> float | None:
    """Least-squares slope of (transitions, MB) points, in MB per 1000 transitions."""
    if len(points) < 3:
        return None
    xs = [float(x) for x, _ in points]
    ys = [y for _, y in points]
    mean_x, mean_y = statistics.fmean(xs), statistics.fmean(ys)
    spread = sum((x - mean_x) ** 2 for x in xs)
    if spread == 0:
        return None
    return sum((x - mean_x) * (y - mean_y) for x, y in zip(xs, ys, strict=True)) / spread * 1000


def robust_figures(samples: list[MemorySample], point: int, window: int) -> dict[str, object]:
    """The median of the samples within ``window`` transitions of ``point``: one sample can
    catch a spike (a view renewal, a Chromium garbage collection) and mislead."""
    near_point = [s for s in samples if abs(s.transitions - point) <= window]
    roles = sorted({role for s in near_point for role in s.roles()})
    return {
        "samples_at": [s.transitions for s in near_point],
        "rss_mb": statistics.median(s.total("rss_mb") for s in near_point),
        "pss_mb": statistics.median(s.total("pss_mb") for s in near_point),
        "processes": statistics.median(len(s.processes) for s in near_point),
        "roles": {
            role: {
                key: statistics.median(s.roles().get(role, {}).get(key, 0.0) for s in near_point)
                for key in ("count", *MEMORY_KEYS)
            }
            for role in roles
        },
    }


def trend(samples: list[MemorySample], role: str | None, key: str) -> float | None:
    return slope_per_1000([(s.transitions, s.total(key, role)) for s in samples])


def memory_over_transitions(
    transitions: Transitions, total: int, every: int, window: int
) -> dict[str, object]:
    """Run ``total`` transitions, sampling the process tree's memory every ``every`` of them
    once the event loop has settled (half a second, a Python ``gc.collect()``, a short wait).
    Figures at 100 and at ``total`` are medians over a window (see ``robust_figures``); the
    trend is the least-squares slope over the second half of the run."""
    from tests.support.pixels import process_for

    samples: list[MemorySample] = []
    offset = transitions.done  # earlier benchmarks' transitions are not counted here
    started = time.monotonic()
    while transitions.done - offset < total:
        transitions.run(min(every, total - (transitions.done - offset)), dwell=0.005)
        process_for(0.5)
        gc.collect()
        process_for(0.2)
        sample = MemorySample(
            transitions.done - offset,
            time.monotonic() - started,
            process_tree_memory(os.getpid()),
            sys.getallocatedblocks(),
            len(gc.get_objects()),
        )
        samples.append(sample)
        summary = ", ".join(
            f"{role} x{figures['count']:.0f} {figures['pss_mb']:.0f}"
            for role, figures in sorted(sample.roles().items())
        )
        print(
            f"after {sample.transitions} transitions: RSS {sample.total('rss_mb'):.0f} MB, "
            f"PSS {sample.total('pss_mb'):.0f} MB ({summary}; python: {sample.python_blocks} "
            f"blocks, {sample.python_objects} objects) ({sample.seconds:.0f} s)",
            flush=True,
        )

    first_point = min(100, total)
    first = robust_figures(samples, first_point, window)
    last = robust_figures(samples, total, window)
    memory: dict[str, object] = {
        "sample_every": every,
        "window": window,
        "method": "median of the samples within `window` transitions of the point; "
        "each sample after 0.5 s of event loop, gc.collect(), 0.2 s more",
        str(first_point): first,
        str(total): last,
        "growth_rss_mb": float(last["rss_mb"]) - float(first["rss_mb"]),  # type: ignore[arg-type]
        "growth_pss_mb": float(last["pss_mb"]) - float(first["pss_mb"]),  # type: ignore[arg-type]
    }
    second_half = [s for s in samples if s.transitions >= total / 2]
    roles = sorted({role for s in second_half for role in s.roles()})
    memory["trend_second_half"] = {
        "from_transition": total // 2,
        "rss_mb_per_1000": trend(second_half, None, "rss_mb"),
        "pss_mb_per_1000": trend(second_half, None, "pss_mb"),
        "pss_mb_per_1000_by_role": {role: trend(second_half, role, "pss_mb") for role in roles},
    }
    memory["samples"] = [s.as_json() for s in samples]
    return memory


def print_memory(memory: dict[str, object], total: int) -> None:
    first, last = memory[str(min(100, total))], memory[str(total)]
    for point, figures in ((min(100, total), first), (total, last)):
        roles = ", ".join(
            f"{role} {f['pss_mb']:.0f}"
            for role, f in sorted(figures["roles"].items())  # type: ignore[index]
        )
        print(
            f"memory at {point} (median of samples {figures['samples_at']}): "  # type: ignore[index]
            f"RSS {figures['rss_mb']:.0f} MB, PSS {figures['pss_mb']:.0f} MB "  # type: ignore[index]
            f"(PSS per role: {roles})"
        )
    slope = memory["trend_second_half"]
    by_role = ", ".join(
        f"{role} {value:+.1f}" if value is not None else f"{role} n/a"
        for role, value in slope["pss_mb_per_1000_by_role"].items()  # type: ignore[index]
    )
    print(
        f"memory growth 100 -> {total}: RSS {memory['growth_rss_mb']:+.1f} MB, "
        f"PSS {memory['growth_pss_mb']:+.1f} MB; trend over the second half: "
        f"RSS {slope['rss_mb_per_1000']:+.1f}, PSS {slope['pss_mb_per_1000']:+.1f} "  # type: ignore[index]
        f"MB per 1000 transitions (PSS per role: {by_role})",
        flush=True,
    )


def cold_start(size: tuple[int, int]) -> float:
    """Seconds from spawning a process to the first frame of content in its window."""
    base, stop = serve_colour_pages()
    try:
        started = time.monotonic()
        child = subprocess.run(
            [
                sys.executable,
                "-m",
                "tests.bench.bench_renderer",
                "--cold-start-child",
                f"{base}/{hex_colour(PALETTE[2])}",
                "--size",
                f"{size[0]}x{size[1]}",
            ],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=60,
            check=True,
        )
        elapsed = time.monotonic() - started
    finally:
        stop()
    if "ON-SCREEN" not in child.stdout:
        raise RuntimeError("cold start child did not show its page: " + child.stderr[-500:])
    return elapsed


def _cold_start_child(url: str, size: tuple[int, int]) -> int:
    prepare_process()
    from PySide6.QtWidgets import QApplication

    from player.renderer import KioskRenderer, RendererOptions
    from tests.support.pixels import wait_for_colour

    app = QApplication(["bench-cold-start"])
    renderer = KioskRenderer(RendererOptions(fullscreen=False, window_size=size))
    renderer.show(play(url))  # type: ignore[arg-type]
    shown = wait_for_colour(renderer, PALETTE[2], 30)
    print("ON-SCREEN" if shown is not None else "NEVER", flush=True)
    renderer.close()
    del app
    sys.stdout.flush()
    os._exit(0 if shown is not None else 1)
    return 0 if shown is not None else 1


# -- the benchmark ------------------------------------------------------------------------


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--transitions", type=int, default=2000)
    parser.add_argument("--blank-transitions", type=int, default=200)
    parser.add_argument("--switches", type=int, default=50)
    parser.add_argument("--size", default="1920x1080")
    parser.add_argument(
        "--output",
        help="default bench-results/renderer.json (renderer-memory.json with --memory-only)",
    )
    parser.add_argument("--cold-start-child", metavar="URL")
    parser.add_argument(
        "--sample-every", type=int, default=50, help="transitions per memory sample"
    )
    parser.add_argument(
        "--window", type=int, default=100, help="memory figures: median of samples this near"
    )
    parser.add_argument(
        "--memory-only",
        action="store_true",
        help="skip cold start, schedule-to-pixel and blank frames (faster memory experiments)",
    )
    parser.add_argument("--crossfade-ms", type=int, default=0)
    args = parser.parse_args()
    width, height = (int(v) for v in args.size.split("x"))
    size = (width, height)
    if args.cold_start_child:
        return _cold_start_child(args.cold_start_child, size)

    results: dict[str, object] = {
        "platform": os.environ.get("QT_QPA_PLATFORM"),
        "size": args.size,
        "cpus": os.cpu_count(),
        "chromium_flags": os.environ.get("QTWEBENGINE_CHROMIUM_FLAGS", ""),
    }
    if not args.memory_only:
        cold = [cold_start(size) for _ in range(3)]
        results["cold_start_s"] = {"runs": cold, "median": statistics.median(cold)}
        print(f"cold start (process start to first content frame): {cold} s")

    prepare_process()
    from PySide6.QtWidgets import QApplication

    from player.renderer import KioskRenderer, RendererOptions
    from tests.support.pixels import process_for

    _app = QApplication(["bench-renderer"])  # kept alive for the whole run
    base, stop = serve_colour_pages()
    workdir = Path(tempfile.mkdtemp(prefix="pdn-bench-"))
    images = write_images(workdir, size)
    options = RendererOptions(
        fullscreen=False,
        window_size=size,
        data_dir=workdir / "data",
        crossfade_ms=args.crossfade_ms,
    )
    results["crossfade_ms"] = options.crossfade_ms
    renderer = KioskRenderer(options)
    process_for(1.0)
    transitions = Transitions(renderer, base, images)  # type: ignore[arg-type]
    if not args.memory_only:
        benchmark_latency_and_blank_frames(renderer, transitions, images, base, args, results)

    memory = memory_over_transitions(transitions, args.transitions, args.sample_every, args.window)
    print_memory(memory, args.transitions)
    results["memory"] = memory
    results["failed_items"] = len(transitions.reports.failed)
    renderer.close()
    stop()
    default = "renderer-memory.json" if args.memory_only else "renderer.json"
    output = Path(args.output or ROOT / "bench-results" / default)
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(json.dumps(results, indent=2) + "\n")
    print(f"written to {output}", flush=True)
    # Leave without Python's final garbage collection of PySide objects, which can crash
    # after Qt WebEngine has shut down; every result is written by now.
    os._exit(0)


def benchmark_latency_and_blank_frames(
    renderer: KioskRenderer,
    transitions: Transitions,
    images: list[tuple[str, tuple[int, int, int]]],
    base: str,
    args: argparse.Namespace,
    results: dict[str, object],
) -> None:
    from tests.support.pixels import FrameSampler

    # Grabbing the window is the probe's own cost, included in every latency below.
    started = time.monotonic()
    for _ in range(20):
        renderer.grab_image()
    grab_ms = (time.monotonic() - started) / 20 * 1000
    results["grab_ms"] = grab_ms

    pages = [
        (play(f"{base}/{hex_colour(PALETTE[n % len(PALETTE)])}?s={n}"), PALETTE[n % len(PALETTE)])
        for n in range(args.switches)
    ]
    page_latency = schedule_to_pixel(renderer, pages)
    picture_items = [
        (play(images[n % len(images)][0], "image/jpeg"), images[n % len(images)][1])
        for n in range(args.switches)
    ]
    image_latency = schedule_to_pixel(renderer, picture_items)
    for name, values in (("page", page_latency), ("cached_image", image_latency)):
        p50, p95 = percentile(values, 0.5) * 1000, percentile(values, 0.95) * 1000
        results[f"schedule_to_pixel_{name}_ms"] = {"p50": p50, "p95": p95, "n": len(values)}
        print(f"schedule-to-pixel {name}: p50 {p50:.0f} ms, p95 {p95:.0f} ms ({len(values)})")
    print(f"(includes the pixel probe: one window grab costs {grab_ms:.1f} ms)")

    sampler = FrameSampler(renderer, PALETTE, interval_ms=2)
    sampler.start()
    transitions.run(args.blank_transitions)
    sampler.stop()
    blank = len(sampler.bad) / max(1, args.blank_transitions)
    results["blank_frames"] = {
        "transitions": args.blank_transitions,
        "samples": sampler.samples,
        "bad_samples": len(sampler.bad),
        "per_transition": blank,
        "failed_items": len(transitions.reports.failed),
        "examples": [points for _, points in sampler.bad[:5]],
    }
    print(
        f"blank frames: {len(sampler.bad)} in {sampler.samples} samples over "
        f"{args.blank_transitions} transitions ({blank:.3f} per transition)"
    )


if __name__ == "__main__":
    sys.exit(main())

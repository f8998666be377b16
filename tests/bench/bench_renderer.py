"""Renderer benchmark: schedule-to-pixel, blank frames, memory over thousands of transitions,
cold start. Real Qt WebEngine (offscreen unless QT_QPA_PLATFORM says otherwise), content
served on 127.0.0.1, pixels read back from the window.

    .venv/bin/python -m tests.bench.bench_renderer [--transitions 2000] [--size 1920x1080]

Prints the figures and writes them to ``bench-results/renderer.json``. Targets (issue 4):
page p95 < 300 ms, cached image p95 < 150 ms, 0 blank frames per transition, resident memory
growth (process tree) < 30 MB between transition 100 and 2000, cold start < 3 s.

The functions take a renderer and are reusable (the end-to-end POST /schedule benchmark
measures from the HTTP request instead of from ``show``).
"""

from __future__ import annotations

import argparse
import http.server
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from itertools import count
from pathlib import Path

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
os.environ.setdefault("QTWEBENGINE_DISABLE_SANDBOX", "1")

from player.renderer.options import prepare_process

ROOT = Path(__file__).resolve().parents[2]
PALETTE = [(255, 0, 0), (0, 255, 0), (0, 0, 255), (255, 255, 0), (255, 0, 255), (0, 255, 255)]
_tokens = count(1)


# -- loopback content ---------------------------------------------------------------------


class _ColourPages(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_GET(self) -> None:
        colour = self.path.strip("/").split("?")[0].split("/")[-1][:6] or "000000"
        body = (
            "<!doctype html><html><head><title>bench</title></head>"
            f"<body style='margin:0;background:#{colour}'><h1 style='color:#{colour}'>x</h1>"
            "</body></html>"
        ).encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        pass


def serve_colour_pages() -> tuple[str, Callable[[], None]]:
    """A loopback server: ``/<rrggbb>[?n]`` is a page of that colour. Returns (base, stop)."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _ColourPages)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()

    def stop() -> None:
        server.shutdown()
        server.server_close()

    return f"http://127.0.0.1:{server.server_address[1]}", stop


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


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, round(fraction * (len(ordered) - 1))))
    return ordered[index]


def schedule_to_pixel(
    renderer: object, items: list[tuple[object, tuple[int, int, int]]], timeout: float = 10.0
) -> list[float]:
    """Seconds from ``show`` to the item's colour on every probe point of the screen."""
    from tests.renderer.pixels import near, uniform_colour, wait_until

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
        from tests.renderer.conftest import Reports

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
        from tests.renderer.pixels import process_for, wait_until

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


def process_tree_memory(root: int) -> dict[str, float]:
    """RSS and PSS (MB) of ``root`` and all its descendants (Chromium's processes too)."""
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
    tree, todo = [], [root]
    while todo:
        pid = todo.pop()
        tree.append(pid)
        todo.extend(children.get(pid, []))
    rss = pss = 0
    for pid in tree:
        try:
            with open(f"/proc/{pid}/smaps_rollup") as stream:
                for line in stream:
                    if line.startswith("Rss:"):
                        rss += int(line.split()[1])
                    elif line.startswith("Pss:"):
                        pss += int(line.split()[1])
        except OSError:
            continue
    return {"processes": len(tree), "rss_mb": rss / 1024, "pss_mb": pss / 1024}


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
    from tests.renderer.pixels import wait_for_colour

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
    parser.add_argument("--output", default=str(ROOT / "bench-results" / "renderer.json"))
    parser.add_argument("--cold-start-child", metavar="URL")
    args = parser.parse_args()
    width, height = (int(v) for v in args.size.split("x"))
    size = (width, height)
    if args.cold_start_child:
        return _cold_start_child(args.cold_start_child, size)

    results: dict[str, object] = {
        "platform": os.environ.get("QT_QPA_PLATFORM"),
        "size": args.size,
        "cpus": os.cpu_count(),
    }
    cold = [cold_start(size) for _ in range(3)]
    results["cold_start_s"] = {"runs": cold, "median": statistics.median(cold)}
    print(f"cold start (process start to first content frame): {cold} s")

    prepare_process()
    from PySide6.QtWidgets import QApplication

    from player.renderer import KioskRenderer, RendererOptions
    from tests.renderer.pixels import FrameSampler, process_for

    _app = QApplication(["bench-renderer"])  # kept alive for the whole run
    base, stop = serve_colour_pages()
    workdir = Path(tempfile.mkdtemp(prefix="pdn-bench-"))
    images = write_images(workdir, size)
    renderer = KioskRenderer(
        RendererOptions(fullscreen=False, window_size=size, data_dir=workdir / "data")
    )
    process_for(1.0)

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

    transitions = Transitions(renderer, base, images)  # type: ignore[arg-type]
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

    memory: dict[str, object] = {}
    checkpoints = sorted({100, 500, 1000, args.transitions} & set(range(1, args.transitions + 1)))
    offset = transitions.done  # the blank-frame transitions already ran
    started = time.monotonic()
    for checkpoint in checkpoints:
        transitions.run(checkpoint - (transitions.done - offset), dwell=0.005)
        process_for(0.5)
        figures = process_tree_memory(os.getpid())
        memory[str(checkpoint)] = figures
        print(
            f"after {checkpoint} transitions: RSS {figures['rss_mb']:.0f} MB, "
            f"PSS {figures['pss_mb']:.0f} MB, {figures['processes']} processes "
            f"({time.monotonic() - started:.0f} s)",
            flush=True,
        )
    if "100" in memory and str(args.transitions) in memory:
        first, last = memory["100"], memory[str(args.transitions)]
        growth = last["rss_mb"] - first["rss_mb"]  # type: ignore[index]
        growth_pss = last["pss_mb"] - first["pss_mb"]  # type: ignore[index]
        memory["growth_rss_mb"] = growth
        memory["growth_pss_mb"] = growth_pss
        print(
            f"memory growth 100 -> {args.transitions}: "
            f"RSS {growth:+.1f} MB, PSS {growth_pss:+.1f} MB"
        )
    results["memory"] = memory
    results["failed_items"] = len(transitions.reports.failed)

    renderer.close()
    stop()
    output = Path(args.output)
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(json.dumps(results, indent=2) + "\n")
    print(f"written to {output}", flush=True)
    # Leave without Python's final garbage collection of PySide objects, which can crash
    # after Qt WebEngine has shut down; every result is written by now.
    os._exit(0)


if __name__ == "__main__":
    sys.exit(main())

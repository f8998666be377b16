"""The cost of one look at what the compositor shows (player/renderer/compositor.py), at 1080p.

    .venv/bin/python -m tests.bench.bench_compositor_check [--checks 20] [--every 30]
        [--output tests/bench/figures/compositor_check.json]

- Wayland: a headless sway at 1920x1080 (tests/support/compositor.py) with a fullscreen client
  on it;
  each check is what the watchdog runs: ``grim -t ppm -`` (wlr-screencopy), its 6 MB read from
  the pipe, 13 samples classified (``ppm_frame_class``).
- X11: an Xvfb at 1920x1080; each check is ``CompositorView.look`` on the ``xcb`` platform
  (the root window read from the X server, ``QScreen.grabWindow(0)``, then classified).

CPU is counted where it is spent: this process (the display's part), grim (a child: its rusage),
and the server (sway or Xvfb: /proc/PID/stat). The figure that matters is their sum per check,
and that sum over ``--every`` seconds (the default ``[screen] compositor-check``) as a share of
one core; the target is under 1 %. Prints the figures and writes them as JSON.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from player.renderer.compositor import ppm_frame_class
from tests.bench.proctree import process_cpu
from tests.bench.results import write_figures
from tests.support.compositor import black_window, sway
from tests.support.xvfb import xvfb

WIDTH, HEIGHT = 1920, 1080


def children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def child_of(parent: int, name: str) -> int:
    """The child of ``parent`` called ``name`` (sway under runuser, this process's Xvfb)."""
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            command, rest = stat.split("(", 1)[1].rsplit(")", 1)
            if command == name and int(rest.split()[1]) == parent:
                return int(entry.name)
    raise RuntimeError(f"process {parent} has no child {name}")


def summary(rows: list[dict[str, float]], every: float) -> dict[str, Any]:
    keys = rows[0].keys()
    median = {key: round(statistics.median(row[key] for row in rows) * 1000, 2) for key in keys}
    total = statistics.mean(row["cpu_total"] for row in rows)
    return {
        "checks": len(rows),
        "median_ms": median,
        "mean_cpu_ms_per_check": round(total * 1000, 2),
        "every_s": every,
        "share_of_one_core_percent": round(total / every * 100, 3),
    }


def bench_wayland(checks: int, every: float) -> dict[str, Any]:
    with sway(WIDTH, HEIGHT) as compositor:
        server = child_of(compositor.process.pid, "sway")
        with black_window(compositor):
            time.sleep(1.0)  # its first frames settled
            command = ["grim", "-t", "ppm", "-"]
            rows: list[dict[str, float]] = []
            for n in range(checks + 2):
                time.sleep(0.2)
                wall, own, helper, served = (
                    time.monotonic(), time.process_time(), children_cpu(), process_cpu(server)
                )  # fmt: skip
                done = subprocess.run(
                    command, env=compositor.env(), capture_output=True, check=True, timeout=10
                )
                frame = ppm_frame_class(done.stdout)
                row = {
                    "wall": time.monotonic() - wall,
                    "cpu_display": time.process_time() - own,
                    "cpu_grim": children_cpu() - helper,
                    "cpu_compositor": process_cpu(server) - served,
                }
                row["cpu_total"] = row["cpu_display"] + row["cpu_grim"] + row["cpu_compositor"]
                assert frame == "black", frame
                if n >= 2:  # the first two warm caches up
                    rows.append(row)
    return {"method": "grim (wlr-screencopy), headless sway, pixman", **summary(rows, every)}


def bench_x11(checks: int, every: float) -> dict[str, Any]:
    from PySide6.QtCore import QObject
    from PySide6.QtGui import QGuiApplication

    from player.renderer.compositor import CompositorView

    with xvfb(WIDTH, HEIGHT) as display:
        os.environ["DISPLAY"] = display
        os.environ["QT_QPA_PLATFORM"] = "xcb"
        os.environ.pop("WAYLAND_DISPLAY", None)
        server = child_of(os.getpid(), "Xvfb")
        app = QGuiApplication(["bench-compositor-check"])
        view = CompositorView(QObject(), every, "xcb")
        rows: list[dict[str, float]] = []
        for n in range(checks + 2):
            time.sleep(0.2)
            wall, own, served = time.monotonic(), time.process_time(), process_cpu(server)
            view.look(time.monotonic())
            row = {
                "wall": time.monotonic() - wall,
                "cpu_display": time.process_time() - own,
                "cpu_compositor": process_cpu(server) - served,
            }
            row["cpu_total"] = row["cpu_display"] + row["cpu_compositor"]
            assert view.frame == "black", view.frame
            if n >= 2:
                rows.append(row)
        view.close()
        del app
    return {
        "method": "the X server's root window (QScreen.grabWindow), Xvfb",
        **summary(rows, every),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--checks", type=int, default=20)
    parser.add_argument("--every", type=float, default=30.0, help="seconds between checks")
    parser.add_argument(
        "--output", type=Path, default=Path("tests/bench/figures/compositor_check.json")
    )
    args = parser.parse_args()
    figures = {
        "resolution": f"{WIDTH}x{HEIGHT}",
        "cores": os.cpu_count(),
        "wayland": bench_wayland(args.checks, args.every),
        "x11": bench_x11(args.checks, args.every),
    }
    write_figures(args.output, figures, echo=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

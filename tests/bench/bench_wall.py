"""What a video wall's tile costs against a single screen ([screen] wall).

    .venv/bin/python -m tests.bench.bench_wall [--seconds 20] [--size 1920x1080]
        [--output tests/bench/figures/wall_cost.json]

One ``pdn display`` at a time on an Xvfb of ``--size``, as a single screen and as the top-left
tile of a 2x2 wall (bezel 0.02: items laid out at 3916x2203 for 1080p panels), each showing in
turn, for ``--seconds``, as a request (``POST /schedule``):

- an animated signage page (a moving gradient, a turning card, a ticker: CSS animations; the
  page's viewport is the wall's on the tile, so Chromium paints four times the pixels);
- an H.264 video at the panel's size (1080p, 30 fps, testsrc2): the same file on both;
- on the tile, also an H.264 video at the wall's size (3840x2160), the file a wall would
  really play: each tile decodes the whole of it.

Measured: the display's process tree's CPU (cores, from /proc, after a 3 s settling), its PSS
(MiB, at the end), and for videos the frames presented (the display's health, its own count of
frames drawn) against the frames due. The machine's load average is noted with each row:
other work on this machine changes the figures, so the ratios of rows measured back to back
are what to read. Prints the figures and writes them as JSON.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from tests.bench.bench_sync import REPO, size_of
from tests.bench.loopback import Answer, LoopbackSite
from tests.bench.memory_tools import Display, tree_memory, xvfb
from tests.bench.sync_setup import tree_cpu
from tests.bench.video_tools import MediaSite, require_ffmpeg

PAGE = b"""<!doctype html><html><head><meta charset="utf-8"><style>
html,body{margin:0;height:100%;overflow:hidden;font-family:sans-serif;color:#fff}
body{background:linear-gradient(120deg,#16324a,#b8475f,#275a73);background-size:400% 400%;
 animation:sweep 6s ease-in-out infinite}
@keyframes sweep{0%{background-position:0% 50%}50%{background-position:100% 50%}
 100%{background-position:0% 50%}}
.card{position:absolute;left:30vw;top:25vh;width:40vw;height:40vh;border-radius:3vh;
 background:rgba(255,255,255,.15);animation:turn 8s linear infinite;font-size:8vh;
 display:flex;align-items:center;justify-content:center}
@keyframes turn{to{transform:rotate(360deg)}}
.ticker{position:absolute;bottom:4vh;white-space:nowrap;font-size:5vh;
 animation:run 12s linear infinite}
@keyframes run{from{transform:translateX(100vw)}to{transform:translateX(-100%)}}
</style></head><body><div class="card">Today's menu</div>
<div class="ticker">Soup of the day: tomato &middot; Coffee 2.10 &middot; Open until 18:00
&middot; Welcome to the lobby</div></body></html>"""


def make_video(path: Path, size: tuple[int, int], seconds: float) -> Path:
    if not path.exists():
        subprocess.run(
            [require_ffmpeg(), "-v", "error", "-y", "-f", "lavfi",
             "-i", f"testsrc2=s={size[0]}x{size[1]}:r=30:d={seconds:g}",
             "-c:v", "libx264", "-preset", "veryfast", "-pix_fmt", "yuv420p", "-g", "60",
             "-movflags", "+faststart", str(path)],
            check=True, timeout=1800,
        )  # fmt: skip
    return path


def measure(display: Display, url: str, seconds: float, video: bool) -> dict[str, Any]:
    display.schedule_json(url, seconds + 6)
    deadline = time.time() + 60
    while display.playback().get("content-item") != url:
        if time.time() > deadline:
            raise SystemExit(f"{url} never came on screen")
        time.sleep(0.2)
    time.sleep(3.0)
    load = os.getloadavg()[0]
    cpu0, at0 = tree_cpu(display.process.pid), time.time()
    frames0 = _frames(display) if video else 0
    time.sleep(seconds)
    cpu1, at1 = tree_cpu(display.process.pid), time.time()
    row: dict[str, Any] = {
        "cpu-cores": round((cpu1 - cpu0) / (at1 - at0), 2),
        "pss-mib": round(tree_memory(display.process.pid)["pss_mb"], 1),
        "load-average": round(load, 2),
    }
    if video:
        shown = _frames(display) - frames0
        row["frames-presented-per-s"] = round(shown / (at1 - at0), 1)
        row["of-due-per-s"] = 30
    return row


def _frames(display: Display) -> int:
    video = display.health()["renderer"].get("screen", {}).get("video") or {}
    return int(video.get("frames") or 0)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--size", type=size_of, default=(1920, 1080))
    parser.add_argument("--output", type=Path, default=Path("tests/bench/figures/wall_cost.json"))
    parser.add_argument("--media", type=Path, default=Path("bench-results/bench_wall_media"))
    args = parser.parse_args()
    width, height = args.size
    args.media.mkdir(parents=True, exist_ok=True)
    length = args.seconds + 12
    panel = make_video(args.media / f"panel-{width}x{height}-{length:g}.mp4", args.size, length)
    wall = make_video(
        args.media / f"wall-{2 * width}x{2 * height}-{length:g}.mp4",
        (2 * width, 2 * height),
        length,
    )
    media = MediaSite({p.name: (p.read_bytes(), "video/mp4") for p in (panel, wall)})
    pages = LoopbackSite(lambda path: Answer(PAGE, "text/html") if path == "/page.html" else None)
    work = Path(tempfile.mkdtemp(prefix="pdn-bench-wall-"))
    figures: dict[str, Any] = {
        "when": datetime.now(UTC).isoformat(timespec="seconds"),
        "panel": f"{width}x{height}",
        "cores": os.cpu_count(),
        "seconds": args.seconds,
    }
    setups = {
        "single screen": "",
        "2x2 wall tile": "wall = {columns = 2, rows = 2, column = 0, row = 0, bezel = 0.02}\n",
    }
    for name, wall_line in setups.items():
        with xvfb(width, height) as server:
            display = Display(server, REPO, work, f"[screen]\ncrossfade = 0\n{wall_line}", name[:6])
            try:
                rows = {
                    "animated page": measure(
                        display, f"{pages.base}/page.html", args.seconds, False
                    ),
                    f"video {width}x{height}": measure(
                        display, f"{media.base}/media/{panel.name}", args.seconds, True
                    ),
                }
                if wall_line:
                    rows[f"video {2 * width}x{2 * height} (the wall's size)"] = measure(
                        display, f"{media.base}/media/{wall.name}", args.seconds, True
                    )
                figures[name] = rows
            finally:
                display.stop()
    media.stop()
    pages.stop()
    single, tile = figures["single screen"], figures["2x2 wall tile"]
    figures["tile-over-single"] = {
        key: {
            "cpu": round(tile[key]["cpu-cores"] / max(0.01, single[key]["cpu-cores"]), 2),
            "pss": round(tile[key]["pss-mib"] / max(1.0, single[key]["pss-mib"]), 2),
        }
        for key in single
    }
    text = json.dumps(figures, indent=2)
    print(text)
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""A ``main+ticker`` layout against the same video full screen, in the same run, read from the
screen: CPU, the ticker's frames, the process tree's memory.

    .venv/bin/python -m tests.bench.bench_zones [--rounds 1] [--seconds 30] [--ticker-seconds 20]
        [--video-seconds 20] [--media DIR] [--output FILE] [--no-alone]

Content as a real deployment has it: a 1920x1080 30 fps H.264 file with sound (made by
Debian's ffmpeg, video_tools.make_media, about 6 Mbit/s, every pixel moving), served from
127.0.0.1 with byte ranges and played from the display's cache (its sha256 given); and an RSS
feed of twenty news headlines served from 127.0.0.1 (zones_tools.FeedSite).

Each round runs two sessions, each a fresh ``pdn display`` of this checkout (default
configuration) on an Xvfb of its own at 1920x1080:

- **full**: a set of the video alone, full screen (it loops);
- **zones**: a ``main+ticker`` layout whose main zone plays the same set and whose ticker
  zone (the bottom 108 rows) shows the feed.

In each, once the video plays (and, in the layout, the ticker shows the feed) and
``--settle`` seconds more: the CPU seconds per second of the display's process tree over
``--seconds`` (from /proc; Xvfb's beside); the PSS of the tree (smaps_rollup, by role) after
it; then, in the layout only, the ticker's strip recorded by ``ffmpeg -f x11grab`` at 150 fps
for ``--ticker-seconds`` (tests/bench/ticker_tools.measure_ticker): its frame times, their
p95, and the frames where it did not move (held or not moved left). The recorder's CPU is not
in the display's figure; it runs after the CPU window, so it does not crowd it either.

Beside them, once per run (``--no-alone`` skips it): the ticker alone in a bare window of its
own process (``python -m tests.bench.ticker_tools``), the same strip recorded the same way:
what the ticker does when nothing else draws.

It prints a table and writes every figure to ``bench-results/bench_zones.json``
(``--output``), after every session. A default run takes about 5 minutes. Needs Xvfb and ffmpeg.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

from tests.bench.memory_tools import Display, while_alive, xvfb
from tests.bench.proctree import foreign_engine_processes, process_cpu, tree_cpu, tree_memory
from tests.bench.results import write_figures
from tests.bench.stage_tools import xvfb_pid
from tests.bench.ticker_tools import measure_ticker
from tests.bench.video_tools import MediaSite, Video, ended_lines, make_media, require_ffmpeg
from tests.bench.zones_tools import (
    TICKER_BOX,
    FeedSite,
    full_screen_cds,
    item,
    layout_cds,
    zones_playing,
)
from tests.support.waiting import wait_until

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "bench-results"
SESSIONS = ("full", "zones")


def session(
    kind: str, args: argparse.Namespace, video: Video, site: MediaSite, feed: FeedSite, work: Path
) -> dict[str, Any]:
    """One display playing the video full screen (``full``) or in the layout (``zones``)."""
    url = f"{site.base}/media/{video.name}"
    items = [item(url, video.codec.content_type, video.sha256)]
    document = layout_cds(items, feed.url) if kind == "zones" else full_screen_cds(items)
    found: dict[str, Any] = {"kind": kind}
    with xvfb(1920, 1080) as server:
        name = f"{kind}-{len(list(work.iterdir()))}"
        display = Display(server, ROOT, work, "", name)
        try:
            display.schedule_cds(document)

            def playing() -> bool:
                record = display.playback()
                if kind == "zones":
                    return zones_playing(record, url, feed.url)
                return record.get("content-item") == url

            began = time.monotonic()
            wait_until(while_alive(display, playing), 300, f"the {kind} session playing", 0.5)
            found["to_playing_s"] = round(time.monotonic() - began, 1)
            time.sleep(args.settle)
            x_pid = xvfb_pid(server)
            load = os.getloadavg()[0]
            tree0, x0, t0 = tree_cpu(display.pid), process_cpu(x_pid), time.monotonic()
            time.sleep(args.seconds)
            tree1, x1, t1 = tree_cpu(display.pid), process_cpu(x_pid), time.monotonic()
            found["cpu_s_per_s"] = round((tree1 - tree0) / (t1 - t0), 3)
            found["xvfb_cpu_s_per_s"] = round((x1 - x0) / (t1 - t0), 3)
            found["loadavg_1m_before"] = load
            memory = tree_memory(display.pid)
            found["pss_mb"] = round(memory["pss_mb"], 1)
            found["processes"] = memory["processes"]
            found["pss_by_role_mb"] = {
                role: round(figures["pss_mb"], 1) for role, figures in memory["by_role"].items()
            }
            found["foreign_engine_processes"] = foreign_engine_processes(display.pid)
            if kind == "zones":
                grabs = work / f"{name}-ticker"
                grabs.mkdir()
                figures, recorder = measure_ticker(
                    server.display, TICKER_BOX, args.ticker_seconds, grabs
                )
                found["ticker"] = asdict(figures)
                found["ticker"]["recorder_cpu_percent"] = round(
                    100 * recorder / args.ticker_seconds, 1
                )
                found["ticker"].update(refresh_misses(found["ticker"], args.refresh))
            record = display.playback()
            found["record"] = {
                key: record.get(key) for key in ("layout", "zone", "content-item", "zones")
            }
            found["alive"] = display.alive()
            found["videos_ended"] = [
                {key: line[key] for key in ("dropped", "frames", "shown_percent")}
                for line in ended_lines(display.log_path)
            ]
        finally:
            display.stop()
    return found


def refresh_misses(ticker: dict[str, Any], refresh: float) -> dict[str, Any]:
    """Against the display's refresh: the refresh intervals of the recording in which the
    text took no step to the left, and how many there were."""
    refreshes = round(ticker["seconds"] * refresh)
    steps = ticker["frames"] - 1 - ticker["wrong_way"]
    return {"refresh_hz": refresh, "not_moved_of_refreshes": [max(0, refreshes - steps), refreshes]}


def ticker_alone(seconds: float, refresh: float) -> dict[str, Any]:
    """``python -m tests.bench.ticker_tools``: the ticker in a bare window, as JSON."""
    done = subprocess.run(
        [sys.executable, "-m", "tests.bench.ticker_tools", "--seconds", f"{seconds:g}"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300 + seconds,
        check=False,
    )
    if done.returncode != 0:
        return {"error": done.stderr[-1000:]}
    found: dict[str, Any] = json.loads(done.stdout)
    return {**found, **refresh_misses(found, refresh)}


def mean(values: list[float]) -> float | None:
    return round(sum(values) / len(values), 3) if values else None


def table(results: dict[str, Any]) -> list[dict[str, Any]]:
    """The layout against full screen (CPU, PSS, the video's frames: means over the rounds),
    and the ticker's frames in the layout against the ticker alone."""
    runs = results["rounds"]

    def figure(kind: str, key: str) -> float | None:
        return mean([r[kind][key] for r in runs if key in r.get(kind, {})])

    def shown(kind: str) -> float | None:
        plays = [line for r in runs for line in r.get(kind, {}).get("videos_ended", [])]
        return mean([line["shown_percent"] for line in plays])

    def ticker(key: str) -> Any:
        found = [r["zones"]["ticker"][key] for r in runs if "ticker" in r.get("zones", {})]
        if found and isinstance(found[0], list):  # [missed, of]: summed over the rounds
            return [sum(pair[0] for pair in found), sum(pair[1] for pair in found)]
        return mean(found)

    alone = results.get("ticker_alone") or {}
    rows = []
    for label, key in (("display tree CPU s/s", "cpu_s_per_s"), ("PSS of the tree, MB", "pss_mb")):
        full, zones = figure("full", key), figure("zones", key)
        ratio = round(zones / full, 2) if full and zones is not None else None
        rows.append({"figure": label, "full screen": full, "main+ticker": zones, "ratio": ratio})
    full, zones = shown("full"), shown("zones")
    rows.append(
        {
            "figure": "video frames shown, % (the display's count)",
            "full screen": full,
            "main+ticker": zones,
            "ratio": round(zones / full, 2) if full and zones is not None else None,
        }
    )
    for label, key in (
        ("ticker frames/s", "fps"),
        ("ticker frame time p95, ms", "frame_ms_p95"),
        ("ticker frames not moved (at its own rate)", "not_moved"),
        ("  of which held", "held"),
        ("ticker refreshes without a step [missed, of]", "not_moved_of_refreshes"),
        ("ticker px/s", "px_per_second"),
    ):
        rows.append({"figure": label, "ticker alone": alone.get(key), "main+ticker": ticker(key)})
    return rows


def arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    add = parser.add_argument
    add("--rounds", type=int, default=1, help="full-screen and layout sessions, in turn")
    add("--seconds", type=float, default=30.0, help="the CPU window of each session")
    add("--settle", type=float, default=5.0, help="seconds from playing to the CPU window")
    add("--ticker-seconds", type=float, default=20.0, help="the ticker's recording")
    add("--refresh", type=float, default=60.0, help="the display's refresh rate, Hz")
    add("--video-seconds", type=float, default=20.0, help="length of the H.264 file")
    add("--media", type=Path, default=RESULTS / "bench_video_media")
    add("--output", type=Path, default=RESULTS / "bench_zones.json")
    add("--no-alone", action="store_true", help="skip the ticker alone in a bare window")
    return parser.parse_args()


def main() -> int:
    args = arguments()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # finally clauses still run
    require_ffmpeg()
    begun = time.monotonic()
    video = make_media(args.media, ["h264"], args.video_seconds)["h264"]
    results: dict[str, Any] = {
        "screen": "1920x1080 Xvfb",
        "cpus": os.cpu_count(),
        "load_average_start": [round(value, 2) for value in os.getloadavg()],
        "options": {key: str(value) for key, value in vars(args).items()},
        "video": {
            "file": str(video.path),
            "frames": video.frames,
            "mbit_per_s": video.bitrate_mbps,
        },
        "rounds": [],
    }

    def save() -> None:
        results["elapsed_s"] = round(time.monotonic() - begun, 1)
        results["load_average_end"] = [round(value, 2) for value in os.getloadavg()]
        write_figures(args.output, results, quiet=True)

    site = MediaSite({video.name: (video.path.read_bytes(), video.codec.content_type)})
    feed = FeedSite()
    work = Path(tempfile.mkdtemp(prefix="pdn-bench-zones-"))
    try:
        for number in range(args.rounds):
            found: dict[str, Any] = {}
            results["rounds"].append(found)
            for kind in SESSIONS:
                print(f"round {number + 1}: {kind} ...", flush=True)
                try:
                    found[kind] = session(kind, args, video, site, feed, work)
                except (Exception, SystemExit) as error:  # one failed session must not end it
                    if isinstance(error, SystemExit) and error.code == 143:
                        raise
                    print(f"  FAILED: {error}", flush=True)
                    found[kind] = {"error": str(error)}
                save()
        if not args.no_alone:
            print("the ticker alone (ticker_tools) ...", flush=True)
            results["ticker_alone"] = ticker_alone(args.ticker_seconds, args.refresh)
    finally:
        site.stop()
        feed.stop()
    results["feed_requests"] = feed.requests
    results["table"] = table(results)
    save()
    for row in results["table"]:
        print("  ".join(f"{key}: {value}" for key, value in row.items()))
    print(
        f"{results['elapsed_s'] / 60:.1f} minutes; load average {results['load_average_end']}; "
        f"written to {args.output}; logs in {work}",
        flush=True,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""A ``main+ticker`` layout played for hours as a real deployment plays it: memory, health and
the ticker's motion, sampled the whole time.

    .venv/bin/python -m tests.bench.soak_zones [--minutes 120] [--pss-every 600]
        [--settle-minutes 20] [--health-every 30] [--item-seconds 5] [--output FILE]

A check of the script and the display, on a loaded machine: ``--minutes 10 --pss-every 60
--settle-minutes 2``.

One ``pdn display`` of this checkout (default configuration) on an Xvfb of its own at
1920x1080 plays a ``main+ticker`` layout: in the main zone, in order and ``--item-seconds``
each, four 1920x1080 pictures (JPEG and PNG, from the display's cache), three signage pages
(signage_content: a clock, a moving ticker of their own, a table, charts, a script allocating
every second) and a 1080p H.264 video with sound (its own length, ``--item-seconds``; cached);
in the ticker zone, an RSS feed of news headlines. Everything is served from 127.0.0.1.

Sampled:

- **PSS** of the display's process tree (smaps_rollup) every ``--pss-every`` seconds, read
  once the main zone's first picture has shown for 2 s (the same point of its loop each
  time: a page's render process, 60-70 MB, is in the tree while it shows), with the number
  of other programs' web-engine processes then (they make the tree's PSS read lower), and
  its least-squares slope in MB an hour over the samples after the first
  ``--settle-minutes``. Target: under 5 MB an hour.
- **health**: ``GET /x/health`` every ``--health-every`` seconds; a sample whose renderer
  says the screen is not right (the visual watchdog, each zone's rectangle) is counted with
  its problem. Target: none.
- **the ticker's motion** once a second: its strip read twice from Xvfb's framebuffer, 50 ms
  apart (a few frames at 60 Hz; zones_tools.TickerReader: a mapped file, nothing asked of
  the X server or the display), and the shift of its text between the two. A second whose
  text did not move left is counted, with its time, the main zone's item and how long before
  it started, and whether the text moved over 250 ms more (a hitch) or not (stopped).
  Target: none.
- the playback record's ``sequence`` (changes in either zone), and the display alive.

The samples start once the layout plays and its ticker moves.

Figures are written to ``bench-results/soak_zones.json`` (``--output``) after every PSS sample
and at the end, and the verdicts printed. Needs Xvfb and ffmpeg.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path
from typing import Any

from tests.bench.memory_tools import Display, while_alive, xvfb
from tests.bench.proctree import foreign_engine_processes, tree_memory
from tests.bench.results import write_figures
from tests.bench.signage_content import ContentServer
from tests.bench.signage_content import make_media as make_signage_media
from tests.bench.video_tools import make_media as make_videos
from tests.bench.video_tools import require_ffmpeg
from tests.bench.zones_tools import FeedSite, TickerReader, item, layout_cds, slope_mb_per_hour
from tests.bench.zones_tools import zones_playing as playing_layout
from tests.support.waiting import wait_until

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "bench-results"
SLOPE_TARGET = 5.0  # MB an hour
PAGES = (3, 11, 27)  # signage_content page numbers


def main_items(site: ContentServer, media: Path, seconds: float) -> tuple[list[str], str]:
    """The main zone's items (pictures, pages and the H.264 video, in turns) and the URL of
    the first, at whose showing PSS is read."""
    images, _ = make_signage_media(media)
    video = make_videos(media, ["h264"], seconds)["h264"]
    pictures = [
        item(f"{site.url}/media/{image.name}", image.content_type, image.sha256, seconds)
        for image in images
    ]
    pages = [item(f"{site.url}/page/{n}.html", "text/html", None, seconds) for n in PAGES]
    clip = item(f"{site.url}/media/{video.name}", video.codec.content_type, video.sha256)
    order = [pictures[0], pages[0], pictures[1], clip, pictures[2], pages[1], pictures[3], pages[2]]
    return order, f"{site.url}/media/{images[0].name}"


def arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    add = parser.add_argument
    add("--minutes", type=float, default=120.0, help="how long the layout plays, measured")
    add("--pss-every", type=float, default=600.0, help="seconds between PSS samples")
    add(
        "--settle-minutes",
        type=float,
        default=20.0,
        help="PSS samples before this are not in the slope",
    )
    add("--health-every", type=float, default=30.0, help="seconds between GET /x/health")
    add("--item-seconds", type=float, default=5.0, help="each main-zone item's time")
    add("--media", type=Path, default=RESULTS / "soak_zones_media")
    add("--output", type=Path, default=RESULTS / "soak_zones.json")
    return parser.parse_args()


class Soak:
    """The samples of one run, and its figures."""

    def __init__(self, args: argparse.Namespace, display: Display, reader: TickerReader) -> None:
        self.args, self.display, self.reader = args, display, reader
        self.begun = time.monotonic()
        self.pss: list[tuple[float, float]] = []  # (seconds in, MB)
        self.foreign: list[int] = []  # at each PSS sample
        self.health_samples = 0
        self.wrong: list[dict[str, Any]] = []
        self.health_errors: list[str] = []
        self.seconds_sampled = 0
        self.not_moving: list[dict[str, Any]] = []
        self.first_sequence: int | None = None
        self.last_sequence: int | None = None

    def elapsed(self) -> float:
        return time.monotonic() - self.begun

    def at_anchor(self, url: str, after: float = 2.0) -> bool:
        """Whether the main zone has shown ``url`` for ``after`` seconds: PSS is read at the
        same point of the main zone's loop each time (a page's render process is in the tree
        while it shows, 60-70 MB, and may be after), so the samples compare."""
        try:
            main = (self.display.playback().get("zones") or {}).get("main") or {}
        except Exception:  # health counts a display that does not answer
            return False
        started = main.get("started")
        return (
            main.get("content-item") == url
            and isinstance(started, str)
            and time.time() - datetime.fromisoformat(started).timestamp() >= after
        )

    def sample_pss(self) -> None:
        memory = tree_memory(self.display.pid)
        self.pss.append((round(self.elapsed(), 1), round(memory["pss_mb"], 1)))
        # Other programs' web-engine processes share pages with the tree: its PSS reads lower.
        self.foreign.append(foreign_engine_processes(self.display.pid))
        print(f"  {self.elapsed() / 60:5.1f} min: PSS {memory['pss_mb']:.1f} MB", flush=True)

    def sample_health(self) -> None:
        self.health_samples += 1
        try:
            health = self.display.health()
            record = self.display.playback()
        except Exception as error:  # a display that does not answer is a finding, not the end
            self.health_errors.append(f"{round(self.elapsed())} s: {error}")
            return
        screen = (health.get("renderer") or {}).get("screen") or {}
        if not screen.get("right"):
            self.wrong.append(
                {
                    "at_s": round(self.elapsed()),
                    "problem": screen.get("problem") or health["renderer"].get("problem"),
                    "zones": {
                        name: zone.get("content-item")
                        for name, zone in (record.get("zones") or {}).items()
                    },
                }
            )
        sequence = record.get("sequence")
        if isinstance(sequence, int):
            self.first_sequence = sequence if self.first_sequence is None else self.first_sequence
            self.last_sequence = sequence

    def sample_ticker(self) -> None:
        self.seconds_sampled += 1
        motion = self.reader.motion()
        if motion.moved:
            return
        at = round(self.elapsed(), 1)
        # A hitch or a stop: read it again over a longer gap, and what the main zone played.
        later = self.reader.motion(0.25)
        main: dict[str, Any] = {}
        with contextlib.suppress(Exception):
            main = (self.display.playback().get("zones") or {}).get("main") or {}
        started = main.get("started")
        self.not_moving.append(
            {
                "at_s": at,
                "shift": motion.shift,
                "changed": motion.changed,
                "blank": motion.blank,
                "moved_over_250ms_after": later.moved,
                "main_item": main.get("content-item"),
                "main_started_s_before": (
                    round(time.time() - datetime.fromisoformat(started).timestamp(), 2)
                    if isinstance(started, str)
                    else None
                ),
            }
        )

    def figures(self) -> dict[str, Any]:
        settle = self.args.settle_minutes * 60
        after = [(t, mb) for t, mb in self.pss if t >= settle]
        slope = slope_mb_per_hour(after)
        return {
            "minutes": round(self.elapsed() / 60, 2),
            "pss_samples_mb": self.pss,
            "foreign_engine_processes_at_pss": self.foreign,
            "pss_slope_mb_per_hour_after_settle": slope,
            "pss_samples_in_slope": len(after),
            "pss_slope_pass": None if slope is None else slope < SLOPE_TARGET,
            "health_samples": self.health_samples,
            "health_wrong": len(self.wrong),
            "health_wrong_samples": self.wrong[:50],
            "health_errors": self.health_errors[:50],
            "ticker_seconds_sampled": self.seconds_sampled,
            "ticker_seconds_not_moving": len(self.not_moving),
            "ticker_seconds_stopped": sum(
                1 for sample in self.not_moving if not sample["moved_over_250ms_after"]
            ),
            "ticker_not_moving_samples": self.not_moving[:100],
            "changes": (
                None
                if self.first_sequence is None or self.last_sequence is None
                else self.last_sequence - self.first_sequence
            ),
            "display_alive": self.display.alive(),
        }


def run(args: argparse.Namespace, results: dict[str, Any]) -> None:
    require_ffmpeg()
    site, feed = ContentServer(args.media), FeedSite()
    work = Path(tempfile.mkdtemp(prefix="pdn-soak-zones-"))
    results["workdir"] = str(work)
    try:
        items, anchor = main_items(site, args.media, args.item_seconds)
        with xvfb(1920, 1080) as server:
            display = Display(server, ROOT, work, "", "soak")
            reader = TickerReader(server.framebuffer)
            try:
                display.schedule_cds(layout_cds(items, feed.url))
                wait_until(
                    while_alive(
                        display,
                        lambda: (
                            playing_layout(display.playback(), None, feed.url)
                            and reader.motion().moved
                        ),
                    ),
                    300,
                    "the layout playing, its ticker moving",
                    0.5,
                )
                soak = Soak(args, display, reader)
                end = args.minutes * 60
                next_pss = next_health = 0.0
                while soak.elapsed() < end and display.alive():
                    second = soak.elapsed()
                    if second >= next_pss and soak.at_anchor(anchor):
                        soak.sample_pss()
                        next_pss += args.pss_every
                        results.update(soak.figures())
                        write_figures(args.output, results, quiet=True)
                    if second >= next_health:
                        soak.sample_health()
                        next_health += args.health_every
                    soak.sample_ticker()
                    time.sleep(max(0.0, 1.0 - (soak.elapsed() - second)))
                results.update(soak.figures())
            finally:
                reader.close()
                display.stop()
    finally:
        site.stop()
        feed.stop()
        results["feed_requests"] = feed.requests
        results["load_average_end"] = [round(value, 2) for value in os.getloadavg()]
        write_figures(args.output, results, quiet=True)


def main() -> int:
    args = arguments()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # finally clauses still run
    results: dict[str, Any] = {
        "screen": "1920x1080 Xvfb",
        "cpus": os.cpu_count(),
        "load_average_start": [round(value, 2) for value in os.getloadavg()],
        "options": {key: str(value) for key, value in vars(args).items()},
    }
    run(args, results)
    slope = results.get("pss_slope_mb_per_hour_after_settle")
    print(
        f"PSS slope after {args.settle_minutes:g} min: {slope} MB/h (target < {SLOPE_TARGET:g}); "
        f"wrong in health: {results.get('health_wrong')} of {results.get('health_samples')}; "
        f"seconds the ticker did not move: {results.get('ticker_seconds_not_moving')} of "
        f"{results.get('ticker_seconds_sampled')}; changes: {results.get('changes')}; "
        f"load average {results['load_average_end']}; written to {args.output}",
        flush=True,
    )
    passed = (
        results.get("pss_slope_pass") is not False
        and results.get("health_wrong") == 0
        and results.get("ticker_seconds_not_moving") == 0
        and results.get("display_alive")
    )
    return 0 if passed else 1


if __name__ == "__main__":
    sys.exit(main())

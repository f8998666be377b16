"""The memory benchmark's feeder: keeps a display busy with the content mix and watches what
reaches its screen through the playback record (``tests/bench/bench_memory.py``)."""

from __future__ import annotations

import time
from typing import Any

from tests.bench.memory_tools import Display
from tests.bench.signage_content import ContentServer
from tests.bench.stats import percentile

# Page, image (the queue runs dry), video: the signage mix (pages 60 %, images 20 %, videos
# 20 %) and a video-heavy one (videos 70 %, pages 20 %, images 10 %).
MIXES = {"signage": "PPIPVPPIVP", "video": "VPVVIVVPVV"}
AHEAD = 2  # requests queued beyond the one on screen


class Driver:
    """Keeps the display fed with the mix and counts transitions by the playback sequence."""

    def __init__(
        self,
        display: Display,
        content: ContentServer,
        videos: list[str],
        seconds: float,
        mix: str = MIXES["signage"],
    ) -> None:
        self.mix = mix
        self.display = display
        self.content = content
        self.videos = videos
        self.seconds = seconds
        self.plan_index = 0
        self.sent = 0
        self.pending: list[tuple[str, float]] = []  # requests sent, not yet seen on screen
        self.shown = {"page": 0, "image": 0, "video": 0, "idle": 0, "other": 0}
        self.never_shown = 0
        self.image_timeouts = 0
        self.record: dict[str, Any] = {}
        self.transition = ""  # the last change seen, "previous -> current"
        self.record_seen = time.monotonic()
        self.last_shown = time.monotonic()
        # Seconds from one record to the next, by "kind -> kind": an item of 1 s that stays
        # longer waited for the next one to load (with one web view, the still's time).
        self.intervals: dict[str, list[float]] = {}

    def _describe(self, record: dict[str, Any]) -> str:
        url = str(record.get("content-item") or "")
        return f"{record.get('origin')} {url.rsplit('/', 1)[-1]}"

    def _kind(self, record: dict[str, Any]) -> str:
        url = str(record.get("content-item") or "")
        if record.get("origin") == "idle":
            return "idle"
        if "/page/" in url:
            return "page"
        if any(url.endswith(s) or f"{s}?" in url for s in (".webm", ".mp4")):
            return "video"
        if "/media/" in url:
            return "image"
        return "other"

    def observe(self) -> int:
        """Read the playback record; returns its sequence."""
        record = self.display.playback()
        if record.get("sequence") != self.record.get("sequence"):
            self.transition = f"{self._describe(self.record)} -> {self._describe(record)}"
            now = time.monotonic()
            if self.record:
                pair = f"{self._kind(self.record)} -> {self._kind(record)}"
                self.intervals.setdefault(pair, []).append(now - self.record_seen)
            self.record, self.record_seen = record, now
            self.shown[self._kind(record)] += 1
            url = record.get("content-item")
            for index, (sent_url, _) in enumerate(self.pending):
                if sent_url == url:  # the queue is first in, first out: earlier ones are done
                    del self.pending[: index + 1]
                    self.last_shown = time.monotonic()
                    break
        if self.pending and time.monotonic() - self.pending[0][1] > 30 + AHEAD * self.seconds:
            self.pending.pop(0)  # failed or skipped by the display
            self.never_shown += 1
        return int(record.get("sequence") or 0)

    def feed(self) -> None:
        step = self.mix[self.plan_index % len(self.mix)]
        now = time.monotonic()
        if step == "I":
            # Let the queue run dry: the schedule's next cached image takes the screen; the
            # next request goes once it has had most of its time (it is loaded behind it).
            showing_image = self.record.get("origin") == "schedule"
            if not self.pending and showing_image and now - self.record_seen >= 0.7 * self.seconds:
                self.plan_index += 1
            elif not self.pending and now - self.last_shown > self.seconds + 15:
                self.image_timeouts += 1
                self.plan_index += 1
            return
        if len(self.pending) >= AHEAD:
            return
        n = self.sent
        if step == "P":
            url = f"{self.content.url}/page/{n}.html"
        else:
            url = f"{self.content.url}/media/{self.videos[n % len(self.videos)]}?n={n}"
        self.display.schedule_json(url, self.seconds)
        self.pending.append((url, now))
        self.sent += 1
        self.plan_index += 1

    def summary(self) -> dict[str, Any]:
        return {
            "shown": self.shown,
            "requests_sent": self.sent,
            "requests_never_shown": self.never_shown,
            "image_timeouts": self.image_timeouts,
            "seconds_between_records": {
                pair: {
                    "n": len(values),
                    "p50": round(percentile(values, 0.5), 2),
                    "p95": round(percentile(values, 0.95), 2),
                }
                for pair, values in sorted(self.intervals.items())
            },
        }

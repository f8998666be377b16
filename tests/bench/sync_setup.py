"""What bench_sync.py sets up: the machine's load as the figures report it, and the
synchronised set it plays (its media, its turns and their grid)."""

from __future__ import annotations

import contextlib
import hashlib
import os
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from cds.parser import parse
from cds.playlist import Playlist
from player.medialength import media_length
from tests.bench.memory_tools import process_tree
from tests.bench.sync_tools import (
    PALETTE,
    numbered_video,
    solid_png,
)
from tests.bench.video_tools import MediaSite

TICK = os.sysconf("SC_CLK_TCK")
SET = "bench-sync"
STEP_S = 2.0
VIDEO_S = 12.0


# -- the machine ------------------------------------------------------------------------------


def cpu_busy() -> tuple[float, float]:
    """(busy, total) jiffies of all CPUs since boot."""
    with open("/proc/stat") as stream:
        fields = [float(v) for v in stream.readline().split()[1:]]
    idle = fields[3] + fields[4]
    return sum(fields) - idle, sum(fields)


def tree_cpu(root: int) -> float:
    total = 0.0
    for pid, _ in process_tree(root):
        with contextlib.suppress(OSError, IndexError):
            with open(f"/proc/{pid}/stat") as stream:
                fields = stream.read().rsplit(")", 1)[1].split()
            total += (int(fields[11]) + int(fields[12])) / TICK
    return total


def autogroup() -> str | None:
    """This session's scheduling group and its niceness (``/proc/self/autogroup``), if any."""
    with contextlib.suppress(OSError):
        return Path("/proc/self/autogroup").read_text().strip()
    return None


def busiest_others(own: set[int], count: int = 5) -> list[str]:
    """The processes not ours using the most CPU over a second (what else loads the machine)."""

    def sample() -> dict[int, tuple[str, float]]:
        found = {}
        for entry in os.listdir("/proc"):
            if not entry.isdigit() or int(entry) in own:
                continue
            with contextlib.suppress(OSError, IndexError):
                with open(f"/proc/{entry}/stat") as stream:
                    text = stream.read()
                name = text[text.index("(") + 1 : text.rindex(")")]
                fields = text.rsplit(")", 1)[1].split()
                found[int(entry)] = (name, (int(fields[11]) + int(fields[12])) / TICK)
        return found

    before = sample()
    time.sleep(1.0)
    after = sample()
    used = [(after[pid][1] - before[pid][1], after[pid][0]) for pid in after if pid in before]
    return [
        f"{name} {share * 100:.0f} %"
        for share, name in sorted(used, reverse=True)[:count]
        if share > 0.02
    ]


# -- the set and its grid -----------------------------------------------------------------------


@dataclass
class Media:
    site: MediaSite
    video: Path
    items: list[tuple[str, str, str, float | None, str | None]]  # name, url, type, seconds, sha

    def cds(self, name: str = SET) -> bytes:
        body = ""
        for _, url, kind, seconds, sha in self.items:
            duration = (
                f"<constraints><scheduling-constraints><preferred-duration>{seconds:g} seconds"
                "</preferred-duration></scheduling-constraints></constraints>"
                if seconds is not None
                else ""
            )
            hashes = f'<hashes><hash type="sha256">{sha}</hash></hashes>' if sha else ""
            body += (
                f'<content-item content-type="{kind}">{duration}<requires-file>{hashes}'
                f"<sources><uri>{url}</uri></sources></requires-file></content-item>"
            )
        return (
            f'<content-set name="{name}"><constraints><scheduling-constraints>'
            '<playback order="inorder" sync="wall-clock"/></scheduling-constraints>'
            f"</constraints>{body}</content-set>"
        ).encode()


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def make_media(work: Path, size: tuple[int, int]) -> Media:
    video = numbered_video(work / "numbered.mp4", size, VIDEO_S)
    yellow = solid_png(work / "yellow.png", size, PALETTE["yellow"])
    magenta = solid_png(work / "magenta.png", size, PALETTE["magenta"])
    files = {
        path.name: (path.read_bytes(), kind)
        for path, kind in ((video, "video/mp4"), (yellow, "image/png"), (magenta, "image/png"))
    }
    site = MediaSite(files)

    def page(name: str) -> str:
        return f"{site.base}/solid/{''.join(f'{c:02x}' for c in PALETTE[name])}.html"

    items = [
        ("red", page("red"), "text/html", STEP_S, None),
        ("yellow", f"{site.base}/media/yellow.png", "image/png", STEP_S, sha256(yellow)),
        ("green", page("green"), "text/html", STEP_S, None),
        ("magenta", f"{site.base}/media/magenta.png", "image/png", STEP_S, sha256(magenta)),
        ("blue", page("blue"), "text/html", STEP_S, None),
        ("video", f"{site.base}/media/numbered.mp4", "video/mp4", None, sha256(video)),
    ]
    return Media(site, video, items)


@dataclass(frozen=True)
class Turn:
    item: str
    start: float
    end: float


class Grid:
    """The turns the displays should follow (the same code: cds.playlist with the CDS)."""

    def __init__(self, media: Media) -> None:
        length = media_length(media.video)
        names = {url: name for name, url, *_ in media.items}
        playlist = Playlist(UTC, natural_length=lambda item: length)
        playlist.set_documents([parse(media.cds()).root])
        self._playlist = playlist
        self._names = names
        self.cycle = 5 * STEP_S + (length or 0.0)

    def turn(self, when: float) -> Turn:
        chosen = self._playlist.next(datetime.fromtimestamp(when, UTC), lambda item: True)
        assert chosen is not None and chosen.slot is not None
        return Turn(
            self._names[chosen.item.url], chosen.slot.start.timestamp(), chosen.slot.end.timestamp()
        )

    def turns(self, start: float, end: float) -> list[Turn]:
        found, at = [], start
        while at < end:
            turn = self.turn(at)
            found.append(turn)
            at = turn.end + 1e-6
        return found

    def next_start(self, item: str, after: float) -> float:
        return next(
            t.start
            for t in self.turns(after, after + 3 * self.cycle)
            if t.item == item and t.start > after
        )

"""What the zone benchmarks (bench_zones.py, soak_zones.py) share: a news feed served from
loopback, the CDS of a ``main+ticker`` layout and of the same main set full screen, where the
ticker is on a 1920x1080 screen, and a cheap reading of whether it moves, from Xvfb's
framebuffer (mapped: a reading costs the X server nothing).

No Qt is imported here (the measured processes' PSS must not shrink by our share of Qt's pages).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime
from pathlib import Path
from typing import Any
from xml.sax.saxutils import escape

from tests.bench.loopback import Answer, LoopbackSite
from tests.bench.memory_tools import Framebuffer
from tests.support.tickerscreen import Box, shift_between

SCREEN = (1920, 1080)
# main+ticker (cds/layouts.py): main is the top 0.9 of the screen, the ticker the rest.
TICKER_BOX: Box = (0, 972, 1920, 108)
LAYOUT = "bench-zones"

# A morning's headlines, as a regional news site's feed carries them: lengths, digits,
# capitals, quotes and punctuation as they come.
NEWS = (
    "City council approves new cycle lanes on the riverside after two-year consultation",
    "Rail operator warns of delays on the northern line this weekend as engineers replace track",
    "Local hospital opens 24-bed ward to cut A&E waiting times",
    "Inflation falls to 2.3% in October, lowest in three years",
    'Football: United come from behind to win 3-2 in "a night to remember"',
    "Weather: heavy rain expected overnight, with gusts of up to 60 mph on the coast",
    "Schools to get £12m for new science labs, education minister says",
    "Airport passenger numbers back above 2019 levels for the first time",
    "Council tax to rise by 4.9% from April after budget vote",
    "Museum's dinosaur exhibition extended until the end of January",
    "Police appeal for witnesses after collision on the A34 near Oxford",
    "Energy prices: regulator's cap to fall by £94 a year for a typical household",
    "Tech firm to create 400 jobs at new campus on the former gasworks site",
    "Marathon road closures: what you need to know for Sunday",
    "Food bank demand up by a third, charity says",
    "Scientists at the university develop a blood test that spots cancer earlier",
    "Bus fares capped at £2 until the end of next year",
    "Theatre's Christmas pantomime sells out in record time",
    "Ferry services cancelled as storm moves across the channel",
    "Stock markets close higher as investors welcome rate decision",
)


def rss(titles: tuple[str, ...] = NEWS, base: str = "https://news.example") -> bytes:
    """An RSS 2.0 feed of ``titles``, newest first, each with its link, guid and date."""
    now = datetime.now(UTC)
    items = "".join(
        f"<item><title>{escape(title)}</title><link>{base}/story/{n}</link>"
        f'<guid isPermaLink="false">story-{n}</guid>'
        f"<pubDate>{format_datetime(now - timedelta(minutes=17 * n))}</pubDate>"
        f"<description>{escape(title)}.</description></item>"
        for n, title in enumerate(titles)
    )
    return (
        '<?xml version="1.0" encoding="UTF-8"?><rss version="2.0"><channel>'
        f"<title>Regional news</title><link>{base}/</link><description>Top stories</description>"
        f"<lastBuildDate>{format_datetime(now)}</lastBuildDate>{items}</channel></rss>"
    ).encode()


class FeedSite:
    """``/news.rss`` on 127.0.0.1, made afresh at each request as a news site's is."""

    def __init__(self) -> None:
        self.requests = 0
        self.site = LoopbackSite(self._answer)
        self.url = f"{self.site.base}/news.rss"

    def _answer(self, path: str) -> Answer | None:
        if path != "/news.rss":
            return None
        self.requests += 1
        return Answer(rss(), "application/rss+xml; charset=utf-8", "max-age=60")

    def stop(self) -> None:
        self.site.stop()


# -- the documents ----------------------------------------------------------------------------


def item(
    url: str, content_type: str, sha256: str | None = None, seconds: float | None = None
) -> str:
    """A content item of ``url``: from the display's cache when ``sha256`` is given; for
    ``seconds`` when given, else its own length (a video) or the set's."""
    duration = (
        "<constraints><scheduling-constraints>"
        f"<preferred-duration>{seconds:g} seconds</preferred-duration>"
        "</scheduling-constraints></constraints>"
        if seconds is not None
        else ""
    )
    hashes = f'<hashes><hash type="sha256">{sha256}</hash></hashes>' if sha256 else ""
    return (
        f'<content-item content-type="{content_type}">{duration}<requires-file>{hashes}'
        f"<sources><uri>{escape(url)}</uri></sources></requires-file></content-item>"
    )


def main_set(name: str, items: list[str]) -> str:
    return (
        f'<content-set name="{name}"><constraints><scheduling-constraints>'
        '<playback order="inorder"/></scheduling-constraints></constraints>'
        f"{''.join(items)}</content-set>"
    )


def full_screen_cds(items: list[str]) -> bytes:
    """The main set's items alone, full screen (a set without a layout)."""
    return main_set(LAYOUT, items).encode()


def layout_cds(items: list[str], feed: str) -> bytes:
    """A ``main+ticker`` layout: ``items`` in the main zone, the feed ``feed`` in the ticker."""
    return (
        f'<content-set name="{LAYOUT}"><layout template="main+ticker">'
        '<zone name="main" set="promos"/><zone name="ticker" set="news"/></layout>'
        f"{main_set('promos', items)}"
        '<content-set name="news"><content-item content-type="application/rss+xml">'
        f'<requires-file><sources><uri refresh="5 minutes">{escape(feed)}</uri></sources>'
        "</requires-file></content-item></content-set></content-set>"
    ).encode()


def zones_playing(record: dict[str, Any], main: str | None, feed: str) -> bool:
    """Whether the playback record has the layout up, the feed in the ticker zone and (when
    given) ``main`` in the main zone."""
    zones = record.get("zones") or {}
    return (
        record.get("layout") == LAYOUT
        and (zones.get("ticker") or {}).get("content-item") == feed
        and (main is None or (zones.get("main") or {}).get("content-item") == main)
    )


# -- the ticker, read from the framebuffer ----------------------------------------------------


@dataclass(frozen=True)
class Motion:
    moved: bool  # the text moved to the left between the two reads
    shift: int  # by how many columns (negative: to the right)
    changed: bool  # the strip differed at all
    blank: bool  # the strip was one flat colour (nothing drawn there)


class TickerReader:
    """Reads the ticker's strip from Xvfb's framebuffer (``rows`` rows of it, each column's
    mean grey) twice, ``gap`` seconds apart, and says whether its text moved left. About
    20 ms of this process's CPU a reading; nothing is asked of the X server or the display."""

    def __init__(self, framebuffer: Path, box: Box = TICKER_BOX, rows: int = 9) -> None:
        x, y, width, height = box
        self.width = width
        self.rows = [y + (height * (2 * n + 1)) // (2 * rows) for n in range(rows)]
        points = [(x + column, row) for row in self.rows for column in range(width)]
        self.framebuffer = Framebuffer(framebuffer, points)

    def profile(self) -> bytes:
        pixels = self.framebuffer.pixels()
        count = len(self.rows)
        sums = [0] * self.width
        for at, (r, g, b) in enumerate(pixels):
            sums[at % self.width] += r * 77 + g * 150 + b * 29
        return bytes(min(255, total // (256 * count)) for total in sums)

    def motion(self, gap: float = 0.05) -> Motion:
        before = self.profile()
        time.sleep(gap)
        after = self.profile()
        shift = shift_between(before, after, 24)
        return Motion(
            moved=before != after and shift > 0,
            shift=shift,
            changed=before != after,
            blank=len(set(after)) <= 1,
        )

    def close(self) -> None:
        self.framebuffer.close()


def slope_mb_per_hour(samples: list[tuple[float, float]]) -> float | None:
    """Least-squares slope of (seconds, MB) samples, in MB an hour; None under two samples."""
    if len(samples) < 2:
        return None
    n = len(samples)
    mean_t = sum(t for t, _ in samples) / n
    mean_m = sum(m for _, m in samples) / n
    spread = sum((t - mean_t) ** 2 for t, _ in samples)
    if spread == 0:
        return None
    slope = sum((t - mean_t) * (m - mean_m) for t, m in samples) / spread
    return round(slope * 3600, 2)

"""The load race: items interrupted while slow pages load, every report checked on the pixels.

Each item is a page of its own colour whose first byte comes after 0.3-2.5 s (a loopback
server). Items are replaced at random moments, most before they have painted. Whatever the
order in which the pages' loads finish, every ``item_shown`` must name what the screen shows
at that moment, and the screen must never show a page other than the last one reported.
Run it in a loop (``for i in $(seq 20); do pytest tests/player/renderer/test_load_race.py; done``).
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from datetime import datetime
from itertools import count

import pytest

from player.playitem import PlayItem
from player.renderer import KioskRenderer, RendererOptions
from tests.player.conftest import LoopbackServer
from tests.support.pixels import RGB, near, process_for, uniform_colour, wait_until

pytestmark = pytest.mark.qt

SIZE = (320, 240)
ITEMS = 24
_tokens = count(1000)


def distinct_colour(index: int) -> RGB:
    """Saturated colours far apart (no black, white or idle-page blue needed to tell them)."""
    steps = [(255, 0, 0), (0, 255, 0), (255, 255, 0), (255, 0, 255), (0, 255, 255)]
    base = steps[index % len(steps)]
    shade = 255 - 40 * (index // len(steps) % 5)
    return (base[0] * shade // 255, base[1] * shade // 255, base[2] * shade // 255)


class Checker:
    """A listener that grabs the screen at every report, and a sampler between them."""

    def __init__(self, renderer: KioskRenderer, colours: dict[int, RGB]) -> None:
        self.renderer = renderer
        self.colours = colours
        self.shown: list[int] = []
        self.failed: list[tuple[int, str]] = []
        self.wrong: list[str] = []
        self.samples = 0
        self.idle_last = False

    def item_shown(self, token: int, at: datetime, natural: float | None) -> None:
        self.shown.append(token)
        self.idle_last = False
        found = uniform_colour(self.renderer.grab_image())
        if found is None or not near(found, self.colours[token], 16):
            expected = self.colours[token]
            self.wrong.append(f"reported {token} ({expected}) but the screen shows {found}")

    def item_failed(self, token: int, reason: str) -> None:
        self.failed.append((token, reason))

    def item_ended(self, token: int) -> None:
        pass

    def idle_shown(self, at: datetime) -> None:
        self.idle_last = True

    def sample(self) -> None:
        if not self.shown or self.idle_last:
            return
        self.samples += 1
        found = uniform_colour(self.renderer.grab_image())
        expected = self.colours[self.shown[-1]]
        if found is None or not near(found, expected, 16):
            self.wrong.append(f"between reports: {found}, last reported {expected}")


@pytest.fixture(params=[2, 1], ids=["two-views", "one-view"])
def renderer(qapp: object, request: pytest.FixtureRequest) -> Iterator[KioskRenderer]:
    made = KioskRenderer(
        RendererOptions(
            fullscreen=False,
            window_size=SIZE,
            keep_screen_on=False,
            crossfade_ms=0,
            views=request.param,
        )
    )
    yield made
    made.close()


def test_interrupted_slow_loads_never_report_the_wrong_page(
    renderer: KioskRenderer, http_server: LoopbackServer
) -> None:
    from PySide6.QtCore import QTimer

    seed = random.randrange(1 << 30)
    rng = random.Random(seed)
    colours: dict[int, RGB] = {}
    checker = Checker(renderer, colours)
    renderer.set_listener(checker)
    timer = QTimer()
    timer.timeout.connect(checker.sample)
    timer.start(7)
    played: list[PlayItem] = []
    for index in range(ITEMS):
        colour = distinct_colour(index)
        # Mostly slow pages (0.3-2.5 s to the first byte), some quick ones interrupted as they
        # finish loading: a load that completes just as the next item reuses its view.
        delay = rng.randint(300, 2500) if rng.random() < 0.6 else rng.randint(0, 40)
        url = f"{http_server.base}/slow/{delay}/" + "".join(f"{c:02x}" for c in colour)
        item = PlayItem(
            token=next(_tokens),
            url=url,
            source_url=url,
            content_type="text/html",
            duration=10.0,
            origin="request",
        )
        colours[item.token] = colour
        played.append(item)
        if rng.random() < 0.15:
            # The idle page (a page of our own, set as HTML: it loads in milliseconds) cut
            # short just as the slot it is in gets blanked and reused.
            renderer.show_idle()
            process_for(rng.uniform(0.0, 0.3))
        if rng.random() < 0.3:
            renderer.prepare(item)
            process_for(rng.uniform(0.05, 0.5))
        renderer.show(item)
        # Interrupted while loading, or just as its first byte arrives and it finishes
        # loading (the narrowest window), or now and then left to reach the screen.
        roll = rng.random()
        if roll < 0.4:
            process_for(delay / 1000 + rng.uniform(-0.03, 0.08))
        elif roll < 0.8:
            process_for(rng.uniform(0.05, 0.6))
        else:
            process_for(delay / 1000 + rng.uniform(0.3, 0.8))
    last = played[-1]
    assert wait_until(lambda: last.token in checker.shown, 10), (seed, checker.failed)
    process_for(0.3)
    timer.stop()
    assert checker.wrong == [], (seed, checker.wrong[:5])
    assert checker.failed == [], (seed, checker.failed)
    assert checker.shown[-1] == last.token
    # Reports only ever for items that were asked for, each at most once per showing.
    assert set(checker.shown) <= set(colours), seed
    assert checker.samples > 100

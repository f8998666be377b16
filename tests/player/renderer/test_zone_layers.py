"""A ticker and a clock shown in a zone as layers of its region (zonelayer.py), on the real
screen: made by Region.qml when asked, reported shown once painted, kept scrolling when the
same ticker plays again, and closed (feed reader, timer, QML item) once covered."""

from __future__ import annotations

from urllib.parse import quote

import pytest

from player.renderer import KioskRenderer
from player.renderer.zonelayer import ZoneItemLayer
from tests.player.conftest import COLOURS, LoopbackServer
from tests.player.renderer.test_zones_screen import TICKER, play, show, split
from tests.support.pixels import near, process_for, rgb, wait_until

pytestmark = pytest.mark.qt

BAR = (0x14, 0x14, 0x14)  # Ticker.qml's and Clock.qml's background


def test_a_ticker_then_a_clock_then_a_page_in_a_zone(
    make_renderer: object, http_server: LoopbackServer
) -> None:
    renderer: KioskRenderer
    renderer, _ = make_renderer()  # type: ignore[operator]
    ticker, reports = split(renderer)
    region = renderer.regions[TICKER]
    text = "data:text/plain," + quote("First news line\nSecond news line")
    first = play(text, "text/plain", zone=TICKER)
    show(ticker, reports, first)
    layer = region.stack.layer
    assert isinstance(layer, ZoneItemLayer) and layer.thing.lines == [  # type: ignore[attr-defined]
        "First news line",
        "Second news line",
    ]
    assert near(rgb(renderer.grab_image(), 2, 236), BAR, 12)
    # The same ticker again (its set turns round): it goes on, reported shown at once.
    again = play(text, "text/plain", zone=TICKER)
    show(ticker, reports, again)
    assert region.stack.layer is layer and layer.view is not None

    clock = play("pdn:clock?format=HH:mm:ss", "application/x-pdn-clock", zone=TICKER)
    show(ticker, reports, clock)
    clock_layer = region.stack.layer
    assert isinstance(clock_layer, ZoneItemLayer) and clock_layer is not layer
    assert wait_until(lambda: layer.view is None, 5), "the covered ticker was not closed"
    assert layer.thing._reader is None  # type: ignore[attr-defined]  # its feed reader closed

    page = play(http_server.colour("yellow"), zone=TICKER)
    show(ticker, reports, page)
    assert wait_until(lambda: clock_layer.view is None, 5), "the covered clock was not closed"
    process_for(0.3)
    assert near(rgb(renderer.grab_image(), 160, 228), COLOURS["yellow"])


def test_a_clock_that_cannot_be_made_fails_with_the_reason(make_renderer: object) -> None:
    renderer, _ = make_renderer()  # type: ignore[operator]
    ticker, reports = split(renderer)
    wrong = play("pdn:calendar", "application/x-pdn-clock", zone=TICKER)
    ticker.show(wrong)
    assert wait_until(lambda: wrong.token in reports.failed_tokens(), 5)
    assert "pdn:clock?format=" in dict(reports.failed)[wrong.token]

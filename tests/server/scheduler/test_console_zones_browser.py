"""The console's display card shows each zone's item while a layout plays, live, in a real
browser (Debian's chromium through ``tests.support.browser``): a display of the fleet is fed
zone changes as its zone engine hands them over, and its card follows the updates the
scheduler ingests, without a reload."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from typing import Any

import pytest

from player.engine import Playback
from server.scheduler.service import SchedulerService
from tests.support.browser import chromium, page_shows
from tests.support.fleet import Screen
from tests.support.waiting import wait_until


@pytest.fixture
def browser(monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    yield from chromium(monkeypatch)


def shown(item: str, zone: str, layout: str | None) -> Playback:
    return Playback(
        f"http://127.0.0.1:9/{item}",
        "text/html",
        "schedule",
        "promos" if zone == "main" else "news",
        datetime.now(UTC),
        5.0,
        zone=zone,
        layout=layout,
    )


def test_the_card_lists_each_zone_while_a_layout_plays(
    scheduler: SchedulerService, make_screen: Callable[..., Screen], browser: Any
) -> None:
    from selenium.webdriver.common.by import By

    screen = make_screen("Foyer")
    wait_until(lambda: screen.display.outbox.subscribers("playback"))
    browser.get(f"{scheduler.url}/console/")
    card = page_shows(
        lambda: browser.find_element(By.CSS_SELECTOR, f'.card[data-url="{screen.url}"]')
    )
    page_shows(lambda: browser.find_element(By.ID, "live").get_attribute("class") == "live on")
    zones = card.find_element(By.CSS_SELECTOR, ".zones")
    assert not zones.is_displayed()  # full screen: no zones to list

    def listed() -> dict[str, str]:
        return {
            li.get_attribute("data-zone"): li.find_element(By.CSS_SELECTOR, ".zone-item").text
            for li in zones.find_elements(By.CSS_SELECTOR, "li")
        }

    record = screen.display.playback_record
    for playback in (
        shown("p1.png", "main", "lobby"),
        shown("news.rss", "ticker", "lobby"),
        shown("clock", "clock", "lobby"),
    ):
        record.changed(playback)
    assert record.flush(10)
    page_shows(lambda: zones.is_displayed() and len(listed()) == 3)
    assert listed() == {
        "main": "http://127.0.0.1:9/p1.png",
        "ticker": "http://127.0.0.1:9/news.rss",
        "clock": "http://127.0.0.1:9/clock",
    }
    assert card.find_element(By.CSS_SELECTOR, ".layout").text == "lobby"
    assert card.find_element(By.CSS_SELECTOR, ".playing").text == "http://127.0.0.1:9/p1.png"

    record.changed(shown("news2.rss", "ticker", "lobby"))
    assert record.flush(10)
    page_shows(lambda: listed()["ticker"] == "http://127.0.0.1:9/news2.rss")

    record.changed(shown("alert.html", "main", None))  # full screen again
    assert record.flush(10)
    page_shows(lambda: not zones.is_displayed())
    assert card.find_element(By.CSS_SELECTOR, ".playing").text == "http://127.0.0.1:9/alert.html"

"""The console in a real browser: Debian's chromium, headless, driven by Selenium through
Debian's chromedriver (``tests.support.browser``). A real scheduler with an API token and a real
display on loopback.
"""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import requests

from server.scheduler.service import SchedulerService
from tests.support.browser import CHROMIUM, chromium, page_shows, screenshotter
from tests.support.fleet import Screen, put_schedule
from tests.support.inprocess_display import cds
from tests.support.scheduler import start
from tests.support.waiting import wait_until

TOKEN = "console-t0k"
AUTH = {"Authorization": f"Bearer {TOKEN}"}


@pytest.fixture
def scheduler(tmp_path: Path) -> Iterator[SchedulerService]:
    schedules = tmp_path / "schedules"
    schedules.mkdir()
    service = start(tmp_path / "scheduler", schedules, refresh_interval=0.3, token=TOKEN)
    yield service
    service.stop()


@pytest.fixture
def screen(make_screen: Callable[..., Screen]) -> Screen:
    """The display Reception, in the group lobby, registered with the operator token; its
    screenshots the colour of what it shows."""
    return make_screen("Reception", groups=["lobby"], token=TOKEN, painted=True)


@pytest.fixture
def browser(monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    yield from chromium(monkeypatch)


@pytest.fixture
def shots(tmp_path: Path) -> Callable[[Any, str], Path]:
    return screenshotter(tmp_path)


def test_console_in_chromium(
    scheduler: SchedulerService,
    screen: Screen,
    browser: Any,
    shots: Callable[[Any, str], Path],
) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select

    assert shutil.which("chromium") or os.path.exists(CHROMIUM)
    base = scheduler.url
    red = cds("welcome", "http://127.0.0.1:9/red-welcome.html")
    assert put_schedule(base, "welcome", red, token=TOKEN).status_code == 201

    # Sign in.
    browser.get(f"{base}/console/")
    assert browser.current_url.endswith("/console/signin?next=/console/")
    browser.find_element(By.ID, "token").send_keys("wrong")
    browser.find_element(By.ID, "signin").click()
    # The click only starts the form's POST: wait for the answer's page.
    page_shows(lambda: "not the scheduler's operator token" in browser.page_source)
    browser.find_element(By.ID, "token").send_keys(TOKEN)
    browser.find_element(By.ID, "signin").click()
    page_shows(lambda: browser.find_element(By.CSS_SELECTOR, ".card"))
    card = browser.find_element(By.CSS_SELECTOR, f'.card[data-url="{screen.url}"]')
    assert "Reception" in card.text

    # Its thumbnail and now playing, live: idle first, then what is assigned (through the API).
    page_shows(lambda: card.find_element(By.CSS_SELECTOR, ".state").text == "online")
    page_shows(lambda: card.find_element(By.CSS_SELECTOR, "img.thumb").is_displayed())
    page_shows(
        lambda: "live" and browser.find_element(By.ID, "live").get_attribute("class") == "live on"
    )
    first = card.find_element(By.CSS_SELECTOR, "img.thumb").get_attribute("src")
    assert card.find_element(By.CSS_SELECTOR, ".playing").text == "nothing (idle)"
    shots(browser, "displays-idle")
    assigned = requests.post(
        f"{base}/x/assignments",
        json={"schedule": "welcome", "group": "lobby"},
        headers=AUTH,
        timeout=5,
    )
    assert assigned.status_code == 201
    page_shows(
        lambda: card.find_element(By.CSS_SELECTOR, ".playing").text.endswith("red-welcome.html")
    )
    assert card.find_element(By.CSS_SELECTOR, ".set").text == "welcome"
    page_shows(
        lambda: card.find_element(By.CSS_SELECTOR, "img.thumb").get_attribute("src") != first
    )
    # The new thumbnail is the red screen.
    thumb = card.find_element(By.CSS_SELECTOR, "img.thumb")
    page_shows(lambda: browser.execute_script("return arguments[0].complete", thumb))
    time.sleep(0.3)
    shots(browser, "displays-live")

    # A schedule with an error: the line at fault is shown; nothing is saved.
    browser.get(f"{base}/console/schedules")
    browser.find_element(By.ID, "new-id").send_keys("menu")
    browser.find_element(By.CSS_SELECTOR, "form.row button").click()
    page_shows(lambda: browser.find_element(By.ID, "cds"))
    broken = (
        '<content-set name="menu" type="inline">\n'
        "  <constraints><scheduling-constraints>"
        '<priority level="high"/></scheduling-constraints></constraints>\n'
        '  <content-item content-type="text/html">\n'
        "    <requires-file><sources><uri>not a url</uri></sources></requires-file>\n"
        "  </content-item>\n"
        "</content-set>\n"
    )
    area = browser.find_element(By.ID, "cds")
    area.clear()
    browser.execute_script("arguments[0].value = arguments[1]", area, broken)
    browser.find_element(By.ID, "save").click()
    fault = page_shows(lambda: browser.find_element(By.CSS_SELECTOR, ".excerpt .fault"))
    assert fault.get_attribute("data-line") == "4" and "not a url" in fault.text
    assert "line 4" in browser.find_element(By.ID, "problems").text
    assert requests.get(f"{base}/schedule/menu/", timeout=5).status_code == 404
    shots(browser, "schedule-error")

    # Fixed, saved, assigned to the display in the console: the screen changes.
    area = browser.find_element(By.ID, "cds")
    browser.execute_script(
        "arguments[0].value = arguments[1]",
        area,
        broken.replace("not a url", "http://127.0.0.1:9/blue-menu.html"),
    )
    browser.find_element(By.ID, "save").click()
    page_shows(lambda: browser.find_element(By.ID, "saved"))
    Select(browser.find_element(By.ID, "target")).select_by_value(f"display:{screen.url}")
    browser.find_element(By.ID, "assign-button").click()
    wait_until(lambda: (screen.item() or "").endswith("blue-menu.html"))

    browser.get(f"{base}/console/display?url={screen.url}")
    card = browser.find_element(By.CSS_SELECTOR, f'.card[data-url="{screen.url}"]')
    page_shows(
        lambda: card.find_element(By.CSS_SELECTOR, ".playing").text.endswith("blue-menu.html")
    )
    page = browser.page_source
    assert "blue-menu.html" in page and "The next 24 hours" in page
    assert browser.find_elements(By.CSS_SELECTOR, "svg.timeline rect.bar")
    time.sleep(0.5)  # let the thumbnail of the blue screen come in
    browser.set_window_size(1280, 1900)
    shots(browser, "display-page")
    browser.set_window_size(1280, 900)

    for name in ("assignments", "groups", "plays", "broadcasts"):
        browser.get(f"{base}/console/{name}")
        assert browser.find_element(By.TAG_NAME, "h1")
        shots(browser, name)

    # Readable on a phone.
    browser.set_window_size(390, 844)
    browser.get(f"{base}/console/")
    page_shows(lambda: browser.find_element(By.CSS_SELECTOR, ".card"))
    width = browser.execute_script("return document.documentElement.scrollWidth")
    assert width <= 400, f"the page is {width} px wide on a phone"
    shots(browser, "phone")

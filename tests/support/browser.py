"""Debian's chromium, headless, driven by Selenium through Debian's chromedriver, for the
console's browser tests: nothing is downloaded (both paths are given and Selenium Manager is
told to stay offline). Screenshots go to ``$PDN_CONSOLE_SHOTS`` (default: the test's temporary
folder); running the tests with it set to ``docs/images`` renews the pictures the docs show.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from server.scheduler.service import SchedulerService
from tests.support.scheduler import start
from tests.support.tools import require_tools
from tests.support.waiting import wait_until

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
LAPTOP = (1280, 800)
PHONE = (390, 844)


def chromium(monkeypatch: pytest.MonkeyPatch, size: tuple[int, int] = (1280, 900)) -> Iterator[Any]:
    """A headless chromium (a Selenium driver) for the test's length; skipped without it."""
    require_tools(CHROMIUM, CHROMEDRIVER)
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    monkeypatch.setenv("SE_OFFLINE", "true")  # Selenium Manager never fetches anything
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for argument in (
        "--headless=new",
        "--no-sandbox",
        "--disable-dev-shm-usage",
        "--disable-gpu",
        f"--window-size={size[0]},{size[1]}",
        "--no-first-run",
        "--disable-background-networking",
    ):
        options.add_argument(argument)
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    driver.set_page_load_timeout(30)
    try:
        yield driver
    finally:
        driver.quit()


def console_scheduler(tmp_path: Path, token: str) -> Iterator[SchedulerService]:
    """A scheduler in this process with the operator ``token`` (its console signs in with
    it), on loopback, for the test's length."""
    service = start(tmp_path / "scheduler", None, refresh_interval=0.3, token=token)
    try:
        yield service
    finally:
        service.stop()


def shot_folder(tmp_path: Path) -> Path:
    folder = Path(os.environ.get("PDN_CONSOLE_SHOTS") or tmp_path / "shots")
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def screenshotter(tmp_path: Path) -> Callable[[Any, str], Path]:
    """``shot(driver, name)``: the page as ``console-<name>.png`` in the shots folder."""
    folder = shot_folder(tmp_path)

    def shot(driver: Any, name: str) -> Path:
        path = folder / f"console-{name}.png"
        driver.save_screenshot(str(path))
        return path

    return shot


def page_shows(check: Callable[[], Any], timeout: float = 15.0) -> Any:
    """What the page shows once ``check`` finds it; an error meanwhile (the page changing
    under the driver) counts as not yet."""
    return wait_until(check, timeout, "the page never showed it", step=0.1, ignore=(Exception,))


def sign_in(driver: Any, base: str, token: str, page: str = "/console/") -> None:
    """Sign in to the console at ``base`` with the operator ``token``, landing on ``page``."""
    from selenium.webdriver.common.by import By

    driver.get(f"{base}{page}")
    driver.find_element(By.ID, "token").send_keys(token)
    driver.find_element(By.ID, "signin").click()
    page_shows(lambda: "/signin" not in driver.current_url)


def page_width(driver: Any) -> int:
    return int(driver.execute_script("return document.documentElement.scrollWidth"))


def unlabelled(driver: Any) -> list[str]:
    """The page's controls that have no label (none of: a <label>, aria-label, text)."""
    found: list[str] = driver.execute_script(
        "return Array.from(document.querySelectorAll('input:not([type=hidden]), select,"
        " textarea, button')).filter(e => !(e.labels && e.labels.length)"
        " && !e.getAttribute('aria-label') && !e.textContent.trim()).map(e => e.outerHTML)"
    )
    return found

"""The operator's whole path in the console, in Debian's chromium, against a real scheduler and
a real ``pdn display`` on the run's X server: upload two pictures and a 1080p H.264 MP4 (made
with ffmpeg here) watching each file's progress; build a playlist of them and a web link (a
page server on loopback) in the editor; assign it to the display; read from the display's
screen that each item shows, in order, for its duration; reorder with the keyboard, save, and
see the screen follow; try to delete an item in use and be refused with the playlist named.

The screenshots it takes are the ones docs/fleet.md shows (``PDN_CONSOLE_SHOTS=docs/images``).
"""

from __future__ import annotations

import io
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import requests
from PIL import Image

from server.scheduler.service import SchedulerService
from tests.support.browser import (
    LAPTOP,
    PHONE,
    chromium,
    console_scheduler,
    page_shows,
    page_width,
    screenshotter,
)
from tests.support.browser import sign_in as console_sign_in
from tests.support.display import DisplayProcess
from tests.support.pages import PageServer
from tests.support.process import CREDENTIALS
from tests.support.tools import require_tools
from tests.support.waiting import wait_until

pytestmark = [pytest.mark.qt, pytest.mark.slow]

TOKEN = "console-path-operator-0123456789"
DISPLAY_TOKEN = "console-path-display-0123456789"
RED = (220, 30, 30)
BLUE = (30, 40, 220)
YELLOW = (235, 225, 20)
MAGENTA = (200, 30, 200)
#: How long each entry shows; the video's entry gives none (its own length, VIDEO_SECONDS).
SECONDS = {"red.png": 3.0, "blue.png": 3.0, "link": 3.0}
VIDEO_SECONDS = 4.0


def picture(path: Path, colour: tuple[int, int, int]) -> Path:
    """A 1920x1080 PNG of one colour with a band of grain along its top (some 800 kB: an
    upload with a progress to watch); the screen is read at its centre."""
    image = Image.new("RGB", (1920, 1080), colour)
    image.paste(Image.effect_noise((1920, 160), 80).convert("RGB"), (0, 0))
    image.save(path, "PNG")
    return path


def video(path: Path) -> Path:
    """A 1080p30 H.264 (High) MP4 of VIDEO_SECONDS: YELLOW, with a moving grainy test pattern
    in its top-left corner (some 4 MB)."""
    require_tools("ffmpeg")
    colour = "0x{:02x}{:02x}{:02x}".format(*YELLOW)
    subprocess.run(
        ["ffmpeg", "-v", "error", "-y", "-f", "lavfi",
         "-i", f"color=c={colour}:s=1920x1080:r=30:d={VIDEO_SECONDS:g}",
         "-f", "lavfi", "-i", f"testsrc2=s=480x270:r=30:d={VIDEO_SECONDS:g}",
         "-filter_complex", "[1]noise=alls=30:allf=t[n];[0][n]overlay=0:0",
         "-c:v", "libx264", "-preset", "veryfast",
         "-profile:v", "high", "-pix_fmt", "yuv420p", "-movflags", "+faststart", str(path)],
        check=True, timeout=120,
    )  # fmt: skip
    return path


@pytest.fixture
def scheduler(tmp_path: Path) -> Iterator[SchedulerService]:
    yield from console_scheduler(tmp_path, TOKEN)


@pytest.fixture
def browser(monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    yield from chromium(monkeypatch, LAPTOP)


@pytest.fixture
def shots(tmp_path: Path) -> Callable[[Any, str], Path]:
    return screenshotter(tmp_path)


def centre(display: DisplayProcess) -> tuple[int, int, int] | None:
    answer = display.get("/x/screenshot", headers={"Authorization": f"Bearer {DISPLAY_TOKEN}"})
    if answer.status_code != 200:
        return None
    with Image.open(io.BytesIO(answer.content)) as image:
        pixel = image.convert("RGB").getpixel((image.width // 2, image.height // 2))
    assert isinstance(pixel, tuple)
    return (int(pixel[0]), int(pixel[1]), int(pixel[2]))


def colour_name(pixel: tuple[int, int, int] | None) -> str | None:
    for name, colour in (("red", RED), ("blue", BLUE), ("yellow", YELLOW), ("magenta", MAGENTA)):
        if pixel is not None and all(abs(a - b) <= 45 for a, b in zip(pixel, colour, strict=True)):
            return name
    return None


def runs(display: DisplayProcess, seconds: float) -> list[tuple[str, float]]:
    """What the screen's centre shows for ``seconds``: each colour in turn with how long it
    stayed (the first and last runs cut off by the window are dropped)."""
    seen: list[tuple[float, str | None]] = []
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        seen.append((time.monotonic(), colour_name(centre(display))))
        time.sleep(0.1)
    found: list[tuple[str, float, float]] = []  # name, first seen, last seen
    for when, name in seen:
        if name is None:
            continue  # a frame between two items (a screenshot mid-change)
        if found and found[-1][0] == name:
            found[-1] = (name, found[-1][1], when)
        else:
            found.append((name, when, when))
    starts = [first for _, first, _ in found]
    return [
        (name, round(starts[index + 1] - starts[index], 2))
        for index, (name, _, _) in enumerate(found[:-1])
    ][1:]


def cycle_of(observed: list[tuple[str, float]], order: list[str]) -> list[tuple[str, float]]:
    """The first full cycle of ``order`` in ``observed``."""
    names = [name for name, _ in observed]
    for index in range(len(names) - len(order) + 1):
        if names[index : index + len(order)] == order:
            return observed[index : index + len(order)]
    raise AssertionError(f"the screen never showed {order} in order: {observed}")


def assert_durations(cycle: list[tuple[str, float]], expected: dict[str, float]) -> None:
    for name, seconds in cycle:
        # Screenshots are taken every ~0.1 s plus their own time on a busy machine.
        assert abs(seconds - expected[name]) <= 1.2, (name, seconds, expected[name], cycle)


def test_upload_build_assign_play_reorder_refuse(
    tmp_path: Path,
    scheduler: SchedulerService,
    browser: Any,
    shots: Callable[[Any, str], Path],
) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys
    from selenium.webdriver.support.ui import Select

    base = scheduler.url
    files = [
        picture(tmp_path / "red.png", RED),
        picture(tmp_path / "blue.png", BLUE),
        video(tmp_path / "clip.mp4"),
    ]
    news = PageServer()
    page = "<!doctype html><html><body style='margin:0;background:#c81ec8'></body></html>"
    link = news.page("/news.html", page)
    config = (
        f'name = "Lobby"\ntimezone = "UTC"\nregister = "{base}"\n'
        f'scheduler_token = "{TOKEN}"\napi_token = "{DISPLAY_TOKEN}"\n'
        '[location]\nlatitude = "N54.0104"\nlongitude = "W2.7883"\n[screen]\ncrossfade = 0\n'
    )
    display = DisplayProcess(
        tmp_path / "display", config=config, unset=(*CREDENTIALS, "PDN_DATABASE_URL")
    ).start()
    try:
        display.wait_ready()
        wait_until(scheduler.storage.displays, 30, "the display registered")
        screen_url = scheduler.storage.displays()[0].url

        # Upload the three files at once through the file picker; each has its progress bar.
        console_sign_in(browser, base, TOKEN, "/console/library")
        browser.find_element(By.ID, "upload-tags").send_keys("lobby")
        # The browser's uplink held to 2 MB/s, so each bar has time to move.
        browser.set_network_conditions(
            offline=False, latency=5, download_throughput=50_000_000, upload_throughput=2_000_000
        )
        browser.find_element(By.ID, "files").send_keys("\n".join(str(f) for f in files))
        rows = page_shows(lambda: _rows(browser, 3))
        assert [r.find_element(By.CSS_SELECTOR, ".name").text for r in rows] == [
            "red.png", "blue.png", "clip.mp4"
        ]  # fmt: skip
        bars: set[tuple[str, float, float]] = set()  # (file, value, max) as the page showed them

        def uploaded() -> bool:
            for name, value, most in browser.execute_script(
                "return Array.from(document.querySelectorAll('#uploads .upload-row')).map("
                "r => [r.getAttribute('data-name'), r.querySelector('progress').value,"
                " r.querySelector('progress').max])"
            ):
                bars.add((name, float(value), float(most)))
            return all(r.get_attribute("data-status") == "201" for r in rows)

        wait_until(uploaded, 60, lambda: "uploads: " + " | ".join(r.text for r in rows), step=0.05)
        browser.delete_network_conditions()
        # Each bar was seen part way, then full.
        for path in files:
            seen = sorted(value / most for name, value, most in bars if name == path.name)
            assert any(0 < part < 1 for part in seen) and seen[-1] == 1, (path.name, seen)
        for row, path in zip(rows, files, strict=True):
            bar = row.find_element(By.TAG_NAME, "progress")
            assert int(float(bar.get_attribute("max"))) >= path.stat().st_size
            assert bar.get_attribute("value") == bar.get_attribute("max")
            assert "new: stored" in row.text
        assert not rows[2].find_elements(By.CSS_SELECTOR, ".warn")  # H.264 1080p30 plays everywhere
        page_shows(lambda: len(browser.find_elements(By.CSS_SELECTOR, "#items .item")) == 3)
        items = browser.find_element(By.ID, "items").text
        assert "1920×1080" in items and "h264" in items.lower() and "4 s" in items
        # The same file again: already stored, nothing new.
        browser.find_element(By.ID, "files").send_keys(str(files[0]))
        again = page_shows(lambda: _rows(browser, 4))[3]
        page_shows(lambda: again.get_attribute("data-status") == "200")
        assert "already stored" in again.text
        assert page_width(browser) <= LAPTOP[0]
        shots(browser, "library")

        # The playlist: the three items and the web link, each with its duration, cut.
        browser.get(f"{base}/console/playlists")
        browser.find_element(By.ID, "new-playlist").send_keys("lobby")
        browser.find_element(By.ID, "new-playlist-button").click()
        page_shows(lambda: browser.find_element(By.ID, "pick"))
        for name in ("red.png", "blue.png", "clip.mp4"):
            browser.find_element(By.CSS_SELECTOR, f'button[aria-label="Add {name}"]').click()
        browser.find_element(By.ID, "web-url").send_keys(link)
        browser.find_element(By.ID, "web-add").click()
        entries = browser.find_elements(By.CSS_SELECTOR, "#entries > li")
        assert len(entries) == 4
        for entry, seconds in zip(entries, (3, 3, None, 3), strict=True):
            if seconds is not None:
                entry.find_element(By.CSS_SELECTOR, "input.duration").send_keys(str(seconds))
            Select(entry.find_element(By.CSS_SELECTOR, "select.transition")).select_by_value("cut")
        total = browser.find_element(By.ID, "total").text
        assert total == "4 items · 13 s in all", total
        assert len(browser.find_elements(By.CSS_SELECTOR, "#strip .cell")) == 4
        browser.find_element(By.ID, "pl-name").send_keys("Lobby")
        browser.find_element(By.ID, "save").click()
        page_shows(lambda: "Saved" in browser.find_element(By.ID, "save-answer").text)
        stored = requests.get(
            f"{base}/x/playlists/lobby", headers={"Authorization": f"Bearer {TOKEN}"}, timeout=5
        ).json()
        assert stored["seconds"] == [3.0, 3.0, VIDEO_SECONDS, 3.0], stored

        # The preview plays it here: the first item, then the second after its 3 s.
        browser.find_element(By.ID, "play").click()
        page_shows(lambda: browser.find_element(By.ID, "preview-now").text.startswith("1 of 4"))
        page_shows(lambda: browser.find_element(By.ID, "preview-now").text.startswith("2 of 4"), 6)
        frame = page_shows(lambda: browser.find_element(By.CSS_SELECTOR, "#stage iframe"), 15)
        assert frame.get_attribute("src") == link
        browser.switch_to.frame(frame)
        colour = browser.execute_script("return getComputedStyle(document.body).backgroundColor")
        browser.switch_to.default_content()
        assert colour == "rgb(200, 30, 200)", colour
        assert page_width(browser) <= LAPTOP[0]
        browser.execute_script("window.scrollTo(0, 0)")
        shots(browser, "playlist")
        browser.find_element(By.ID, "play").click()

        # Assigned to the display from the same page.
        Select(browser.find_element(By.ID, "target")).select_by_value(f"display:{screen_url}")
        browser.find_element(By.ID, "assign-button").click()
        page_shows(lambda: "no display yet" not in browser.find_element(By.ID, "assigned").text)
        order = ["red", "blue", "yellow", "magenta"]
        wait_until(lambda: colour_name(centre(display)) is not None, 60, "the playlist on screen")
        expected = {"red": 3.0, "blue": 3.0, "yellow": VIDEO_SECONDS, "magenta": 3.0}
        assert_durations(cycle_of(runs(display, 30), order), expected)

        # The display's card: what plays now and what comes next, with thumbnails.
        browser.get(f"{base}/console/")
        card = browser.find_element(By.CSS_SELECTOR, f'.card[data-url="{screen_url}"]')
        names = ["red.png", "blue.png", "clip.mp4", "127.0.0.1"]

        def now_and_next() -> tuple[str, str]:
            now = card.find_element(By.CSS_SELECTOR, ".now-name").text
            upcoming = card.find_element(By.CSS_SELECTOR, ".next-name").text
            return now, upcoming

        def follows() -> bool:
            now, upcoming = now_and_next()
            at = next(i for i, n in enumerate(names) if now.startswith(n))
            return upcoming.startswith(names[(at + 1) % 4])

        page_shows(follows, 20)
        page_shows(lambda: now_and_next()[0] == "blue.png", 20)
        assert card.find_element(By.CSS_SELECTOR, "img.now-thumb").is_displayed()
        assert card.find_element(By.CSS_SELECTOR, ".next-name").text == "clip.mp4"
        shots(browser, "displays-playlist")

        # Reorder with the keyboard: the link first (Alt+Up three times), saved; the screen
        # follows.
        browser.get(f"{base}/console/playlists/lobby")
        entry = page_shows(lambda: browser.find_elements(By.CSS_SELECTOR, "#entries > li")[3])
        entry.find_element(By.CSS_SELECTOR, ".name").click()  # focuses the entry itself
        for _ in range(3):
            focused = browser.switch_to.active_element
            focused.send_keys(Keys.ALT, Keys.ARROW_UP)
        first = browser.find_elements(By.CSS_SELECTOR, "#entries > li")[0]
        assert first.find_element(By.CSS_SELECTOR, ".name").text.startswith("127.0.0.1")
        assert browser.switch_to.active_element == first
        browser.find_element(By.ID, "save").click()
        page_shows(lambda: "Saved" in browser.find_element(By.ID, "save-answer").text)
        order = ["magenta", "red", "blue", "yellow"]
        wait_until(lambda: colour_name(centre(display)) == "magenta", 30, "the link shown")
        assert_durations(cycle_of(runs(display, 30), order), expected)

        # Delete an item in use: refused, naming the playlist; nothing deleted.
        red = stored["items"][0]["media"]
        browser.get(f"{base}/console/library/{red}")
        assert "lobby" in browser.find_element(By.ID, "used-by").text
        browser.find_element(By.ID, "delete").click()
        refusal = page_shows(lambda: browser.find_element(By.ID, "delete-answer").text)
        assert "lobby" in refusal and "Not deleted" in refusal
        assert browser.find_element(By.ID, "force-box").is_displayed()
        assert not browser.find_element(By.ID, "force-delete").is_enabled()
        shots(browser, "item-in-use")
        assert scheduler.media.get(red) is not None

        # A phone's width: the library and the editor fit.
        browser.set_window_size(*PHONE)
        for where, name in (("/console/library", "phone-library"),
                           ("/console/playlists/lobby", "phone-playlist")):  # fmt: skip
            browser.get(f"{base}{where}")
            page_shows(lambda: browser.find_element(By.TAG_NAME, "h1"))
            assert page_width(browser) <= PHONE[0], (where, page_width(browser))
            shots(browser, name)
    finally:
        display.stop()
        news.close()


def _rows(browser: Any, count: int) -> list[Any]:
    from selenium.webdriver.common.by import By

    rows = browser.find_elements(By.CSS_SELECTOR, "#uploads .upload-row")
    assert len(rows) >= count
    return list(rows)

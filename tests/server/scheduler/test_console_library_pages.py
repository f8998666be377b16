"""The console's library and playlist pages, narrower than the whole path
(test_console_library_path.py): the console's door to the API (session, the change header),
refused uploads beside good ones, filters, web links, deleting and force-deleting, a refused
save that keeps the edits, drag and drop, and the playlist's CDS. Debian's chromium against a
real scheduler with an operator token on loopback; no display.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests

from server.scheduler.service import SchedulerService
from tests.support.browser import chromium, console_scheduler, page_shows, sign_in, unlabelled
from tests.support.png import png as make_png

TOKEN = "console-pages-operator-0123456789"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
CONSOLE = {"X-Requested-With": "console"}


def png(colour: tuple[int, int, int]) -> bytes:
    return make_png(320, 180, colour)


@pytest.fixture
def scheduler(tmp_path: Path) -> Iterator[SchedulerService]:
    yield from console_scheduler(tmp_path, TOKEN)


@pytest.fixture
def browser(monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    yield from chromium(monkeypatch)


def upload(base: str, name: str, data: bytes, tags: str = "") -> dict[str, Any]:
    headers = {**AUTH, "X-Filename": name, **({"X-Tags": tags} if tags else {})}
    answer = requests.post(f"{base}/x/media", data=data, headers=headers, timeout=10)
    assert answer.status_code == 201, answer.text
    return dict(answer.json())


def test_the_console_reaches_the_api_with_its_session_only(scheduler: SchedulerService) -> None:
    base = scheduler.url
    stranger = requests.post(
        f"{base}/console/x/media", data=png((1, 2, 3)),
        headers={"X-Filename": "a.png", **CONSOLE}, timeout=10,
    )  # fmt: skip
    assert stranger.status_code == 401 and stranger.json()["error"] == "signed-out"
    session = requests.Session()
    assert session.post(f"{base}/console/signin", data={"token": TOKEN}, timeout=10).ok
    # A change without the console's header (what a cross-site form would send): refused.
    forged = session.post(
        f"{base}/console/x/media", data=png((1, 2, 3)), headers={"X-Filename": "a.png"}, timeout=10
    )
    assert forged.status_code == 403 and "X-Requested-With" in forged.json()["message"]
    assert scheduler.media.items() == []
    # Through the door: the API's own answers, the token added by the console.
    stored = session.post(
        f"{base}/console/x/media", data=png((1, 2, 3)),
        headers={"X-Filename": "a.png", **CONSOLE}, timeout=10,
    )  # fmt: skip
    assert stored.status_code == 201 and stored.json()["type"] == "image"
    assert stored.json()["uploader"] == "operator"
    sha = stored.json()["sha256"]
    thumbnail = session.get(f"{base}/console/x/media/{sha}/thumbnail", timeout=10)
    assert thumbnail.headers["Content-Type"] == "image/jpeg"
    ranged = session.get(f"{base}/console/media/{sha}/a.png", headers={"Range": "bytes=0-3"})
    assert ranged.status_code == 206 and ranged.content == b"\x89PNG"
    # Only the library's and the playlists' routes pass; the rest of the API does not.
    assert session.get(f"{base}/console/x/schedules", timeout=10).status_code == 404
    assert session.get(f"{base}/console/x/assignments", timeout=10).status_code == 404
    refused = session.put(
        f"{base}/console/x/playlists/p", json={"items": [{"media": "0" * 64}]},
        headers=CONSOLE, timeout=10,
    )  # fmt: skip
    assert refused.status_code == 400 and refused.json()["error"] == "unknown-media"


def test_library_refusals_filters_links_and_delete(
    tmp_path: Path, scheduler: SchedulerService, browser: Any
) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select

    base = scheduler.url
    upload(base, "tree.png", png((20, 160, 40)), tags="garden")
    good = tmp_path / "sky.png"
    good.write_bytes(png((40, 120, 230)))
    liar = tmp_path / "liar.png"
    liar.write_bytes(b"this is no picture at all\n" * 20)
    sign_in(browser, base, TOKEN, "/console/library")
    browser.find_element(By.ID, "files").send_keys(f"{liar}\n{good}")
    rows = page_shows(lambda: browser.find_elements(By.CSS_SELECTOR, "#uploads .upload-row")[1])
    rows = browser.find_elements(By.CSS_SELECTOR, "#uploads .upload-row")
    page_shows(lambda: all(r.get_attribute("data-status") for r in rows))
    refused, stored = rows
    assert refused.get_attribute("data-status").startswith("4")
    assert "refused:" in refused.text and "drop it again" in refused.text
    assert stored.get_attribute("data-status") == "201"
    page_shows(lambda: len(browser.find_elements(By.CSS_SELECTOR, "#items .item")) == 2)

    # A file dropped on the page (a picture drawn in the browser, dropped as a mouse drops it).
    browser.execute_async_script(
        "var done = arguments[0], canvas = document.createElement('canvas');"
        "canvas.width = 64; canvas.height = 36;"
        "var g = canvas.getContext('2d'); g.fillStyle = '#f0a000'; g.fillRect(0, 0, 64, 36);"
        "canvas.toBlob(function (blob) {"
        "  var dt = new DataTransfer();"
        "  dt.items.add(new File([blob], 'dropped.png', {type: 'image/png'}));"
        "  document.getElementById('drop').dispatchEvent(new DragEvent('drop',"
        "    {bubbles: true, cancelable: true, dataTransfer: dt}));"
        "  done();"
        "}, 'image/png');"
    )
    dropped = page_shows(lambda: browser.find_elements(By.CSS_SELECTOR, "#uploads .upload-row")[2])
    page_shows(lambda: dropped.get_attribute("data-status") == "201")
    assert dropped.find_element(By.CSS_SELECTOR, ".name").text == "dropped.png"
    page_shows(lambda: len(browser.find_elements(By.CSS_SELECTOR, "#items .item")) == 3)

    # A web link, by name and URL; a bad URL is refused with the API's reason.
    browser.find_element(By.ID, "link-name").send_keys("News")
    browser.find_element(By.ID, "link-url").send_keys("https://example.org/news")
    browser.find_element(By.ID, "link-add").click()
    page_shows(lambda: "Added: News" in browser.find_element(By.ID, "link-answer").text)
    page_shows(lambda: len(browser.find_elements(By.CSS_SELECTOR, "#items .item")) == 4)

    def shown() -> list[str]:
        return [
            i.find_element(By.CSS_SELECTOR, ".name").text
            for i in browser.find_elements(By.CSS_SELECTOR, "#items .item")
            if i.is_displayed()
        ]

    Select(browser.find_element(By.ID, "type-filter")).select_by_value("link")
    assert shown() == ["News"]
    Select(browser.find_element(By.ID, "type-filter")).select_by_value("")
    Select(browser.find_element(By.ID, "tag-filter")).select_by_value("garden")
    assert shown() == ["tree.png"]
    Select(browser.find_element(By.ID, "tag-filter")).select_by_value("")
    browser.find_element(By.ID, "search").send_keys("SKY")
    assert shown() == ["sky.png"]
    assert browser.find_element(By.ID, "count").text == "(1)"

    # Every control has a label.
    assert unlabelled(browser) == []

    # An item not in use is deleted from its page, and is gone.
    browser.find_element(By.LINK_TEXT, "sky.png").click()
    page_shows(lambda: "In no playlist" in browser.find_element(By.ID, "used-by").text)
    assert browser.find_element(By.ID, "preview").tag_name == "img"
    browser.find_element(By.ID, "delete").click()
    page_shows(lambda: browser.current_url.endswith("/console/library"))
    assert sorted(i.name for i in scheduler.media.items()) == ["News", "dropped.png", "tree.png"]


def test_editor_refused_save_keeps_edits_drag_and_drop_cds_and_forced_delete(
    scheduler: SchedulerService, browser: Any
) -> None:
    from selenium.webdriver.common.by import By

    base = scheduler.url
    red = upload(base, "red.png", png((220, 30, 30)))
    blue = upload(base, "blue.png", png((30, 30, 220)))
    sign_in(browser, base, TOKEN, "/console/playlists/wall")
    for name in ("red.png", "blue.png"):
        browser.find_element(By.CSS_SELECTOR, f'button[aria-label="Add {name}"]').click()

    def names() -> list[str]:
        return [
            e.find_element(By.CSS_SELECTOR, ".name").text
            for e in browser.find_elements(By.CSS_SELECTOR, "#entries > li")
        ]

    assert unlabelled(browser) == []

    # A times-of-day the editor cannot read: not sent, and it says how to write it.
    first = browser.find_elements(By.CSS_SELECTOR, "#entries > li")[0]
    first.find_element(By.CSS_SELECTOR, "input.windows").send_keys("8 to 9")
    browser.find_element(By.ID, "save").click()
    answer = browser.find_element(By.ID, "save-answer").text
    assert "Not saved" in answer and "08:00-12:00" in answer
    first.find_element(By.CSS_SELECTOR, "input.windows").clear()
    first.find_element(By.CSS_SELECTOR, "input.windows").send_keys("08:00-12:00")
    # Dates the scheduler refuses (until before from): its reason, the item, the edits kept.
    browser.execute_script(
        "var e = arguments[0]; e.value = arguments[1];"
        " e.dispatchEvent(new Event('input', {bubbles: true}));",
        first.find_element(By.CSS_SELECTOR, "input.from"), "2030-05-02",
    )  # fmt: skip
    browser.execute_script(
        "var e = arguments[0]; e.value = arguments[1];"
        " e.dispatchEvent(new Event('input', {bubbles: true}));",
        first.find_element(By.CSS_SELECTOR, "input.until"), "2030-05-01",
    )  # fmt: skip
    browser.find_element(By.ID, "save").click()
    refusal = page_shows(
        lambda: (
            "Not saved" in browser.find_element(By.ID, "save-answer").text
            and browser.find_element(By.ID, "save-answer").text
        )
    )
    assert "before its 'from'" in refusal and "(item 1)" in refusal and "still here" in refusal
    assert names() == ["red.png", "blue.png"]
    assert first.find_element(By.CSS_SELECTOR, "input.from").get_attribute("value") == "2030-05-02"
    assert requests.get(f"{base}/x/playlists/wall", headers=AUTH, timeout=5).status_code == 404
    browser.execute_script(
        "var e = arguments[0]; e.value = ''; e.dispatchEvent(new Event('input', {bubbles: true}));",
        first.find_element(By.CSS_SELECTOR, "input.until"),
    )

    # Drag blue above red (HTML5 drag and drop, as a mouse sends it).
    browser.execute_script(
        "var items = document.querySelectorAll('#entries > li'), dt = new DataTransfer();"
        "function fire(node, type) { node.dispatchEvent(new DragEvent(type,"
        " {bubbles: true, cancelable: true, dataTransfer: dt})); }"
        "fire(items[1], 'dragstart'); fire(items[0], 'dragover'); fire(items[0], 'drop');"
        "fire(items[1], 'dragend');"
    )
    assert names() == ["blue.png", "red.png"]
    browser.find_element(By.ID, "save").click()
    page_shows(lambda: "Saved" in browser.find_element(By.ID, "save-answer").text)
    stored = requests.get(f"{base}/x/playlists/wall", headers=AUTH, timeout=5).json()
    assert [i["media"] for i in stored["items"]] == [blue["sha256"], red["sha256"]]
    assert stored["items"][1]["windows"] == [{"start": "08:00", "end": "12:00"}]
    assert stored["items"][1]["from"] == "2030-05-02"

    # The list of playlists: each with its thumbnails, count and length.
    browser.get(f"{base}/console/playlists")
    listed = browser.find_element(By.CSS_SELECTOR, "#playlists .playlist")
    assert "wall · 2 items · 20 s" in listed.text
    assert len(listed.find_elements(By.CSS_SELECTOR, ".small-strip img")) == 2
    listed.find_element(By.CSS_SELECTOR, "a").click()
    page_shows(lambda: browser.find_element(By.ID, "cds-box"))

    # Its CDS, read-only.
    browser.find_element(By.CSS_SELECTOR, "#cds-box summary").click()
    cds = page_shows(lambda: "content-set" in browser.find_element(By.ID, "cds").text
                     and browser.find_element(By.ID, "cds").text)  # fmt: skip
    assert red["sha256"] in cds and blue["sha256"] in cds

    # Force delete, behind its confirmation: out of the playlist too.
    browser.get(f"{base}/console/library/{red['sha256']}")
    browser.find_element(By.ID, "delete").click()
    page_shows(lambda: "wall" in browser.find_element(By.ID, "delete-answer").text)
    forced = browser.find_element(By.ID, "force-delete")
    assert not forced.is_enabled()
    browser.find_element(By.ID, "force-confirm").click()
    forced.click()
    page_shows(lambda: browser.current_url.endswith("/console/library"))
    after = requests.get(f"{base}/x/playlists/wall", headers=AUTH, timeout=5).json()
    assert [i["media"] for i in after["items"]] == [blue["sha256"]]

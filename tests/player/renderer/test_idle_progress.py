"""The idle page says how the schedule's first files are coming."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from player.renderer import KioskRenderer, RendererOptions
from player.renderer.content import IDLE_TOKEN
from player.renderer.idle import download_progress, idle_html
from tests.support.pixels import wait_until
from tests.support.reports import Reports

pytestmark = pytest.mark.qt


def test_progress_text_from_the_cache_status() -> None:
    assert download_progress({"wanted": 5, "ready": 2}) == (
        "Downloading the schedule's files: 2 of 5 ready"
    )
    assert download_progress({"wanted": 5, "ready": 5}) == ""
    assert download_progress({"wanted": 0, "ready": 0}) == ""
    assert download_progress({}) == ""
    assert "2 of 5" in idle_html("Lobby", "http://x", [], "<b>2 of 5</b>")
    assert "<b>" not in idle_html("Lobby", "http://x", [], "<b>2 of 5</b>")  # escaped


@pytest.fixture
def renderer(qapp: object) -> Iterator[KioskRenderer]:
    made = KioskRenderer(
        RendererOptions(fullscreen=False, window_size=(320, 240), keep_screen_on=False)
    )
    made.set_listener(Reports())
    yield made
    made.close()


def idle_progress_shown(renderer: KioskRenderer) -> str | None:
    """The idle page's progress line, as its document has it (None: no idle page up)."""
    found: list[str] = []
    for slot in renderer.region.slots:
        if slot.item is not None and slot.item.token == IDLE_TOKEN:
            slot.evaluate(
                "(document.getElementById('progress') || {}).textContent || ''",
                found.append,
            )
            wait_until(lambda: bool(found), 5)
            return found[0] if found else None
    return None


def test_the_idle_page_shows_download_progress_and_clears_it(renderer: KioskRenderer) -> None:
    assert wait_until(lambda: renderer.last_frame_time() is not None, 15)
    renderer.set_idle_progress("Downloading the schedule's files: 2 of 5 ready")
    assert wait_until(
        lambda: idle_progress_shown(renderer) == "Downloading the schedule's files: 2 of 5 ready",
        10,
    )
    renderer.set_idle_progress("")
    assert wait_until(lambda: idle_progress_shown(renderer) == "", 10)

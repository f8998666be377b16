"""The idle page shows the pairing code, large, and the new one after each renewal."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from player.renderer import KioskRenderer, RendererOptions
from player.renderer.content import IDLE_TOKEN
from player.renderer.idle import idle_html
from tests.support.pixels import wait_until
from tests.support.reports import Reports

pytestmark = pytest.mark.qt


def test_the_pairing_line_is_in_the_page_and_escaped() -> None:
    assert "Pairing code K7QM-2XPA" in idle_html(
        "Lobby", "http://x", [], "", "Pairing code K7QM-2XPA"
    )
    assert "<i>" not in idle_html("Lobby", "http://x", [], "", "<i>")


@pytest.fixture
def renderer(qapp: object) -> Iterator[KioskRenderer]:
    made = KioskRenderer(
        RendererOptions(fullscreen=False, window_size=(320, 240), keep_screen_on=False)
    )
    made.set_listener(Reports())
    yield made
    made.close()


def pairing_shown(renderer: KioskRenderer) -> str | None:
    """The idle page's pairing line, as its document has it (None: no idle page up)."""
    found: list[str] = []
    for slot in renderer.region.slots:
        if slot.item is not None and slot.item.token == IDLE_TOKEN:
            slot.evaluate(
                "(document.getElementById('pairing') || {}).textContent || ''", found.append
            )
            wait_until(lambda: bool(found), 5)
            return found[0] if found else None
    return None


def test_the_idle_page_shows_each_new_pairing_code(renderer: KioskRenderer) -> None:
    assert wait_until(lambda: renderer.last_frame_time() is not None, 15)
    renderer.set_idle_pairing("Pairing code K7QM-2XPA")
    assert wait_until(lambda: pairing_shown(renderer) == "Pairing code K7QM-2XPA", 10)
    renderer.set_idle_pairing("Pairing code R4TW-9HNB")
    assert wait_until(lambda: pairing_shown(renderer) == "Pairing code R4TW-9HNB", 10)

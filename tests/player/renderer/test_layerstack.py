"""The region's layer stack (player/renderer/layerstack.py) on a real scene: what is in front
follows what the renderer shows, its notify signal fires, a fade runs on the render thread and
a cut does without one."""

from __future__ import annotations

from pathlib import Path

import pytest

from player.playitem import PlayItem
from tests.player.conftest import COLOURS, LoopbackServer, write_png
from tests.support.pixels import wait_until

pytestmark = pytest.mark.qt


def play(url: str, token: int, content_type: str | None = None) -> PlayItem:
    return PlayItem(
        token=token,
        url=url,
        source_url=url,
        content_type=content_type,
        duration=10.0,
        origin="request",
    )


def test_front_follows_each_show_and_a_cut_has_no_fade(
    make_renderer: object, http_server: LoopbackServer, tmp_path: Path
) -> None:
    renderer, reports = make_renderer(crossfade_ms=400)  # type: ignore[operator]
    stack = renderer.region.stack
    changes: list[object] = []
    stack.frontChanged.connect(lambda: changes.append(stack.front))
    assert wait_until(lambda: renderer.last_frame_time() is not None, 10)

    red = play(http_server.colour("red"), 1)
    renderer.show(red)
    assert wait_until(lambda: 1 in reports.shown_tokens(), 15), reports.failed
    slot = renderer.region.stack.front_slot()
    assert slot is not None
    assert stack.front is slot.front_item()

    picture = write_png(tmp_path / "blue.png", COLOURS["blue"], size=(320, 240))
    blue = play(picture.as_uri(), 2, "image/png")
    renderer.show(blue)
    assert wait_until(lambda: 2 in reports.shown_tokens(), 15), reports.failed
    front = stack.front
    assert renderer.region.stack.layer is renderer.region.image_layer
    assert front is renderer.region.image_layer.front_item()
    assert front in changes
    assert wait_until(lambda: not stack.fading(front), 5)
    assert front.opacity() == 1.0

    # A cut: in front at once, fully opaque, no animation running.
    still = renderer.region.still.front_item()
    still.setProperty("sourceItem", front)
    assert stack.bring_in(still, 400, cut=True) is False
    assert stack.front is still
    assert still.opacity() == 1.0 and not stack.fading(still)
    assert still.z() > front.z()
    # A fade: raised over it, starting transparent, animated on the render thread.
    assert stack.bring_in(front, 400) is True
    assert stack.front is front and front.z() > still.z()
    assert stack.fading(front)
    assert wait_until(lambda: not stack.fading(front), 5)
    assert front.opacity() == 1.0

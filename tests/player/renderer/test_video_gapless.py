"""Gapless video to video, by pixels.

A CDS of two WebMs with no preferred duration (so each plays for its own length) runs through
the real engine and the real renderer: red, blue, red, blue, each to its end. The window is
grabbed every 10 ms across the boundaries; every grab must show a frame of one of the clips
(no black, white, unpainted or idle frame), every playback update must name the clip on
screen, and a clip must come on screen at its first frames (not played through behind the
screen) and then advance (not frozen on a poster).
"""

from __future__ import annotations

import logging
import time
from datetime import UTC, datetime
from pathlib import Path

import pytest

from cds.parser import parse
from cds.playlist import Playlist
from player.engine import Engine, Playback
from player.qtloop import EngineDriver, Waker
from player.renderer import KioskRenderer, RendererOptions
from player.store import DisplayStore
from tests.player.conftest import LoopbackServer
from tests.support.pixels import process_for, wait_until
from tests.support.videoscreen import (
    CLIP_COLOURS,
    CLIP_FRAMES,
    CLIP_SIZE,
    Sample,
    ScreenRecorder,
    blend_of,
    clip_bytes,
    which_clip,
)

pytestmark = pytest.mark.qt


def video_set(base: str, names: list[str]) -> str:
    items = "".join(
        f'<content-item content-type="video/webm"><requires-file><sources>'
        f"<uri>{base}/{name}.webm</uri></sources></requires-file></content-item>"
        for name in names
    )
    return (
        '<content-set name="videos"><constraints><scheduling-constraints>'
        '<playback order="inorder"/></scheduling-constraints></constraints>'
        f"{items}</content-set>"
    )


class Screen:
    """The engine's playback updates, each checked against a grab taken as it is made."""

    def __init__(self, renderer: KioskRenderer) -> None:
        self.renderer = renderer
        self.updates: list[tuple[float, str | None, str | None, float | None]] = []
        self.named_wrong: list[str] = []

    def changed(self, playback: Playback) -> None:
        # On the GUI thread, just after the swap: the screen must show what is reported.
        image = self.renderer.grab_image()
        on_screen = which_clip(image)
        item = playback.content_item
        clip = item.rsplit("/", 1)[-1].removesuffix(".webm") if item else None
        self.updates.append((time.monotonic(), clip, on_screen, playback.duration))
        if item is not None and clip != on_screen:
            self.named_wrong.append(f"update names {clip}, the screen shows {on_screen}")

    def clips(self) -> list[str | None]:
        return [clip for _, clip, _, _ in self.updates]


def runs(samples: list[Sample]) -> list[tuple[str, list[Sample]]]:
    """The samples that show one clip, grouped into consecutive runs of the same clip."""
    grouped: list[tuple[str, list[Sample]]] = []
    for sample in samples:
        if sample.clip is None:
            continue
        if grouped and grouped[-1][0] == sample.clip:
            grouped[-1][1].append(sample)
        else:
            grouped.append((sample.clip, [sample]))
    return grouped


@pytest.mark.parametrize(("crossfade_ms", "views"), [(0, 2), (300, 2), (0, 1)])
def test_video_to_video_has_no_gap_and_starts_at_the_first_frame(
    qapp: object,
    http_server: LoopbackServer,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
    crossfade_ms: int,
    views: int,
) -> None:
    """With one view (the low-memory profile) the next clip loads in the view on screen, behind
    a still of the last one's final frame: a moment standing still, never a gap."""
    caplog.set_level(logging.INFO, logger="pdn.renderer")
    for name in ("red", "blue"):
        http_server.served.files[f"/{name}.webm"] = (clip_bytes(name), "video/webm")
    renderer = KioskRenderer(
        RendererOptions(
            fullscreen=False,
            window_size=CLIP_SIZE,
            keep_screen_on=False,
            crossfade_ms=crossfade_ms,
            views=views,
        )
    )
    screen = Screen(renderer)
    store = DisplayStore(tmp_path / "display.db")
    waker = Waker()
    engine = Engine(
        clock=lambda: datetime.now(UTC),
        schedule=Playlist(UTC),
        store=store,
        renderer=renderer,
        on_playback=screen.changed,
        wake=waker.wake,
    )
    renderer.set_listener(engine)
    driver = EngineDriver(engine, waker)
    recorder = ScreenRecorder(renderer.grab_image, interval_ms=10)
    try:
        driver.start()
        engine.set_documents([parse(video_set(http_server.base, ["red", "blue"])).root])
        assert wait_until(lambda: "red" in screen.clips(), 15), screen.updates
        process_for(crossfade_ms / 1000 + 0.05)  # past the fade from the idle page
        recorder.start()
        # red (on screen now), blue, red, then the start of blue: three boundaries.
        assert wait_until(lambda: screen.clips().count("blue") >= 2, 20), screen.updates
        process_for(crossfade_ms / 1000 + 0.3)
    finally:
        recorder.stop()
        driver.stop()
        store.close()
        renderer.close()
    samples = recorder.samples
    assert len(samples) > 100
    red, blue = CLIP_COLOURS["red"], CLIP_COLOURS["blue"]
    # Every grab is a frame of a clip; with a crossfade, or the two mixed in one proportion.
    wrong = [
        (round(s.at - samples[0].at, 3), s.points)
        for s in samples
        if s.clip is None and not (crossfade_ms and blend_of(s.points, red, blue))
    ]
    assert wrong == [], wrong[:5]
    played = runs(samples)
    assert [name for name, _ in played] == ["red", "blue", "red", "blue"], [
        (name, len(run)) for name, run in played
    ]
    # The updates: red, blue, red, blue, each for the clip's own length.
    assert screen.clips()[:4] == ["red", "blue", "red", "blue"]
    for _, _, _, duration in screen.updates[:4]:
        assert duration == pytest.approx(2.0, abs=0.15)
    # No clip is on screen before its update (with a fade, the update comes as the fade
    # from the last clip's final frame begins, and the screen then settles on the clip named).
    for (at, clip, _, _), (name, run) in zip(screen.updates[1:4], played[1:], strict=True):
        assert clip == name and run[0].at >= at
    # Each clip that reached its end says how many of its frames this machine dropped.
    counted = [
        record.args
        for record in caplog.records
        if record.getMessage().startswith("video ended:") and isinstance(record.args, tuple)
    ]
    assert len(counted) >= 3, [record.getMessage() for record in caplog.records]
    for dropped, frames, *_ in counted:
        assert isinstance(frames, int) and isinstance(dropped, int)
        assert 0 < frames <= CLIP_FRAMES and 0 <= dropped <= frames
    if crossfade_ms:
        return
    # Without a fade, each update names what the screen shows as it is made.
    assert screen.named_wrong == []
    for index, (name, run) in enumerate(played):
        frames = [s.frame for s in run]
        assert min(frames) >= 0, (name, frames)  # the bar is there: a frame of the clip
        assert frames == sorted(frames), (name, frames)  # never backwards
        if index > 0:
            # On screen from its first frames: not played through behind the screen.
            assert frames[0] <= 8, (name, frames[:10])
        if index < len(played) - 1:
            # Then it plays (not a frozen poster) to its end before the next one comes.
            assert frames[-1] >= CLIP_FRAMES - 10, (name, frames[-10:])

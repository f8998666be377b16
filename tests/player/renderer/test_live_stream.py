"""Live streams as items of a set, on the real ``pdn display`` process, read back from its
screen: an HLS stream and an RTSP camera show and move; their server cut for 10 s, the set's
next item (a picture) shows in their place; the server back, the stream shows again.

The HLS stream is made here by ffmpeg (a sliding-window live playlist), the camera by
GStreamer's RTSP server (tests/support/livestream), both on loopback; the picture is served by
another loopback server.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path
from typing import Any, Protocol

import pytest
from PySide6.QtGui import QImage

from tests.support.display import DisplayProcess
from tests.support.livestream import HlsStream, RtspStream
from tests.support.pages import PageServer, Reply
from tests.support.pixels import near
from tests.support.png import png
from tests.support.ports import free_port
from tests.support.waiting import wait_until

pytestmark = [pytest.mark.qt, pytest.mark.slow]

STREAM = (200, 40, 200)
PICTURE = (30, 200, 60)
TOLERANCE = 24  # a flat colour through H.264's YUV 4:2:0 and the screen's scaling
CUT = 10.0  # seconds the stream's server refuses connections
BLIP = 2.5  # ... for a short loss, bridged by reopening

HLS = "application/vnd.apple.mpegurl"

CONFIG = 'name = "Live"\n[location]\nlatitude = "N54.0104"\nlongitude = "W 2 47.22"\n'


@pytest.fixture
def stream(tmp_path: Path) -> Iterator[HlsStream]:
    with closing(HlsStream(tmp_path / "hls", STREAM)) as live:
        yield live


@pytest.fixture
def camera() -> Iterator[RtspStream]:
    with closing(RtspStream(STREAM)) as live:
        yield live


@pytest.fixture
def pictures() -> Iterator[PageServer]:
    with PageServer() as server:
        server.reply("/green.png", Reply(200, png(64, 48, PICTURE), "image/png"))
        yield server


def screen(display: DisplayProcess) -> QImage:
    shot = display.get("/x/screenshot")
    assert shot.status_code == 200, shot.text
    image = QImage.fromData(shot.content)
    assert not image.isNull()
    return image


def colour_at(image: QImage, fx: float, fy: float) -> tuple[int, int, int]:
    pixel = image.pixelColor(int(image.width() * fx), int(image.height() * fy))
    return pixel.red(), pixel.green(), pixel.blue()


def showing(display: DisplayProcess, colour: tuple[int, int, int]) -> bool:
    return near(colour_at(screen(display), 0.5, 0.75), colour, TOLERANCE)


def schedule(display: DisplayProcess, document: bytes) -> None:
    posted = display.post("/schedule", data=document, headers={"Content-Type": "text/xml"})
    assert posted.status_code == 202, posted.text


def frames_in(display: DisplayProcess, seconds: float) -> int:
    """How many frames of the video on screen were drawn over the next ``seconds``."""
    before = int(display.health()["renderer"]["screen"]["video"]["frames"])
    time.sleep(seconds)
    return int(display.health()["renderer"]["screen"]["video"]["frames"]) - before


def box_x(image: QImage) -> float | None:
    """Where the stream's white box is across the top quarter of the screen (None: nowhere)."""
    xs = [
        x
        for y in range(0, image.height() // 4, 4)
        for x in range(0, image.width(), 2)
        if min(colour_at(image, x / image.width(), y / image.height())) > 230
    ]
    return sum(xs) / len(xs) if xs else None


def cds(stream: str, pictures: PageServer, content_type: str | None = HLS) -> bytes:
    """The stream at ``stream`` for 10 minutes, then a picture for 2 s, in turns."""
    typed = f' content-type="{content_type}"' if content_type else ""
    return (
        '<content-set name="live">'
        f"<content-item{typed}><constraints>"
        "<scheduling-constraints><preferred-duration>PT10M</preferred-duration>"
        "</scheduling-constraints></constraints>"
        f"<requires-file><sources><uri>{stream}</uri></sources></requires-file>"
        "</content-item>"
        '<content-item content-type="image/png"><constraints>'
        "<scheduling-constraints><preferred-duration>PT2S</preferred-duration>"
        "</scheduling-constraints></constraints>"
        f"<requires-file><sources><uri>{pictures.url}/green.png</uri></sources>"
        "</requires-file></content-item>"
        "</content-set>"
    ).encode()


class Cuttable(Protocol):
    """A live stream whose server a test can end and start again (tests.support.livestream)."""

    @property
    def url(self) -> str: ...
    def cut(self) -> None: ...
    def restore(self) -> None: ...


def cut_and_back(display: DisplayProcess, stream: Cuttable) -> dict[str, Any]:
    """Cut ``stream``'s server for :data:`CUT` seconds: the set's picture shows in its place and
    the stream never does (it is tried again with a back-off); then the server is back and so
    is the stream, on screen. Returns the playback record of its return."""
    stream.cut()
    cut_at = time.monotonic()
    fallback = display.wait_playback(lambda r: r["content-item"].endswith("/green.png"), 20)
    gave_way = time.monotonic() - cut_at
    assert wait_until(lambda: showing(display, PICTURE), 5), "the picture is not on screen"
    while time.monotonic() - cut_at < CUT:
        assert display.playback()["content-item"] != stream.url
        time.sleep(0.5)
    stream.restore()
    back = display.wait_playback(
        lambda r: r["content-item"] == stream.url and r["sequence"] > fallback["sequence"], 45
    )
    came_back = time.monotonic() - cut_at - CUT
    assert wait_until(lambda: showing(display, STREAM), 10), "the stream did not come back"
    print(f"gave way {gave_way:.1f} s after the cut; back {came_back:.1f} s after the server")
    return back


def test_a_cut_stream_gives_way_to_the_next_item_and_comes_back(
    tmp_path: Path, stream: HlsStream, pictures: PageServer
) -> None:
    display = DisplayProcess(tmp_path / "display", config=CONFIG)
    display.start().wait_ready()
    try:
        schedule(display, cds(stream.url, pictures))
        record = display.wait_playback(lambda r: r["content-item"] == stream.url, 60)
        assert record["content-type"] == "application/vnd.apple.mpegurl"
        assert record["duration"] == 600.0
        assert wait_until(lambda: showing(display, STREAM), 10), "the stream is not on screen"
        # It moves: the box along its top is elsewhere a moment later.
        first = box_x(screen(display))
        time.sleep(0.6)
        second = box_x(screen(display))
        assert first is not None and second is not None and first != second, (first, second)
        health = display.health()["renderer"]["screen"]["video"]
        assert health["live"] == {"reopens": 0}, health
        # Nothing was downloaded for it: the content cache holds the picture only.
        downloads = display.health()["cache"]["downloads"]
        assert all(stream.url not in str(entry) for entry in downloads), downloads

        # A short loss is bridged: the stream is reopened, and never given up on.
        sequence = display.playback()["sequence"]
        stream.cut()
        time.sleep(BLIP)
        stream.restore()
        assert wait_until(
            lambda: display.health()["renderer"]["screen"]["video"]["live"]["reopens"] > 0, 10
        )
        # ... and plays again: its frames count up once more, on screen, the same item.
        assert wait_until(lambda: frames_in(display, 1.0) > 10, 10), "no frames after the loss"
        assert showing(display, STREAM)
        assert display.playback()["sequence"] == sequence, "a short loss changed the item"

        back = cut_and_back(display, stream)
        assert back["origin"] == "schedule"
        log = display.text()
        assert "left out for" in log  # the engine backed off from it
    finally:
        display.stop(30)


def test_an_rtsp_camera_plays_gives_way_when_cut_and_comes_back(
    tmp_path: Path, camera: RtspStream, pictures: PageServer
) -> None:
    """An RTSP camera (GStreamer's RTSP server on loopback: H.264 over RTP, 25 frames a second)
    plays natively and is never downloaded; its server ended for 10 s, the set's picture shows
    in its place, and the camera again once the server is back."""
    display = DisplayProcess(tmp_path / "display", config=CONFIG)
    display.start().wait_ready()
    try:
        schedule(display, cds(camera.url, pictures, content_type=None))
        record = display.wait_playback(lambda r: r["content-item"] == camera.url, 60)
        assert record["duration"] == 600.0
        assert wait_until(lambda: showing(display, STREAM), 15), "the camera is not on screen"
        assert wait_until(lambda: frames_in(display, 1.0) > 10, 10), "its frames do not count up"
        downloads = display.health()["cache"]["downloads"]
        assert all(camera.url not in str(entry) for entry in downloads), downloads

        cut_and_back(display, camera)
        assert wait_until(lambda: frames_in(display, 1.0) > 10, 10), "no frames after the cut"
    finally:
        display.stop(30)


def test_a_stream_this_backend_cannot_open_is_reported_failed(
    tmp_path: Path, pictures: PageServer
) -> None:
    """The wheel's FFmpeg has no SRT ("Protocol not found"): an SRT request is given up on
    within the no-frame time, and the screen keeps the schedule's picture."""
    display = DisplayProcess(tmp_path / "display", config=CONFIG)
    display.start().wait_ready()
    try:
        picture = (
            '<content-set name="pictures"><content-item content-type="image/png">'
            f"<requires-file><sources><uri>{pictures.url}/green.png</uri></sources>"
            "</requires-file></content-item></content-set>"
        ).encode()
        schedule(display, picture)
        display.wait_playback(lambda r: r["content-item"] == f"{pictures.url}/green.png", 30)
        srt = f"srt://127.0.0.1:{free_port()}?mode=caller"
        answer = display.post("/schedule", json={"content-item": srt})
        assert answer.json() == {"request-status": "scheduling"}, answer.text
        asked = time.monotonic()
        assert wait_until(lambda: f"could not show {srt}" in display.text(), 15)
        assert time.monotonic() - asked < 10
        assert "live stream: no frame for" in display.text()
        assert display.playback()["content-item"] == f"{pictures.url}/green.png"
        assert showing(display, PICTURE)
    finally:
        display.stop(30)


def test_a_stream_alone_in_its_set_plays_on(tmp_path: Path, stream: HlsStream) -> None:
    """Its preferred-duration over, the set's only item comes again: the record says so each
    time, and the stream on screen plays on (one player's frames counting up, never opened
    again)."""
    display = DisplayProcess(tmp_path / "display", config=CONFIG)
    display.start().wait_ready()
    try:
        alone = (
            '<content-set name="alone"><content-item><constraints><scheduling-constraints>'
            "<preferred-duration>PT2S</preferred-duration></scheduling-constraints>"
            f"</constraints><requires-file><sources><uri>{stream.url}</uri></sources>"
            "</requires-file></content-item></content-set>"
        ).encode()
        schedule(display, alone)
        first = display.wait_playback(lambda r: r["content-item"] == stream.url, 60)
        frames: list[int] = []
        until = time.monotonic() + 7
        while time.monotonic() < until:
            video = display.health()["renderer"]["screen"]["video"]
            assert video["url"] == stream.url and video["live"] == {"reopens": 0}, video
            frames.append(video["frames"])
            time.sleep(0.25)
        record = display.playback()
        assert record["content-item"] == stream.url
        assert record["sequence"] >= first["sequence"] + 2, (first, record)
        assert frames == sorted(frames) and frames[-1] > frames[0] + 50, frames
        assert showing(display, STREAM)
    finally:
        display.stop(30)

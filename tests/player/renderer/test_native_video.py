"""Videos as people have them: MP4 with H.264 or HEVC and AAC, WebM with VP9 and
Opus, played natively (QtMultimedia), read back from the screen on Xvfb.

The files are made here by Debian's ffmpeg (installed by ``dev.sh setup``): a solid colour
each, two seconds at 30 fps, with a sound track; this machine has no audio device, so every
test also proves that a video with sound plays where there is nothing to play it on.
"""

from __future__ import annotations

import itertools
import logging
import re
import shutil
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from PySide6.QtCore import QTimer

from player.playitem import PlayItem
from player.renderer import KioskRenderer
from player.renderer.content import Kind, classify
from player.renderer.videoplayer import PlayerState
from tests.player.conftest import LoopbackServer
from tests.support.pixels import near, process_for, rgb, uniform_colour, wait_until
from tests.support.reports import Reports
from tests.support.videofiles import solid_video
from tests.support.videoscreen import blend_of

pytestmark = pytest.mark.qt

SIZE = (320, 240)
SECONDS = 2.0
FPS = 30
# Each video's colour, container, codecs (video, audio) and content type.
VIDEOS = {
    "h264": ((220, 30, 30), "mp4", ("libx264", "aac"), "video/mp4"),
    "hevc": ((30, 60, 220), "mp4", ("libx265", "aac"), "video/mp4"),
    "vp9": ((230, 210, 30), "webm", ("libvpx-vp9", "libopus"), "video/webm"),
}
CODEC_NAMES = {"h264": "H264", "hevc": "H265", "vp9": "VP9"}  # as QtMultimedia names them
PAGE_GREEN = (0, 255, 0)
TOLERANCE = 16  # a flat colour through YUV 4:2:0 and back

_tokens = itertools.count(5000)


@pytest.fixture(scope="module")
def videos(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    ffmpeg = shutil.which("ffmpeg")
    assert ffmpeg, "ffmpeg is missing: bash packaging/dev.sh setup installs it"
    folder = tmp_path_factory.mktemp("videos")
    made = {}
    for name, (colour, container, codecs, _) in VIDEOS.items():
        path = folder / f"{name}.{container}"
        solid_video(ffmpeg, path, colour, SIZE, SECONDS, codecs, FPS)
        made[name] = path
    broken = folder / "broken.mp4"
    broken.write_bytes(made["h264"].read_bytes()[:2000])  # the header, then nothing
    made["broken"] = broken
    return made


def video_item(path: Path, content_type: str | None = None) -> PlayItem:
    kind = content_type or VIDEOS[path.stem][3]
    url = path.as_uri()
    return PlayItem(next(_tokens), url, url, kind, None, "request")


def page_item(server: LoopbackServer) -> PlayItem:
    url = server.colour("green")
    return PlayItem(next(_tokens), url, url, "text/html", 10.0, "request")


def show_and_wait(renderer: KioskRenderer, reports: Reports, play: PlayItem) -> None:
    renderer.show(play)
    assert wait_until(
        lambda: play.token in reports.shown_tokens() or play.token in reports.failed_tokens(), 15
    ), f"no report for {play.url}"
    assert play.token in reports.shown_tokens(), reports.failed


def centre(renderer: KioskRenderer) -> tuple[int, int, int]:
    return rgb(renderer.grab_image(), SIZE[0] // 2, SIZE[1] // 2)


@pytest.mark.parametrize("name", list(VIDEOS))
def test_each_codec_plays_to_its_own_end(
    make_renderer: Callable[..., tuple[KioskRenderer, Reports]],
    videos: dict[str, Path],
    caplog: pytest.LogCaptureFixture,
    name: str,
) -> None:
    caplog.set_level(logging.INFO, logger="pdn.renderer")
    renderer, reports = make_renderer()
    play = video_item(videos[name])
    swaps_before = renderer.stage.frames
    show_and_wait(renderer, reports, play)
    natural = dict((token, length) for token, _, length in reports.shown)[play.token]
    assert natural == pytest.approx(SECONDS, abs=0.1)  # from the container
    assert wait_until(lambda: near(centre(renderer), VIDEOS[name][0], TOLERANCE), 3)
    state = renderer.screen_state()
    video = state["video"]
    assert isinstance(video, dict)
    assert video["backend"] == "ffmpeg" and video["decoding"] == "software", video
    assert video["codec"] == CODEC_NAMES[name], video
    # It ends by itself, on its own end, and keeps its last frame.
    assert wait_until(lambda: play.token in reports.ended, SECONDS + 3)
    swapped_while_playing = renderer.stage.frames - swaps_before
    process_for(0.3)
    assert near(centre(renderer), VIDEOS[name][0], TOLERANCE)
    ended = [r.getMessage() for r in caplog.records if r.getMessage().startswith("video ended")]
    assert ended and f"of {int(SECONDS * FPS)} frames dropped" in ended[0], ended
    # Dropped is counted on screen: the frames drawn are at most those decoded, and at most
    # one per frame the window swapped while the video played.
    counts = re.search(r"(\d+) of (\d+) frames dropped .* (\d+) decoded\)", ended[0])
    assert counts, ended[0]
    dropped, total, decoded = (int(value) for value in counts.groups())
    assert 0 < total - dropped <= decoded <= total, ended[0]
    assert total - dropped <= swapped_while_playing
    assert reports.failed == []


@pytest.mark.parametrize(("crossfade_ms", "decoders"), [(0, 2), (300, 2), (0, 1), (300, 1)])
def test_video_page_video_never_shows_black(
    make_renderer: Callable[..., tuple[KioskRenderer, Reports]],
    videos: dict[str, Path],
    http_server: LoopbackServer,
    crossfade_ms: int,
    decoders: int,
) -> None:
    """With one decoder ([screen] video-decoders = 1) the outgoing video stands still on a
    copy of its last frame while the decoder moves to the next: never two open at once."""
    renderer, reports = make_renderer(crossfade_ms=crossfade_ms, video_decoders=decoders)
    show_and_wait(renderer, reports, page_item(http_server))
    colours = [PAGE_GREEN, *(colour for colour, *_ in VIDEOS.values())]
    wrong: list[tuple[float, tuple[int, int, int]]] = []
    most_open = 0
    started = time.monotonic()

    def sample() -> None:
        nonlocal most_open
        loaded = [
            p for p in renderer.region.video_layer.players() if p.state is not PlayerState.EMPTY
        ]
        most_open = max(most_open, len(loaded))
        point = centre(renderer)
        if any(near(point, colour, TOLERANCE) for colour in colours):
            return
        if crossfade_ms and any(
            blend_of([point], a, b) for a, b in itertools.permutations(colours, 2)
        ):
            return
        wrong.append((round(time.monotonic() - started, 3), point))

    timer = QTimer()
    timer.timeout.connect(sample)
    timer.start(5)
    try:
        # Page to video, video to video (prepared: the next one waits on its first frame),
        # video to page, and the same video again after itself.
        sequence = [videos["h264"], videos["vp9"], None, videos["hevc"], videos["hevc"]]
        for index, path in enumerate(sequence):
            play = page_item(http_server) if path is None else video_item(path)
            show_and_wait(renderer, reports, play)
            following = sequence[index + 1] if index + 1 < len(sequence) else None
            if following is not None:
                renderer.prepare(video_item(following))
            process_for(0.8)
    finally:
        timer.stop()
    assert wrong == [], wrong[:5]
    assert reports.failed == []
    assert most_open == decoders


def test_a_broken_file_fails_within_3_s_and_the_screen_stays(
    make_renderer: Callable[..., tuple[KioskRenderer, Reports]],
    videos: dict[str, Path],
    http_server: LoopbackServer,
) -> None:
    renderer, reports = make_renderer()
    show_and_wait(renderer, reports, page_item(http_server))
    broken = video_item(videos["broken"], "video/mp4")
    asked = time.monotonic()
    renderer.show(broken)
    assert wait_until(lambda: broken.token in reports.failed_tokens(), 5)
    assert time.monotonic() - asked < 3.5
    reason = dict(reports.failed)[broken.token]
    assert "video" in reason or "frame" in reason, reason
    assert uniform_colour(renderer.grab_image()) == PAGE_GREEN  # never black or frozen
    # The next item shows.
    show_and_wait(renderer, reports, video_item(videos["h264"]))
    assert wait_until(lambda: near(centre(renderer), VIDEOS["h264"][0], TOLERANCE), 3)


def test_audio_off_plays_the_picture(
    make_renderer: Callable[..., tuple[KioskRenderer, Reports]], videos: dict[str, Path]
) -> None:
    renderer, reports = make_renderer(audio=False)
    play = video_item(videos["h264"])
    show_and_wait(renderer, reports, play)
    assert wait_until(lambda: play.token in reports.ended, SECONDS + 3)
    assert near(centre(renderer), VIDEOS["h264"][0], TOLERANCE)


def test_a_video_over_http_plays(
    make_renderer: Callable[..., tuple[KioskRenderer, Reports]],
    videos: dict[str, Path],
    http_server: LoopbackServer,
) -> None:
    """As ``POST /schedule`` sends one: a URL, here with the type a server gives any file."""
    http_server.served.files["/clip.mp4"] = (
        videos["hevc"].read_bytes(),
        "application/octet-stream",
    )
    renderer, reports = make_renderer()
    url = http_server.base + "/clip.mp4"
    play = PlayItem(next(_tokens), url, url, "application/octet-stream", None, "request")
    assert classify(play) is Kind.VIDEO  # by its suffix
    show_and_wait(renderer, reports, play)
    assert wait_until(lambda: near(centre(renderer), VIDEOS["hevc"][0], TOLERANCE), 3)


def test_a_video_that_stops_moving_is_given_up(
    make_renderer: Callable[..., tuple[KioskRenderer, Reports]], videos: dict[str, Path]
) -> None:
    """A stream that stops (a hung decoder, a server gone mid-file) must not freeze the
    screen: here the player is paused behind the renderer's back, which it cannot tell from
    a stall."""
    renderer, reports = make_renderer()
    play = video_item(videos["h264"])
    show_and_wait(renderer, reports, play)
    process_for(0.3)
    renderer.region.video_layer.front_player().player.pause()
    assert wait_until(lambda: play.token in reports.failed_tokens(), 10)
    assert "stalled" in dict(reports.failed)[play.token]
    assert renderer.region.stack.layer is renderer.region.cover


def test_an_mp4_from_a_server_without_ranges_is_fetched_whole(
    make_renderer: Callable[..., tuple[KioskRenderer, Reports]],
    videos: dict[str, Path],
    http_server: LoopbackServer,
    tmp_path: Path,
) -> None:
    """ffmpeg writes an MP4's index after its frames; from a server that ignores ranges
    (Python's http.server) it cannot be streamed, so it is downloaded and played from a file,
    which goes when the video does."""
    http_server.served.no_range = True
    http_server.served.files["/late-index.mp4"] = (videos["h264"].read_bytes(), "video/mp4")
    renderer, reports = make_renderer(data_dir=tmp_path)
    url = http_server.base + "/late-index.mp4"
    play = PlayItem(next(_tokens), url, url, "video/mp4", None, "request")
    show_and_wait(renderer, reports, play)
    assert wait_until(lambda: near(centre(renderer), VIDEOS["h264"][0], TOLERANCE), 3)
    spool = tmp_path / "video-spool"
    assert len(list(spool.iterdir())) == 1
    show_and_wait(renderer, reports, video_item(videos["vp9"]))
    assert wait_until(lambda: not list(spool.iterdir()), 3)  # released once covered


def test_the_page_stays_under_a_fade_that_runs_late(
    make_renderer: Callable[..., tuple[KioskRenderer, Reports]],
    videos: dict[str, Path],
    http_server: LoopbackServer,
) -> None:
    """The fade runs on the render thread, whose time falls behind the GUI's clock when frames
    come late (a loaded board): what it fades in over stays until it is opaque, however long
    that takes, never cleared on the GUI's clock to show black under a half-faded video. The
    fade is made late here by playing it again, slower, once the video is shown."""
    renderer, reports = make_renderer(crossfade_ms=300)
    show_and_wait(renderer, reports, page_item(http_server))
    red = VIDEOS["h264"][0]
    show_and_wait(renderer, reports, video_item(videos["h264"]))
    item = renderer.region.video_layer.front_item()
    assert item is not None
    # Long enough to be running still after the wait below (on Xvfb, with no vsync to pace
    # them, animations run faster than the clock; under load, slower).
    renderer.region.stack.fade(item, 0.3, 1.0, 60_000)
    process_for(1.5)  # the page's clearing was due 250 + 300 ms after the swap
    assert renderer.region.stack.fading(item)
    point = centre(renderer)
    assert blend_of([point], PAGE_GREEN, red) and not near(point, red, TOLERANCE), point
    renderer.region.stack.stop_fade(item, 1.0)
    assert wait_until(lambda: near(centre(renderer), red, TOLERANCE), 10), centre(renderer)

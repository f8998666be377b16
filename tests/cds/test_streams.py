"""Live streams as content items: which items are streams, and the addresses a CDS takes for
them (refused with the line where wrong)."""

from __future__ import annotations

import pytest

from cds import parse
from cds.errors import CdsError
from cds.streams import is_stream


@pytest.mark.parametrize(
    ("url", "content_type", "stream"),
    [
        ("rtsp://cam.example.org/live", None, True),
        ("RTSPS://cam.example.org:322/live", "video/mp4", True),
        ("srt://10.0.0.5:9000?mode=caller", None, True),
        ("https://tv.example.org/live/index.m3u8", None, True),
        ("https://tv.example.org/live/INDEX.M3U8?token=1", "", True),
        ("https://tv.example.org/live", "application/vnd.apple.mpegurl; charset=utf-8", True),
        ("https://tv.example.org/live", "application/x-mpegURL", True),
        ("https://tv.example.org/a.mp4", "video/mp4", False),
        ("https://tv.example.org/m3u8/a.html", "text/html", False),
        ("file:///var/a.m3u8", None, False),
        ("data:image/png;base64,AAAA", "image/png", False),
    ],
)
def test_which_items_are_streams(url: str, content_type: str | None, stream: bool) -> None:
    assert is_stream(url, content_type) is stream


def item(uri: str, content_type: str = "application/vnd.apple.mpegurl") -> str:
    return (
        f'<content-set name="s">\n<content-item content-type="{content_type}">'
        f"<requires-file><sources>\n<uri>{uri}</uri></sources></requires-file></content-item>"
        "</content-set>"
    )


@pytest.mark.parametrize(
    "uri",
    [
        "rtsp://cam.example.org:8554/lobby",
        "rtsps://cam.example.org/lobby",
        "srt://10.0.0.5:9000?mode=caller&amp;latency=200",
        "https://tv.example.org/live/index.m3u8",
    ],
)
def test_a_cds_takes_stream_addresses(uri: str) -> None:
    document = parse(item(uri))
    [content] = document.root.children
    assert content.files[0].sources[0].uri == uri.replace("&amp;", "&")


@pytest.mark.parametrize(
    ("uri", "message"),
    [
        ("rtsp:///lobby", "has no host name"),
        ("srt://10.0.0.5:99999", "not a valid address"),
        ("rtmp://cam.example.org/live", "or a live stream's rtsp://, rtsps:// or srt://"),
    ],
)
def test_a_bad_stream_address_is_refused_at_its_line(uri: str, message: str) -> None:
    with pytest.raises(CdsError) as caught:
        parse(item(uri))
    assert message in str(caught.value)
    assert "line 3" in str(caught.value)

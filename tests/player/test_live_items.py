"""Live stream items at the display: its allowed origins, the content cache and JSON requests
take a stream's address as they take an http one, and never fetch it."""

from __future__ import annotations

from pathlib import Path

import pytest

from cds import parse
from cds.errors import CdsError
from player.cachedcontent import CachedContent
from player.config import ConfigError, DisplayConfig, load_config, origin_of
from server.platform.validation import CONTENT, check_uri


def item(uri: str, content_type: str = "application/vnd.apple.mpegurl") -> str:
    return (
        f'<content-set name="s">\n<content-item content-type="{content_type}">'
        f"<requires-file><sources>\n<uri>{uri}</uri></sources></requires-file></content-item>"
        "</content-set>"
    )


def test_allowed_origins_apply_to_streams_as_to_http() -> None:
    config = DisplayConfig(allowed_origins=(origin_of("rtsp://cam.example.org:554"),))
    assert config.origin_allowed("rtsp://cam.example.org/lobby")  # 554: RTSP's default
    refusal = config.item_refusal("rtsp://other.example.org/lobby")
    assert refusal == "the origin rtsp://other.example.org is not in this display's allowed_origins"
    with pytest.raises(CdsError) as caught:
        parse(item("rtsp://other.example.org/lobby"), check_item=config.item_refusal)
    assert "not in this display's allowed_origins" in str(caught.value)


def test_a_stream_is_never_cached() -> None:
    document = parse(item("https://tv.example.org/live/index.m3u8"))
    [content] = document.root.children
    assert not CachedContent.needs_cache(content)


def test_a_json_request_takes_stream_addresses() -> None:
    assert check_uri("rtsp://cam.example.org:8554/lobby", CONTENT) is None
    assert check_uri("srt://10.0.0.5:9000?mode=caller", CONTENT) is None
    assert check_uri("rtsp:///lobby", CONTENT) is not None
    assert check_uri("rtmp://cam.example.org/live", CONTENT) is not None


def test_the_config_file_takes_stream_origins(tmp_path: Path) -> None:
    path = tmp_path / "display.toml"
    path.write_text(
        'allowed_origins = ["rtsp://Cam.Example.org:554", "srt://10.0.0.5:9000", '
        '"https://tv.example.org"]\n'
        '[location]\nlatitude = "N54"\nlongitude = "W2"\n'
    )
    config = load_config(path, environ={})
    assert config.allowed_origins == (
        "rtsp://cam.example.org",
        "srt://10.0.0.5:9000",
        "https://tv.example.org",
    )
    assert config.origin_allowed("srt://10.0.0.5:9000?mode=caller")
    assert not config.origin_allowed("srt://10.0.0.5:9001?mode=caller")
    path.write_text('allowed_origins = ["rtmp://cam.example.org"]\n')
    with pytest.raises(ConfigError, match="is not an origin"):
        load_config(path, environ={})

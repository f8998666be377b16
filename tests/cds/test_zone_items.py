"""The native zone items a CDS may hold: a ticker's text or feed and a clock, accepted where
their content-type says so and refused anywhere else with the line, also by a display's
allowed origins; the content cache never downloads them."""

from __future__ import annotations

import pytest

from cds.errors import CdsError
from cds.layouts import native_kind
from cds.parser import parse
from player.cache import ContentCache
from player.cachedcontent import CachedContent
from player.config import DisplayConfig


def document(content_type: str, uri: str) -> str:
    return (
        '<content-set name="news">\n'
        f'  <content-item content-type="{content_type}">\n'
        f"    <requires-file><sources><uri>{uri}</uri></sources></requires-file>\n"
        "  </content-item>\n"
        "</content-set>"
    )


@pytest.mark.parametrize(
    ("content_type", "uri", "kind"),
    [
        ("text/plain", "data:text/plain,First%20line%0ASecond%20line", "ticker"),
        ("text/plain", "data:,Just%20text", "ticker"),
        ("text/plain; charset=utf-8", "data:text/plain;charset=utf-8,Caf%C3%A9", "ticker"),
        ("text/plain", "https://news.example/lines.txt", "ticker"),
        ("application/rss+xml", "https://news.example/rss.xml", "ticker"),
        ("application/atom+xml", "http://news.example/atom.xml", "ticker"),
        ("application/x-pdn-clock", "pdn:clock?format=HH:mm:ss", "clock"),
        ("application/x-pdn-clock", "pdn:clock", "clock"),
    ],
)
def test_ticker_and_clock_items_are_taken(content_type: str, uri: str, kind: str) -> None:
    item = parse(document(content_type, uri)).root.walk_items()[0]
    assert item.url == uri
    assert native_kind(item.content_type) == kind


@pytest.mark.parametrize(
    ("content_type", "uri", "words"),
    [
        ("application/rss+xml", "data:text/plain,x", "data: address is taken only"),
        ("text/html", "data:text/plain,x", "data: address is taken only"),
        ("text/plain", "data:text/html,%3Cb%3Ex", "data: address is taken only"),
        ("application/rss+xml", "file:///etc/passwd", "http or https address"),
        ("text/plain", "pdn:clock", "http or https address"),
        ("text/html", "pdn:clock?format=HH:mm", "http or https address"),
        ("application/x-pdn-clock", "https://time.example/", "pdn:clock?format="),
        ("application/x-pdn-clock", "pdn:calendar", "pdn:clock?format="),
        ("application/x-pdn-clock", "pdn:clock?format=" + "H" * 65, "at most 64"),
    ],
)
def test_misplaced_native_addresses_are_refused_with_the_line(
    content_type: str, uri: str, words: str
) -> None:
    with pytest.raises(CdsError) as caught:
        parse(document(content_type, uri))
    (problem,) = caught.value.problems
    assert problem.line == 3
    assert words in problem.message


def test_a_feed_follows_the_displays_allowed_origins_and_a_clock_has_none() -> None:
    config = DisplayConfig(allowed_origins=("https://news.example",))
    taken = parse(
        document("application/rss+xml", "https://news.example/rss.xml"),
        check_item=config.item_refusal,
    )
    assert taken.root.walk_items()[0].url == "https://news.example/rss.xml"
    with pytest.raises(CdsError) as caught:
        parse(
            document("application/atom+xml", "https://elsewhere.example/atom.xml"),
            check_item=config.item_refusal,
        )
    assert "https://elsewhere.example is not in this display's allowed_origins" in str(caught.value)
    for content_type, uri in (
        ("application/x-pdn-clock", "pdn:clock?format=HH:mm"),
        ("text/plain", "data:text/plain,hello"),
    ):
        parse(document(content_type, uri), check_item=config.item_refusal)


def test_the_content_cache_never_downloads_a_ticker_or_a_clock(tmp_path: object) -> None:
    from pathlib import Path

    assert isinstance(tmp_path, Path)
    content = CachedContent(ContentCache(tmp_path))
    try:
        for content_type, uri in (
            ("application/rss+xml", "https://news.example/rss.xml"),
            ("text/plain", "https://news.example/lines.txt"),
            ("application/x-pdn-clock", "pdn:clock"),
        ):
            root = parse(document(content_type, uri)).root
            item = root.walk_items()[0]
            assert not content.needs_cache(item)
            assert content.available(item)
            assert content.locate(item) == uri
            content.documents_changed([root])
            assert content.status()["wanted"] == 0
        picture = parse(document("image/png", "https://news.example/a.png")).root.walk_items()[0]
        assert content.needs_cache(picture)
    finally:
        content.close()

"""A ticker's lines from feeds (player/feeds.py): RSS, Atom, text and data: URIs read right;
hostile feeds refused; a reader on a loopback server follows updates, keeps its last good
lines through failures and refusals, and hands them over again after a restart offline."""

from __future__ import annotations

import base64
import logging
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote

import pytest

from player.feeds import (
    DEFAULT_REFRESH,
    MAX_BYTES,
    MAX_LINE_CHARS,
    MAX_LINES,
    FeedError,
    FeedReader,
    FeedSpec,
    parse_feed,
    read_uri,
    refresh_seconds,
)
from tests.support.pages import PageServer, Reply, Request
from tests.support.waiting import wait_until

RSS = """<?xml version="1.0" encoding="utf-8"?>
<rss version="2.0"><channel><title>Newsroom</title><link>https://news.example/</link>
<item><title>Trains run late  tonight</title>
  <description>&lt;p&gt;Works on the &lt;b&gt;north&lt;/b&gt; line &amp;amp; the bridge.&lt;/p&gt;
  </description></item>
<item><title>Caf\u00e9 opens at nine</title><description>Coffee and cake</description></item>
<item><description>An item without a title</description></item>
</channel></rss>"""

ATOM = """<?xml version="1.0" encoding="utf-8"?>
<feed xmlns="http://www.w3.org/2005/Atom"><title>Site</title>
<entry><title type="text">First entry</title><summary>Its summary</summary></entry>
<entry><title>Second entry</title><content type="html">&lt;i&gt;Content&lt;/i&gt;</content></entry>
</feed>"""

BILLION_LAUGHS = """<?xml version="1.0"?>
<!DOCTYPE lolz [<!ENTITY lol "lol"><!ENTITY lol1 "&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;">
<!ENTITY lol2 "&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;">]>
<rss version="2.0"><channel><item><title>&lol2;</title></item></channel></rss>"""

EXTERNAL_ENTITY = """<?xml version="1.0"?>
<!DOCTYPE rss [<!ENTITY secret SYSTEM "file:///etc/passwd">]>
<rss version="2.0"><channel><item><title>&secret;</title></item></channel></rss>"""


def rss(*titles: str) -> str:
    items = "".join(f"<item><title>{title}</title></item>" for title in titles)
    return f'<rss version="2.0"><channel><title>t</title>{items}</channel></rss>'


def test_rss_titles_and_descriptions() -> None:
    data = RSS.encode()
    assert parse_feed(data, "application/rss+xml") == [
        "Trains run late tonight",
        "Caf\u00e9 opens at nine",
    ]
    assert parse_feed(data, "application/rss+xml", descriptions=True) == [
        "Trains run late tonight: Works on the north line & the bridge.",
        "Caf\u00e9 opens at nine: Coffee and cake",
        "An item without a title",
    ]
    # Told by the data when the media type says nothing useful.
    assert parse_feed(data, None) == parse_feed(data, "application/octet-stream")[:2]


def test_atom_entries() -> None:
    assert parse_feed(ATOM.encode(), "application/atom+xml") == ["First entry", "Second entry"]
    assert parse_feed(ATOM.encode(), "application/atom+xml", descriptions=True) == [
        "First entry: Its summary",
        "Second entry: Content",
    ]


def test_text_lines_and_data_uris() -> None:
    text = "\ufeffFirst message\r\n\n  Second\tmessage  \nThird\x07 bell\n"
    assert parse_feed(text.encode(), "text/plain") == [
        "First message",
        "Second message",
        "Third bell",
    ]
    uri = "data:text/plain," + quote("Doors open at 9\nCoffee in the hall")
    body, media_type, _ = read_uri(uri)  # type: ignore[misc]
    assert media_type == "text/plain"
    assert parse_feed(body, media_type) == ["Doors open at 9", "Coffee in the hall"]
    encoded = base64.b64encode(b"Line one\nLine two\n").decode()
    body, media_type, _ = read_uri(f"data:text/plain;charset=utf-8;base64,{encoded}")  # type: ignore[misc]
    assert parse_feed(body, media_type) == ["Line one", "Line two"]
    # Markup in a text ticker is text, shown as written.
    assert parse_feed(b"<b>bold?</b> no", "text/plain") == ["<b>bold?</b> no"]


def test_lines_are_bounded() -> None:
    many = "\n".join(f"message {n}" for n in range(MAX_LINES * 3)).encode()
    assert len(parse_feed(many, "text/plain")) == MAX_LINES
    long = parse_feed(rss("x" * 5000).encode(), "application/rss+xml")[0]
    assert len(long) == MAX_LINE_CHARS and long.endswith("\u2026")


@pytest.mark.parametrize(
    ("document", "reason"),
    [
        (BILLION_LAUGHS, "DOCTYPE"),
        (EXTERNAL_ENTITY, "DOCTYPE"),
        (BILLION_LAUGHS.encode("utf-16").decode("latin-1"), "DOCTYPE"),
        ("<html><body>not a feed</body></html>", "neither RSS nor Atom"),
        ('<rss version="2.0"><channel><item><title>open', "not readable XML"),
        (rss(), "no line"),
        ("<rss>" + "<a/>" * 50_000 + "</rss>", "elements"),
        ("<rss>" + "<a>" * 300 + "</rss>", "not readable XML"),  # too deep
    ],
)
def test_hostile_or_broken_feeds_are_refused(document: str, reason: str) -> None:
    data = document.encode("latin-1") if "\x00" in document else document.encode()
    with pytest.raises(FeedError, match=reason):
        parse_feed(data, "application/rss+xml")


def test_only_http_https_and_data_are_read() -> None:
    for uri in ("file:///etc/passwd", "ftp://example.org/feed", "gopher://x", "/etc/passwd"):
        with pytest.raises(FeedError, match="http, https or data"):
            read_uri(uri)
    with pytest.raises(FeedError, match="http, https or data"):
        FeedReader(FeedSpec("file:///etc/passwd"), lambda lines: None)
    with pytest.raises(FeedError, match="larger than"):
        read_uri("data:text/plain," + "a" * (MAX_BYTES + 1))


def test_refresh_is_read_as_a_duration() -> None:
    assert refresh_seconds(None) == DEFAULT_REFRESH == 300.0
    assert refresh_seconds("2 minutes") == 120.0
    assert refresh_seconds("PT1H") == 3600.0
    assert refresh_seconds("1 ms") == 5.0  # no feed is polled flat out
    with pytest.raises(FeedError, match="refresh"):
        refresh_seconds("soon")


class Lines:
    """What a reader hands over, in order, from its worker thread."""

    def __init__(self) -> None:
        self.got: list[list[str]] = []
        self.threads: set[str] = set()

    def __call__(self, lines: list[str]) -> None:
        self.threads.add(threading.current_thread().name)
        self.got.append(lines)

    def last(self) -> list[str] | None:
        return self.got[-1] if self.got else None


@pytest.fixture
def server() -> Iterator[PageServer]:
    with PageServer() as pages:
        yield pages


def reads_past(reader: FeedReader, count: int) -> bool:
    return bool(wait_until(lambda: reader.reads > count, 15))


def test_a_reader_follows_its_feed_and_keeps_the_last_good_lines(
    server: PageServer, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    url = server.page("/news.xml", rss("One", "Two"), "application/rss+xml")
    lines = Lines()
    reader = FeedReader(FeedSpec(url, "application/rss+xml", refresh=300), lines, data_dir=tmp_path)
    reader.start()
    try:
        assert wait_until(lambda: lines.last() == ["One", "Two"], 15)
        assert threading.current_thread().name not in lines.threads

        # An updated feed changes the lines.
        server.page("/news.xml", rss("Three"), "application/rss+xml")
        reads = reader.reads
        reader.refresh_now()
        assert wait_until(lambda: lines.last() == ["Three"], 15)

        # A feed that goes away: the last lines stay, one warning says so.
        server.page("/news.xml", "gone", "text/plain", status=404)
        handed = len(lines.got)
        reads = reader.reads
        with caplog.at_level(logging.DEBUG, "pdn.feeds"):
            reader.refresh_now()
            assert reads_past(reader, reads)
            reads = reader.reads
            reader.refresh_now()  # a back-off is cut short too
            assert reads_past(reader, reads)
        warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
        assert len(warnings) == 1 and "404" in warnings[0].getMessage()
        assert "keeping its last 1 lines" in warnings[0].getMessage()
        assert reader.lines == ["Three"] and len(lines.got) == handed and reader.failures == 2

        # A malicious feed is refused, with a log line; the last good lines stay.
        caplog.clear()
        for hostile, reason in (
            (BILLION_LAUGHS, "DOCTYPE"),
            ("<rss>" + "x" * (MAX_BYTES + 10), "larger than 1024 KiB"),
        ):
            server.page("/news.xml", hostile, "application/rss+xml")
            reads = reader.reads
            reader.refresh_now()
            assert reads_past(reader, reads)
            refused = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
            assert reason in refused[-1], refused
        assert reader.lines == ["Three"] and len(lines.got) == handed

        # Back: read again, logged once.
        server.page("/news.xml", rss("Four", "Five"), "application/rss+xml")
        reader.refresh_now()
        assert wait_until(lambda: lines.last() == ["Four", "Five"], 15)
        assert reader.failures == 0
    finally:
        reader.close()
    assert wait_until(lambda: reader._thread is not None and not reader._thread.is_alive(), 5)

    # A restart without the network: the stored lines at once.
    server.close()
    again = Lines()
    offline = FeedReader(FeedSpec(url, "application/rss+xml"), again, data_dir=tmp_path)
    with caplog.at_level(logging.ERROR, "pdn.feeds"):  # its failed read is expected
        offline.start()
        try:
            assert wait_until(lambda: again.last() == ["Four", "Five"], 15)
            assert wait_until(lambda: offline.failures >= 1, 20)
            assert offline.lines == ["Four", "Five"]
        finally:
            offline.close()
    stored = list((tmp_path / "feeds").iterdir())
    assert len(stored) == 1 and stored[0].suffix == ".json"  # no temporary file left


def test_a_feed_not_modified_is_not_downloaded_again(server: PageServer) -> None:
    body = rss("Same").encode()

    def answer(request: Request) -> Reply:
        if request.headers.get("If-None-Match") == '"v1"':
            return Reply(304, b"", "application/rss+xml", {"ETag": '"v1"'})
        return Reply(200, body, "application/rss+xml", {"ETag": '"v1"'})

    server.handle(answer)
    lines = Lines()
    reader = FeedReader(FeedSpec(server.url + "/feed"), lines)
    reader.start()
    try:
        assert wait_until(lambda: lines.last() == ["Same"], 15)
        reader.refresh_now()
        assert reads_past(reader, 1)
        assert reader.failures == 0 and lines.got == [["Same"]]
        sent = [r.headers.get("If-None-Match") for r in server.received("/feed", "GET")]
        assert sent[-1] == '"v1"'
    finally:
        reader.close()


def test_a_data_uri_is_read_once(tmp_path: Path) -> None:
    lines = Lines()
    reader = FeedReader(FeedSpec("data:text/plain,Welcome%0ALunch%20at%2012", "text/plain"), lines)
    reader.start()
    try:
        assert wait_until(lambda: lines.last() == ["Welcome", "Lunch at 12"], 15)
        assert reader._thread is not None
        reader._thread.join(5)
        assert not reader._thread.is_alive() and reader.reads == 1
    finally:
        reader.close()


def test_a_slow_feed_does_not_hold_close(server: PageServer) -> None:
    server.reply("/slow", Reply(200, rss("late").encode(), "application/rss+xml", delay=3))
    lines = Lines()
    reader = FeedReader(FeedSpec(server.url + "/slow"), lines)
    reader.start()
    assert wait_until(lambda: len(server.received("/slow", "GET")) == 1, 10)
    began = time.monotonic()
    reader.close()
    assert time.monotonic() - began < 0.2  # the GUI thread does not wait for the read
    assert reader._thread is not None and reader._thread.is_alive()
    assert wait_until(lambda: reader._thread is not None and not reader._thread.is_alive(), 20)
    assert lines.got == []  # what the abandoned read brought is dropped

"""The playback event stream (GET /x/playback/events) through a real waitress server."""

from __future__ import annotations

import json
import queue
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
import requests
from flask import Flask

from server.ctl.cli import ServerEvent, read_events
from server.display.api import MAX_EVENT_STREAMS
from server.platform.wsgi import WsgiServer
from tests.support.inprocess_display import Display
from tests.support.waiting import wait_until

HEARTBEAT = 0.2


@pytest.fixture(autouse=True)
def quick_heartbeat(display_server: tuple[Flask, WsgiServer]) -> Iterator[None]:
    app, _server = display_server
    app.config["PDN_SSE_HEARTBEAT"] = HEARTBEAT
    yield
    app.config.pop("PDN_SSE_HEARTBEAT", None)


class _FromSource(requests.adapters.HTTPAdapter):
    """Connections from one loopback source address: to the server, another client."""

    def __init__(self, source: str) -> None:
        self._source = source
        super().__init__()

    def init_poolmanager(self, *args: Any, **kwargs: Any) -> None:
        kwargs["source_address"] = (self._source, 0)
        super().init_poolmanager(*args, **kwargs)


class Stream:
    """One open event stream from the client at ``source`` (a loopback address), read on a
    thread of its own into a queue; ``ended`` is set when the server ends it."""

    def __init__(
        self, url: str, headers: dict[str, str] | None = None, source: str = "127.0.0.1"
    ) -> None:
        self._session = requests.Session()
        self._session.mount("http://", _FromSource(source))
        self.response = self._session.get(
            url + "/x/playback/events", headers=headers or {}, stream=True, timeout=(5, 10)
        )
        self.items: queue.Queue[ServerEvent | None] = queue.Queue()
        self.ended = threading.Event()
        if self.response.status_code == 200:
            threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        try:
            for event in read_events(self.response.iter_content(chunk_size=None)):
                self.items.put(event)
            self.ended.set()
        except (requests.RequestException, AttributeError, ValueError):
            pass  # closed by the test

    def next_event(self, timeout: float = 10.0) -> ServerEvent:
        deadline = time.monotonic() + timeout
        while True:
            item = self.items.get(timeout=max(0.01, deadline - time.monotonic()))
            if item is not None:
                return item

    def next_record(self, timeout: float = 10.0) -> tuple[int, dict[str, Any]]:
        event = self.next_event(timeout)
        assert event.event == "playback"
        assert event.id is not None
        record: dict[str, Any] = json.loads(event.data)
        assert int(event.id) == record["sequence"]
        return int(event.id), record

    def close(self) -> None:
        self.response.close()
        self._session.close()


def open_stream(url: str, source: str = "127.0.0.1") -> Stream:
    """A stream, once the slots of earlier tests' closed streams are free (a server notices a
    client has gone when a heartbeat cannot be sent)."""
    refused: list[int] = []

    def opened() -> Stream | None:
        stream = Stream(url, source=source)
        if stream.response.status_code == 200:
            return stream
        refused.append(stream.response.status_code)
        stream.close()
        return None

    stream: Stream = wait_until(opened, 10, lambda: f"a stream (answers: {refused[-3:]})", 0.1)
    return stream


def request(display: Display, name: str, duration: str = "0.3 s") -> None:
    response = display.post(
        "/schedule",
        json={"content-item": f"http://example.org/{name}", "preferred-duration": duration},
    )
    assert response.json() == {"request-status": "scheduling"}


def test_current_record_first_then_each_change_then_heartbeats(display: Display) -> None:
    stream = Stream(display.url)
    try:
        assert stream.response.headers["Content-Type"].startswith("text/event-stream")
        assert stream.response.headers["Cache-Control"] == "no-store"
        sequence, record = stream.next_record()
        assert record == display.playback()
        request(display, "a")
        request(display, "b")
        got = [stream.next_record() for _ in range(3)]
        assert [s for s, _ in got] == [sequence + 1, sequence + 2, sequence + 3]
        assert [r["content-item"] for _, r in got] == [
            "http://example.org/a",
            "http://example.org/b",
            None,  # the idle page, after the requests
        ]
        assert got[-1][1] == display.playback()
        # A quiet stream carries comments (None) at the heartbeat, nothing else.
        started = time.monotonic()
        assert stream.items.get(timeout=5) is None
        assert stream.items.get(timeout=5) is None
        assert time.monotonic() - started < 3
    finally:
        stream.close()


def test_resume_replays_missed_records_in_order(display: Display) -> None:
    first = Stream(display.url)
    sequence, _ = first.next_record()
    first.close()
    request(display, "one", "0.3 s")
    request(display, "two", "60 s")
    display.wait_playback(lambda r: r["content-item"] == "http://example.org/two")
    resumed = Stream(display.url, {"Last-Event-ID": str(sequence)})
    try:
        got = [resumed.next_record() for _ in range(2)]
        assert [s for s, _ in got] == [sequence + 1, sequence + 2]
        assert [r["content-item"] for _, r in got] == [
            "http://example.org/one",
            "http://example.org/two",
        ]
        assert resumed.items.get(timeout=5) is None  # then nothing but heartbeats
    finally:
        resumed.close()
    # An id the display never reached (another display's, or before a reset): the current one.
    fresh = Stream(display.url, {"Last-Event-ID": "999999"})
    try:
        assert fresh.next_record()[1] == display.playback()
    finally:
        fresh.close()
    bad = requests.get(
        display.url + "/x/playback/events", headers={"Last-Event-ID": "soon"}, timeout=5
    )
    assert bad.status_code == 400
    assert bad.json()["error"] == "invalid-field"


def test_streams_are_bounded_below_the_thread_pool(
    display: Display, display_server: tuple[Flask, WsgiServer]
) -> None:
    assert MAX_EVENT_STREAMS <= 8 // 2  # waitress serves with 8 threads (server.platform.wsgi)
    sources = [f"127.0.0.{10 + n}" for n in range(MAX_EVENT_STREAMS)]
    streams = [open_stream(display.url, source) for source in sources]
    try:
        for stream in streams:
            stream.next_record()
        refused = Stream(display.url, source="127.0.0.40")
        assert refused.response.status_code == 503
        assert refused.response.json()["error"] == "too-many-streams"
        refused.close()
        # Every other request is still served while the streams are open.
        for _ in range(20):
            assert display.get("/x/health").status_code in (200, 503)
        request(display, "busy", "60 s")
        for stream in streams:
            assert stream.next_record()[1]["content-item"] == "http://example.org/busy"
        # A client that leaves gives its slot back (seen at the next heartbeat at the latest).
        streams.pop().close()
        open_stream(display.url, "127.0.0.40").close()
    finally:
        for stream in streams:
            stream.close()


def test_event_parser_follows_the_standard() -> None:
    chunks = [
        b"retry: 10\n: hi\n\nid: 4\nevent: playback\nda",
        b"ta: {}\r\n\r\ndata: a\ndata: b\n\n",
    ]
    assert list(read_events(chunks)) == [
        None,
        ServerEvent("4", "playback", "{}"),
        ServerEvent("4", "message", "a\nb"),
    ]


def test_one_client_holds_one_slot_and_its_newer_stream_takes_it(display: Display) -> None:
    """A client holding streams open does not lock others out: its newer stream ends its
    older one, so it never holds more than one slot, and the others find theirs."""
    hog = [open_stream(display.url, "127.0.0.50")]
    try:
        hog[0].next_record()
        for _ in range(MAX_EVENT_STREAMS + 2):
            hog.append(Stream(display.url, source="127.0.0.50"))
            assert hog[-1].response.status_code == 200
            assert hog[-2].ended.wait(5), "the older stream of the client was not ended"
        hog[-1].next_record()
        others = [open_stream(display.url, f"127.0.0.{51 + n}") for n in range(2)]
        try:
            request(display, "seen", "60 s")
            for stream in [hog[-1], *others]:
                got = stream.next_record()[1]
                while got["content-item"] != "http://example.org/seen":
                    got = stream.next_record()[1]
        finally:
            for stream in others:
                stream.close()
    finally:
        for stream in hog:
            stream.close()


def test_a_stream_ends_after_its_life_and_resumes_where_it_stopped(
    display: Display, display_server: tuple[Flask, WsgiServer]
) -> None:
    app, _server = display_server
    app.config["PDN_SSE_LIFE"] = 1.0
    try:
        stream = open_stream(display.url, "127.0.0.60")
        sequence, _ = stream.next_record()
        assert stream.ended.wait(5), "the stream outlived its life"
        stream.close()
        request(display, "missed", "60 s")
        display.wait_playback(lambda r: r["content-item"] == "http://example.org/missed")
        resumed = open_stream(display.url, "127.0.0.60")
        try:
            resumed_headers = {"Last-Event-ID": str(sequence)}
            resumed.close()
            resumed = Stream(display.url, resumed_headers, source="127.0.0.60")
            assert resumed.next_record()[1]["content-item"] == "http://example.org/missed"
        finally:
            resumed.close()
    finally:
        app.config.pop("PDN_SSE_LIFE", None)

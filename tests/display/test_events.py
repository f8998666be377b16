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

from server.ctl import ServerEvent, read_events
from server.display.api import MAX_EVENT_STREAMS
from server.wsgi import WsgiServer
from tests.display.conftest import Display

HEARTBEAT = 0.2


@pytest.fixture(autouse=True)
def quick_heartbeat(display_server: tuple[Flask, WsgiServer]) -> Iterator[None]:
    app, _server = display_server
    app.config["PDN_SSE_HEARTBEAT"] = HEARTBEAT
    yield
    app.config.pop("PDN_SSE_HEARTBEAT", None)


class Stream:
    """One open event stream, read on a thread of its own into a queue."""

    def __init__(self, url: str, headers: dict[str, str] | None = None) -> None:
        self.response = requests.get(
            url + "/x/playback/events", headers=headers or {}, stream=True, timeout=(5, 10)
        )
        self.items: queue.Queue[ServerEvent | None] = queue.Queue()
        if self.response.status_code == 200:
            threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        try:
            for event in read_events(self.response.iter_content(chunk_size=None)):
                self.items.put(event)
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


def open_stream(url: str) -> Stream:
    """A stream, once the slots of earlier tests' closed streams are free (a server notices a
    client has gone when a heartbeat cannot be sent)."""
    deadline = time.monotonic() + 10
    while True:
        stream = Stream(url)
        if stream.response.status_code == 200:
            return stream
        stream.close()
        assert time.monotonic() < deadline, f"no stream: {stream.response.status_code}"
        time.sleep(0.1)


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
    assert MAX_EVENT_STREAMS <= 8 // 2  # waitress serves with 8 threads (server.wsgi)
    streams = [open_stream(display.url) for _ in range(MAX_EVENT_STREAMS)]
    try:
        for stream in streams:
            stream.next_record()
        refused = requests.get(display.url + "/x/playback/events", timeout=5)
        assert refused.status_code == 503
        assert refused.json()["error"] == "too-many-streams"
        # Every other request is still served while the streams are open.
        for _ in range(20):
            assert display.get("/x/health").status_code in (200, 503)
        request(display, "busy", "60 s")
        for stream in streams:
            assert stream.next_record()[1]["content-item"] == "http://example.org/busy"
        # A client that leaves gives its slot back (seen at the next heartbeat at the latest).
        streams.pop().close()
        deadline = time.monotonic() + 10
        while True:
            again = requests.get(display.url + "/x/playback/events", stream=True, timeout=5)
            if again.status_code == 200:
                again.close()
                break
            again.close()
            assert time.monotonic() < deadline, "the slot never came back"
            time.sleep(0.1)
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

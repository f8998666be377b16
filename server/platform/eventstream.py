"""Server-sent events: the body of one ``text/event-stream`` response and its framing, for
every stream pdn serves (the display's playback events, the console's fleet status).

A stream is a WSGI body that is an iterator of chunks, each one or more whole events or a
comment. Its ``close`` is always called by the WSGI server, even when the client left before
the first byte; it ends the generator and gives back whatever the stream held (a slot), once.
A subclass writes :meth:`EventStream.events`; :func:`event` and :func:`comment` frame what it
yields, and :func:`stream_response` answers with it, unbuffered and never cached.
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Iterator

from flask import Response

__all__ = ["EventStream", "comment", "event", "opening", "stream_response"]

#: Milliseconds a client waits before it reconnects (the stream's first line).
RETRY_MS = 3000


def event(kind: str, ident: int, data: bytes | str) -> bytes:
    """One event of type ``kind`` whose ``id:`` is ``ident`` (``Last-Event-ID`` on reconnect);
    ``data`` on one line."""
    body = data.encode() if isinstance(data, str) else data
    return b"id: %d\nevent: %s\ndata: %s\n\n" % (ident, kind.encode(), body)


def comment(text: str) -> bytes:
    """A comment: clients ignore it, proxies see traffic (a heartbeat), people read it."""
    return f": {text}\n\n".encode()


def opening(text: str) -> bytes:
    """A stream's first chunk: the reconnect delay and a comment saying what it carries."""
    return f"retry: {RETRY_MS}\n: {text}\n\n".encode()


class EventStream:
    """One stream's body: iterates over :meth:`events`; ``close`` ends it and calls the
    ``release`` given to :meth:`on_close` once."""

    def __init__(self) -> None:
        self._release: Callable[[], None] = lambda: None
        self._closed = False
        self._events = self.events()

    def events(self) -> Generator[bytes]:
        """The stream's chunks, until it ends or is closed."""
        raise NotImplementedError

    @property
    def closed(self) -> bool:
        return self._closed

    def __iter__(self) -> Iterator[bytes]:
        return self

    def __next__(self) -> bytes:
        return next(self._events)

    def on_close(self, release: Callable[[], None]) -> None:
        """Call ``release`` when the stream is closed (what it held is given back)."""
        self._release = release

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self._events.close()
            self._release()


def stream_response(body: EventStream) -> Response:
    """The response that streams ``body``: not cached, and passed on by a proxy event by event."""
    response = Response(body, mimetype="text/event-stream")
    response.headers["Cache-Control"] = "no-store"
    response.headers["X-Accel-Buffering"] = "no"  # nginx: pass each event on at once
    return response

"""A loopback webhook receiver on asyncio that counts what it *acknowledges*: one server, any
number of subscriber paths, HTTP/1.1 with kept-alive connections (as the outbox sends).

A delivery counts when the receiver answered it 2xx on a connection that was still open: an
update whose sender died before the answer (``kill -9`` mid-delivery) was never acknowledged,
and the outbox must send it again. ``hold()`` keeps answers back until ``release()``, so a
test can kill a sender while its POSTs are in flight; paths in ``dead`` are answered 503;
paths in ``silent`` are read and never answered (the sender gives up: its time limit).

Used by tests/server/platform/test_pg_outbox.py (in a thread) and tests/bench/bench_fleet_pg.py.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections import defaultdict
from dataclasses import dataclass, field


@dataclass
class Seen:
    path: str
    event_id: str
    body: bytes
    acknowledged: bool
    at: float  # time.time() when answered (or dropped)


@dataclass
class Receiver:
    host: str = "127.0.0.1"
    port: int = 0
    dead: set[str] = field(default_factory=set)
    silent: set[str] = field(default_factory=set)
    seen: list[Seen] = field(default_factory=list)
    _held: bool = False
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _loop: asyncio.AbstractEventLoop | None = None
    _release: asyncio.Event | None = None
    _thread: threading.Thread | None = None
    _server: asyncio.Server | None = None
    in_flight: int = 0
    unanswered: int = 0  # POSTs to ``silent`` paths whose sender has not given up yet

    # In a thread (tests)

    def start_thread(self) -> Receiver:
        ready = threading.Event()
        self._thread = threading.Thread(target=self._run_thread, args=(ready,), daemon=True)
        self._thread.start()
        ready.wait(10)
        return self

    def _run_thread(self, ready: threading.Event) -> None:
        async def main() -> None:
            await self.serve()
            ready.set()
            assert self._server is not None
            with contextlib.suppress(asyncio.CancelledError):
                await self._server.serve_forever()

        with contextlib.suppress(RuntimeError):
            asyncio.run(main())

    def close(self) -> None:
        loop, server = self._loop, self._server
        if loop is not None and server is not None:
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(server.close)
        if self._thread is not None:
            self._thread.join(5)

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    # Control (thread-safe)

    def hold(self) -> None:
        self._held = True

    def release(self) -> None:
        self._held = False
        loop, event = self._loop, self._release
        if loop is not None and event is not None:
            loop.call_soon_threadsafe(event.set)

    def records(self) -> list[Seen]:
        with self._lock:
            return list(self.seen)

    def acknowledged(self) -> dict[str, list[str]]:
        """path -> the event ids answered 2xx, in order."""
        out: dict[str, list[str]] = defaultdict(list)
        for record in self.records():
            if record.acknowledged:
                out[record.path].append(record.event_id)
        return out

    # The server

    async def serve(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._release = asyncio.Event()
        self._server = await asyncio.start_server(
            self._connection, self.host, self.port, backlog=4096, limit=1 << 20
        )
        self.port = self._server.sockets[0].getsockname()[1]

    async def _never_answer(self, reader: asyncio.StreamReader, record: Seen) -> None:
        """Hold the request until the sender closes the connection; recorded then."""
        self.unanswered += 1
        try:
            while await reader.read(4096):
                pass
        finally:
            self.unanswered -= 1
            record.at = time.time()
            with self._lock:
                self.seen.append(record)

    async def _connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                lines = head.decode("latin-1").split("\r\n")
                path = lines[0].split(" ")[1]
                headers = {}
                for line in lines[1:]:
                    if ":" in line:
                        name, value = line.split(":", 1)
                        headers[name.strip().lower()] = value.strip()
                body = await reader.readexactly(int(headers.get("content-length", "0")))
                if path in self.silent:
                    await self._never_answer(
                        reader, Seen(path, headers.get("x-pdn-event-id", ""), body, False, 0.0)
                    )
                    break
                self.in_flight += 1
                try:
                    while self._held:
                        assert self._release is not None
                        self._release.clear()
                        with contextlib.suppress(TimeoutError):
                            await asyncio.wait_for(self._release.wait(), 0.5)
                finally:
                    self.in_flight -= 1
                await asyncio.sleep(0)
                # A sender gone meanwhile (killed) has closed its end: never acknowledged.
                gone = reader.at_eof() or writer.is_closing()
                dead = path in self.dead
                record = Seen(
                    path,
                    headers.get("x-pdn-event-id", ""),
                    body,
                    not gone and not dead,
                    time.time(),
                )
                with self._lock:
                    self.seen.append(record)
                if gone:
                    break
                status = b"503 Service Unavailable" if dead else b"204 No Content"
                writer.write(b"HTTP/1.1 " + status + b"\r\nContent-Length: 0\r\n\r\n")
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError, asyncio.LimitOverrunError):
            pass
        finally:
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()

"""Benchmark of the Display Segment API and of playback fan-out, against a real ``pdn display``.

    .venv/bin/python tests/bench/bench_api.py [--clients 50] [--requests 200] [--subscribers 500]

Starts ``pdn display`` (Qt WebEngine offscreen, the renderer running and showing a local page)
on loopback, then measures:

1. API: requests per second and p50/p95/p99 latency of ``GET /playback/`` and of
   ``POST /schedule`` with N concurrent keep-alive clients. ``POST /schedule`` is measured
   twice: the accepted requests (the queue holds 100, so at most 100 per display: each is a
   durable SQLite insert), and a sustained run in which the full queue rejects by policy
   (validation and the queue check, no write). Target: GET p99 under 50 ms.
2. Fan-out: S subscribers (10% of them accept the connection but never answer), one playback
   change: time from the change being painted to the last live subscriber receiving it.
   Target: under 2 s. And a second change 2 s later, to show the dead subscribers do not
   delay the screen: its gap to the first is reported beside the 2 s asked for.

Prints the figures and writes them to ``bench-results/bench_api.json``.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import http.client
import json
import os
import platform
import socket
import ssl
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))  # run as a script, the checkout's packages come first

from tests.bench.loopback import Answer, LoopbackSite  # noqa: E402
from tests.bench.results import write_figures  # noqa: E402
from tests.bench.stats import percentile  # noqa: E402
from tests.support.display import DisplayProcess  # noqa: E402
from tests.support.ports import free_port  # noqa: E402

PAGE = b"<!doctype html><html><body style='background:#036;color:#fff'><h1>bench</h1></body></html>"


def summary(latencies: list[float], elapsed: float) -> dict[str, Any]:
    ms = [v * 1000 for v in latencies]
    return {
        "requests": len(ms),
        "seconds": round(elapsed, 3),
        "requests_per_second": round(len(ms) / elapsed, 1) if elapsed else None,
        "p50_ms": round(percentile(ms, 0.50), 2),
        "p95_ms": round(percentile(ms, 0.95), 2),
        "p99_ms": round(percentile(ms, 0.99), 2),
        "max_ms": round(max(ms), 2),
        "mean_ms": round(statistics.fmean(ms), 2),
    }


def page_site() -> LoopbackSite:
    """The page the display shows while it is measured, whatever the path."""
    return LoopbackSite(lambda path: Answer(PAGE, "text/html"))


class FanoutReceivers:
    """Live subscribers (an asyncio HTTP server) and a port whose connections never answer."""

    def __init__(self) -> None:
        self.arrivals: dict[int, dict[str, float]] = {}  # sequence -> path -> wall time
        self.lock = threading.Lock()
        self.loop = asyncio.new_event_loop()
        self.port = free_port()
        ready = threading.Event()
        threading.Thread(target=self._run, args=(ready,), daemon=True).start()
        ready.wait(10)
        # Dead subscribers: the kernel completes the connections, nobody ever reads them.
        self.dead = socket.socket()
        self.dead.bind(("127.0.0.1", 0))
        self.dead.listen(1024)
        self.dead_port = self.dead.getsockname()[1]

    def _run(self, ready: threading.Event) -> None:
        asyncio.set_event_loop(self.loop)

        async def main() -> None:
            server = await asyncio.start_server(self._handle, "127.0.0.1", self.port, backlog=1024)
            ready.set()
            async with server:
                await server.serve_forever()

        self.loop.run_until_complete(main())

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            request_line = await reader.readline()
            length = 0
            while True:
                line = await reader.readline()
                if not line.strip():
                    break
                name, _, value = line.decode("latin-1").partition(":")
                if name.strip().lower() == "content-length":
                    length = int(value.strip())
            body = await reader.readexactly(length)
            arrived = time.time()
            path = request_line.split()[1].decode()
            sequence = int(json.loads(body)["sequence"])
            with self.lock:
                self.arrivals.setdefault(sequence, {})[path] = arrived
            writer.write(
                b"HTTP/1.1 204 No Content\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
            )
            await writer.drain()
        finally:
            writer.close()

    def received(self, sequence: int) -> dict[str, float]:
        with self.lock:
            return dict(self.arrivals.get(sequence, {}))


@functools.cache
def insecure_context() -> ssl.SSLContext:
    """A client context that takes the display's self-signed certificate (benchmarks only).
    Made once: a new default context loads the system's CA store, ~50 ms of the client's CPU,
    which the TLS figures would count as the server's latency."""
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    return context


class Display(DisplayProcess):
    """``pdn display`` offscreen (tests/support's display process), named "bench", in UTC;
    HTTPS with its self-signed certificate when ``tls``. The benchmarks speak to it with
    http.client, whose connections they open and time themselves."""

    def __init__(self, folder: Path, *, tls: bool = False) -> None:
        flags = "--disable-gpu --disable-background-networking --disable-component-update"
        super().__init__(
            folder,
            ["--name", "bench", "--timezone", "UTC"],
            config="[listen]\ntls = true\n" if tls else None,
            platform="offscreen",
            env={"QTWEBENGINE_CHROMIUM_FLAGS": os.environ.get("QTWEBENGINE_CHROMIUM_FLAGS", flags)},
            scheme="https" if tls else "http",
        )
        self.tls = tls
        self.start().wait_ready(self.answers)

    def answers(self) -> bool:
        try:
            return self.request("GET", "/")[0] == 200
        except OSError:
            return False

    def request(self, method: str, path: str, body: Any = None) -> tuple[int, Any]:
        connection = self.connection(timeout=30)
        try:
            data = json.dumps(body).encode() if body is not None else None
            headers = {"Content-Type": "application/json"} if data else {}
            connection.request(method, path, body=data, headers=headers)
            response = connection.getresponse()
            text = response.read()
            return response.status, json.loads(text) if text else None
        finally:
            connection.close()

    def connection(
        self, timeout: float, source: tuple[str, int] | None = None
    ) -> http.client.HTTPConnection:
        """A new connection to the display (HTTPS when it serves TLS)."""
        if self.tls:
            return http.client.HTTPSConnection(
                "127.0.0.1", self.port, timeout=timeout, source_address=source,
                context=insecure_context(),
            )  # fmt: skip
        return http.client.HTTPConnection(
            "127.0.0.1", self.port, timeout=timeout, source_address=source
        )

    def playback(self) -> dict[str, Any]:
        record: dict[str, Any] = self.request("GET", "/playback/")[1]
        return record


def load(
    display: Display,
    clients: int,
    per_client: int,
    method: str,
    path: str,
    body: Callable[[int, int], Any],
) -> tuple[list[float], float, dict[str, int]]:
    """``clients`` concurrent keep-alive connections, ``per_client`` requests each.

    The load comes from one asyncio loop with raw HTTP/1.1 on each connection: a thread per
    client (http.client) costs so much CPU on a 2-core machine that it would measure the
    client more than the display.
    """
    return asyncio.run(_load(display.port, clients, per_client, method, path, body))


async def _load(
    port: int,
    clients: int,
    per_client: int,
    method: str,
    path: str,
    body: Callable[[int, int], Any],
) -> tuple[list[float], float, dict[str, int]]:
    latencies: list[float] = []
    outcomes: dict[str, int] = {}
    connections = [await asyncio.open_connection("127.0.0.1", port) for _ in range(clients)]
    start = asyncio.Event()

    async def client(
        index: int, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        await start.wait()
        for n in range(per_client):
            payload = body(index, n)
            data = json.dumps(payload).encode() if payload is not None else b""
            head = (
                f"{method} {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
                f"Content-Length: {len(data)}\r\n"
            )
            if data:
                head += "Content-Type: application/json\r\n"
            started = time.perf_counter()
            writer.write(head.encode() + b"\r\n" + data)
            status_line = await reader.readline()
            length = 0
            while True:
                line = await reader.readline()
                if line in (b"\r\n", b"\n", b""):
                    break
                name, _, value = line.partition(b":")
                if name.strip().lower() == b"content-length":
                    length = int(value.strip())
            answer = await reader.readexactly(length)
            latencies.append(time.perf_counter() - started)
            key = status_line.split()[1].decode()
            if method == "POST" and key == "202":
                key = json.loads(answer)["request-status"]
            outcomes[key] = outcomes.get(key, 0) + 1
        writer.close()

    tasks = [asyncio.create_task(client(i, *pair)) for i, pair in enumerate(connections)]
    await asyncio.sleep(0)
    started = time.perf_counter()
    start.set()
    await asyncio.gather(*tasks)
    return latencies, time.perf_counter() - started, outcomes


def bench_api(
    display: Display, content: LoopbackSite, clients: int, per_client: int
) -> dict[str, Any]:
    # The renderer runs: a scheduled page is on screen and rotates while we measure.
    cds = (
        f'<content-set name="bench"><content-item content-type="text/html"><constraints>'
        f"<scheduling-constraints><preferred-duration>2 seconds</preferred-duration>"
        f"</scheduling-constraints></constraints><requires-file><sources><uri>{content.base}/a</uri>"
        f"</sources></requires-file></content-item><content-item content-type='text/html'>"
        f"<requires-file><sources><uri>{content.base}/b</uri></sources></requires-file>"
        f"</content-item></content-set>"
    ).encode()
    connection = http.client.HTTPConnection("127.0.0.1", display.port, timeout=30)
    connection.request("POST", "/schedule", body=cds, headers={"Content-Type": "text/xml"})
    assert connection.getresponse().status == 202
    connection.close()
    display.wait_playback(lambda r: r["set"] == "bench")

    results: dict[str, Any] = {}
    latencies, elapsed, outcomes = load(
        display, clients, per_client, "GET", "/playback/", lambda i, n: None
    )
    results["get_playback"] = {**summary(latencies, elapsed), "outcomes": outcomes}

    def item(i: int, n: int) -> dict[str, str]:
        return {"content-item": f"{content.base}/req/{i}/{n}", "preferred-duration": "10 minutes"}

    per = max(1, 100 // clients)
    latencies, elapsed, outcomes = load(display, clients, per, "POST", "/schedule", item)
    results["post_schedule_accepted"] = {**summary(latencies, elapsed), "outcomes": outcomes}
    latencies, elapsed, outcomes = load(display, clients, per_client, "POST", "/schedule", item)
    results["post_schedule_queue_full"] = {**summary(latencies, elapsed), "outcomes": outcomes}
    return results


def bench_fanout(display: Display, content: LoopbackSite, subscribers: int) -> dict[str, Any]:
    receivers = FanoutReceivers()
    dead_count = subscribers // 10
    live_paths = [f"/live/{n}" for n in range(subscribers - dead_count)]
    for path in live_paths:
        uri = f"http://127.0.0.1:{receivers.port}{path}"
        assert display.request("POST", "/playback/subscribe/", {"subscriber-uri": uri})[0] == 201
    for n in range(dead_count):
        uri = f"http://127.0.0.1:{receivers.dead_port}/dead/{n}"
        assert display.request("POST", "/playback/subscribe/", {"subscriber-uri": uri})[0] == 201

    before = display.playback()["sequence"]
    first_url, second_url = f"{content.base}/fanout/1", f"{content.base}/fanout/2"
    display.request("POST", "/schedule", {"content-item": first_url, "preferred-duration": "2 s"})
    display.request("POST", "/schedule", {"content-item": second_url, "preferred-duration": "2 s"})
    first = display.wait_playback(
        lambda r: r["content-item"] == first_url and r["sequence"] > before
    )
    second = display.wait_playback(lambda r: r["content-item"] == second_url, timeout=30)

    def delivered(record: dict[str, Any]) -> dict[str, Any]:
        started = datetime.fromisoformat(record["started"]).timestamp()
        deadline = time.monotonic() + 20
        while len(receivers.received(record["sequence"])) < len(live_paths):
            if time.monotonic() > deadline:
                break
            time.sleep(0.01)
        arrivals = receivers.received(record["sequence"])
        delays = [when - started for when in arrivals.values()]
        return {
            "sequence": record["sequence"],
            "live_received": len(arrivals),
            "live_expected": len(live_paths),
            "last_live_after_paint_s": round(max(delays), 3) if delays else None,
            "median_live_after_paint_s": round(statistics.median(delays), 3) if delays else None,
        }

    gap = (
        datetime.fromisoformat(second["started"]) - datetime.fromisoformat(first["started"])
    ).total_seconds()
    return {
        "subscribers": subscribers,
        "dead_subscribers": dead_count,
        "first_change": delivered(first),
        "second_change": delivered(second),
        "screen_gap_between_changes_s": round(gap, 3),
        "screen_gap_asked_s": 2.0,
    }


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--clients", type=int, default=50)
    parser.add_argument("--requests", type=int, default=200, help="requests per client")
    parser.add_argument("--subscribers", type=int, default=500)
    parser.add_argument("--out", type=Path, default=ROOT / "bench-results" / "bench_api.json")
    args = parser.parse_args()

    content = page_site()
    with tempfile.TemporaryDirectory(prefix="pdn-bench-") as temp:
        results: dict[str, Any] = {
            "machine": {
                "cpus": os.cpu_count(),
                "python": platform.python_version(),
                "platform": platform.platform(),
            },
            "clients": args.clients,
        }
        display = Display(Path(temp) / "api")
        try:
            results["api"] = bench_api(display, content, args.clients, args.requests)
        finally:
            display.stop()
        display = Display(Path(temp) / "fanout")
        try:
            results["fanout"] = bench_fanout(display, content, args.subscribers)
        finally:
            display.stop()

    api = results["api"]
    print(f"API, {args.clients} concurrent keep-alive clients on loopback, renderer running:")
    for name, figures in api.items():
        print(
            f"  {name:26s} {figures['requests']:6d} req"
            f"  {figures['requests_per_second']:8.1f} req/s"
            f"  p50 {figures['p50_ms']:7.2f} ms  p95 {figures['p95_ms']:7.2f} ms"
            f"  p99 {figures['p99_ms']:7.2f} ms  {figures['outcomes']}"
        )
    fanout = results["fanout"]
    print(
        f"Fan-out to {fanout['subscribers']} subscribers"
        f" ({fanout['dead_subscribers']} never answer):"
    )
    for key in ("first_change", "second_change"):
        change = fanout[key]
        print(
            f"  {key:14s} {change['live_received']}/{change['live_expected']} live received;"
            f" last {change['last_live_after_paint_s']} s,"
            f" median {change['median_live_after_paint_s']} s"
            " after the paint"
        )
    print(
        f"  screen: second change {fanout['screen_gap_between_changes_s']} s after the first"
        f" (asked: {fanout['screen_gap_asked_s']} s)"
    )
    write_figures(args.out, results)
    return 0


if __name__ == "__main__":
    sys.exit(main())

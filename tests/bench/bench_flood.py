"""Benchmark: ``GET /playback/`` from a healthy client while the API is flooded.

    .venv/bin/python tests/bench/bench_flood.py [--idle 500] [--drip 100] [--probes 200] [--tls]

Starts a real ``pdn display`` (Qt offscreen, as tests/bench/bench_api.py does) on loopback with
its default limits (``server.platform.limits``), then measures ``GET /playback/`` latency
p50/p95/p99
from a healthy client (a new connection per request, from 127.0.0.2) twice in the same run:

1. baseline: no flood;
2. flood: ``--idle`` idle TCP connections (spread over 127.0.1.1-20, as from 20 hosts) and
   ``--drip`` connections that drip one header byte every 0.5 s (from 127.0.2.1-10), held
   (reopened when the server closes them) during the whole measurement.

A probe that gets no answer within 5 s counts as failed. Figures go to
``bench-results/bench_flood.json``.

``--tls`` runs it all twice in the same run, over plain HTTP and then over HTTPS
(``[listen] tls = true``, a self-signed certificate), each probe a new TLS connection. Over
TLS the idle connections never start their handshake (closed by the header deadline and
reopened) and the drip-fed ones complete the handshake and then drip encrypted header bytes.
Each display also gets ``--cpu-requests`` requests on new connections and as many on one
kept-alive connection, and the display process's CPU time (``/proc/<pid>/stat``) per request
is reported (the display's CPU when idle for as long is subtracted): the CPU cost of TLS.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import socket
import ssl
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_api import ROOT, Display, insecure_context, percentile  # type: ignore[import-not-found]


def probe(display: Display) -> float | None:
    began = time.monotonic()
    conn = display.connection(timeout=5, source=("127.0.0.2", 0))
    try:
        conn.request("GET", "/playback/")
        answer = conn.getresponse()
        answer.read()
        if answer.status != 200:
            return None
    except OSError:
        return None
    finally:
        conn.close()
    return time.monotonic() - began


def measure(display: Display, probes: int) -> dict[str, Any]:
    latencies: list[float] = []
    failed = 0
    for _ in range(probes):
        took = probe(display)
        if took is None:
            failed += 1
        else:
            latencies.append(took)
        time.sleep(0.02)
    return {
        "probes": probes,
        "failed": failed,
        "p50_ms": round(percentile(latencies, 0.50) * 1000, 2) if latencies else None,
        "p95_ms": round(percentile(latencies, 0.95) * 1000, 2) if latencies else None,
        "p99_ms": round(percentile(latencies, 0.99) * 1000, 2) if latencies else None,
        "max_ms": round(max(latencies) * 1000, 2) if latencies else None,
    }


class Flood:
    """Idle and drip-fed connections, held (reopened when closed) until stopped."""

    def __init__(self, port: int, idle: int, drip: int, tls: bool = False) -> None:
        self.port = port
        self.tls = tls
        self.idle = [f"127.0.1.{i % 20 + 1}" for i in range(idle)]
        self.drip = [f"127.0.2.{i % 10 + 1}" for i in range(drip)]
        self.stop = threading.Event()
        self.opened = 0
        self.closed_by_server = 0
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _open(self, source: str, first: bytes = b"") -> socket.socket | None:
        conn = socket.socket()
        try:
            conn.bind((source, 0))
            conn.settimeout(2)
            conn.connect(("127.0.0.1", self.port))
            if first and self.tls:  # handshake done, then encrypted header bytes drip
                conn = insecure_context().wrap_socket(conn)
            if first:
                conn.sendall(first)
            conn.setblocking(False)
        except OSError:
            conn.close()
            return None
        self.opened += 1
        return conn

    def _run(self) -> None:
        held: list[tuple[str, bytes, socket.socket | None]] = [
            (source, b"", self._open(source)) for source in self.idle
        ] + [(source, b"GET /playback/ HTTP/1.1\r\n", None) for source in self.drip]
        held = [(s, f, c or self._open(s, f)) for s, f, c in held]
        while not self.stop.wait(0.5):
            renewed = []
            for source, first, kept in held:
                conn = kept
                alive = conn is not None
                if conn is not None:
                    try:
                        if conn.recv(4096) == b"":
                            alive = False
                    except (BlockingIOError, ssl.SSLWantReadError):
                        pass
                    except OSError:
                        alive = False
                    if alive and first:
                        try:
                            conn.send(b"X")
                        except OSError:
                            alive = False
                if not alive:
                    if conn is not None:
                        self.closed_by_server += 1
                        conn.close()
                    conn = self._open(source, first)
                renewed.append((source, first, conn))
            held = renewed
        for _source, _first, conn in held:
            if conn is not None:
                conn.close()

    def __enter__(self) -> Flood:
        self.thread.start()
        time.sleep(3)  # let the connections open
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.thread.join(30)


def cpu_seconds(pid: int) -> float:
    """User and system CPU time of a process so far (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def cpu_cost(display: Display, requests: int) -> dict[str, Any]:
    """The display's CPU time per GET /playback/, on new connections and on one kept-alive
    connection, less its CPU time when idle for as long."""
    pid = display.process.pid

    def timed(run: Any) -> tuple[float, float]:
        cpu, wall = cpu_seconds(pid), time.monotonic()
        run()
        return cpu_seconds(pid) - cpu, time.monotonic() - wall

    def new_connections() -> None:
        for _ in range(requests):
            conn = display.connection(timeout=10)
            conn.request("GET", "/playback/")
            conn.getresponse().read()
            conn.close()

    def kept_alive() -> None:
        conn = display.connection(timeout=10)
        for _ in range(requests):
            conn.request("GET", "/playback/")
            conn.getresponse().read()
        conn.close()

    result: dict[str, Any] = {"requests": requests}
    for name, run in (("new_connection", new_connections), ("kept_alive", kept_alive)):
        busy, wall = timed(run)
        idle, _ = timed(lambda wall=wall: time.sleep(wall))
        result[name] = {
            "cpu_ms_per_request": round(max(0.0, busy - idle) / requests * 1000, 3),
            "requests_per_s": round(requests / wall, 1),
        }
    return result


def run_one(temp: Path, args: argparse.Namespace, *, tls: bool) -> dict[str, Any]:
    name = "tls" if tls else "plain"
    display = Display(temp / f"data-{name}", temp / f"display-{name}.log", tls=tls)
    results: dict[str, Any] = {}
    try:
        results["baseline"] = measure(display, args.probes)
        with Flood(display.port, args.idle, args.drip, tls=tls) as flood:
            results["flood"] = measure(display, args.probes)
        results["flood"]["connections_opened"] = flood.opened
        results["flood"]["closed_by_server"] = flood.closed_by_server
        if args.tls:
            results["cpu"] = cpu_cost(display, args.cpu_requests)
    finally:
        with contextlib.suppress(Exception):
            display.stop()
    return results


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--idle", type=int, default=500)
    parser.add_argument("--drip", type=int, default=100)
    parser.add_argument("--probes", type=int, default=200)
    parser.add_argument("--tls", action="store_true", help="plain HTTP, then HTTPS, in one run")
    parser.add_argument("--cpu-requests", type=int, default=500)
    parser.add_argument("--out", type=Path, default=ROOT / "bench-results" / "bench_flood.json")
    args = parser.parse_args()
    results: dict[str, Any] = {
        "machine": {
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
            "platform": platform.platform(),
        },
        "idle_connections": args.idle,
        "drip_fed_connections": args.drip,
    }
    with tempfile.TemporaryDirectory(prefix="pdn-bench-") as temp:
        runs = {"plain": False, "tls": True} if args.tls else {"plain": False}
        for label, tls in runs.items():
            results[label] = run_one(Path(temp), args, tls=tls)
    for label in runs:
        for name in ("baseline", "flood"):
            figures = results[label][name]
            print(
                f"{label:5s} GET /playback/ {name:8s} {figures['probes']} probes,"
                f" {figures['failed']} failed: p50 {figures['p50_ms']} ms"
                f"  p95 {figures['p95_ms']} ms  p99 {figures['p99_ms']} ms"
                f"  max {figures['max_ms']} ms"
            )
        for kind, cost in results[label].get("cpu", {}).items():
            if isinstance(cost, dict):
                print(
                    f"{label:5s} CPU per request, {kind}: {cost['cpu_ms_per_request']} ms"
                    f" ({cost['requests_per_s']} requests/s)"
                )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=2) + "\n")
    print(f"written to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

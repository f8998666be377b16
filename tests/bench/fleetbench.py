"""What the fleet benchmarks share: scheduler processes on one PostgreSQL, parallel HTTP calls,
and the process figures (CPU seconds, resident memory) they report."""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import requests

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from tests.bench.results import write_figures  # noqa: E402
from tests.support.process import PDN_MODULE  # noqa: E402
from tests.support.scheduler import SchedulerProcess  # noqa: E402

XML = {"Content-Type": "text/xml"}


def schedule_document(marker: str) -> bytes:
    return (
        '<content-set name="bench" type="inline"><content-item content-type="text/html">'
        f"<requires-file><sources><uri>http://127.0.0.1:9/{marker}.html</uri></sources>"
        "</requires-file></content-item></content-set>"
    ).encode()


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    ticks = os.sysconf("SC_CLK_TCK")
    return (int(fields[11]) + int(fields[12])) / ticks  # utime + stime


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def load() -> float:
    return os.getloadavg()[0]


def fleet_scheduler(
    database: str,
    folder: Path,
    *,
    env: dict[str, str] | None = None,
    program: Sequence[str] = PDN_MODULE,
) -> SchedulerProcess:
    """``pdn scheduler`` on PostgreSQL (tests/support's scheduler process), started and up. It
    takes 10,000 subscribers of one schedule: far above the default bound (100 per topic)."""
    settings = {"PDN_MAX_SUBSCRIPTIONS": "50000", **(env or {})}
    process = SchedulerProcess(folder, database=database, env=settings, program=program)
    return process.start().wait_ready()


def parallel(
    calls: list[tuple[str, str, dict[str, Any]]], workers: int = 16, deadline: float | None = None
) -> list[int]:
    """Status codes (0: not sent, the ``deadline`` (monotonic) had passed)."""
    local = threading.local()

    def one(call: tuple[str, str, dict[str, Any]]) -> int:
        if deadline is not None and time.monotonic() > deadline:
            return 0
        session = getattr(local, "session", None)
        if session is None:
            session = local.session = requests.Session()
        method, url, kwargs = call
        return session.request(method, url, timeout=30, **kwargs).status_code

    with ThreadPoolExecutor(workers) as pool:
        return list(pool.map(one, calls))


def save(path: Path, results: dict[str, Any]) -> None:
    """Written after every phase: a run stopped half-way keeps what it measured."""
    write_figures(path, results, quiet=True)

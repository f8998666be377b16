"""The fleet benchmark's load phases (tests/bench/bench_fleet_pg.py): followers polling the
schedule, registrations of displays, and the schedulers' idle cost."""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import requests

from player.follower import ScheduleFollower
from tests.bench.fleetbench import cpu_seconds, load, parallel
from tests.support.ports import free_port
from tests.support.scheduler import SchedulerProcess
from tests.support.webhook_receiver import Receiver


def followers_minute(
    schedulers: list[SchedulerProcess],
    receiver: Receiver,
    count: int,
    state: Path,
    *,
    conditional: bool,
    seconds: float = 60.0,
) -> dict[str, Any]:
    statuses: dict[int, int] = {}
    lock = threading.Lock()

    def hook(response: requests.Response, **kwargs: Any) -> None:
        if response.request.method == "GET":
            with lock:
                statuses[response.status_code] = statuses.get(response.status_code, 0) + 1

    followers = []
    for n in range(count):
        scheduler = schedulers[n % len(schedulers)]
        follower = ScheduleFollower(
            apply_cds=lambda data: None,
            display_url=lambda n=n: f"{receiver.url}/f{n}",  # type: ignore[misc]
            state_dir=state / f"f{n}",
            schedule_url=f"{scheduler.url}/schedule/bench/",
        )
        follower._session.hooks["response"].append(hook)
        follower.sync_once()  # the first check: the whole document, and the subscription
        followers.append(follower)
    statuses.clear()
    before = [cpu_seconds(s.pid) for s in schedulers]
    load_before = load()
    began = time.monotonic()

    def check(n: int) -> None:
        due = began + seconds * n / count
        time.sleep(max(0.0, due - time.monotonic()))
        if not conditional:
            followers[n]._etag = None
        followers[n].sync_once()

    with ThreadPoolExecutor(16) as pool:
        list(pool.map(check, range(count)))
    time.sleep(max(0.0, began + seconds - time.monotonic()))
    elapsed = time.monotonic() - began
    used = [cpu_seconds(s.pid) - b for s, b in zip(schedulers, before, strict=True)]
    for follower in followers:
        follower._session.close()
    return {
        "followers": count,
        "conditional": conditional,
        "seconds": round(elapsed, 1),
        "get_statuses": {str(k): v for k, v in sorted(statuses.items())},
        "scheduler_cpu_s_per_minute": [round(u * 60 / elapsed, 2) for u in used],
        "total_cpu_s_per_minute": round(sum(used) * 60 / elapsed, 2),
        "load_before": round(load_before, 2),
        "load_after": round(load(), 2),
    }


def idle_cpu(schedulers: list[SchedulerProcess], seconds: float = 20.0) -> float:
    before = [cpu_seconds(s.pid) for s in schedulers]
    time.sleep(seconds)
    used = sum(cpu_seconds(s.pid) - b for s, b in zip(schedulers, before, strict=True))
    return round(used * 60 / seconds, 2)


def registrations(schedulers: list[SchedulerProcess], count: int) -> dict[str, Any]:
    """``count`` POST /displays (16 clients, both schedulers; displays that are switched off:
    a port nobody listens on). Bounded: 10,000 must fit in 60 s; the phase stops at 180 s
    and says how far it got."""
    closed_display = f"http://127.0.0.1:{free_port()}"
    location = {"latitude": "N54.0104", "longitude": "W2.7883"}
    load_before = load()
    began = time.monotonic()
    codes = parallel(
        [
            (
                "POST",
                f"{schedulers[n % len(schedulers)].url}/displays",
                {"json": {"url": f"{closed_display}/r{n}", "location": location}},
            )
            for n in range(count)
        ],
        deadline=began + 180.0,
    )
    took = time.monotonic() - began
    listed = len(requests.get(f"{schedulers[0].url}/displays", timeout=60).json())
    return {
        "count": count,
        "created": sum(1 for code in codes if code == 201),
        "not_sent_by_the_deadline": sum(1 for code in codes if code == 0),
        "listed_by_the_other": listed,
        "seconds": round(took, 1),
        "per_second": round(sum(1 for code in codes if code == 201) / took, 1),
        "load_before": round(load_before, 2),
        "load_after": round(load(), 2),
    }

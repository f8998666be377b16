"""Benchmark: two scheduler processes on one PostgreSQL serving 10,000 simulated displays.

    .venv/bin/python tests/bench/bench_fleet_pg.py [--displays 10000] [--followers 1000]
        [--phases delivery,followers,registrations]

Starts a real PostgreSQL (tests/support/pgserver.py), two ``pdn scheduler --database`` processes
on it
(``PDN_MAX_SUBSCRIPTIONS=50000``: the default allows 100 subscribers per schedule) and one
asyncio webhook receiver (tests/support/webhook_receiver.py, in this process, one path per simulated
display) on loopback, then measures:

1. **delivery**: ``--displays`` subscribers of one schedule (half subscribed through each
   scheduler); the schedule is changed through one (``PUT /x/schedules/bench``); the time from
   the PUT to each subscriber's acknowledged delivery (p50/p95/p100), and that every subscriber
   acknowledged the change exactly once (none twice, none lost), and where the CPU went:
   seconds spent by each scheduler, by PostgreSQL (postmaster and backends) and by this
   process (the receiver) from the PUT until 3 s after the last delivery;
2. **delivery with 10% dead**: the same change again with 10% of the subscribers dead (half
   answer 503, half refuse the connection: a port nobody listens on); the live ones' latency;
3. **followers**: ``--followers`` real ``player.follower.ScheduleFollower`` checks (conditional
   GET of the schedule + the re-subscription, as a display does every 60 s) spread over one
   minute, split over the schedulers: the schedulers' CPU seconds in that minute (and the same
   minute with unconditional GETs, for comparison), and how many answers were 304;
4. **registrations**: ``--displays`` ``POST /displays`` (16 clients, both schedulers; displays
   that are switched off: a port nobody listens on), the time (the phase stops at 180 s and
   reports how many it registered), and the schedulers' resident memory (VmRSS) with 10,000
   subscribers and after the registrations.

The machine is shared: each phase is reported with the load average around it. Figures go to
``bench-results/bench_fleet_pg.json``. The load phases (3, 4) live in tests/bench/fleet_load.py,
what the phases share in tests/bench/fleetbench.py.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import requests

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from tests.bench.fleet_load import followers_minute, idle_cpu, registrations  # noqa: E402
from tests.bench.fleetbench import (  # noqa: E402
    XML,
    cpu_seconds,
    fleet_scheduler,
    load,
    parallel,
    rss_mib,
    save,
    schedule_document,
)
from tests.bench.stats import percentile  # noqa: E402
from tests.support.pgserver import PgServer  # noqa: E402
from tests.support.ports import free_port  # noqa: E402
from tests.support.scheduler import SchedulerProcess  # noqa: E402
from tests.support.webhook_receiver import Receiver  # noqa: E402

PHASES = ("delivery", "followers", "registrations")


def postgres_cpu(pg: PgServer) -> float:
    """CPU seconds of the PostgreSQL server: the postmaster, its live children (backends,
    background workers) and the children it has reaped."""
    postmaster = int((pg.data / "postmaster.pid").read_text().split()[0])
    ticks = os.sysconf("SC_CLK_TCK")
    total = 0.0
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue  # gone meanwhile
        if int(entry.name) == postmaster:
            total += sum(int(x) for x in fields[11:15]) / ticks  # own + reaped children
        elif int(fields[1]) == postmaster:
            total += (int(fields[11]) + int(fields[12])) / ticks
    return total


class CpuMeter:
    """CPU seconds spent by the schedulers, PostgreSQL and this process (the receiver)
    between ``__init__`` and ``read()``: where a delivery's time goes."""

    def __init__(self, schedulers: list[SchedulerProcess], pg: PgServer) -> None:
        self.schedulers = schedulers
        self.pg = pg
        self.start = self._now()

    def _now(self) -> list[float]:
        own = [cpu_seconds(s.pid) for s in self.schedulers]
        return [*own, postgres_cpu(self.pg), time.process_time()]

    def read(self) -> dict[str, Any]:
        spent = [round(b - a, 1) for a, b in zip(self.start, self._now(), strict=True)]
        return {"schedulers": spent[:-2], "postgres": spent[-2], "receiver_process": spent[-1]}


def delivery(
    receiver: Receiver,
    paths: list[str],
    put_url: str,
    marker: str,
    measured: tuple[list[SchedulerProcess], PgServer],
    timeout: float = 60.0,
) -> dict[str, Any]:
    """PUT a new version and wait for every path in ``paths`` to acknowledge it."""
    needle = f"/{marker}.html".encode()
    began = time.time()
    load_before = load()
    cpu = CpuMeter(*measured)
    answer = requests.put(put_url, data=schedule_document(marker), headers=XML, timeout=30)
    assert answer.status_code in (200, 201, 204), answer.text
    wanted = set(paths)
    first: dict[str, float] = {}
    copies: dict[str, int] = {}
    seen_upto = 0
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        records = receiver.records()
        for record in records[seen_upto:]:
            if record.acknowledged and needle in record.body and record.path in wanted:
                copies[record.path] = copies.get(record.path, 0) + 1
                first.setdefault(record.path, record.at - began)
        seen_upto = len(records)
        if len(first) == len(wanted):
            break
        time.sleep(0.1)
    time.sleep(3.0)  # anything sent twice arrives now
    for record in receiver.records()[seen_upto:]:
        if record.acknowledged and needle in record.body and record.path in wanted:
            copies[record.path] = copies.get(record.path, 0) + 1
            first.setdefault(record.path, record.at - began)
    latencies = list(first.values())
    return {
        "subscribers": len(wanted),
        "delivered": len(first),
        "lost": len(wanted) - len(first),
        "twice_or_more": sum(1 for n in copies.values() if n > 1),
        "p50_s": round(percentile(latencies, 0.50), 3),
        "p95_s": round(percentile(latencies, 0.95), 3),
        "p100_s": round(max(latencies) if latencies else float("nan"), 3),
        "cpu_s_until_3s_after_the_last": cpu.read(),
        "load_before": round(load_before, 2),
        "load_after": round(load(), 2),
    }


def subscribe_all(schedulers: list[SchedulerProcess], receiver: Receiver, count: int) -> list[str]:
    """``count`` subscribers of the schedule, a receiver path each, half through each one."""
    paths = [f"/d{n}" for n in range(count)]
    codes = parallel(
        [
            (
                "POST",
                f"{schedulers[n % len(schedulers)].url}/schedule/bench/subscribe/",
                {"json": {"subscriber-uri": f"{receiver.url}{path}"}},
            )
            for n, path in enumerate(paths)
        ]
    )
    assert all(code == 201 for code in codes), set(codes)
    return paths


def delivery_phases(
    schedulers: list[SchedulerProcess],
    pg: PgServer,
    receiver: Receiver,
    paths: list[str],
    results: dict[str, Any],
) -> None:
    first, second = schedulers
    measured = (schedulers, pg)
    results["delivery"] = delivery(
        receiver, paths, f"{second.url}/x/schedules/bench", "v1", measured
    )
    print("delivery:", results["delivery"], flush=True)

    # 10% dead: half answer 503, half are moved to a port nobody listens on.
    dead = paths[::10]
    answering_503, refusing = dead[::2], dead[1::2]
    receiver.dead.update(answering_503)
    closed = f"http://127.0.0.1:{free_port()}"
    parallel(
        [
            (
                "POST",
                f"{first.url}/schedule/bench/unsubscribe/",
                {"json": {"subscriber-uri": f"{receiver.url}{path}"}},
            )
            for path in refusing
        ]
        + [
            (
                "POST",
                f"{second.url}/schedule/bench/subscribe/",
                {"json": {"subscriber-uri": f"{closed}{path}"}},
            )
            for path in refusing
        ]
    )
    live = [path for path in paths if path not in set(dead)]
    results["delivery_with_10pct_dead"] = delivery(
        receiver, live, f"{first.url}/x/schedules/bench", "v2", measured
    )
    results["delivery_with_10pct_dead"]["dead"] = len(dead)
    print("delivery with 10% dead:", results["delivery_with_10pct_dead"], flush=True)
    # A third change while the dead ones still have retries pending.
    results["delivery_with_backlog_of_dead"] = delivery(
        receiver, live, f"{second.url}/x/schedules/bench", "v3", measured
    )
    print("again, dead ones backing off:", results["delivery_with_backlog_of_dead"], flush=True)


def follower_phases(
    schedulers: list[SchedulerProcess],
    receiver: Receiver,
    count: int,
    work: Path,
    results: dict[str, Any],
) -> None:
    """Each minute of followers beside the idle cost just before it (the dead subscribers'
    retries and the schedulers' own timers run all the time)."""
    state = work / "followers"
    for conditional in (False, True):
        key = "followers_conditional" if conditional else "followers_unconditional"
        idle = idle_cpu(schedulers)
        results[key] = followers_minute(schedulers, receiver, count, state, conditional=conditional)
        results[key]["idle_cpu_s_per_minute_before"] = idle
        results[key]["net_cpu_s_per_minute"] = round(
            results[key]["total_cpu_s_per_minute"] - idle, 2
        )
        print(key, results[key], flush=True)


def registration_phase(
    schedulers: list[SchedulerProcess], count: int, results: dict[str, Any]
) -> None:
    results["registrations"] = registrations(schedulers, count)
    print("registrations:", results["registrations"], flush=True)
    results["rss_mib_after_registrations"] = [round(rss_mib(s.pid), 1) for s in schedulers]
    time.sleep(20)
    results["rss_mib_20s_later"] = [round(rss_mib(s.pid), 1) for s in schedulers]
    results["idle_cpu_s_per_minute_with_displays_registered"] = idle_cpu(schedulers)
    print("rss:", results["rss_mib_after_registrations"], results["rss_mib_20s_later"])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--displays", type=int, default=10_000)
    parser.add_argument("--followers", type=int, default=1_000)
    parser.add_argument(
        "--phases",
        default=",".join(PHASES),
        help=f"comma-separated, any of {', '.join(PHASES)} (default: all, in that order)",
    )
    parser.add_argument("--out", type=Path, default=ROOT / "bench-results" / "bench_fleet_pg.json")
    args = parser.parse_args()
    phases = [phase for phase in args.phases.split(",") if phase]
    unknown = sorted(set(phases) - set(PHASES))
    if unknown:
        parser.error(f"unknown phase(s) {', '.join(unknown)}: choose from {', '.join(PHASES)}")
    results: dict[str, Any] = {
        "machine": {
            "platform": platform.platform(),
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
            "load_at_start": [round(x, 2) for x in os.getloadavg()],
        },
        "displays": args.displays,
        "phases": phases,
    }
    work = Path(tempfile.mkdtemp(prefix="bench-fleet-pg-"))
    pg = PgServer.start(max_connections=200)
    receiver = Receiver().start_thread()
    schedulers: list[SchedulerProcess] = []
    try:
        database = pg.create_database("bench")
        schedulers = [fleet_scheduler(database, work / f"s{n}") for n in range(2)]
        results["rss_mib_at_start"] = [round(rss_mib(s.pid), 1) for s in schedulers]
        put = f"{schedulers[0].url}/x/schedules/bench"
        assert requests.put(put, data=schedule_document("v0"), headers=XML, timeout=10).ok
        for scheduler in schedulers:  # the other learns of the new schedule by a notification
            deadline = time.monotonic() + 10
            while requests.get(f"{scheduler.url}/schedule/bench/", timeout=10).status_code != 200:
                assert time.monotonic() < deadline, f"{scheduler.url} never served the schedule"
                time.sleep(0.05)

        if "delivery" in phases or "followers" in phases:
            began = time.monotonic()
            paths = subscribe_all(schedulers, receiver, args.displays)
            results["subscribe_s"] = round(time.monotonic() - began, 1)
            print(f"{len(paths)} subscribed in {results['subscribe_s']} s", flush=True)
            results["rss_mib_with_10000_subscribers"] = [
                round(rss_mib(s.pid), 1) for s in schedulers
            ]
            save(args.out, results)
        if "delivery" in phases:
            delivery_phases(schedulers, pg, receiver, paths, results)
            save(args.out, results)
        if "followers" in phases:
            follower_phases(schedulers, receiver, args.followers, work, results)
            save(args.out, results)
        if "registrations" in phases:
            registration_phase(schedulers, args.displays, results)
    finally:
        for scheduler in schedulers:
            scheduler.stop()
        receiver.close()
        pg.stop()
    results["machine"]["load_at_end"] = [round(x, 2) for x in os.getloadavg()]
    save(args.out, results)
    print(json.dumps(results, indent=2))
    print(f"written to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

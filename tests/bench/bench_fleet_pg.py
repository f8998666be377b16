"""Benchmark: two scheduler processes on one PostgreSQL serving 10,000 simulated displays.

    .venv/bin/python tests/bench/bench_fleet_pg.py [--displays 10000] [--followers 1000]

Starts a real PostgreSQL (tests/pgserver.py), two ``pdn scheduler --database`` processes on it
(``PDN_MAX_SUBSCRIPTIONS=50000``: the default allows 100 subscribers per schedule) and one
asyncio webhook receiver (tests/webhook_receiver.py, in this process, one path per simulated
display) on loopback, then measures:

1. **delivery**: ``--displays`` subscribers of one schedule (half subscribed through each
   scheduler); the schedule is changed through one (``PUT /x/schedules/bench``); the time from
   the PUT to each subscriber's acknowledged delivery (p50/p95/p100), and that every subscriber
   acknowledged the change exactly once (none twice, none lost);
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
``bench-results/bench_fleet_pg.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import requests

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from player.follower import ScheduleFollower  # noqa: E402
from tests.pgserver import PgServer, free_port  # noqa: E402
from tests.webhook_receiver import Receiver  # noqa: E402

XML = {"Content-Type": "text/xml"}


def schedule_document(marker: str) -> bytes:
    return (
        '<content-set name="bench" type="inline"><content-item content-type="text/html">'
        f"<requires-file><sources><uri>http://127.0.0.1:9/{marker}.html</uri></sources>"
        "</requires-file></content-item></content-set>"
    ).encode()


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    index = min(len(ordered) - 1, max(0, round(fraction * (len(ordered) - 1))))
    return ordered[index]


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


class Scheduler:
    def __init__(self, database: str, data_dir: Path, log: Path) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        # 10,000 subscribers of one schedule: far above the default bound (100 per topic).
        env = {**os.environ, "PDN_DATABASE_URL": database, "PDN_MAX_SUBSCRIPTIONS": "50000"}
        env.pop("PDN_API_TOKEN", None)
        self._log = open(log, "wb")  # noqa: SIM115
        self.process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "server.cli",
                "scheduler",
                "--port",
                str(self.port),
                "--data-dir",
                str(data_dir),
            ],
            cwd=ROOT,
            env=env,
            stdout=self._log,
            stderr=subprocess.STDOUT,
        )
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                if requests.get(f"{self.url}/x/schedules", timeout=2).ok:
                    return
            except requests.RequestException:
                pass
            time.sleep(0.2)
        raise RuntimeError(f"scheduler on {self.port} did not start: see {log}")

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(20)
        except subprocess.TimeoutExpired:
            self.process.kill()
        self._log.close()


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


def delivery(
    receiver: Receiver, paths: list[str], put_url: str, marker: str, timeout: float = 60.0
) -> dict[str, Any]:
    """PUT a new version and wait for every path in ``paths`` to acknowledge it."""
    needle = f"/{marker}.html".encode()
    began = time.time()
    load_before = load()
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
        "load_before": round(load_before, 2),
        "load_after": round(load(), 2),
    }


def followers_minute(
    schedulers: list[Scheduler],
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
    before = [cpu_seconds(s.process.pid) for s in schedulers]
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
    used = [cpu_seconds(s.process.pid) - b for s, b in zip(schedulers, before, strict=True)]
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


def idle_cpu(schedulers: list[Scheduler], seconds: float = 20.0) -> float:
    before = [cpu_seconds(s.process.pid) for s in schedulers]
    time.sleep(seconds)
    used = sum(cpu_seconds(s.process.pid) - b for s, b in zip(schedulers, before, strict=True))
    return round(used * 60 / seconds, 2)


def save(path: Path, results: dict[str, Any]) -> None:
    """Written after every phase: a run stopped half-way keeps what it measured."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(results, indent=2) + "\n")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--displays", type=int, default=10_000)
    parser.add_argument("--followers", type=int, default=1_000)
    parser.add_argument("--out", type=Path, default=ROOT / "bench-results" / "bench_fleet_pg.json")
    args = parser.parse_args()
    results: dict[str, Any] = {
        "machine": {
            "platform": platform.platform(),
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
            "load_at_start": [round(x, 2) for x in os.getloadavg()],
        },
        "displays": args.displays,
    }
    work = Path(tempfile.mkdtemp(prefix="bench-fleet-pg-"))
    pg = PgServer.start(max_connections=200)
    receiver = Receiver().start_thread()
    schedulers: list[Scheduler] = []
    try:
        database = pg.create_database("bench")
        schedulers = [Scheduler(database, work / f"s{n}", work / f"s{n}.log") for n in range(2)]
        first, second = schedulers
        results["rss_mib_at_start"] = [round(rss_mib(s.process.pid), 1) for s in schedulers]
        put = f"{first.url}/x/schedules/bench"
        assert requests.put(put, data=schedule_document("v0"), headers=XML, timeout=10).ok

        paths = [f"/d{n}" for n in range(args.displays)]
        began = time.monotonic()
        codes = parallel(
            [
                (
                    "POST",
                    f"{schedulers[n % 2].url}/schedule/bench/subscribe/",
                    {"json": {"subscriber-uri": f"{receiver.url}{path}"}},
                )
                for n, path in enumerate(paths)
            ]
        )
        assert all(code == 201 for code in codes), set(codes)
        results["subscribe_s"] = round(time.monotonic() - began, 1)
        print(f"{len(paths)} subscribed in {results['subscribe_s']} s", flush=True)
        results["rss_mib_with_10000_subscribers"] = [
            round(rss_mib(s.process.pid), 1) for s in schedulers
        ]
        save(args.out, results)

        results["delivery"] = delivery(receiver, paths, f"{second.url}/x/schedules/bench", "v1")
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
            receiver, live, f"{first.url}/x/schedules/bench", "v2"
        )
        results["delivery_with_10pct_dead"]["dead"] = len(dead)
        print("delivery with 10% dead:", results["delivery_with_10pct_dead"], flush=True)
        # A third change while the dead ones still have retries pending.
        results["delivery_with_backlog_of_dead"] = delivery(
            receiver, live, f"{second.url}/x/schedules/bench", "v3"
        )
        print("again, dead ones backing off:", results["delivery_with_backlog_of_dead"], flush=True)

        save(args.out, results)
        # Each minute of followers beside the idle cost just before it (the dead subscribers'
        # retries and the schedulers' own timers run all the time).
        state = work / "followers"
        for conditional in (False, True):
            key = "followers_conditional" if conditional else "followers_unconditional"
            idle = idle_cpu(schedulers)
            results[key] = followers_minute(
                schedulers, receiver, args.followers, state, conditional=conditional
            )
            results[key]["idle_cpu_s_per_minute_before"] = idle
            results[key]["net_cpu_s_per_minute"] = round(
                results[key]["total_cpu_s_per_minute"] - idle, 2
            )
            print(key, results[key], flush=True)
        save(args.out, results)

        closed_display = f"http://127.0.0.1:{free_port()}"  # displays that are switched off
        location = {"latitude": "N54.0104", "longitude": "W2.7883"}
        load_before = load()
        began = time.monotonic()
        # Bounded: 10,000 must fit in 60 s; the phase stops at 180 s and says how far it got.
        codes = parallel(
            [
                (
                    "POST",
                    f"{schedulers[n % 2].url}/displays",
                    {"json": {"url": f"{closed_display}/r{n}", "location": location}},
                )
                for n in range(args.displays)
            ],
            deadline=began + 180.0,
        )
        took = time.monotonic() - began
        listed = len(requests.get(f"{first.url}/displays", timeout=60).json())
        results["registrations"] = {
            "count": args.displays,
            "created": sum(1 for code in codes if code == 201),
            "not_sent_by_the_deadline": sum(1 for code in codes if code == 0),
            "listed_by_the_other": listed,
            "seconds": round(took, 1),
            "per_second": round(sum(1 for code in codes if code == 201) / took, 1),
            "load_before": round(load_before, 2),
            "load_after": round(load(), 2),
        }
        print("registrations:", results["registrations"], flush=True)
        save(args.out, results)
        results["rss_mib_after_registrations"] = [
            round(rss_mib(s.process.pid), 1) for s in schedulers
        ]
        time.sleep(20)
        results["rss_mib_20s_later"] = [round(rss_mib(s.process.pid), 1) for s in schedulers]
        results["idle_cpu_s_per_minute_with_displays_registered"] = idle_cpu(schedulers)
        print("rss:", results["rss_mib_after_registrations"], results["rss_mib_20s_later"])
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

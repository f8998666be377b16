"""Where a registration's time goes as the registry grows, and what idle schedulers burn.

    .venv/bin/python tests/bench/profile_registrations.py [--upto 8000] [--sample]

Two ``pdn scheduler --database`` processes on a real PostgreSQL (tests/support/pgserver.py);
displays
that are switched off (a port nobody listens on), registered by 16 clients over both. Measures
the rate of 300 registrations with 0, 2,000 and ``--upto`` displays already registered, the
schedulers' CPU seconds during each, and their idle CPU per minute in the two minutes after.
``--sample`` runs each scheduler under tests/bench/stack_sampler.py (stacks in its work folder).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from tests.bench.fleetbench import (  # noqa: E402
    cpu_seconds,
    fleet_scheduler,
    load,
    parallel,
    rss_mib,
)
from tests.support.pgserver import PgServer  # noqa: E402
from tests.support.ports import free_port  # noqa: E402
from tests.support.process import PDN_MODULE  # noqa: E402
from tests.support.scheduler import SchedulerProcess  # noqa: E402

LOCATION = {"latitude": "N54.0104", "longitude": "W2.7883"}


def start_scheduler(
    database: str, work: Path, n: int, sample: bool, max_backoff: float | None
) -> SchedulerProcess:
    env = {} if max_backoff is None else {"PDN_PROBE_MAX_BACKOFF": str(max_backoff)}
    program = list(PDN_MODULE)
    if sample:  # the stack sampler runs the scheduler's module in its own process
        sampler = [str(ROOT / "tests/bench/stack_sampler.py"), str(work / f"stacks{n}.txt")]
        program = [PDN_MODULE[0], *sampler, *PDN_MODULE[1:]]
    return fleet_scheduler(database, work / f"s{n}", env=env, program=program)


def register(urls: list[str], closed: str, first: int, count: int) -> list[int]:
    return parallel(
        [
            (
                "POST",
                f"{urls[n % len(urls)]}/displays",
                {"json": {"url": f"{closed}/r{n}", "location": LOCATION}},
            )
            for n in range(first, first + count)
        ]
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--upto", type=int, default=8000)
    parser.add_argument("--sample", action="store_true")
    parser.add_argument("--steady", type=float, default=0.0, help="seconds of steady state")
    parser.add_argument("--max-backoff", type=float, default=None)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="profile-registrations-"))
    pg = PgServer.start(max_connections=200)
    processes: list[SchedulerProcess] = []
    results: dict[str, Any] = {"load_at_start": os.getloadavg()}
    try:
        database = pg.create_database("bench")
        processes = [
            start_scheduler(database, work, n, args.sample, args.max_backoff) for n in range(2)
        ]
        urls = [p.url for p in processes]
        closed = f"http://127.0.0.1:{free_port()}"
        registered = 0
        for size in (0, 2000, args.upto):
            if size > registered:
                codes = register(urls, closed, registered, size - registered)
                assert all(c == 201 for c in codes), set(codes)
                registered = size
            cpu = [cpu_seconds(p.pid) for p in processes]
            began = time.monotonic()
            codes = register(urls, closed, registered, 300)
            took = time.monotonic() - began
            registered += 300
            used = [cpu_seconds(p.pid) - c for p, c in zip(processes, cpu, strict=True)]
            results[f"at_{size}"] = {
                "per_second": round(300 / took, 1),
                "ms_cpu_per_registration": round(sum(used) * 1000 / 300, 2),
                "load": round(load(), 2),
            }
            print(size, results[f"at_{size}"], flush=True)
        for window in ("0-30", "30-60", "60-90", "90-120"):
            cpu = [cpu_seconds(p.pid) for p in processes]
            time.sleep(30)
            used = [cpu_seconds(p.pid) - c for p, c in zip(processes, cpu, strict=True)]
            results[f"idle_cpu_s_per_minute_{window}s"] = [round(u * 2, 2) for u in used]
            print(window, results[f"idle_cpu_s_per_minute_{window}s"], load(), flush=True)
        if args.steady:
            ceiling = args.max_backoff or 300.0
            # The last registration's reads: after 10, 50, 210 s, ... then every ceiling.
            time.sleep(max(0.0, 10 + 40 + 160 + ceiling - 120) if ceiling > 160 else ceiling)
            cpu = [cpu_seconds(p.pid) for p in processes]
            load_before = load()
            time.sleep(args.steady)
            used = [cpu_seconds(p.pid) - c for p, c in zip(processes, cpu, strict=True)]
            results["steady_state"] = {
                "max_backoff_s": ceiling,
                "seconds": args.steady,
                "idle_cpu_s_per_minute": [round(u * 60 / args.steady, 2) for u in used],
                "load_before": round(load_before, 2),
                "load_after": round(load(), 2),
            }
            print("steady", results["steady_state"], flush=True)
        results["rss_mib"] = [round(rss_mib(p.pid), 1) for p in processes]
        results["load_at_end"] = os.getloadavg()
    finally:
        for process in processes:
            process.stop(30)
        pg.stop()
    print(json.dumps(results, indent=2))
    print("work directory:", work)
    return 0


if __name__ == "__main__":
    sys.exit(main())

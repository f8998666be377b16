"""Where a following display's periodic check costs the scheduler CPU.

    .venv/bin/python tests/bench/profile_followers.py [--checks 1000] [--top 30]

One scheduler on a real PostgreSQL (tests/support/pgserver.py), in this process, its Flask app
called
through its WSGI test client (no sockets: waitress's share is not in these figures). A check
is what player/follower.py sends: ``GET /schedule/<id>/`` with ``If-None-Match`` (304), then
the idempotent re-subscription ``POST /schedule/<id>/subscribe/``. Prints the CPU per check of
each half and cProfile's busiest functions (cumulative) over all of them.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import os
import pstats
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from server.scheduler.service import SchedulerService  # noqa: E402
from tests.support.inprocess_display import cds  # noqa: E402
from tests.support.pgserver import PgServer  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--checks", type=int, default=1000)
    parser.add_argument("--top", type=int, default=30)
    args = parser.parse_args()
    os.environ.pop("PDN_API_TOKEN", None)
    os.environ["PDN_MAX_SUBSCRIPTIONS"] = str(args.checks + 10)
    pg = PgServer.start(max_connections=50)
    work = Path(tempfile.mkdtemp(prefix="profile-followers-"))
    service = SchedulerService(data_dir=work, database=pg.create_database("bench"))
    try:
        client = service.app.test_client()
        put = client.put(
            "/x/schedules/bench",
            data=cds("bench", "http://127.0.0.1:9/a.html"),
            headers={"Content-Type": "text/xml"},
        )
        assert put.status_code in (200, 201), put.text
        etag = client.get("/schedule/bench/").headers["ETag"]
        subscribers = [f"http://127.0.0.1:9/f{n}/schedule" for n in range(args.checks)]
        for uri in subscribers:  # the first check of each: a new subscription
            first = client.post("/schedule/bench/subscribe/", json={"subscriber-uri": uri})
            assert first.status_code == 201, first.text
        spent = {"get": 0.0, "subscribe": 0.0}
        profile = cProfile.Profile()
        began = time.monotonic()
        for uri in subscribers:
            cpu = time.process_time()
            profile.enable()
            got = client.get("/schedule/bench/", headers={"If-None-Match": etag})
            profile.disable()
            spent["get"] += time.process_time() - cpu
            assert got.status_code == 304, got.status_code
            cpu = time.process_time()
            profile.enable()
            again = client.post("/schedule/bench/subscribe/", json={"subscriber-uri": uri})
            profile.disable()
            spent["subscribe"] += time.process_time() - cpu
            assert again.status_code == 201, again.text
        took = time.monotonic() - began
        for half, seconds in spent.items():
            print(f"{half}: {seconds * 1e6 / args.checks:.0f} us CPU per check")
        print(f"{args.checks} checks in {took:.1f} s, load {os.getloadavg()[0]:.1f}")
        out = io.StringIO()
        pstats.Stats(profile, stream=out).sort_stats("cumulative").print_stats(args.top)
        print(out.getvalue())
    finally:
        service.stop()
        pg.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""A delivery process for the multi-process outbox tests:
``python -m tests.support.pgworker URL LEASE TIMEOUT`` starts a PgOutbox on the database, says
``ready`` on stdout, delivers until SIGTERM (or its standard input closes), then prints its
stats as one JSON line and stops."""

from __future__ import annotations

import json
import logging
import signal
import sys
import threading

from server.platform.pg import open_pool
from server.platform.pgoutbox import PgOutbox


def main() -> None:
    url, lease, timeout = sys.argv[1], float(sys.argv[2]), float(sys.argv[3])
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    pool = open_pool(url, name="worker", max_size=4)
    outbox = PgOutbox(pool, name="worker", lease=lease, timeout=timeout, first_retry=0.2)
    outbox.start()
    done = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: done.set())

    def until_stdin_closes() -> None:
        sys.stdin.read()
        done.set()

    threading.Thread(target=until_stdin_closes, daemon=True).start()
    print("ready", flush=True)
    done.wait()
    outbox.stop()
    print(json.dumps(outbox.stats()), flush=True)
    pool.close()


if __name__ == "__main__":
    main()

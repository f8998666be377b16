"""A delivery process for the multi-process outbox tests:
``python -m tests.support.pgworker URL LEASE TIMEOUT`` starts a PgOutbox on the database, says
``ready`` on stdout, delivers until SIGTERM (or its standard input closes), then prints its
stats as one JSON line and stops. ``PgWorker`` starts one and stops it, for a test."""

from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import sys
import threading
from typing import Any

from server.platform.pg import open_pool
from server.platform.pgoutbox import PgOutbox
from tests.support.paths import REPO


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


class PgWorker:
    """This module as a process of its own, for a test: started and ready (an AssertionError
    if it says anything else first), stopped with SIGTERM or killed."""

    def __init__(self, url: str, lease: float, timeout: float) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-m", "tests.support.pgworker", url, str(lease), str(timeout)],
            cwd=REPO,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env={**os.environ, "PYTHONPATH": str(REPO)},
        )
        assert self.process.stdout is not None
        line = self.process.stdout.readline()
        assert line.strip() == "ready", line

    def stop(self) -> dict[str, Any] | None:
        """SIGTERM; its stats (None when it was killed)."""
        if self.process.poll() is not None:
            return None
        self.process.send_signal(signal.SIGTERM)
        out, _ = self.process.communicate(timeout=30)
        return dict(json.loads(out.strip().splitlines()[-1]))

    def kill(self) -> None:
        self.process.kill()
        self.process.communicate(timeout=10)


if __name__ == "__main__":
    main()

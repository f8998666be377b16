"""Benchmark: web engine loss -> content back on screen, on a real ``pdn display``.

    .venv/bin/python tests/bench/bench_engine_loss.py [--runs 5]

Plays the service manager (``Restart=always``, no delay: tests/player/test_engine_loss.py's
Supervisor), shows a red page, then ``--runs`` times kills every QtWebEngineProcess of the
display and times how long until the red page is on screen again and ``/playback/`` says so
with a new record. The restart back-off file is cleared before each loss, so each is a first
one (an installed unit adds its RestartSec). Prints p50/max and writes
``bench-results/bench_engine_loss.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
os.environ.setdefault("QTWEBENGINE_DISABLE_SANDBOX", "1")

from player.crashonly import EXITS_FILE  # noqa: E402
from tests.player.test_engine_loss import (  # noqa: E402
    RED,
    Supervisor,
    lose_and_recover,
    playback,
    show_red,
)
from tests.support.pages import one_page  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    red = one_page(RED)
    figures: list[float] = []
    with tempfile.TemporaryDirectory() as work:
        supervisor = Supervisor(Path(work))
        supervisor.start()
        try:
            sequence = show_red(supervisor, red)
            for _ in range(args.runs):
                (supervisor.data / EXITS_FILE).unlink(missing_ok=True)
                figures.append(lose_and_recover(supervisor, red, sequence))
                record = playback(supervisor.url)
                assert record is not None and isinstance(record["sequence"], int)
                sequence = record["sequence"]
                time.sleep(1)
        finally:
            supervisor.stop()
            red.close()
    result = {
        "machine": {"cpus": os.cpu_count(), "platform": platform.platform()},
        "runs": figures,
        "p50_s": round(statistics.median(figures), 3),
        "max_s": round(max(figures), 3),
    }
    print(
        f"web engine loss -> content back on screen, {len(figures)} runs: "
        f"p50 {result['p50_s']:.2f} s, max {result['max_s']:.2f} s; "
        + ", ".join(f"{f:.2f}" for f in figures)
    )
    out = ROOT / "bench-results" / "bench_engine_loss.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps(result, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Benchmark of the CDS library: hostile documents, big schedules, the playlist engine.

    .venv/bin/python tests/bench/bench_cds.py [--runs 20]

1. Hostile documents (billion laughs, external entities, deep nesting, element floods, 8 MiB+):
   time to refusal, p50/p95 over the runs. Target: well under a second each.
2. A large valid schedule (2,000 items in 100 sets, every kind of constraint): parse time,
   serialise time.
3. The playlist over that schedule: ``next``, ``eligible`` and ``next_change`` per call.

Prints the figures and writes them to ``bench-results/bench_cds.json``.
"""

from __future__ import annotations

import argparse
import datetime
import json
import platform
import random
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from cds.errors import CdsError  # noqa: E402
from cds.model import ContentItem  # noqa: E402
from cds.parser import parse  # noqa: E402
from cds.playlist import Playlist  # noqa: E402
from cds.serialise import to_xml  # noqa: E402
from tests.support.hostilecds import hostile_documents  # noqa: E402


def timed(action: Callable[[], object], runs: int) -> dict[str, float]:
    samples: list[float] = []
    for _ in range(runs):
        start = time.perf_counter()
        action()
        samples.append(time.perf_counter() - start)
    samples.sort()
    return {
        "p50_ms": round(statistics.median(samples) * 1000, 3),
        "p95_ms": round(samples[min(len(samples) - 1, int(len(samples) * 0.95))] * 1000, 3),
        "max_ms": round(samples[-1] * 1000, 3),
    }


def refuse(data: bytes) -> Callable[[], object]:
    def action() -> object:
        try:
            parse(data)
        except CdsError as error:
            return error
        raise AssertionError("a hostile document was accepted")

    return action


def big_schedule(sets: int = 100, items_per_set: int = 20) -> bytes:
    parts = [
        '<content-set name="big"><constraints><scheduling-constraints>'
        '<playback order="random"/></scheduling-constraints></constraints>'
    ]
    for s in range(sets):
        parts.append(
            f'<content-set name="set{s}"><constraints><scheduling-constraints>'
            f'<time><between start="{s % 24:02d}:00" end="{(s + 6) % 24:02d}:30"/></time>'
            '<day-of-week><between start="fri" end="mon"/><between start="wed" end="wed"/>'
            "</day-of-week>"
            f'<priority level="{s % 5}"/></scheduling-constraints></constraints>'
        )
        for i in range(items_per_set):
            parts.append(
                f'<content-item content-type="text/html" size="{i * 100} bytes">'
                "<constraints><scheduling-constraints>"
                f"<preferred-duration>{10 + i} seconds</preferred-duration>"
                '<date><between start="2026-01-01" end="2027-12-31"/></date>'
                "</scheduling-constraints></constraints><requires-file><hashes>"
                f'<hash type="md5">{(s * 1000 + i):032x}</hash></hashes><sources>'
                f"<uri>http://content.example/{s}/{i}.html</uri></sources></requires-file>"
                "</content-item>"
            )
        parts.append("</content-set>")
    parts.append("</content-set>")
    return "".join(parts).encode()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20)
    args = parser.parse_args()
    results: dict[str, Any] = {
        "when": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "python": platform.python_version(),
        "machine": platform.machine(),
        "runs": args.runs,
        "hostile": {},
    }

    print("Hostile documents: time to refusal")
    for name, data in hostile_documents():
        figures = timed(refuse(data), args.runs)
        figures["size_bytes"] = len(data)
        results["hostile"][name] = figures
        print(
            f"  {name:22} {len(data):>10} bytes  p50 {figures['p50_ms']:8.3f} ms  "
            f"p95 {figures['p95_ms']:8.3f} ms  max {figures['max_ms']:8.3f} ms"
        )

    data = big_schedule()
    document = parse(data)
    items = len(document.root.walk_items())
    results["big"] = {
        "bytes": len(data),
        "items": items,
        "parse": timed(lambda: parse(data), max(3, args.runs // 4)),
        "serialise": timed(lambda: to_xml(document), max(3, args.runs // 4)),
    }
    print(f"Large schedule: {len(data)} bytes, {items} items")
    print(f"  parse      p50 {results['big']['parse']['p50_ms']:8.1f} ms")
    print(f"  serialise  p50 {results['big']['serialise']['p50_ms']:8.1f} ms")

    playlist = Playlist(ZoneInfo("Europe/London"), random.Random(1))
    playlist.set_documents([document.root])
    now = datetime.datetime(2026, 11, 23, 10, 0, tzinfo=ZoneInfo("Europe/London"))

    def available(_item: ContentItem) -> bool:
        return True

    results["playlist"] = {
        "next": timed(lambda: playlist.next(now, available), args.runs * 5),
        "eligible": timed(lambda: playlist.eligible(now, available), args.runs),
        "next_change": timed(lambda: playlist.next_change(now), args.runs),
    }
    for name, figures in results["playlist"].items():
        print(
            f"  playlist.{name:12} p50 {figures['p50_ms']:8.3f} ms  p95 {figures['p95_ms']:8.3f} ms"
        )

    out = ROOT / "bench-results" / "bench_cds.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps(results, indent=2) + "\n")
    print(f"Written to {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Wake-ups of a process tree, counted rather than timed: every thread's context switches
(``/proc/PID/task/TID/status``) and CPU ticks (``.../stat``), read twice, the difference per
second and per thread. A count does not bend to how busy the machine is, as CPU time of a
nearly idle process does: a thread that wakes up 10 times a second does so on a quiet machine
and on a loaded one.

A thread is named by its process's role (:func:`tests.bench.proctree.roles`: browser,
render, gpu, zygote, utility) and its own name (``comm``: Qt's ``QSGRenderThread``, Python's
thread names, Chromium's ``Chrome_ChildIOT``...). Threads of one name in one role are added up.

Run alone on a live display: ``python -m tests.bench.wakeups PID [SECONDS]``.
"""

from __future__ import annotations

import os
import sys
import time
from dataclasses import dataclass
from typing import Any

from tests.bench.proctree import CLOCK_TICKS, process_tree, roles


@dataclass(frozen=True)
class ThreadCount:
    role: str
    name: str
    switches: int  # voluntary and involuntary context switches so far
    ticks: int  # user and system CPU ticks so far


def _thread(pid: int, tid: int, role: str) -> ThreadCount | None:
    base = f"/proc/{pid}/task/{tid}"
    try:
        with open(f"{base}/status") as stream:
            status = dict(line.split(":", 1) for line in stream if ":" in line)
        with open(f"{base}/stat") as stream:
            fields = stream.read().rsplit(")", 1)[1].split()
    except (OSError, ValueError):
        return None
    switches = int(status["voluntary_ctxt_switches"]) + int(status["nonvoluntary_ctxt_switches"])
    return ThreadCount(role, status["Name"].strip(), switches, int(fields[11]) + int(fields[12]))


def snapshot(root: int) -> dict[tuple[int, int], ThreadCount]:
    """Every thread of ``root``'s tree now, by (pid, tid)."""
    named = roles(root)
    found: dict[tuple[int, int], ThreadCount] = {}
    for pid, _ in process_tree(root):
        try:
            tids = [int(tid) for tid in os.listdir(f"/proc/{pid}/task")]
        except OSError:
            continue
        for tid in tids:
            count = _thread(pid, tid, named.get(pid, "other"))
            if count is not None:
                found[(pid, tid)] = count
    return found


def difference(
    before: dict[tuple[int, int], ThreadCount],
    after: dict[tuple[int, int], ThreadCount],
    seconds: float,
) -> dict[str, Any]:
    """Wake-ups per second of the threads alive at both readings (a thread that came or went
    meanwhile is counted in ``threads_changed``), by role and thread name, busiest first."""
    rows: dict[str, list[float]] = {}
    for key, end in after.items():
        start = before.get(key)
        if start is None:
            continue
        row = rows.setdefault(f"{end.role}/{end.name}", [0.0, 0.0, 0.0])
        row[0] += (end.switches - start.switches) / seconds
        row[1] += (end.ticks - start.ticks) / CLOCK_TICKS / seconds
        row[2] += 1
    threads = sorted(rows.items(), key=lambda item: -item[1][0])
    return {
        "seconds": round(seconds, 2),
        "wakeups_per_s": round(sum(row[0] for _, row in threads), 2),
        "cpu_s_per_s": round(sum(row[1] for _, row in threads), 4),
        "threads": len(set(before) & set(after)),
        "threads_changed": len(set(before) ^ set(after)),
        "by_thread": [
            {
                "thread": name,
                "count": int(row[2]),
                "wakeups_per_s": round(row[0], 2),
                "cpu_s_per_s": round(row[1], 4),
            }
            for name, row in threads
            if row[0] > 0 or row[1] > 0
        ],
    }


def print_threads(found: dict[str, Any], indent: str = "    ", top: int = 12) -> None:
    for row in found["by_thread"][:top]:
        print(
            f"{indent}{row['thread']:<40} x{row['count']:<3} {row['wakeups_per_s']:8.2f}/s "
            f"{row['cpu_s_per_s'] * 100:6.2f} % of a core",
            flush=True,
        )


def main() -> int:
    root = int(sys.argv[1])
    seconds = float(sys.argv[2]) if len(sys.argv) > 2 else 60.0
    before, start = snapshot(root), time.monotonic()
    time.sleep(seconds)
    found = difference(before, snapshot(root), time.monotonic() - start)
    print(
        f"{found['wakeups_per_s']} wake-ups/s, {found['cpu_s_per_s'] * 100:.2f} % of a core, "
        f"{found['threads']} threads ({found['threads_changed']} came or went)"
    )
    print_threads(found, top=100)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""A display's process tree as the benchmarks measure it: who is in it, what role each
process plays, and what memory and CPU time it holds, read from ``/proc`` (Linux).

Roles come from the product (:func:`player.memory.measure_tree`): the display's own process
is the browser, and Chromium's helpers go by their ``--type`` (a zygote's child that keeps the
zygote's command line is a render process). The benchmarks add what the display itself does
not watch: anonymous and private memory, and the CPU time of the whole tree.
"""

from __future__ import annotations

import os
from typing import Any

from player.memory import measure_tree

ROLES = ("browser", "render", "gpu", "zygote", "utility", "other")
# What smaps_rollup adds up, by its own names; figures are read in MB.
MEMORY_FIELDS = ("Rss", "Pss", "Private_Dirty", "Anonymous")
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def process_tree(root: int) -> list[tuple[int, int]]:
    """``root`` and all its descendants, as (pid, parent pid)."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as stream:
                fields = stream.read().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        children.setdefault(int(fields[1]), []).append(int(entry))
    tree, todo = [], [(root, 0)]
    while todo:
        pid, parent = todo.pop()
        tree.append((pid, parent))
        todo.extend((child, pid) for child in children.get(pid, []))
    return tree


def roles(root: int) -> dict[int, str]:
    """The role of each process of ``root``'s tree, as the display names them."""
    return {process.pid: process.role for process in measure_tree(root).processes}


def rollup(pid: int) -> dict[str, float] | None:
    """:data:`MEMORY_FIELDS` of one process in MB, from ``smaps_rollup``; None if it ended."""
    figures = dict.fromkeys(MEMORY_FIELDS, 0.0)
    try:
        with open(f"/proc/{pid}/smaps_rollup") as stream:
            for line in stream:
                key, _, value = line.partition(":")
                if key in figures:
                    figures[key] = int(value.split()[0]) / 1024
    except (OSError, ValueError, IndexError):
        return None
    return figures


def tree_processes(root: int) -> list[tuple[int, str, dict[str, float]]]:
    """(pid, role, :func:`rollup`) of each process of ``root``'s tree that is still there."""
    found = []
    for pid, role in roles(root).items():
        figures = rollup(pid)
        if figures is not None:
            found.append((pid, role, figures))
    return found


def tree_memory(root: int) -> dict[str, Any]:
    """PSS, RSS and anonymous memory (MB) of ``root`` and its descendants, summed and by role."""
    by_role: dict[str, dict[str, float]] = {}
    total_pss = total_rss = 0.0
    processes = tree_processes(root)
    for _, role, figures in processes:
        into = by_role.setdefault(role, {"count": 0, "pss_mb": 0.0, "rss_mb": 0.0, "anon_mb": 0.0})
        into["count"] += 1
        into["pss_mb"] += figures["Pss"]
        into["rss_mb"] += figures["Rss"]
        # Anonymous memory (heaps, V8, GL buffers): the part no other process shares.
        into["anon_mb"] += figures["Anonymous"]
        total_pss += figures["Pss"]
        total_rss += figures["Rss"]
    return {
        "pss_mb": total_pss,
        "rss_mb": total_rss,
        "processes": len(processes),
        "by_role": by_role,
    }


def foreign_engine_processes(root: int) -> int:
    """QtWebEngineProcess processes on this machine outside ``root``'s tree: they map the same
    libraries, so while they run, the tree's PSS reads lower than it would alone."""
    ours = {pid for pid, _ in process_tree(root)}
    count = 0
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) in ours:
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as stream:
                if b"QtWebEngineProcess" in stream.read(4096):
                    count += 1
        except OSError:
            continue
    return count


# -- CPU time ---------------------------------------------------------------------------------


def _ticks(pid: int, children: bool) -> int | None:
    try:
        with open(f"/proc/{pid}/stat") as stream:
            fields = stream.read().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    # After the command: state is field 3, so utime (14), stime, cutime, cstime are 11..14.
    return sum(int(value) for value in fields[11 : 15 if children else 13])


def tree_cpu(root: int) -> float:
    """CPU seconds used so far by ``root`` and its descendants. Each live process counts its
    own time and, through cutime/cstime, that of the children it has reaped (a render
    process that ended is in its zygote's figure), so every process is counted once."""
    total = 0
    for pid, _ in process_tree(root):
        ticks = _ticks(pid, children=True)
        total += ticks or 0
    return total / CLOCK_TICKS


def process_cpu(pid: int | None) -> float:
    """CPU seconds of one process (its own, not its children's); 0 when there is none."""
    ticks = _ticks(pid, children=False) if pid is not None else None
    return (ticks or 0) / CLOCK_TICKS

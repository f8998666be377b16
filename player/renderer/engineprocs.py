"""Qt WebEngine's helper processes, as the operating system sees them (no Qt here).

Chromium starts its render processes from a *zygote*: a ``QtWebEngineProcess --type=zygote``
child of the display process that forks one renderer per page. When the zygote dies (a GPU
driver fault, the OOM killer), no render process can be started again in this process: a fresh
profile's pages only get "launch failed" (measured: exit code 1002), and the views whose
renderers died with it are not even told (``renderProcessTerminated`` never comes). The only
way back is a new display process, so losing a zygote is the renderer's one fatal fault.

This reads ``/proc`` (Linux): the display's direct children whose command line names
``QtWebEngineProcess``, alive or not (a killed child stays a zombie until Chromium reaps it).
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from pathlib import Path

log = logging.getLogger("pdn.renderer")

PROC = Path("/proc")
MARKER = b"QtWebEngineProcess"
FULL_SCAN_EVERY = 30  # calls of ZygoteWatch.lost between looks for zygotes not yet seen


@dataclass(frozen=True)
class EngineProcess:
    pid: int
    kind: str  # Chromium's --type= ("zygote", "gpu-process", "utility", "renderer", ...)
    alive: bool  # False: gone or a zombie


def _read_children(pid: int) -> list[int]:
    children: list[int] = []
    task = PROC / str(pid) / "task"
    try:
        threads = os.listdir(task)
    except OSError:
        return children
    for thread in threads:
        try:
            text = (task / thread / "children").read_text()
        except OSError:
            continue
        children += [int(word) for word in text.split()]
    return children


def _stat(pid: int) -> list[str] | None:
    """The fields of ``/proc/PID/stat`` after the command (the state first); None if gone."""
    try:
        stat = (PROC / str(pid) / "stat").read_text()
    except OSError:
        return None
    # "pid (comm) S ...": comm may hold spaces and parentheses; the state follows the last ')'.
    return stat.rsplit(")", 1)[-1].split() if ")" in stat else None


def _state(pid: int) -> str | None:
    fields = _stat(pid)
    return fields[0] if fields else None


def _alive_since(pid: int) -> str | None:
    """When ``pid`` started (clock ticks since boot, as ``/proc`` says), while it lives and is
    no zombie; None otherwise. A pid the kernel gave to a new process has a new start time."""
    fields = _stat(pid)
    if fields is None or len(fields) < 20 or fields[0] in ("Z", "X"):
        return None
    return fields[19]  # field 22 of stat, the start time


def engine_children(pid: int | None = None) -> list[EngineProcess]:
    """The web engine's processes among ``pid``'s (default: this process's) direct children."""
    found: list[EngineProcess] = []
    for child in _read_children(os.getpid() if pid is None else pid):
        try:
            cmdline = (PROC / str(child) / "cmdline").read_bytes()
        except OSError:
            continue
        state = _state(child)
        if not cmdline:
            # A zombie has no command line any more; its comm still tells what it was.
            try:
                comm = (PROC / str(child) / "comm").read_text().strip()
            except OSError:
                continue
            if comm.startswith("QtWebEngine"):
                found.append(EngineProcess(child, "?", False))
            continue
        if MARKER not in cmdline:
            continue
        kind = "?"
        for arg in cmdline.split(b"\0"):
            if arg.startswith(b"--type="):
                kind = arg[len(b"--type=") :].decode(errors="replace")
        found.append(EngineProcess(child, kind, state not in (None, "Z", "X")))
    return found


class ZygoteWatch:
    """Remembers the zygotes it has seen alive and says when one of them is gone.

    :meth:`lost` runs every second on the GUI thread. Listing the display's children reads a
    file per thread of the display (about fifty), so it is done until a zygote is seen and
    then every ``FULL_SCAN_EVERY`` calls, for one that comes later; in between, each zygote
    seen is checked by its own ``stat`` alone (one file), by its start time, so a pid given
    to another process does not pass for the zygote."""

    def __init__(self, pid: int | None = None) -> None:
        self._pid = pid
        self._zygotes: dict[int, str] = {}  # pid -> its start time
        self._calls = 0
        self.supported = (PROC / "self" / "task").is_dir()

    @property
    def seen(self) -> bool:
        return bool(self._zygotes)

    def lost(self) -> str | None:
        """None while every zygote seen so far lives; else what happened to the first gone."""
        if not self.supported:
            return None
        if not self._zygotes or self._calls % FULL_SCAN_EVERY == 0:
            self._scan()
        self._calls += 1
        for pid, started in sorted(self._zygotes.items()):
            if _alive_since(pid) != started:
                return f"the web engine's zygote process {pid} is gone"
        return None

    def _scan(self) -> None:
        for process in engine_children(self._pid):
            if process.alive and process.kind == "zygote" and process.pid not in self._zygotes:
                started = _alive_since(process.pid)
                if started is not None:
                    self._zygotes[process.pid] = started
                    log.info("web engine zygote process %d", process.pid)

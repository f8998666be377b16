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


def _state(pid: int) -> str | None:
    try:
        stat = (PROC / str(pid) / "stat").read_text()
    except OSError:
        return None
    # "pid (comm) S ...": comm may hold spaces and parentheses; the state follows the last ')'.
    return stat.rsplit(")", 1)[-1].split()[0] if ")" in stat else None


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
    """Remembers the zygotes it has seen alive and says when one of them is gone."""

    def __init__(self, pid: int | None = None) -> None:
        self._pid = pid
        self._zygotes: set[int] = set()
        self.supported = (PROC / "self" / "task").is_dir()

    @property
    def seen(self) -> bool:
        return bool(self._zygotes)

    def lost(self) -> str | None:
        """None while every zygote seen so far lives; else what happened to the first gone."""
        if not self.supported:
            return None
        processes = engine_children(self._pid)
        alive = {p.pid for p in processes if p.alive}
        for process in processes:
            if process.alive and process.kind == "zygote" and process.pid not in self._zygotes:
                self._zygotes.add(process.pid)
                log.info("web engine zygote process %d", process.pid)
        gone = sorted(self._zygotes - alive)
        if gone:
            return f"the web engine's zygote process {gone[0]} is gone"
        return None

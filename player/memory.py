"""The display's memory: what its process tree holds, the budget it stays under, and the
low-memory profile of small boards. No Qt: the renderer asks :class:`MemoryWatch` whether a
should give memory back, health asks it for the figures.

The tree is the display's own process (Chromium's *browser* process runs in it, with Qt and
Python) and every descendant: Qt WebEngine's zygotes, the render processes they fork, the GPU
and utility processes. Each is measured from ``/proc/PID/smaps_rollup``: PSS (proportional set
size: shared pages divided among the processes sharing them, so the sum is what the tree costs
the board) and RSS. A role comes from the ``--type=`` of a child's command line; a render
process forked by a zygote keeps the zygote's command line, so a zygote's zygote child is a
render process.

Budget (``[screen] memory-budget``): a size in binary units, ``"600M"``, ``"1.5G"``, ``"700
MiB"`` (M, MB, MiB are all MiB; G, GB, GiB are GiB, as ``/proc`` and ``free -m`` count), or a
number of MiB; ``"auto"`` (the default) is :func:`auto_budget_mb` of the board's RAM. Profile
(``[screen] low-memory``): ``"auto"`` (on below :data:`LOW_MEMORY_BELOW_MB` of RAM), ``"on"``,
``"off"``.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import logging
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

log = logging.getLogger("pdn.memory")

MEMINFO = Path("/proc/meminfo")
# 1 GB boards report 900-1000 MiB (the firmware keeps some), 2 GB boards 1.8-1.9 GiB: the
# threshold sits between the two.
LOW_MEMORY_BELOW_MB = 1536
# The auto budget: half the board's RAM (the rest for the kernel, its page cache and the other
# services), never under 256 MiB, and at most 1.5 GiB: a healthy tree measured 350-570 MiB
# PSS, so one past 1.5 GiB is leaking whatever the board, and renewing views earlier costs
# nothing on screen. A 1 GB board (~950 MiB) gets ~475 MiB, 2 GB ~950 MiB, 4 GB and more 1536.
BUDGET_SHARE = 0.5
AUTO_BUDGET_MIN_MB = 256
AUTO_BUDGET_MAX_MB = 1536
# Below this, a budget cannot even hold one view: refused in the config.
MIN_BUDGET_MB = 128
MAX_BUDGET_MB = 1024 * 1024
# Without /proc/meminfo (not Linux): treat the board as this big.
UNKNOWN_BOARD_MB = 2048
LOW_MEMORY_CHOICES = ("auto", "on", "off")
SAMPLE_EVERY = 20.0  # seconds between measurements of the tree (and heap trims)
SAMPLE_EVERY_LOW_MEMORY = 10.0  # ... in the low-memory profile: the heap trimmed twice as often
# Memory given back at two boundaries (the heap trimmed before the next view) since the tree was
# last under budget, and still over: the memory is held by the browser process itself (or a page
# that grows as fast); health says so.
RECYCLES_TO_GIVE_UP = 2
# The last resort: this far above the budget, with memory given back, for this many samples in
# a row, and not in the first minutes of the process: a planned restart (crash-only exit) is
# better than the kernel's OOM killer choosing what dies on a small board.
RESTART_FACTOR = 1.5
RESTART_AFTER_SAMPLES = 3
RESTART_NOT_BEFORE = 600.0  # seconds of uptime

_UNITS_MB = {"m": 1, "mb": 1, "mib": 1, "g": 1024, "gb": 1024, "gib": 1024}


def parse_budget(value: object) -> int | None:
    """MiB from ``"600M"``, ``"1.5G"``, ``"700 MiB"`` or a number of MiB; None for ``"auto"``.
    Raises ValueError with a message that says the grammar."""
    grammar = "a size such as '600M' or '1.5G' (binary units), a number of MiB, or 'auto'"
    if isinstance(value, bool):
        raise ValueError(f"must be {grammar}")
    if isinstance(value, int | float):
        number = float(value)
    elif isinstance(value, str):
        text = value.strip().lower().replace(" ", "")
        if text == "auto":
            return None
        digits = text.rstrip("abcdefghijklmnopqrstuvwxyz")
        unit = text[len(digits) :] or "m"
        try:
            number = float(digits)
        except ValueError:
            raise ValueError(f"{value!r} is not {grammar}") from None
        if unit not in _UNITS_MB:
            raise ValueError(f"{value!r}: unknown unit (M, MB, MiB, G, GB, GiB)")
        number *= _UNITS_MB[unit]
    else:
        raise ValueError(f"must be {grammar}")
    megabytes = round(number)
    if not MIN_BUDGET_MB <= megabytes <= MAX_BUDGET_MB:
        raise ValueError(
            f"{value!r} is out of range: at least {MIN_BUDGET_MB}M (one view needs more), "
            f"at most {MAX_BUDGET_MB // 1024}G"
        )
    return megabytes


def parse_low_memory(value: object) -> str:
    """``"auto"``, ``"on"`` or ``"off"`` (TOML true and false mean on and off)."""
    if isinstance(value, bool):
        return "on" if value else "off"
    if isinstance(value, str) and value.strip().lower() in LOW_MEMORY_CHOICES:
        return value.strip().lower()
    raise ValueError(f"must be one of {', '.join(LOW_MEMORY_CHOICES)}, not {value!r}")


def mem_total_mb(meminfo: str) -> int:
    """The board's RAM (``MemTotal``) in MiB, from the text of ``/proc/meminfo``."""
    for line in meminfo.splitlines():
        if line.startswith("MemTotal:"):
            parts = line.split()
            return int(parts[1]) // 1024  # kB
    raise ValueError("no MemTotal in the meminfo text")


def board_mb(meminfo_path: Path = MEMINFO) -> int | None:
    """The board's RAM in MiB, or None when it cannot be read."""
    try:
        return mem_total_mb(meminfo_path.read_text())
    except (OSError, ValueError):
        return None


def auto_budget_mb(total_mb: int) -> int:
    return max(AUTO_BUDGET_MIN_MB, min(AUTO_BUDGET_MAX_MB, round(total_mb * BUDGET_SHARE)))


def auto_low_memory(total_mb: int) -> bool:
    return total_mb < LOW_MEMORY_BELOW_MB


@dataclass(frozen=True)
class MemoryPlan:
    """What the display holds itself to: the budget (MiB of PSS) and the profile."""

    budget_mb: int
    low_memory: bool
    board_mb: int | None = None
    budget_auto: bool = False

    @property
    def profile(self) -> str:
        return "low-memory" if self.low_memory else "default"

    def describe(self) -> str:
        board = f"{self.board_mb} MiB" if self.board_mb is not None else "unknown"
        return (
            f"memory budget {self.budget_mb} MiB{' (auto)' if self.budget_auto else ''}, "
            f"{self.profile} profile, board RAM {board}"
        )


def memory_plan(
    budget_mb: int | None, low_memory: str, *, meminfo_path: Path = MEMINFO
) -> MemoryPlan:
    """The plan from the config's ``memory-budget`` (None: auto) and ``low-memory``."""
    total = board_mb(meminfo_path)
    known = total if total is not None else UNKNOWN_BOARD_MB
    low = auto_low_memory(known) if low_memory == "auto" else low_memory == "on"
    budget = budget_mb if budget_mb is not None else auto_budget_mb(known)
    return MemoryPlan(budget, low, total, budget_mb is None)


def _load_malloc_trim() -> Callable[[int], int] | None:
    name = ctypes.util.find_library("c")
    if name is None:
        return None
    try:
        trim: Callable[[int], int] = ctypes.CDLL(name).malloc_trim
    except (OSError, AttributeError):
        return None  # not glibc
    return trim


_MALLOC_TRIM = _load_malloc_trim()


def release_free_heap() -> None:
    """Hand the free pages of this process's heaps back to the kernel (glibc's
    ``malloc_trim``; nothing elsewhere). glibc keeps freed memory for reuse, and Chromium's
    browser side, Qt and Python allocate and free a lot per item: measured after 30 items,
    the browser process's anonymous memory went from 110-126 MiB to 93 MiB."""
    if _MALLOC_TRIM is not None:
        _MALLOC_TRIM(0)


# glibc's mallopt parameter, and the size from which an allocation gets pages of its own.
_M_MMAP_THRESHOLD = -3
MMAP_THRESHOLD = 1024 * 1024


def _load_mallopt() -> Callable[[int, int], int] | None:
    name = ctypes.util.find_library("c")
    if name is None:
        return None
    try:
        mallopt: Callable[[int, int], int] = ctypes.CDLL(name).mallopt
    except (OSError, AttributeError):
        return None  # not glibc
    return mallopt


def fix_mmap_threshold(threshold: int = MMAP_THRESHOLD) -> bool:
    """Give every allocation of ``threshold`` bytes or more pages of its own, returned to the
    kernel when it is freed. glibc raises its threshold (from 128 KiB up to 32 MiB) every time
    such a block is freed, so after a few 1920x1080 frames (8 MiB: widget grabs, Qt Quick's
    read-backs, Mesa's software textures, decoded images) every frame is carved out of the
    main heap and freed into it, where it stays until a trim. Measured on 30 pages at
    1920x1080 (bench_memory_probe, two runs each): the browser process's heap went from 25
    to 190-280 MiB in 10 items with the moving threshold, and stays at 30 MiB with a fixed
    one; the process's anonymous memory 293-384 MiB while playing, 204-228 after a trim,
    against 213-260 and 173-189. A fixed threshold also keeps glibc's trim threshold at its
    default. Nothing is done when MALLOC_MMAP_THRESHOLD_ is set (the operator's choice).
    Returns whether the threshold was set."""
    if os.environ.get("MALLOC_MMAP_THRESHOLD_") or _MALLOPT is None:
        return False
    return bool(_MALLOPT(_M_MMAP_THRESHOLD, threshold))


_MALLOPT = _load_mallopt()


# -- measuring the tree ------------------------------------------------------------------------


@dataclass(frozen=True)
class ProcessMemory:
    pid: int
    role: str  # browser, render, zygote, gpu, utility, other
    pss_kb: int
    rss_kb: int


@dataclass(frozen=True)
class TreeMemory:
    """One measurement of the display's process tree."""

    processes: tuple[ProcessMemory, ...]
    measured_at: datetime
    cost: float  # seconds the measurement took

    @property
    def pss_mb(self) -> float:
        return sum(p.pss_kb for p in self.processes) / 1024

    @property
    def rss_mb(self) -> float:
        return sum(p.rss_kb for p in self.processes) / 1024

    def by_role(self) -> dict[str, dict[str, Any]]:
        roles: dict[str, dict[str, Any]] = {}
        for process in self.processes:
            role = roles.setdefault(process.role, {"pss_mb": 0.0, "rss_mb": 0.0, "count": 0})
            role["pss_mb"] += process.pss_kb / 1024
            role["rss_mb"] += process.rss_kb / 1024
            role["count"] += 1
        for role in roles.values():
            role["pss_mb"] = round(role["pss_mb"], 1)
            role["rss_mb"] = round(role["rss_mb"], 1)
        return roles

    def summary(self) -> str:
        parts = ", ".join(
            f"{name} {figures['pss_mb']:.0f}" for name, figures in sorted(self.by_role().items())
        )
        return f"{self.pss_mb:.0f} MiB PSS ({parts}), {self.rss_mb:.0f} MiB RSS"


def _children(pid: int, proc: Path) -> list[int]:
    """Direct children, from the kernel's per-thread ``children`` lists."""
    found: list[int] = []
    try:
        tasks = os.listdir(proc / str(pid) / "task")
    except OSError:
        return found
    for task in tasks:
        try:
            text = (proc / str(pid) / "task" / task / "children").read_text()
        except OSError:
            continue
        found.extend(int(child) for child in text.split())
    return found


def _chromium_type(pid: int, proc: Path) -> str:
    try:
        arguments = (proc / str(pid) / "cmdline").read_bytes().split(b"\0")
    except OSError:
        return ""
    for argument in arguments:
        if argument.startswith(b"--type="):
            return argument[len(b"--type=") :].decode(errors="replace")
    return ""


_ROLES = {"renderer": "render", "gpu-process": "gpu", "zygote": "zygote", "utility": "utility"}


def _smaps_rollup(pid: int, proc: Path) -> tuple[int, int] | None:
    """(PSS, RSS) in kB, or None when the process has gone."""
    pss = rss = 0
    try:
        with (proc / str(pid) / "smaps_rollup").open() as stream:
            for line in stream:
                if line.startswith("Pss:"):
                    pss = int(line.split()[1])
                elif line.startswith("Rss:"):
                    rss = int(line.split()[1])
    except (OSError, ValueError):
        return None
    return pss, rss


def measure_tree(root: int | None = None, *, proc: Path = Path("/proc")) -> TreeMemory:
    """PSS and RSS of ``root`` (default: this process) and every descendant, with roles."""
    started = time.monotonic()
    root = os.getpid() if root is None else root
    processes: list[ProcessMemory] = []
    todo: list[tuple[int, str]] = [(root, "")]
    while todo:
        pid, parent_type = todo.pop()
        kind = _chromium_type(pid, proc) if pid != root else ""
        if pid == root:
            role = "browser"
        elif kind == "zygote" and parent_type == "zygote":
            role = "render"  # forked by a zygote, with its command line
        else:
            role = _ROLES.get(kind, "other")
        figures = _smaps_rollup(pid, proc)
        if figures is None:
            continue  # it ended meanwhile: its children are re-parented, not ours
        processes.append(ProcessMemory(pid, role, figures[0], figures[1]))
        todo.extend((child, kind) for child in _children(pid, proc))
    return TreeMemory(tuple(processes), datetime.now(UTC), time.monotonic() - started)


# -- watching it -------------------------------------------------------------------------------


@dataclass
class _State:
    latest: TreeMemory | None = None
    recycles: int = 0
    samples: int = 0  # measurements taken
    # The measurement count at the last recycle: a count, not a time, so a clock set by NTP
    # after boot cannot make a measurement look older than a recycle.
    recycled_at_sample: int | None = None
    recycles_while_over: int = 0  # since the tree was last measured under budget
    stuck_samples: int = 0  # samples in a row far over budget with memory given back
    logged_stuck: bool = False
    restart_asked: bool = False


class MemoryWatch:
    """Measures the tree every ``interval`` seconds on its own thread, and keeps the policy:
    when to give memory back at an item boundary (:meth:`recycle_due`), whether the tree stays
    over budget after that (:meth:`problem`), and the last resort (``on_restart``).

    Thread-safe: the sampler thread writes, the GUI thread asks and notes recycles, the API
    thread reads :meth:`status`."""

    def __init__(
        self,
        plan: MemoryPlan,
        *,
        root: int | None = None,
        interval: float | None = None,
        measure: Callable[[int], TreeMemory] = measure_tree,
        on_restart: Callable[[str], None] | None = None,
        uptime: Callable[[], float] | None = None,
    ) -> None:
        self.plan = plan
        self._root = os.getpid() if root is None else root
        if interval is None:
            interval = SAMPLE_EVERY_LOW_MEMORY if plan.low_memory else SAMPLE_EVERY
        self.interval = interval
        self._measure = measure
        self._on_restart = on_restart
        started = time.monotonic()
        self._uptime = uptime or (lambda: time.monotonic() - started)
        self._lock = threading.Lock()
        self._state = _State()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    # -- the sampler ----------------------------------------------------------------------

    def start(self) -> None:
        log.info("%s", self.plan.describe())
        self._thread = threading.Thread(target=self._run, name="pdn-memory", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def _run(self) -> None:
        while True:
            try:
                self.sample()
            except Exception:  # a measurement must never take the display down
                log.exception("measuring the process tree failed")
            if self._stop.wait(self.interval):
                return

    def sample(self) -> TreeMemory:
        """Give glibc's free heap back, measure, and apply the policy to the figures."""
        if self._root == os.getpid():
            release_free_heap()
        tree = self._measure(self._root)
        restart: str | None = None
        with self._lock:
            state = self._state
            state.latest = tree
            state.samples += 1
            budget = self.plan.budget_mb
            if tree.pss_mb <= budget:
                if state.recycles_while_over:
                    log.info("memory back under budget: %s", tree.summary())
                state.recycles_while_over = 0
                state.stuck_samples = 0
                state.logged_stuck = False
            elif self._stuck(state):
                if not state.logged_stuck:
                    state.logged_stuck = True
                    log.warning(
                        "memory stays over budget (%d MiB) after giving memory back: %s",
                        budget,
                        tree.summary(),
                    )
                if tree.pss_mb > budget * RESTART_FACTOR:
                    state.stuck_samples += 1
                else:
                    state.stuck_samples = 0
                if (
                    state.stuck_samples >= RESTART_AFTER_SAMPLES
                    and self._uptime() >= RESTART_NOT_BEFORE
                    and not state.restart_asked
                    and self._on_restart is not None
                ):
                    state.restart_asked = True
                    restart = (
                        f"the display's memory ({tree.pss_mb:.0f} MiB PSS) stayed over "
                        f"{RESTART_FACTOR:g}x its budget ({budget} MiB) after giving memory "
                        f"back, {state.stuck_samples} measurements in a row"
                    )
        if restart is not None and self._on_restart is not None:
            log.error("planned restart: %s", restart)
            self._on_restart(restart)
        return tree

    @staticmethod
    def _measured_since_recycle(state: _State) -> bool:
        return state.recycled_at_sample is None or state.samples > state.recycled_at_sample

    @classmethod
    def _stuck(cls, state: _State) -> bool:
        """Memory given back twice since the tree was under budget, and measured since."""
        return (
            state.recycles_while_over >= RECYCLES_TO_GIVE_UP
            and state.recycled_at_sample is not None
            and cls._measured_since_recycle(state)
        )

    # -- the renderer's side --------------------------------------------------------------

    def recycle_due(self) -> bool:
        """The last measurement, taken after the last recycle, is over budget."""
        with self._lock:
            latest = self._state.latest
            return (
                latest is not None
                and latest.pss_mb > self.plan.budget_mb
                and self._measured_since_recycle(self._state)
            )

    def note_recycle(self, what: str) -> None:
        """Memory was given back at a boundary: logged once, with the figures that asked for it."""
        with self._lock:
            state = self._state
            state.recycles += 1
            state.recycles_while_over += 1
            state.recycled_at_sample = state.samples
            latest = state.latest
        log.info(
            "memory over budget (%d MiB): heap given back before %s loads; measured %s",
            self.plan.budget_mb,
            what,
            latest.summary() if latest is not None else "nothing yet",
        )

    # -- health ---------------------------------------------------------------------------

    def problem(self) -> str | None:
        """Why health is degraded by memory, or None."""
        with self._lock:
            state = self._state
            latest = state.latest
            if latest is None or latest.pss_mb <= self.plan.budget_mb:
                return None
            if not self._stuck(state):
                return None
            return (
                f"memory {latest.pss_mb:.0f} MiB PSS stays over its budget "
                f"({self.plan.budget_mb} MiB) after giving memory back"
            )

    def status(self) -> dict[str, Any]:
        """The ``memory`` object of ``/x/health``."""
        with self._lock:
            latest = self._state.latest
            recycles = self._state.recycles
        body: dict[str, Any] = {
            "pss_mb": round(latest.pss_mb, 1) if latest is not None else None,
            "rss_mb": round(latest.rss_mb, 1) if latest is not None else None,
            "budget_mb": self.plan.budget_mb,
            "profile": self.plan.profile,
            "over_budget": latest is not None and latest.pss_mb > self.plan.budget_mb,
            "recycles": recycles,
            "by_role": latest.by_role() if latest is not None else {},
            "measured_at": latest.measured_at.isoformat() if latest is not None else None,
            "board_mb": self.plan.board_mb,
        }
        problem = self.problem()
        if problem is not None:
            body["problem"] = problem
        return body

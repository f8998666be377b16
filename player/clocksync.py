"""How well this display's clock is kept, for ``/x/health`` and the fleet view.

Screens that change together (``sync="wall-clock"``) agree only as well as their clocks do:
each switches on its own clock's instant. This reads what the time daemon says, and nothing
else (no clock protocol of our own: NTP and PTP exist):

- chrony, when ``chronyd`` answers: ``chronyc tracking`` ("System time : X seconds fast/slow
  of NTP time", the leap status, the reference and stratum);
- else systemd-timesyncd: ``timedatectl show`` (``NTPSynchronized``) and ``timedatectl
  timesync-status`` (the last exchange's offset, server and stratum).

``offset-ms`` is how far this clock is *ahead* of its time source (negative: behind), so the
fleet's spread is the largest minus the smallest. A tool that is missing or does not answer is
reported as such (``source: unknown``, ``synchronised: null``), never guessed.

The commands run on the object's own thread every :data:`INTERVAL` seconds, never on a request.
"""

from __future__ import annotations

import logging
import re
import shutil
import threading
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from player.commands import CommandRunner, run_command

log = logging.getLogger("pdn.clock")

INTERVAL = 60.0  # seconds between readings
TIMEOUT = 3.0
_ENV = {"LC_ALL": "C", "PATH": "/usr/sbin:/usr/bin:/sbin:/bin"}
_UNITS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "min": 60.0, "h": 3600.0}
_SPAN = re.compile(r"(\d+(?:\.\d+)?)\s*(ns|us|µs|ms|min|s|h)\b")


@dataclass(frozen=True)
class ClockState:
    """One reading of the time daemon."""

    source: str  # "chrony", "timesyncd" or "unknown"
    synchronised: bool | None  # None: nobody says
    offset: float | None = None  # seconds this clock is ahead of its source
    server: str | None = None
    stratum: int | None = None
    note: str = ""
    checked: datetime | None = None

    def fields(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "synchronised": self.synchronised,
            "offset-ms": None if self.offset is None else round(self.offset * 1000, 3),
            "server": self.server,
            "stratum": self.stratum,
            "note": self.note,
            "checked": self.checked.isoformat() if self.checked else None,
        }


def parse_span(text: str) -> float | None:
    """systemd's time span ("-1.234ms", "+275us", "1min 2.5s") in seconds."""
    text = text.strip()
    sign = -1.0 if text.startswith("-") else 1.0
    parts = _SPAN.findall(text)
    if not parts:
        return None
    return sign * sum(float(number) * _UNITS[unit] for number, unit in parts)


def parse_chrony(text: str) -> ClockState | None:
    """``chronyc tracking`` as chrony prints it (C locale)."""
    lines = {}
    for line in text.splitlines():
        key, _, value = line.partition(":")
        lines[key.strip()] = value.strip()
    system = re.match(r"([\d.]+) seconds (fast|slow) of NTP time", lines.get("System time", ""))
    if system is None:
        return None
    offset = float(system.group(1)) * (1 if system.group(2) == "fast" else -1)
    leap = lines.get("Leap status", "")
    stratum = lines.get("Stratum", "")
    reference = lines.get("Reference ID", "")
    name = re.search(r"\((.*)\)", reference)
    return ClockState(
        source="chrony",
        synchronised=leap not in {"", "Not synchronised"},
        offset=offset,
        server=(name.group(1) if name else reference) or None,
        stratum=int(stratum) if stratum.isdigit() else None,
        note=f"leap status {leap}" if leap else "",
    )


def parse_timesync_status(text: str) -> tuple[float | None, str | None, int | None]:
    """``timedatectl timesync-status``: (offset ahead, server, stratum). Its "Offset" is the
    NTP offset, the server's time minus ours: ours is ahead by its negative."""
    found: dict[str, str] = {}
    for line in text.splitlines():
        key, _, value = line.partition(":")
        found[key.strip()] = value.strip()
    span = parse_span(found.get("Offset", ""))
    stratum = found.get("Stratum", "")
    return (
        None if span is None else -span,
        found.get("Server") or None,
        int(stratum) if stratum.isdigit() else None,
    )


def read_clock(
    runner: CommandRunner = run_command,
    which: Callable[[str], Any] = shutil.which,
    chronyc: tuple[str, ...] = ("chronyc",),
) -> ClockState:
    """What the time daemon says now (see the module's docstring). ``chronyc``: the command
    that asks chronyd (another socket: ``("chronyc", "-h", "/run/x.sock")``)."""
    if which(chronyc[0]):
        result = runner([*chronyc, "tracking"], timeout=TIMEOUT, env=_ENV)
        if result.ok:
            state = parse_chrony(result.stdout)
            if state is not None:
                return state
        chrony = f"chronyc: {result.describe()}"
    else:
        chrony = "chronyc is not installed"
    if not which("timedatectl"):
        return ClockState("unknown", None, note=f"{chrony}; timedatectl is not installed")
    shown = runner(
        ["timedatectl", "show", "-p", "NTPSynchronized", "--value"], timeout=TIMEOUT, env=_ENV
    )
    if not shown.ok:
        return ClockState("unknown", None, note=f"{chrony}; timedatectl: {shown.describe()}")
    synchronised = shown.stdout.strip() == "yes"
    status = runner(["timedatectl", "timesync-status"], timeout=TIMEOUT, env=_ENV)
    if not status.ok:
        return ClockState(
            "timesyncd",
            synchronised,
            note=f"{chrony}; no offset: timedatectl timesync-status: {status.describe()}",
        )
    offset, server, stratum = parse_timesync_status(status.stdout)
    return ClockState("timesyncd", synchronised, offset, server, stratum)


class ClockSync:
    """Reads the time daemon on its own thread; :meth:`status` answers from the last reading."""

    def __init__(
        self,
        read: Callable[[], ClockState] = read_clock,
        interval: float = INTERVAL,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        self._read = read
        self._interval = interval
        self._clock = clock
        self._lock = threading.Lock()
        self._state = ClockState("unknown", None, note="not read yet")
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def refresh(self) -> ClockState:
        try:
            state = self._read()
        except Exception as error:  # a reading must never take the display down
            log.exception("cannot read the clock's synchronisation")
            state = ClockState("unknown", None, note=f"reading failed: {error}")
        state = ClockState(
            state.source,
            state.synchronised,
            state.offset,
            state.server,
            state.stratum,
            state.note,
            self._clock(),
        )
        with self._lock:
            before, self._state = self._state, state
        if (before.source, before.synchronised) != (state.source, state.synchronised):
            log.info(
                "clock: %s, %s%s",
                state.source,
                {True: "synchronised", False: "not synchronised", None: "synchronisation unknown"}[
                    state.synchronised
                ],
                f", {state.offset * 1000:+.3f} ms" if state.offset is not None else "",
            )
        return state

    def status(self) -> dict[str, Any]:
        with self._lock:
            return self._state.fields()

    def start(self) -> None:
        def run() -> None:
            while not self._stop.is_set():
                self.refresh()
                self._stop.wait(self._interval)

        self._thread = threading.Thread(target=run, name="pdn-clocksync", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(TIMEOUT * 3)

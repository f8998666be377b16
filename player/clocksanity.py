"""Is the clock set? Nothing time-windowed plays before it is.

A Raspberry Pi has no real-time clock: it boots at the epoch, or at the time ``fake-hwclock`` saved
at the last shutdown, until NTP answers. Evaluating ``time between 09:00 and 17:00`` on that clock
would show the wrong things. The clock counts as set when

1. NTP says so: ``/run/systemd/timesync/synchronized`` exists (systemd-timesyncd), or
   ``timedatectl show -p NTPSynchronized --value`` answers ``yes`` (any NTP daemon); or
2. the date is plausible: not earlier than this software's build date (nor than a later time the
   caller has seen, such as the last stored playback) - unless the config requires NTP.

Once set, the verdict latches: a clock that was right does not become wrong by itself.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from player.commands import CommandRunner, run_command

logger = logging.getLogger("pdn.clock")

TIMESYNC_FLAG = Path("/run/systemd/timesync/synchronized")
# Never trust a date before this, whatever the files say (the first release of pdn-display).
RELEASE_FLOOR = datetime(2026, 11, 1, tzinfo=UTC)


def build_date(
    package_dir: Path = Path(__file__).parent, floor: datetime = RELEASE_FLOOR
) -> datetime:
    """When this copy was built: the newest module's modification time (a wheel keeps the build
    time; a checkout the last edit), and never before :data:`RELEASE_FLOOR`."""
    newest = floor
    for module in package_dir.glob("*.py"):
        try:
            stamp = datetime.fromtimestamp(module.stat().st_mtime, UTC)
        except OSError:
            continue
        newest = max(newest, stamp)
    return newest


@dataclass(frozen=True)
class ClockVerdict:
    is_set: bool
    reason: str


class ClockSanity:
    """Decides whether the wall clock can be trusted, cheaply enough to ask at every tick."""

    def __init__(
        self,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
        *,
        runner: CommandRunner = run_command,
        sync_flags: Iterable[Path] = (TIMESYNC_FLAG,),
        not_before: datetime | None = None,
        require_ntp: bool = False,
        recheck_seconds: float = 5.0,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.clock = clock
        self.runner = runner
        self.sync_flags = tuple(sync_flags)
        self.not_before = not_before if not_before is not None else build_date()
        self.require_ntp = require_ntp
        self.recheck_seconds = recheck_seconds
        self.monotonic = monotonic
        self._latched: ClockVerdict | None = None
        self._last: tuple[float, ClockVerdict] | None = None

    def saw_time(self, moment: datetime) -> None:
        """A time known to have passed (e.g. the last stored playback): the clock must be later."""
        self.not_before = max(self.not_before, moment)

    def ntp_synchronized(self) -> str | None:
        """Why NTP counts as synchronised, or None."""
        for flag in self.sync_flags:
            if flag.exists():
                return f"NTP synchronised ({flag} exists)"
        result = self.runner(
            ["timedatectl", "show", "-p", "NTPSynchronized", "--value"], timeout=3.0
        )
        if result.ok and result.stdout.strip() == "yes":
            return "NTP synchronised (timedatectl)"
        return None

    def check(self) -> ClockVerdict:
        """A fresh verdict (runs timedatectl; prefer :meth:`is_set` in loops)."""
        if self._latched is not None:
            return self._latched
        synced = self.ntp_synchronized()
        now = self.clock()
        if synced is not None:
            verdict = ClockVerdict(True, synced)
        elif self.require_ntp:
            verdict = ClockVerdict(False, "waiting for NTP (clock.require-ntp is on)")
        elif now >= self.not_before:
            verdict = ClockVerdict(
                True,
                f"date {now:%Y-%m-%d %H:%M} is plausible (not before {self.not_before:%Y-%m-%d})",
            )
        else:
            verdict = ClockVerdict(
                False,
                f"clock not set: {now:%Y-%m-%d %H:%M} is before {self.not_before:%Y-%m-%d} "
                "and NTP has not synchronised",
            )
        if verdict.is_set:
            self._latched = verdict
            logger.info("clock is set: %s", verdict.reason)
        elif self._last is None or self._last[1] != verdict:
            logger.warning("%s; time-windowed items wait", verdict.reason)
        return verdict

    def is_set(self) -> bool:
        """The latest verdict, re-checked at most every ``recheck_seconds``."""
        if self._latched is not None:
            return True
        now = self.monotonic()
        if self._last is None or now - self._last[0] >= self.recheck_seconds:
            self._last = (now, self.check())
        return self._last[1].is_set

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
import threading
import time
from collections.abc import Callable, Iterable, Mapping
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
        self._ntp_synced = False

    def saw_time(self, moment: datetime) -> None:
        """A time known to have passed (e.g. the last stored playback): the clock must be later."""
        self.not_before = max(self.not_before, moment)

    def _flag_present(self) -> str | None:
        for flag in self.sync_flags:
            if flag.exists():
                return f"NTP synchronised ({flag} exists)"
        return None

    def _timedatectl_says_synced(self) -> bool:
        args = ["timedatectl", "show", "-p", "NTPSynchronized", "--value"]
        result = self.runner(args, timeout=3.0)
        return result.ok and result.stdout.strip() == "yes"

    def refresh_ntp(self) -> None:
        """Ask timedatectl (may take up to 3 s: call it off the GUI thread, see :meth:`start`)."""
        self._ntp_synced = self._timedatectl_says_synced()

    def check(self, *, ask_timedatectl: bool = True) -> ClockVerdict:
        """A fresh verdict. With ``ask_timedatectl=False`` it runs no command (fast)."""
        if self._latched is not None:
            return self._latched
        if ask_timedatectl:
            self.refresh_ntp()
        now = self.clock()
        synced = self._flag_present() or (
            "NTP synchronised (timedatectl)" if self._ntp_synced else None
        )
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
        """The latest verdict, cheap enough for every engine tick: it runs no command (the
        timedatectl answer comes from :meth:`start`'s thread) and re-checks the sync flag and
        the date at most every ``recheck_seconds``."""
        if self._latched is not None:
            return True
        now = self.monotonic()
        if self._last is None or now - self._last[0] >= self.recheck_seconds:
            self._last = (now, self.check(ask_timedatectl=False))
        return self._last[1].is_set

    def start(
        self, interval: float = 5.0, on_set: Callable[[], None] | None = None
    ) -> threading.Thread:
        """Ask timedatectl every ``interval`` seconds on a daemon thread until the clock is set,
        then call ``on_set`` (the display re-plans: time windows may open now)."""

        def watch() -> None:
            while self._latched is None:
                self.refresh_ntp()
                if self.check(ask_timedatectl=False).is_set:
                    break
                time.sleep(interval)
            if on_set is not None:
                on_set()

        thread = threading.Thread(target=watch, name="pdn-clock", daemon=True)
        thread.start()
        return thread


@dataclass(frozen=True)
class ClockConfig:
    """``[clock]`` in the display's config."""

    require_ntp: bool = False  # only NTP's word counts as a set clock, not a plausible date


def parse_clock_config(table: Mapping[str, object]) -> ClockConfig:
    """Validate a ``[clock]`` table; raises ValueError naming the bad key."""
    for key in table:
        if key.replace("-", "_") != "require_ntp":
            raise ValueError(f"clock.{key}: unknown setting (known: require-ntp)")
    require_ntp = table.get("require_ntp", table.get("require-ntp", False))
    if not isinstance(require_ntp, bool):
        raise ValueError("clock.require-ntp: must be true or false")
    return ClockConfig(require_ntp=require_ntp)

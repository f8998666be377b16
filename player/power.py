"""The daily screen on/off schedule: blank the screen at night, wake it in the morning.

Qt-free. :class:`PowerSchedule` says when the screen should be on (with an injected clock, so tests
cover midnight and DST); :class:`ScreenPower` switches it through every method the machine offers,
best effort and with timeouts: HDMI-CEC (``cec-ctl`` or ``cec-client``, so a TV goes to standby),
DPMS on X (``xset``), Wayland output power (``wlopm``, else ``wlr-randr``), the Raspberry Pi
firmware (``vcgencmd display_power``) and a panel's backlight (``/sys/class/backlight``).
:class:`PowerScheduler` applies the schedule at each change, on a background thread.

Config (``[power]`` in the display's TOML file)::

    [power]
    on = "07:00"                 # local time, the display's time zone
    off = "22:00"                # earlier than "on" means overnight (on 18:00, off 02:00)
    days = ["mon", "tue", "wed", "thu", "fri"]   # days the screen comes on (default: every day)
    methods = ["auto"]           # or any of: cec, dpms, wayland, vcgencmd, backlight

No ``[power]`` table, or neither ``on`` nor ``off``, means the screen stays on.
"""

from __future__ import annotations

import logging
import os
import re
import shutil
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, time, timedelta, tzinfo
from pathlib import Path
from typing import Protocol

from player.commands import CommandResult, CommandRunner, run_command

logger = logging.getLogger("pdn.power")

WEEKDAYS = ("mon", "tue", "wed", "thu", "fri", "sat", "sun")
METHOD_NAMES = ("cec", "dpms", "wayland", "vcgencmd", "backlight")
_TIME = re.compile(r"^(\d{1,2}):(\d{2})(?::(\d{2}))?$")
# Re-check at least this often, so a clock that is stepped (NTP) is noticed soon.
MAX_SLEEP_SECONDS = 60.0


class PowerConfigError(ValueError):
    """A bad ``[power]`` setting; ``key`` names it (``power.on``)."""

    def __init__(self, key: str, message: str) -> None:
        super().__init__(f"{key}: {message}")
        self.key = key


@dataclass(frozen=True)
class PowerSchedule:
    """On from ``on`` to ``off`` each day in ``days`` (0 = Monday); ``off`` <= ``on`` wraps
    past midnight, and ``on == off`` means on for the whole day."""

    on: time
    off: time
    days: frozenset[int] = frozenset(range(7))

    def wanted_on(self, now: datetime) -> bool:
        """Should the screen be on at ``now`` (an aware datetime in the display's zone)?"""
        instant = now.timestamp()
        today = now.date()
        for start_day in (today - timedelta(days=1), today):
            period = self._period(start_day, now.tzinfo)
            if period is not None and period[0] <= instant < period[1]:
                return True
        return False

    def next_change(self, now: datetime) -> datetime | None:
        """The first instant after ``now`` at which :meth:`wanted_on` changes, or None."""
        current = self.wanted_on(now)
        zone = now.tzinfo
        boundaries: list[float] = []
        for offset in range(-1, 9):
            period = self._period(now.date() + timedelta(days=offset), zone)
            if period is not None:
                boundaries.extend(period)
        for boundary in sorted(b for b in boundaries if b > now.timestamp()):
            moment = datetime.fromtimestamp(boundary, UTC).astimezone(zone)
            if self.wanted_on(moment) != current:
                return moment
        return None

    def _period(self, start_day: date, zone: tzinfo | None) -> tuple[float, float] | None:
        """The on period that starts on ``start_day``, as POSIX timestamps."""
        if start_day.weekday() not in self.days:
            return None
        start = datetime.combine(start_day, self.on, tzinfo=zone)
        end_day = start_day + timedelta(days=1) if self.off <= self.on else start_day
        end = datetime.combine(end_day, self.off, tzinfo=zone)
        return start.timestamp(), end.timestamp()


def parse_time(value: object, key: str) -> time:
    """``"07:00"``, ``"7:00:30"`` or a TOML local time."""
    if isinstance(value, time):
        return value.replace(tzinfo=None)
    if isinstance(value, str) and (match := _TIME.match(value.strip())):
        hour, minute, second = int(match[1]), int(match[2]), int(match[3] or 0)
        if hour < 24 and minute < 60 and second < 60:
            return time(hour, minute, second)
    raise PowerConfigError(key, f'expected a time of day like "07:30", got {value!r}')


def parse_days(value: object, key: str) -> frozenset[int]:
    if not isinstance(value, list) or not value:
        raise PowerConfigError(key, f'expected a list of days like ["mon", "tue"], got {value!r}')
    days: set[int] = set()
    for item in value:
        name = item.strip().lower()[:3] if isinstance(item, str) else ""
        if name not in WEEKDAYS:
            raise PowerConfigError(key, f"unknown day {item!r} (use {', '.join(WEEKDAYS)})")
        days.add(WEEKDAYS.index(name))
    return frozenset(days)


@dataclass(frozen=True)
class PowerConfig:
    schedule: PowerSchedule | None
    methods: tuple[str, ...] = ("auto",)
    cec_device: str = "/dev/cec0"


def parse_power_config(table: Mapping[str, object] | None) -> PowerConfig:
    """Validate a ``[power]`` table; raises :class:`PowerConfigError` naming the bad key."""
    # Key names may use - or _ (the display's config loader turns - into _).
    table = {str(key).replace("_", "-"): value for key, value in (table or {}).items()}
    known = {"on", "off", "days", "methods", "cec-device"}
    for key in table:
        if key not in known:
            raise PowerConfigError(f"power.{key}", f"unknown setting (known: {sorted(known)})")
    methods: tuple[str, ...] = ("auto",)
    if "methods" in table:
        raw = table["methods"]
        if not isinstance(raw, list) or not raw or not all(isinstance(m, str) for m in raw):
            raise PowerConfigError("power.methods", f"expected a list of names, got {raw!r}")
        for name in raw:
            if name not in (*METHOD_NAMES, "auto", "none"):
                raise PowerConfigError(
                    "power.methods",
                    f"unknown method {name!r} (auto, none, {', '.join(METHOD_NAMES)})",
                )
        methods = tuple(raw)
    cec_device = table.get("cec-device", "/dev/cec0")
    if not isinstance(cec_device, str) or not cec_device.startswith("/dev/"):
        raise PowerConfigError("power.cec-device", f"expected a /dev path, got {cec_device!r}")
    if "on" not in table and "off" not in table:
        return PowerConfig(None, methods, cec_device)
    if "on" not in table or "off" not in table:
        missing = "power.on" if "on" not in table else "power.off"
        raise PowerConfigError(missing, "set both power.on and power.off, or neither")
    on = parse_time(table["on"], "power.on")
    off = parse_time(table["off"], "power.off")
    days = parse_days(table["days"], "power.days") if "days" in table else frozenset(range(7))
    return PowerConfig(PowerSchedule(on, off, days), methods, cec_device)


class PowerMethod(Protocol):
    """One way of switching the screen."""

    name: str

    def available(self) -> bool: ...

    def set_power(self, on: bool) -> CommandResult: ...


Which = Callable[[str], str | None]


@dataclass
class CecCtl:
    """HDMI-CEC through the kernel's CEC framework (``cec-ctl`` from v4l-utils)."""

    runner: CommandRunner
    which: Which
    device: str = "/dev/cec0"
    exists: Callable[[str], bool] = os.path.exists
    name: str = "cec-ctl"

    def available(self) -> bool:
        return self.which("cec-ctl") is not None and self.exists(self.device)

    def set_power(self, on: bool) -> CommandResult:
        # --playback claims a logical address first; a TV ignores messages from address 15.
        message = "--image-view-on" if on else "--standby"
        args = ["cec-ctl", "-d", self.device, "--playback", "--to", "0", message]
        return self.runner(args, timeout=10.0)


@dataclass
class CecClient:
    """HDMI-CEC through libcec's ``cec-client`` (cec-utils), e.g. a Pulse-Eight USB adapter."""

    runner: CommandRunner
    which: Which
    name: str = "cec-client"

    def available(self) -> bool:
        return self.which("cec-client") is not None

    def set_power(self, on: bool) -> CommandResult:
        command = "on 0\n" if on else "standby 0\n"
        return self.runner(["cec-client", "-s", "-d", "1"], timeout=15.0, input=command)


@dataclass
class XsetDpms:
    """DPMS on an X server (``xset``), the one place the display calls it. Waking also turns
    DPMS and the screen saver off again, so the X server does not blank the screen by itself
    while content plays. An X server without the DPMS extension (a VM, Xvfb) gets the screen
    saver's black blanking instead. ``xset`` exits 0 even when it fails, so the outcome is read
    back with ``xset q``."""

    runner: CommandRunner
    which: Which
    display: str | None
    name: str = "xset"

    def available(self) -> bool:
        return bool(self.display) and self.which("xset") is not None

    def _xset(self, *args: str) -> CommandResult:
        env = {**os.environ, "DISPLAY": self.display or ""}
        return self.runner(["xset", *args], timeout=5.0, env=env)

    def query(self) -> CommandResult:
        return self._xset("q")

    def has_dpms(self) -> bool | None:
        status = self.query()
        if not status.ok:
            return None
        return "does not have the DPMS Extension" not in status.stdout

    def monitor_is_on(self) -> bool | None:
        """What the X server reports, or None if it cannot tell (no DPMS, no server)."""
        status = self.query()
        match = re.search(r"Monitor is (On|Off|in Standby|in Suspend)", status.stdout)
        if not status.ok or match is None:
            return None
        return match[1] == "On"

    def keep_awake(self) -> bool:
        """Screen saver and DPMS off, so X never blanks the screen by itself while content
        plays (the renderer asks for this at start). Best effort: False, logged, on failure."""
        if not self.available():
            logger.warning("xset is not installed: cannot turn the X screen saver and DPMS off")
            return False
        for step in (("s", "off"), ("s", "noblank"), ("-dpms",)):
            result = self._xset(*step)
            if not result.ok:
                logger.warning("xset %s: %s", " ".join(step), result.describe()[:200])
                return False
        logger.info("X screen saver and DPMS turned off")
        return True

    def set_power(self, on: bool) -> CommandResult:
        dpms = self.has_dpms()
        if dpms is None:
            return CommandResult(None, stderr=f"cannot reach the X server {self.display}")
        steps: list[tuple[str, ...]]
        if not dpms:
            steps = [("s", "reset"), ("s", "off")] if on else [("s", "blank"), ("s", "activate")]
            for step in steps:
                result = self._xset(*step)
                if not result.ok:
                    return result
            return CommandResult(0, stdout="screen saver blanking (this X server has no DPMS)")
        steps = (
            [("dpms", "force", "on"), ("s", "off"), ("-dpms",)]
            if on
            else [("dpms", "force", "off")]
        )
        for step in steps:
            result = self._xset(*step)
            if not result.ok:
                return result
        if not on and self.monitor_is_on():
            return CommandResult(1, stderr="the X server still reports the monitor on")
        return CommandResult(0)


@dataclass
class WaylandOutputPower:
    """Output power on a wlroots compositor (cage): ``wlopm``, else ``wlr-randr``."""

    runner: CommandRunner
    which: Which
    wayland_display: str | None
    name: str = "wayland"

    def available(self) -> bool:
        tools = ("wlopm", "wlr-randr")
        return bool(self.wayland_display) and any(self.which(t) for t in tools)

    def set_power(self, on: bool) -> CommandResult:
        env = {**os.environ, "WAYLAND_DISPLAY": self.wayland_display or ""}
        if self.which("wlopm"):
            return self.runner(["wlopm", "--on" if on else "--off", "*"], timeout=5.0, env=env)
        listing = self.runner(["wlr-randr"], timeout=5.0, env=env)
        if not listing.ok:
            return listing
        outputs = [line.split()[0] for line in listing.stdout.splitlines() if line[:1].strip()]
        result = CommandResult(None, stderr="wlr-randr lists no outputs")
        for output in outputs:
            flag = "--on" if on else "--off"
            result = self.runner(["wlr-randr", "--output", output, flag], timeout=5.0, env=env)
        return result


@dataclass
class Vcgencmd:
    """The Raspberry Pi firmware's display power (works with the firmware/fkms HDMI driver)."""

    runner: CommandRunner
    which: Which
    name: str = "vcgencmd"

    def available(self) -> bool:
        return self.which("vcgencmd") is not None

    def set_power(self, on: bool) -> CommandResult:
        wanted = "1" if on else "0"
        result = self.runner(["vcgencmd", "display_power", wanted], timeout=5.0)
        # Under full KMS the firmware answers display_power=-1: it no longer owns the HDMI port.
        if result.ok and f"display_power={wanted}" not in result.stdout:
            return CommandResult(1, result.stdout, "firmware does not control this display")
        return result


@dataclass
class Backlight:
    """A panel's backlight (the Pi touch display, laptops): ``bl_power`` 0 = on, 4 = off."""

    root: Path = Path("/sys/class/backlight")
    name: str = "backlight"

    def _controls(self) -> list[Path]:
        try:
            return sorted(p / "bl_power" for p in self.root.iterdir() if (p / "bl_power").exists())
        except OSError:
            return []

    def available(self) -> bool:
        return any(os.access(p, os.W_OK) for p in self._controls())

    def set_power(self, on: bool) -> CommandResult:
        errors = []
        for control in self._controls():
            try:
                control.write_text("0\n" if on else "4\n")
            except OSError as error:
                errors.append(f"{control}: {error}")
        return CommandResult(1 if errors else 0, stderr="; ".join(errors))


def x_screen_power(environ: Mapping[str, str] = os.environ) -> XsetDpms:
    """The X server of this process's ``DISPLAY``, switched with ``xset``."""
    return XsetDpms(run_command, shutil.which, environ.get("DISPLAY"))


def default_methods(
    names: Sequence[str],
    *,
    runner: CommandRunner = run_command,
    which: Which = shutil.which,
    environ: Mapping[str, str] = os.environ,
    cec_device: str = "/dev/cec0",
    backlight_root: Path = Path("/sys/class/backlight"),
) -> list[PowerMethod]:
    """The methods named in the config (``auto`` = all of them, in a sensible order)."""
    if "none" in names:
        return []
    wanted = set(METHOD_NAMES) if "auto" in names else set(names)
    methods: list[PowerMethod] = []
    if "cec" in wanted:
        # Prefer the kernel CEC device; cec-client only when there is none (USB adapters).
        kernel_cec = CecCtl(runner, which, cec_device)
        methods.append(kernel_cec if kernel_cec.available() else CecClient(runner, which))
    if "dpms" in wanted:
        methods.append(XsetDpms(runner, which, environ.get("DISPLAY")))
    if "wayland" in wanted:
        methods.append(WaylandOutputPower(runner, which, environ.get("WAYLAND_DISPLAY")))
    if "vcgencmd" in wanted:
        methods.append(Vcgencmd(runner, which))
    if "backlight" in wanted:
        methods.append(Backlight(backlight_root))
    return methods


@dataclass
class ScreenPower:
    """Switches the screen through every available method; succeeds if any one does."""

    methods: Sequence[PowerMethod]
    fallback: Callable[[bool], None] | None = None
    """Called with the new state after the methods, e.g. to show black when nothing else can."""
    _warned: bool = field(default=False, repr=False)

    def set_power(self, on: bool) -> bool:
        state = "on" if on else "off"
        usable = [m for m in self.methods if m.available()]
        outcomes: list[str] = []
        succeeded = False
        for method in usable:
            result = method.set_power(on)
            succeeded = succeeded or result.ok
            note = f" ({result.stdout.strip()})" if result.ok and result.stdout.strip() else ""
            outcomes.append(f"{method.name} {'ok' + note if result.ok else result.describe()}")
        if self.fallback is not None:
            self.fallback(on)
        if not usable:
            if not self._warned:
                logger.warning(
                    "cannot switch the screen %s: no CEC device, X or Wayland display, vcgencmd "
                    "or writable backlight (install v4l-utils or cec-utils for HDMI-CEC)",
                    state,
                )
                self._warned = True
            return False
        log = logger.info if succeeded else logger.warning
        log("screen %s: %s", state, "; ".join(outcomes))
        return succeeded


class PowerScheduler:
    """Applies a :class:`PowerSchedule` at every change. ``clock_ok`` guards against a clock
    that is not set yet: the screen is never blanked on a guessed time."""

    def __init__(
        self,
        schedule: PowerSchedule,
        power: ScreenPower,
        clock: Callable[[], datetime],
        clock_ok: Callable[[], bool] = lambda: True,
    ) -> None:
        self.schedule = schedule
        self.power = power
        self.clock = clock
        self.clock_ok = clock_ok
        self.applied: bool | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def wanted_on(self, now: datetime) -> bool:
        return True if not self.clock_ok() else self.schedule.wanted_on(now)

    def tick(self) -> float:
        """Apply the wanted state if it changed; return seconds to sleep before the next tick."""
        now = self.clock()
        wanted = self.wanted_on(now)
        if wanted != self.applied:
            self.power.set_power(wanted)
            self.applied = wanted
        change = self.schedule.next_change(now)
        if change is None:
            return MAX_SLEEP_SECONDS
        return max(0.05, min(MAX_SLEEP_SECONDS, change.timestamp() - now.timestamp()))

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="pdn-power", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=20)

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                delay = self.tick()
            except Exception:  # a broken tool must not end the schedule for good
                logger.exception("screen power schedule failed; retrying in a minute")
                delay = MAX_SLEEP_SECONDS
            self._stop.wait(delay)


def describe(schedule: PowerSchedule) -> str:
    days: Iterable[str] = (WEEKDAYS[d] for d in sorted(schedule.days))
    return f"on {schedule.on:%H:%M}, off {schedule.off:%H:%M}, days {','.join(days)}"


def start_power_schedule(
    config: PowerConfig, zone: tzinfo, clock_ok: Callable[[], bool]
) -> PowerScheduler | None:
    """Start the ``[power]`` schedule of a loaded display config, if it has one."""
    if config.schedule is None:
        return None
    methods = default_methods(config.methods, cec_device=config.cec_device)
    power = ScreenPower(methods)
    scheduler = PowerScheduler(config.schedule, power, lambda: datetime.now(zone), clock_ok)
    logger.info(
        "screen power schedule: %s; methods here: %s",
        describe(config.schedule),
        ", ".join(m.name for m in methods if m.available()) or "none",
    )
    scheduler.start()
    return scheduler

"""Screen power schedule: the schedule maths with an injected clock, the methods with CEC and
the Pi firmware faked (they cannot run here), and xset for real against an Xvfb."""

from __future__ import annotations

import shutil
import time as systime
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, time, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest

from player.commands import CommandResult, run_command
from player.power import (
    Backlight,
    CecClient,
    CecCtl,
    PowerConfigError,
    PowerSchedule,
    PowerScheduler,
    ScreenPower,
    Vcgencmd,
    WaylandOutputPower,
    XsetDpms,
    default_methods,
    parse_power_config,
)
from tests.support.tools import require_tools
from tests.support.waiting import wait_until
from tests.support.xvfb import xvfb

BERLIN = ZoneInfo("Europe/Berlin")


def at(text: str, zone: ZoneInfo = BERLIN) -> datetime:
    return datetime.fromisoformat(text).replace(tzinfo=zone)


@dataclass
class FakeRunner:
    """Stands in for tools that need hardware (cec-ctl, cec-client, vcgencmd, wlopm)."""

    answers: dict[str, CommandResult] = field(default_factory=dict)
    calls: list[tuple[list[str], str | None]] = field(default_factory=list)

    def __call__(
        self,
        args: Sequence[str],
        *,
        timeout: float,
        input: str | None = None,
        env: Mapping[str, str] | None = None,
    ) -> CommandResult:
        assert 0 < timeout <= 15
        self.calls.append((list(args), input))
        return self.answers.get(args[0], CommandResult(0))


def which_of(*present: str) -> Callable[[str], str | None]:
    return lambda name: f"/usr/bin/{name}" if name in present else None


# The schedule


def test_daytime_schedule() -> None:
    schedule = PowerSchedule(time(7), time(22))
    assert not schedule.wanted_on(at("2026-11-23T06:59:59"))
    assert schedule.wanted_on(at("2026-11-23T07:00:00"))
    assert schedule.wanted_on(at("2026-11-23T21:59:59"))
    assert not schedule.wanted_on(at("2026-11-23T22:00:00"))
    assert schedule.next_change(at("2026-11-23T12:00")) == at("2026-11-23T22:00")
    assert schedule.next_change(at("2026-11-23T23:00")) == at("2026-11-24T07:00")


def test_overnight_schedule_spans_midnight() -> None:
    schedule = PowerSchedule(time(18), time(2))
    assert schedule.wanted_on(at("2026-11-23T23:30"))
    assert schedule.wanted_on(at("2026-11-24T01:59"))
    assert not schedule.wanted_on(at("2026-11-24T02:00"))
    assert not schedule.wanted_on(at("2026-11-24T17:59"))
    assert schedule.next_change(at("2026-11-24T01:00")) == at("2026-11-24T02:00")


def test_weekdays_only() -> None:
    schedule = PowerSchedule(time(8), time(18), frozenset(range(5)))
    friday, saturday, monday = (
        at("2026-11-27T12:00"),
        at("2026-11-28T12:00"),
        at("2026-11-30T12:00"),
    )
    assert schedule.wanted_on(friday)
    assert not schedule.wanted_on(saturday)
    assert schedule.wanted_on(monday)
    assert schedule.next_change(at("2026-11-27T19:00")) == at("2026-11-30T08:00")
    # An overnight period that starts on Friday still ends on Saturday morning.
    overnight = PowerSchedule(time(20), time(2), frozenset({4}))
    assert overnight.wanted_on(at("2026-11-28T01:00"))
    assert not overnight.wanted_on(at("2026-11-29T01:00"))


def test_on_equals_off_means_always_on_and_no_days_means_never() -> None:
    always = PowerSchedule(time(6), time(6))
    assert always.wanted_on(at("2026-11-23T05:00"))
    assert always.next_change(at("2026-11-23T05:00")) is None
    never = PowerSchedule(time(6), time(20), frozenset())
    assert not never.wanted_on(at("2026-11-23T12:00"))
    assert never.next_change(at("2026-11-23T12:00")) is None


def test_dst_changes_keep_local_wall_times() -> None:
    schedule = PowerSchedule(time(7), time(22))
    # Europe/Berlin leaves summer time on 2026-10-25 at 03:00 (clocks go back to 02:00).
    change = schedule.next_change(at("2026-10-24T23:00"))
    assert change == at("2026-10-25T07:00")
    assert change is not None and change.utcoffset() == timedelta(hours=1)
    # The 25-hour night: off from 22:00 CEST to 07:00 CET is ten hours of real time.
    start = at("2026-10-24T22:00").timestamp()
    assert change.timestamp() - start == 10 * 3600
    # A switch time inside the spring-forward gap (02:30 on 2026-03-29) still happens once.
    gap = PowerSchedule(time(2, 30), time(23))
    moment = gap.next_change(at("2026-03-29T01:00"))
    assert moment is not None and at("2026-03-29T01:00") < moment <= at("2026-03-29T03:30")


# The config


def test_config_parsing_and_errors_name_the_key() -> None:
    config = parse_power_config(
        {"on": "7:30", "off": time(22, 15), "days": ["Mon", "tue"], "methods": ["cec", "dpms"]}
    )
    assert config.schedule == PowerSchedule(time(7, 30), time(22, 15), frozenset({0, 1}))
    assert config.methods == ("cec", "dpms")
    assert parse_power_config(None).schedule is None
    assert parse_power_config({"methods": ["none"]}).schedule is None
    bad: list[tuple[dict[str, object], str]] = [
        ({"on": "7:30"}, "power.off"),
        ({"on": "25:00", "off": "08:00"}, "power.on"),
        ({"on": "07:00", "off": "noon"}, "power.off"),
        ({"on": "07:00", "off": "08:00", "days": ["someday"]}, "power.days"),
        ({"on": "07:00", "off": "08:00", "days": []}, "power.days"),
        ({"methods": ["smoke-signals"]}, "power.methods"),
        ({"methods": "cec"}, "power.methods"),
        ({"cec-device": "cec0"}, "power.cec-device"),
        ({"of": "08:00"}, "power.of"),
    ]
    for table, key in bad:
        with pytest.raises(PowerConfigError) as caught:
            parse_power_config(table)
        assert caught.value.key == key, table


# The methods (CEC and the Pi firmware cannot run here: their runner is faked)


def test_cec_ctl_standby_and_wake() -> None:
    runner = FakeRunner()
    cec = CecCtl(runner, which_of("cec-ctl"), "/dev/cec0", exists=lambda p: p == "/dev/cec0")
    assert cec.available()
    assert cec.set_power(False).ok
    assert cec.set_power(True).ok
    assert [call[0][-1] for call in runner.calls] == ["--standby", "--image-view-on"]
    assert runner.calls[0][0][:4] == ["cec-ctl", "-d", "/dev/cec0", "--playback"]
    assert not CecCtl(runner, which_of("cec-ctl"), exists=lambda p: False).available()


def test_cec_client_gets_its_command_on_stdin() -> None:
    runner = FakeRunner()
    cec = CecClient(runner, which_of("cec-client"))
    assert cec.available()
    cec.set_power(False)
    assert runner.calls == [(["cec-client", "-s", "-d", "1"], "standby 0\n")]


def test_auto_prefers_kernel_cec_and_falls_back_to_cec_client() -> None:
    runner = FakeRunner()
    both = which_of("cec-ctl", "cec-client")
    with_device = default_methods(["cec"], runner=runner, which=both, cec_device="/dev/null")
    assert [m.name for m in with_device] == ["cec-ctl"]
    without = default_methods(["cec"], runner=runner, which=both, cec_device="/dev/cec-none")
    assert [m.name for m in without] == ["cec-client"]
    assert default_methods(["none"], runner=runner) == []
    names = [m.name for m in default_methods(["auto"], runner=runner, which=both, environ={})]
    assert names == ["cec-client", "xset", "wayland", "vcgencmd", "backlight"]


def test_vcgencmd_under_full_kms_is_reported_as_failure() -> None:
    runner = FakeRunner({"vcgencmd": CommandResult(0, "display_power=-1\n")})
    result = Vcgencmd(runner, which_of("vcgencmd")).set_power(False)
    assert not result.ok and "firmware" in result.describe()
    runner.answers["vcgencmd"] = CommandResult(0, "display_power=0\n")
    assert Vcgencmd(runner, which_of("vcgencmd")).set_power(False).ok


def test_wayland_uses_wlopm_else_wlr_randr_per_output() -> None:
    runner = FakeRunner()
    assert WaylandOutputPower(runner, which_of("wlopm"), "wayland-0").set_power(False).ok
    assert runner.calls[-1][0] == ["wlopm", "--off", "*"]
    runner = FakeRunner({"wlr-randr": CommandResult(0, 'HDMI-A-1 "Dell"\n  Enabled: yes\n')})
    method = WaylandOutputPower(runner, which_of("wlr-randr"), "wayland-0")
    method.set_power(True)
    assert runner.calls[-1][0] == ["wlr-randr", "--output", "HDMI-A-1", "--on"]
    assert not WaylandOutputPower(runner, which_of("wlopm"), None).available()


def test_backlight_writes_bl_power(tmp_path: Path) -> None:
    panel = tmp_path / "10-0045"
    panel.mkdir()
    (panel / "bl_power").write_text("0\n")
    backlight = Backlight(tmp_path)
    assert backlight.available()
    assert backlight.set_power(False).ok
    assert (panel / "bl_power").read_text() == "4\n"
    assert backlight.set_power(True).ok
    assert (panel / "bl_power").read_text() == "0\n"
    assert not Backlight(tmp_path / "none").available()


def test_screen_power_tries_every_method_and_survives_a_hung_one(
    caplog: pytest.LogCaptureFixture,
) -> None:
    runner = FakeRunner(
        {
            "cec-client": CommandResult(None, stderr="timed out after 15 s"),
            "vcgencmd": CommandResult(0, "display_power=0"),
        }
    )
    fallback: list[bool] = []
    power = ScreenPower(
        [
            CecClient(runner, which_of("cec-client", "vcgencmd")),
            Vcgencmd(runner, which_of("vcgencmd")),
        ],
        fallback=fallback.append,
    )
    with caplog.at_level("INFO", logger="pdn.power"):
        assert power.set_power(False)
    assert fallback == [False]
    assert "cec-client timed out after 15 s; vcgencmd ok" in caplog.text
    nothing = ScreenPower([CecClient(runner, which_of())])
    assert not nothing.set_power(False)
    assert "cannot switch the screen off" in caplog.text


# The scheduler, with an injected clock


def test_scheduler_switches_at_the_boundaries_and_not_on_an_unset_clock() -> None:
    runner = FakeRunner()
    power = ScreenPower([CecCtl(runner, which_of("cec-ctl"), exists=lambda p: True)])
    now = [at("2026-11-23T21:00")]
    clock_ok = [False]
    scheduler = PowerScheduler(
        PowerSchedule(time(7), time(22)), power, lambda: now[0], lambda: clock_ok[0]
    )

    assert scheduler.tick() == 60.0  # clock not set: stays on, checks again within a minute
    assert [c[0][-1] for c in runner.calls] == ["--image-view-on"]
    clock_ok[0] = True
    now[0] = at("2026-11-23T21:59:30")
    assert scheduler.tick() == 30.0  # sleeps exactly until the change
    assert len(runner.calls) == 1  # no change: nothing sent again
    now[0] = at("2026-11-23T22:00")
    scheduler.tick()
    assert runner.calls[-1][0][-1] == "--standby"
    now[0] = at("2026-11-24T07:00:01")
    scheduler.tick()
    assert runner.calls[-1][0][-1] == "--image-view-on"
    assert len(runner.calls) == 3


def test_scheduler_thread_starts_and_stops_promptly() -> None:
    runner = FakeRunner()
    power = ScreenPower([CecCtl(runner, which_of("cec-ctl"), exists=lambda p: True)])
    scheduler = PowerScheduler(
        PowerSchedule(time(0), time(0, 0, 1)), power, lambda: datetime.now(UTC).astimezone(BERLIN)
    )
    scheduler.start()
    wait_until(lambda: runner.calls, 5, "the scheduler's first screen command")
    started = systime.monotonic()
    scheduler.stop()
    assert runner.calls
    assert systime.monotonic() - started < 2


# xset, for real, against an X server


@pytest.fixture(scope="module")
def xvfb_display() -> Iterator[str]:
    require_tools("xset")
    with xvfb(320, 240) as display:
        yield display


def test_xset_against_a_real_x_server(xvfb_display: str) -> None:
    xset = XsetDpms(run_command, shutil.which, xvfb_display)
    assert xset.available()
    # Xvfb has no DPMS extension: xset exits 0 anyway, and the method must notice.
    assert xset.has_dpms() is False
    assert xset.monitor_is_on() is None
    off = xset.set_power(False)
    assert off.ok and "screen saver" in off.stdout
    on = xset.set_power(True)
    assert on.ok
    query = xset.query().stdout
    assert "timeout:  0" in query  # waking leaves the X screen saver off


def test_xset_without_a_server_fails_within_its_timeout() -> None:
    require_tools("xset")
    started = systime.monotonic()
    result = XsetDpms(run_command, shutil.which, ":254").set_power(False)
    assert not result.ok and "cannot reach the X server" in result.describe()
    assert systime.monotonic() - started < 6


def test_start_power_schedule_from_a_loaded_config(tmp_path: Path) -> None:
    from player.config import load_config
    from player.power import start_power_schedule

    config_file = tmp_path / "pdn.toml"
    config_file.write_text('[power]\non = "00:00"\noff = "00:00"\nmethods = ["none"]\n')
    config = load_config(config_file, environ={})
    scheduler = start_power_schedule(config.power, BERLIN, lambda: True)
    assert scheduler is not None
    wait_until(lambda: scheduler.applied is not None, 5, "the schedule applied")
    assert scheduler.applied is True  # on == off: on all day
    scheduler.stop()
    assert start_power_schedule(load_config(None, environ={}).power, BERLIN, lambda: True) is None

"""Clock sanity with an injected clock, runner and sync flag files."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path

import pytest

from player.clocksanity import RELEASE_FLOOR, ClockSanity, build_date
from player.commands import CommandResult, run_command


class Timedatectl:
    def __init__(self, answer: str = "no\n", returncode: int | None = 0) -> None:
        self.answer = answer
        self.returncode = returncode
        self.calls = 0

    def __call__(
        self,
        args: Sequence[str],
        *,
        timeout: float,
        input: str | None = None,
        env: Mapping[str, str] | None = None,
    ) -> CommandResult:
        assert args == ["timedatectl", "show", "-p", "NTPSynchronized", "--value"]
        self.calls += 1
        return CommandResult(self.returncode, self.answer)


EPOCH = datetime(1970, 1, 1, 0, 0, 5, tzinfo=UTC)
LATER = datetime(2027, 3, 1, 12, 0, tzinfo=UTC)


def test_a_pi_at_the_epoch_is_not_set_until_ntp_answers(tmp_path: Path) -> None:
    now = [EPOCH]
    flag = tmp_path / "synchronized"
    timedatectl = Timedatectl()
    sanity = ClockSanity(lambda: now[0], runner=timedatectl, sync_flags=[flag], recheck_seconds=0)
    verdict = sanity.check()
    assert not verdict.is_set and "1970-01-01" in verdict.reason
    assert not sanity.is_set()
    flag.touch()  # systemd-timesyncd synchronised; the clock has jumped
    now[0] = LATER
    assert sanity.is_set()
    assert timedatectl.calls == 1  # is_set never runs a command
    assert "NTP synchronised" in sanity.check().reason
    # Latched: a later failure to ask does not unset it.
    flag.unlink()
    now[0] = EPOCH
    assert sanity.is_set()


def test_timedatectl_counts_for_any_ntp_daemon(tmp_path: Path) -> None:
    sanity = ClockSanity(lambda: EPOCH, runner=Timedatectl("yes\n"), sync_flags=[tmp_path / "none"])
    assert sanity.check().reason == "NTP synchronised (timedatectl)"


def test_a_plausible_date_counts_unless_ntp_is_required(tmp_path: Path) -> None:
    flags = [tmp_path / "none"]
    plausible = ClockSanity(lambda: LATER, runner=Timedatectl(), sync_flags=flags)
    assert plausible.is_set()
    strict = ClockSanity(lambda: LATER, runner=Timedatectl(), sync_flags=flags, require_ntp=True)
    assert not strict.is_set()
    assert "require-ntp" in strict.check().reason


def test_a_time_seen_before_raises_the_bar(tmp_path: Path) -> None:
    # fake-hwclock restores the time of the last shutdown; we stored a playback after that.
    sanity = ClockSanity(lambda: LATER, runner=Timedatectl(), sync_flags=[tmp_path / "x"])
    sanity.saw_time(datetime(2027, 3, 2, tzinfo=UTC))
    assert not sanity.check().is_set


def test_missing_timedatectl_is_just_not_synchronised(tmp_path: Path) -> None:
    sanity = ClockSanity(
        lambda: EPOCH,
        runner=Timedatectl("", returncode=None),
        sync_flags=[tmp_path / "x"],
    )
    assert not sanity.is_set()


def test_rechecks_are_rate_limited(tmp_path: Path) -> None:
    ticks = [0.0]
    flag = tmp_path / "x"
    sanity = ClockSanity(
        lambda: EPOCH,
        runner=Timedatectl(),
        sync_flags=[flag],
        recheck_seconds=5,
        monotonic=lambda: ticks[0],
    )
    assert not sanity.is_set()
    flag.touch()
    ticks[0] = 4.9
    assert not sanity.is_set()  # the cached verdict
    ticks[0] = 5.0
    assert sanity.is_set()


def test_background_thread_learns_ntp_from_timedatectl(tmp_path: Path) -> None:
    timedatectl = Timedatectl("no\n")
    sanity = ClockSanity(
        lambda: EPOCH, runner=timedatectl, sync_flags=[tmp_path / "x"], recheck_seconds=0
    )
    told: list[bool] = []
    thread = sanity.start(interval=0.01, on_set=lambda: told.append(sanity.is_set()))
    assert not sanity.is_set()
    assert told == []
    timedatectl.answer = "yes\n"
    thread.join(timeout=5)
    assert not thread.is_alive()
    assert sanity.is_set()
    assert told == [True]  # the display re-plans once, when the clock becomes trustworthy


def test_build_date_is_the_newest_module_and_never_before_the_floor(tmp_path: Path) -> None:
    assert build_date(tmp_path) == RELEASE_FLOOR
    module = tmp_path / "m.py"
    module.write_text("")
    stamp = datetime(2028, 1, 1, tzinfo=UTC).timestamp()
    os.utime(module, (stamp, stamp))
    assert build_date(tmp_path) == datetime(2028, 1, 1, tzinfo=UTC)
    assert build_date() >= RELEASE_FLOOR


def test_real_timedatectl_answers_or_fails_cleanly() -> None:
    # This machine has timedatectl but may run no systemd: either way no exception, no hang.
    result = run_command(["timedatectl", "show", "-p", "NTPSynchronized", "--value"], timeout=3)
    assert result.returncode is None or result.stdout.strip() in {"yes", "no", ""}
    sanity = ClockSanity()
    assert isinstance(sanity.is_set(), bool)


@pytest.mark.parametrize("value", ["yes", "no"])
def test_only_yes_means_synchronised(tmp_path: Path, value: str) -> None:
    sanity = ClockSanity(lambda: EPOCH, runner=Timedatectl(value), sync_flags=[tmp_path / "x"])
    assert sanity.check().is_set is (value == "yes")

"""cds.timezone: which time zone the display is in, one answer for the player and ``pdn cds``.

The system files are pointed at a temporary directory, so these tests read only what they
write; the zone names are checked against the machine's real tz database."""

from __future__ import annotations

import datetime
import os
import zoneinfo
from pathlib import Path

import pytest

from cds import timezone
from cds.cli import main
from cds.timezone import system_timezone_name

from .helpers import content_set, item


@pytest.fixture
def etc(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty stand-in for /etc (no timezone file, no localtime link) and no $TZ."""
    monkeypatch.setattr(timezone, "TIMEZONE_FILE", tmp_path / "timezone")
    monkeypatch.setattr(timezone, "LOCALTIME", tmp_path / "localtime")
    monkeypatch.delenv("TZ", raising=False)
    return tmp_path


def zone_file(root: Path, name: str) -> Path:
    """A file at ``root/usr/share/zoneinfo/<name>``, as tzdata installs it."""
    path = root / "usr" / "share" / "zoneinfo" / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"TZif")
    return path


def test_nothing_configured_is_utc(etc: Path) -> None:
    name = system_timezone_name()
    assert name == "UTC"
    midsummer = datetime.datetime(2026, 7, 1, 12, tzinfo=zoneinfo.ZoneInfo(name))
    assert midsummer.utcoffset() == datetime.timedelta(0)


def test_tz_variable_comes_first(etc: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (etc / "timezone").write_text("Asia/Tokyo\n", encoding="utf-8")
    os.symlink(zone_file(etc, "Europe/London"), etc / "localtime")
    monkeypatch.setenv("TZ", "America/New_York")
    assert system_timezone_name() == "America/New_York"
    monkeypatch.setenv("TZ", ":Europe/Berlin")  # the POSIX "read this file" form
    assert system_timezone_name() == "Europe/Berlin"


def test_an_unknown_tz_falls_through_to_etc_timezone(
    etc: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TZ", "Mars/Olympus")
    (etc / "timezone").write_text("Asia/Tokyo\n", encoding="utf-8")
    assert system_timezone_name() == "Asia/Tokyo"
    monkeypatch.setenv("TZ", "")
    assert system_timezone_name() == "Asia/Tokyo"


def test_localtime_link_keeps_the_name_the_administrator_chose(etc: Path) -> None:
    """``timedatectl set-timezone US/Eastern`` links /etc/localtime to US/Eastern, which tzdata
    links on to America/New_York: the display reports the name that was set."""
    target = zone_file(etc, "America/New_York")
    alias = etc / "usr" / "share" / "zoneinfo" / "US" / "Eastern"
    alias.parent.mkdir(parents=True)
    os.symlink("../America/New_York", alias)
    os.symlink(alias, etc / "localtime")
    assert os.path.realpath(etc / "localtime") == str(target)
    assert system_timezone_name() == "US/Eastern"


def test_localtime_chain_is_followed_when_its_first_step_names_no_zone(etc: Path) -> None:
    alternatives = etc / "alternatives"
    alternatives.mkdir()
    os.symlink(zone_file(etc, "Asia/Tokyo"), alternatives / "localtime")
    os.symlink(alternatives / "localtime", etc / "localtime")
    assert system_timezone_name() == "Asia/Tokyo"


def test_unusable_files_mean_utc(etc: Path) -> None:
    (etc / "timezone").write_bytes(b"\xff\xfeEurope/London\n")  # not UTF-8
    (etc / "localtime").write_bytes(b"TZif")  # a copy, not a link: no name to read
    assert system_timezone_name() == "UTC"
    (etc / "timezone").write_text("Not a zone\n", encoding="utf-8")
    assert system_timezone_name() == "UTC"


def test_cds_explain_reads_the_clock_in_the_system_zone(
    etc: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    schedule = etc / "schedule.xml"
    schedule.write_text(content_set("lobby", item("a")), encoding="utf-8")
    monkeypatch.setenv("TZ", "Asia/Tokyo")
    assert main(["explain", str(schedule), "--at", "2026-11-23T00:30:00Z"]) == 0
    assert capsys.readouterr().out.startswith("At Monday 2026-11-23 09:30:00 Asia/Tokyo ")
    monkeypatch.delenv("TZ")
    assert main(["explain", str(schedule), "--at", "2026-11-23T00:30:00Z"]) == 0
    assert capsys.readouterr().out.startswith("At Monday 2026-11-23 00:30:00 UTC ")

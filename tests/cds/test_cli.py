"""`pdn cds check` and `pdn cds explain`, run as an operator runs them: the installed command."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from .helpers import content_set, days, item, priority, times

DATA = Path(__file__).parent / "data"
PDN = Path(sys.executable).with_name("pdn")


def pdn(*args: str | Path, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    """The installed `pdn cds ...`, as an operator types it."""
    return run([str(PDN), "cds"], args, cwd)


def cds_cli(*args: str | Path, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    """The same code without starting the rest of pdn (faster, for the error paths)."""
    return run([sys.executable, "-m", "cds.cli"], args, cwd)


def run(
    command: list[str], args: tuple[str | Path, ...], cwd: Path | None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*command, *map(str, args)],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=cwd,
        check=False,
    )


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("cds")
    (folder / "bad.xml").write_text(
        '<content-set name="a">\n'
        "  <constraints>\n"
        "    <scheduling-constraints>\n"
        '      <time><between start="9am" end="17:00"/></time>\n'
        '      <priority level="urgent"/>\n'
        "    </scheduling-constraints>\n"
        "  </constraints>\n"
        "  <content-item/>\n"
        "</content-set>\n"
    )
    (folder / "junk.bin").write_bytes(bytes(range(256)) * 4)
    (folder / "legacy.xml").write_text("<?xml version='1.0'?>\n<content-collection/>\n")
    (folder / "laughs.xml").write_text(
        '<!DOCTYPE x [<!ENTITY a "aaaaaaaaaa"><!ENTITY b "&a;&a;&a;&a;&a;&a;">]>\n'
        "<content-set>&b;</content-set>"
    )
    (folder / "extra.xml").write_text(
        '<content-set name="e" colour="red">\n' + item("e") + "\n<x-note/>\n</content-set>"
    )
    (folder / "schedule.xml").write_text(
        content_set(
            "hall",
            item("welcome"),
            item("lunch", times(("12:00", "14:00"))),
            content_set("weekend", item("brunch"), constraints=(days(("sat", "sun")),)),
            item("fire", priority("highest"), times(("03:00", "03:05"))),
        )
    )
    return folder


def test_check_valid_file_one_line_each(files: Path) -> None:
    result = pdn("check", DATA / "lobby.xml", files / "schedule.xml")
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == [
        f"{DATA / 'lobby.xml'}: valid CDS 'lobby': 1 set, 3 items, 6 constraints "
        "(playback 1, time 2, day-of-week 1, priority 1, preferred-duration 1)",
        f"{files / 'schedule.xml'}: valid CDS 'hall': 2 sets, 4 items, 4 constraints "
        "(time 2, day-of-week 1, priority 1)",
    ]
    assert result.stderr == ""


def test_check_problems_file_line_message(files: Path) -> None:
    result = pdn("check", "bad.xml", "legacy.xml", "laughs.xml", "schedule.xml", cwd=files)
    assert result.returncode == 1
    lines = result.stdout.splitlines()
    assert lines[:3] == [
        "bad.xml:4: <between> in <time> needs start like 09:00 or 09:00:00, got '9am'",
        "bad.xml:5: <priority> level must be lowest, low, medium, high or highest (or 0 to 4), "
        "got 'urgent'",
        "bad.xml:8: a <content-item> needs a <requires-file> with <sources><uri>address of the "
        "content</uri></sources>",
    ]
    assert lines[3].startswith("legacy.xml:2: <content-collection> is an old form")
    assert lines[4].startswith("laughs.xml:1: the document declares a DOCTYPE or entities")
    assert lines[5].startswith("schedule.xml: valid CDS 'hall'")
    assert "Traceback" not in result.stderr


def test_check_never_a_traceback(files: Path) -> None:
    result = cds_cli("check", "junk.bin", "missing.xml", ".", "/dev/null", cwd=files)
    assert result.returncode == 1
    assert result.stdout.splitlines() == [
        "junk.bin:1: this is not an XML document (it should start with <content-set ...>)",
        "missing.xml: no such file",
        ".: this is a directory, not a CDS file",
        "/dev/null: the document is empty",
    ]
    assert result.stderr == ""


def test_check_warnings_go_to_stderr(files: Path) -> None:
    result = cds_cli("check", "extra.xml", cwd=files)
    assert result.returncode == 0
    assert result.stdout.splitlines() == [
        "extra.xml: valid CDS 'e': 1 set, 1 item, 0 constraints, 2 warnings"
    ]
    assert result.stderr.splitlines() == [
        'extra.xml:1: warning: attribute colour="red" on <content-set> is not part of the CDS '
        "grammar; it is ignored (and kept when the CDS is written out again)",
        "extra.xml:3: warning: <x-note> inside <content-set> is not part of the CDS grammar; it "
        "is ignored (and kept when the CDS is written out again)",
    ]


def test_explain_what_plays_and_why_not(files: Path) -> None:
    result = pdn(
        "explain", files / "schedule.xml", "--at", "2026-11-23 18:02", "--tz", "Europe/London"
    )
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert out.startswith("At Monday 2026-11-23 18:02:00 Europe/London")
    assert "Plays now, in this order (priority medium):\n  1. http://example.org/welcome\n" in out
    assert (
        "  http://example.org/lunch (hall/1)\n"
        "     - time window 12:00-14:00 (the item itself) is closed at 18:02 Europe/London\n"
    ) in out
    assert "day-of-week saturday-sunday (set 'weekend') does not include monday" in out
    assert "Next change: Tuesday 2026-11-24 03:00:00 Europe/London" in out


def test_explain_rfc3339_and_priority(files: Path) -> None:
    # 03:01 in London in winter is 03:01 UTC: the highest-priority item pre-empts the rest.
    result = pdn(
        "explain", files / "schedule.xml", "--at", "2026-11-23T03:01:00Z", "--tz", "Europe/London"
    )
    assert result.returncode == 0, result.stderr
    assert (
        "Plays now, in this order (priority highest):\n  1. http://example.org/fire"
        in result.stdout
    )
    assert "priority medium is below highest" in result.stdout
    assert "Next change: Monday 2026-11-23 03:05:00 Europe/London" in result.stdout


def test_explain_usage_errors(files: Path) -> None:
    bad_zone = cds_cli("explain", files / "schedule.xml", "--tz", "Mars/Olympus")
    assert bad_zone.returncode == 2
    assert "unknown time zone 'Mars/Olympus'" in bad_zone.stderr
    bad_time = cds_cli("explain", files / "schedule.xml", "--at", "teatime", "--tz", "UTC")
    assert bad_time.returncode == 2
    assert "--at 'teatime' is not a time" in bad_time.stderr
    invalid = cds_cli("explain", "bad.xml", cwd=files)
    assert invalid.returncode == 1
    assert invalid.stdout.startswith("bad.xml:4: ")
    for result in (bad_zone, bad_time, invalid):
        assert "Traceback" not in result.stderr


def test_cds_without_action_shows_usage() -> None:
    result = pdn()
    assert result.returncode == 2
    assert "check" in result.stderr and "explain" in result.stderr

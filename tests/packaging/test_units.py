"""The systemd units, installed by install.sh into a throwaway root: systemd-analyze verify is
clean and the sandbox exposure is within bounds (systemd 252's scores, offline: the display
2.5, the network services 1.2, pdn-release-check.service, root, 4.0 at most: 1.6)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.paths import REPO
from tests.support.tools import require_tools


@pytest.fixture(autouse=True)
def _systemd_tools() -> None:
    require_tools("systemd-analyze", "systemctl")


UNITS = {
    "pdn-display.service": 2.5,
    "pdn-scheduler.service": 1.2,
    "pdn-content.service": 1.2,
    "pdn-sensor@cpu-temp.service": 1.2,
    "pdn-release-check.service": 4.0,
}


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A root with the units installed and enabled by install.sh, the real pdn command at
    /opt/pdn/bin/pdn (this checkout's venv) and the host's systemd units (targets)."""
    root = tmp_path_factory.mktemp("root")
    result = subprocess.run(
        [
            "bash",
            str(REPO / "packaging/install.sh"),
            "--root",
            str(root),
            "--skip",
            "packages,venv",
            "--services",
            "display,scheduler,content,sensor",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    (root / "opt/pdn/bin").mkdir(parents=True, exist_ok=True)
    # A copy, not a link: systemd resolves links inside the root.
    shutil.copy2(Path(sys.executable).parent / "pdn", root / "opt/pdn/bin/pdn")
    # The release the display unit runs (install.sh makes one; --skip venv did not).
    release = root / "opt/pdn/releases/test/libexec"
    release.mkdir(parents=True)
    shutil.copy2(REPO / "packaging/pdn-display-start", release / "pdn-display-start")
    (root / "opt/pdn/current").symlink_to("releases/test")
    host_units = Path("/lib/systemd/system")
    shutil.copytree(host_units, root / "usr/lib/systemd/system", symlinks=True)
    env_file = root / "etc/pdn/sensor-cpu-temp.env"
    env_file.write_text(
        'PDN_SENSOR_TYPE="cpu temperature"\nPDN_SENSOR_SOURCE_KIND=--file\n'
        "PDN_SENSOR_SOURCE=/sys/class/thermal/thermal_zone0/temp\n"
    )
    return root


def analyze(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["systemd-analyze", *args, f"--root={root}"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env={**os.environ, "SYSTEMD_LOG_COLOR": "0"},
    )


@pytest.mark.parametrize("unit", list(UNITS))
def test_verify_is_clean(root: Path, unit: str) -> None:
    result = analyze(root, "verify", unit)
    assert result.returncode == 0, result.stderr
    assert result.stderr.strip() == "", result.stderr


@pytest.mark.parametrize(("unit", "limit"), list(UNITS.items()))
def test_exposure_within_bounds(root: Path, unit: str, limit: float) -> None:
    result = analyze(root, "security", "--offline=true", unit)
    match = re.search(r"Overall exposure level for \S+: (\d+\.\d+)", result.stdout)
    assert match is not None, result.stdout + result.stderr
    assert float(match[1]) <= limit, result.stdout


def settings(path: Path) -> dict[str, list[str]]:
    """A unit file's assignments; keys may repeat."""
    found: dict[str, list[str]] = {}
    for line in path.read_text().splitlines():
        if "=" in line and not line.startswith(("#", ";", "[")):
            key, value = line.split("=", 1)
            found.setdefault(key.strip(), []).append(value.strip())
    return found


def test_display_unit_is_a_watched_kiosk(root: Path) -> None:
    unit = settings(root / "etc/systemd/system/pdn-display.service")
    assert unit["Type"] == ["notify"]
    assert unit["Restart"] == ["always"]
    assert 10 <= int(unit["WatchdogSec"][0]) <= 60
    assert int(unit["StartLimitBurst"][0]) >= 3
    assert unit["User"] == ["pdn"]
    assert unit["ExecStart"] == ["/opt/pdn/current/libexec/pdn-display-start"]
    # Each start of a new release is counted as root, and never stops the display.
    assert unit["ExecStartPre"] == ["-+/opt/pdn/libexec/pdn-release started"]
    assert unit["DevicePolicy"] == ["closed"]
    assert any(v.startswith("char-drm") for v in unit["DeviceAllow"])
    # $STATE_DIRECTORY is the display's data directory alone: systemd 250 and later sort a list
    # of them, so the first named is not the first in the variable (pdn/display pdn gave
    # /var/lib/pdn first, proved under a real systemd 252).
    assert unit["StateDirectory"] == ["pdn/display"]
    # /var/lib/pdn is root's: the display's home (Qt's caches) is its own directory, and it
    # writes nothing beside it.
    assert unit["Environment"].count("HOME=/var/lib/pdn/display") == 1
    assert unit["WorkingDirectory"] == ["/var/lib/pdn/display"]
    assert "ReadWritePaths" not in unit


def test_units_are_enabled_at_boot(root: Path) -> None:
    wants = root / "etc/systemd/system/multi-user.target.wants"
    assert {p.name for p in wants.iterdir()} >= {
        "pdn-display.service",
        "pdn-scheduler.service",
        "pdn-content.service",
    }
    assert (root / "etc/systemd/system/timers.target.wants/pdn-display-retry.timer").is_symlink()
    result = subprocess.run(
        ["systemctl", f"--root={root}", "is-enabled", "pdn-display.service"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.stdout.strip() == "enabled"


@pytest.mark.parametrize("timer", ["pdn-display-retry.timer", "pdn-release-check.timer"])
def test_timers_verify(root: Path, timer: str) -> None:
    result = analyze(root, "verify", timer)
    assert result.returncode == 0 and result.stderr.strip() == "", result.stderr


def test_the_release_check_runs_while_the_display_is_enabled(root: Path) -> None:
    """pdn-release check: from boot on, so a rollback a power cut stopped is
    finished; it does nothing without a trial."""
    assert (root / "etc/systemd/system/timers.target.wants/pdn-release-check.timer").is_symlink()
    check = settings(root / "etc/systemd/system/pdn-release-check.service")
    assert check["Type"] == ["oneshot"]
    assert check["ExecStart"] == ["/opt/pdn/libexec/pdn-release check"]
    assert "User" not in check  # root: it switches /opt/pdn/current
    # ... and writes nothing else: its state is root's own directory, outside /var/lib/pdn.
    assert check["ProtectSystem"] == ["strict"]
    assert check["ReadWritePaths"] == ["/opt/pdn"]
    assert check["StateDirectory"] == ["pdn-release"]
    assert check["CapabilityBoundingSet"] == [""]
    assert check["NoNewPrivileges"] == ["yes"]
    # Run every 15 s: systemd's info lines for each run stay out of the journal, what
    # pdn-release says (notice) does not.
    assert check["SyslogLevel"] == ["notice"]
    assert check["LogLevelMax"] == ["notice"]


def test_each_role_runs_as_a_user_of_its_own(root: Path) -> None:
    """The display (pdn) cannot read the other roles' secrets or data, nor they its: one user
    a role, and each role's secrets in an env file of its own."""
    users = {}
    for name in ("pdn-display.service", "pdn-scheduler.service", "pdn-content.service",
                 "pdn-sensor@.service"):  # fmt: skip
        unit = settings(root / "etc/systemd/system" / name)
        assert unit["User"] == unit["Group"], name
        users[name] = unit["User"][0]
    assert users == {
        "pdn-display.service": "pdn",
        "pdn-scheduler.service": "pdn-scheduler",
        "pdn-content.service": "pdn-content",
        "pdn-sensor@.service": "pdn-sensor",
    }
    scheduler = settings(root / "etc/systemd/system/pdn-scheduler.service")
    assert "-/etc/pdn/scheduler.env" in scheduler["EnvironmentFile"]
    sensor = settings(root / "etc/systemd/system/pdn-sensor@.service")
    # The sensors' token (install.sh), then the sensor's own file, which may set another.
    assert sensor["EnvironmentFile"] == ["-/etc/pdn/sensor.env", "/etc/pdn/sensor-%i.env"]

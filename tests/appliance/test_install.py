"""install.sh, uninstall.sh and the display's start wrapper, in throwaway roots."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.tools import require_tools

from .conftest import REPO

INSTALL = REPO / "packaging/install.sh"
UNINSTALL = REPO / "packaging/uninstall.sh"
START = REPO / "packaging/pdn-display-start"
SCRIPTS = [
    INSTALL,
    UNINSTALL,
    START,
    REPO / "packaging/pdn-release",
    REPO / "packaging/dev.sh",
    REPO / "packaging/fresh-root.sh",
    REPO / "packaging/systemd-proof.sh",
    REPO / "packaging/lock.sh",
]


def run(*args: str | Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(a) for a in args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env={**os.environ, **(env or {})},
    )


def install_into(root: Path, *options: str) -> subprocess.CompletedProcess[str]:
    return run("bash", INSTALL, "--root", root, "--skip", "packages,venv", *options)


def test_scripts_are_shellcheck_clean() -> None:
    require_tools("shellcheck")
    result = run("shellcheck", "--shell=bash", *SCRIPTS)
    assert result.returncode == 0, result.stdout


def sourced(call: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """Run ``call`` with install.sh's functions defined (sourcing it runs nothing)."""
    return run("bash", "-c", f'source "{INSTALL}"; {call}', env=env)


@pytest.mark.parametrize(
    ("arch", "glibc", "expected"),
    [
        ("aarch64", "2.41", "PySide6>=6.8.0,<6.12"),  # Raspberry Pi OS Trixie
        ("aarch64", "2.39", "PySide6>=6.8.0,<6.12"),
        ("x86_64", "2.36", "PySide6>=6.8.0,<6.12"),  # Debian 12 kiosk PC
        ("x86_64", "2.31", "PySide6>=6.8.0,<6.12"),
    ],
)
def test_pyside6_choice_follows_glibc_and_arch(arch: str, glibc: str, expected: str) -> None:
    result = sourced(f"pyside6_requirement {arch} {glibc}")
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == expected


@pytest.mark.parametrize(
    ("arch", "glibc"), [("armv7l", "2.36"), ("x86_64", "2.27"), ("aarch64", "2.36")]
)
def test_machines_without_wheels_are_refused_with_a_reason(arch: str, glibc: str) -> None:
    result = sourced(f"pyside6_requirement {arch} {glibc}")
    assert result.returncode != 0
    assert "64-bit" in result.stderr or "too old" in result.stderr


def test_a_display_on_pi_bookworm_is_refused_at_once(tmp_path: Path) -> None:
    """Raspberry Pi OS Bookworm (arm64, glibc 2.36): PyPI's Qt for it needs Debian 11's
    libraries (measured in an emulated Pi, packaging/fresh-root.sh --arch arm64). install.sh
    stops before it changes anything, says why and the way forward."""
    bookworm = {"PDN_ARCH": "aarch64", "PDN_GLIBC": "2.36"}
    result = run("bash", INSTALL, "--root", tmp_path / "root", env=bookworm)
    assert result.returncode != 0
    assert "libtiff5, libwebp6 and FFmpeg 4" in result.stderr
    assert "no security fixes" in result.stderr
    assert "Raspberry Pi OS Lite (64-bit), Trixie" in result.stderr
    assert not any((tmp_path / "root").iterdir())  # nothing installed, not even the files
    assert "installing" not in result.stdout and "would install" not in result.stdout
    # The roles without a screen need no Qt: still installed on Bookworm.
    scheduler = run(
        "bash", INSTALL, "--root", tmp_path / "other", "--services", "scheduler",
        "--skip", "packages,venv", env=bookworm,
    )  # fmt: skip
    assert scheduler.returncode == 0, scheduler.stderr


def test_glibc_and_python_detection_on_this_machine() -> None:
    result = sourced("glibc_version; choose_python")
    glibc, python = result.stdout.split()
    assert glibc.count(".") == 1 and glibc.split(".")[0] == "2"
    assert Path(python).exists()
    assert sourced("version_at_least 2.41 2.39 && ! version_at_least 2.36 2.39").returncode == 0
    assert sourced("version_at_least 2.100 2.39").returncode == 0


def test_install_into_a_throwaway_root(tmp_path: Path) -> None:
    result = install_into(tmp_path, "--platform", "eglfs")
    assert result.returncode == 0, result.stderr
    config = tmp_path / "etc/pdn/pdn.toml"
    assert 'platform = "eglfs"' in config.read_text()
    assert oct(config.stat().st_mode & 0o777) == "0o640"  # may hold the API token
    assert (tmp_path / "etc/pdn/services.env").exists()
    for sub in ("display", "scheduler", "schedules", "apps"):
        assert (tmp_path / "var/lib/pdn" / sub).is_dir()
    # Beside the releases (the venv step, skipped here, makes one: tests/appliance/test_release.py)
    assert os.access(tmp_path / "opt/pdn/libexec/pdn-release", os.X_OK)
    assert (tmp_path / "var/lib/pdn/release").is_dir()
    wants = tmp_path / "etc/systemd/system/multi-user.target.wants"
    assert (wants / "pdn-display.service").is_symlink()
    assert not (wants / "pdn-scheduler.service").is_symlink()
    out = result.stdout
    assert "would create the system user pdn" in out
    # A new display serves HTTPS (issue 22) and says how to pair and pin.
    assert "\ntls = true\n" in config.read_text()
    assert "display API: https://" in out and ":8080/" in out
    assert "pdn ctl pins the display's certificate" in out


def test_install_twice_keeps_the_owners_config(tmp_path: Path) -> None:
    assert install_into(tmp_path).returncode == 0
    config = tmp_path / "etc/pdn/pdn.toml"
    config.write_text('name = "Lobby"\n[listen]\nhost = "10.1.2.3"\nport = 9000\n')
    again = install_into(tmp_path, "--platform", "xcb")
    assert again.returncode == 0, again.stderr
    assert config.read_text().startswith('name = "Lobby"')
    assert "kept the existing /etc/pdn/pdn.toml" in again.stdout
    assert "--platform xcb ignored" in again.stderr
    assert "display API: http://10.1.2.3:9000/" in again.stdout


def test_an_upgrade_installs_the_packages_of_the_configured_platform(tmp_path: Path) -> None:
    """An upgrade without --platform (install.sh run again) keeps the config, and installs for
    its platform: an offscreen display got cage, xwayland, seatd and grim before (seen on a
    Debian bookworm upgrade)."""
    assert install_into(tmp_path, "--platform", "offscreen").returncode == 0
    # A machine with no package installed, where apt has every one.
    tools = tmp_path / "tools"
    tools.mkdir()
    (tools / "dpkg-query").write_text("#!/bin/sh\nexit 1\n")
    (tools / "apt-cache").write_text("#!/bin/sh\necho '  Candidate: 1.0'\n")
    (tools / "apt-get").write_text("#!/bin/sh\nexit 0\n")
    for tool in tools.iterdir():
        tool.chmod(0o755)
    env = {"PATH": f"{tools}:{os.environ['PATH']}"}
    again = run("bash", INSTALL, "--root", tmp_path, "--skip", "venv", env=env)
    assert again.returncode == 0, again.stderr
    (line,) = [x for x in again.stdout.splitlines() if "would install system packages" in x]
    assert "libnss3" in line.split()
    assert not {"cage", "seatd", "xwayland", "grim"} & set(line.split())
    fresh = run("bash", INSTALL, "--root", tmp_path / "fresh", "--skip", "venv", env=env)
    (line,) = [x for x in fresh.stdout.splitlines() if "would install system packages" in x]
    assert {"cage", "seatd"} <= set(line.split())  # a new display's default platform


def test_install_tightens_config_files_others_may_read(tmp_path: Path) -> None:
    """Secrets at rest (issue 22): /etc/pdn's files may hold tokens."""
    assert install_into(tmp_path).returncode == 0
    services = tmp_path / "etc/pdn/services.env"
    services.chmod(0o644)
    again = install_into(tmp_path)
    assert again.returncode == 0, again.stderr
    assert oct(services.stat().st_mode & 0o777) == "0o640"
    assert "was mode 644, readable by others" in again.stderr
    assert "pdn ctl pair https://" in again.stdout and "--pairing-code" in again.stdout


def test_a_display_with_a_local_sensor_or_content_server_serves_https_too(tmp_path: Path) -> None:
    """They pair with it like any controller and pin its certificate (server.displaycreds)."""
    result = install_into(tmp_path, "--services", "display,sensor,content")
    assert result.returncode == 0, result.stderr
    assert "\ntls = true\n" in (tmp_path / "etc/pdn/pdn.toml").read_text()
    assert "display API: https://" in result.stdout


def test_a_scheduler_gets_an_operator_token_printed_once(tmp_path: Path) -> None:
    result = install_into(tmp_path, "--services", "scheduler")
    assert result.returncode == 0, result.stderr
    env = tmp_path / "etc/pdn/scheduler.env"
    assert oct(env.stat().st_mode & 0o777) == "0o640"
    values = dict(
        line.split("=", 1) for line in env.read_text().splitlines() if line.startswith("PDN_")
    )
    operator, enrolment = values["PDN_API_TOKEN"], values["PDN_ENROLMENT_TOKEN"]
    assert len(operator) == 43 and len(enrolment) == 43 and operator != enrolment
    assert result.stdout.count(operator) == 1 and result.stdout.count(enrolment) == 1
    unit = (tmp_path / "etc/systemd/system/pdn-scheduler.service").read_text()
    assert "EnvironmentFile=-/etc/pdn/scheduler.env" in unit
    # Installed again: the token is kept, and not shown again.
    again = install_into(tmp_path, "--services", "scheduler")
    assert again.returncode == 0, again.stderr
    assert operator not in again.stdout and enrolment not in again.stdout
    assert f"PDN_API_TOKEN={operator}" in env.read_text()
    # One the owner set is kept.
    env.write_text("PDN_API_TOKEN=mine\n")
    third = install_into(tmp_path, "--services", "scheduler")
    assert "mine" not in third.stdout and env.read_text() == "PDN_API_TOKEN=mine\n"


def test_bad_options_are_refused(tmp_path: Path) -> None:
    assert "unknown option" in install_into(tmp_path, "--frobnicate").stderr
    assert "--platform must be" in install_into(tmp_path, "--platform", "vnc").stderr
    assert "unknown service" in install_into(tmp_path, "--services", "display,printer").stderr
    missing = install_into(tmp_path, "--wheelhouse", str(tmp_path / "nowhere"))
    assert "--wheelhouse: no such directory" in missing.stderr


def test_a_wheelhouse_without_the_locked_pip_installs_nothing(tmp_path: Path) -> None:
    """Offline (--wheelhouse), pip comes from the lock's pip wheel there: without it, no
    release is made and nothing is switched (before any venv is made)."""
    from tests.release import BASE_PYTHON, PREVIOUS_WHEEL

    house = tmp_path / "wheelhouse"
    house.mkdir()
    root = tmp_path / "root"
    result = run("bash", INSTALL, "--root", root, "--skip", "packages",
                 "--services", "scheduler", "--python", BASE_PYTHON,
                 "--wheel", PREVIOUS_WHEEL, "--wheelhouse", house)  # fmt: skip
    assert result.returncode != 0
    locked = next(
        line.split("==")[1]
        for line in (REPO / "constraints.txt").read_text().splitlines()
        if line.startswith("pip==")
    )
    assert f"has no pip-{locked}-py3-none-any.whl, the lock's pip" in result.stderr
    assert not (root / "opt/pdn/current").exists()
    assert list((root / "opt/pdn/releases").iterdir()) == []


def test_uninstall_keeps_data_unless_purged(tmp_path: Path) -> None:
    assert install_into(tmp_path, "--services", "display,content").returncode == 0
    (tmp_path / "var/lib/pdn/schedules/lobby.xml").write_text("<content-set/>")
    result = run("bash", UNINSTALL, "--root", tmp_path)
    assert result.returncode == 0, result.stderr
    assert not (tmp_path / "opt/pdn").exists()
    assert not (tmp_path / "etc/systemd/system/pdn-display.service").exists()
    wants = tmp_path / "etc/systemd/system/multi-user.target.wants"
    assert not (wants / "pdn-display.service").is_symlink()
    assert not (wants / "pdn-content.service").is_symlink()
    assert (tmp_path / "etc/pdn/pdn.toml").exists()
    assert (tmp_path / "var/lib/pdn/schedules/lobby.xml").exists()
    purged = run("bash", UNINSTALL, "--root", tmp_path, "--purge")
    assert purged.returncode == 0, purged.stderr
    assert not (tmp_path / "etc/pdn").exists()
    assert not (tmp_path / "var/lib/pdn").exists()


# The start wrapper


def start_wrapper(tmp_path: Path, config_text: str, **env: str) -> subprocess.CompletedProcess[str]:
    config = tmp_path / "pdn.toml"
    config.write_text(config_text)
    base = {
        "PDN_CONFIG": str(config),
        "PDN_PYTHON": shutil.which("python3") or "python3",
        "PDN_BIN": "/opt/pdn/bin/pdn",
        "PDN_DRY_RUN": "1",
        "PDN_SEATD_SOCKET": str(tmp_path / "no-seatd.sock"),
        "WATCHDOG_PID": "1",
    }
    clean = {k: v for k, v in os.environ.items() if k not in ("DISPLAY", "WAYLAND_DISPLAY")}
    return subprocess.run(
        ["bash", str(START), "--verbose"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env={**clean, **base, **env},
    )


def test_start_wrapper_eglfs(tmp_path: Path) -> None:
    result = start_wrapper(
        tmp_path, '[screen]\nplatform = "eglfs"\neglfs-kms-config = "/etc/pdn/kms.json"\n'
    )
    assert result.returncode == 0, result.stderr
    assert "QT_QPA_PLATFORM=eglfs" in result.stdout
    assert "QT_QPA_EGLFS_INTEGRATION=eglfs_kms" in result.stdout
    assert "QT_QPA_EGLFS_KMS_CONFIG=/etc/pdn/kms.json" in result.stdout
    assert f"exec /opt/pdn/bin/pdn display --config {tmp_path}/pdn.toml --verbose" in result.stdout


def test_start_wrapper_xcb_and_sandbox_switch(tmp_path: Path) -> None:
    result = start_wrapper(
        tmp_path, '[screen]\nplatform = "xcb"\nx_display = ":3"\nchromium_sandbox = false\n'
    )
    assert "QT_QPA_PLATFORM=xcb" in result.stdout
    assert "DISPLAY=:3" in result.stdout
    assert "QTWEBENGINE_DISABLE_SANDBOX=1" in result.stdout


def test_start_wrapper_auto_without_cage_or_session_is_eglfs(tmp_path: Path) -> None:
    result = start_wrapper(tmp_path, "", PATH="/usr/bin:/bin")
    assert result.returncode == 0, result.stderr
    assert "platform auto: using eglfs" in result.stderr
    auto_x = start_wrapper(tmp_path, "", DISPLAY=":7")
    assert "QT_QPA_PLATFORM=xcb" in auto_x.stdout and "DISPLAY=:7" in auto_x.stdout


def test_start_wrapper_cage(tmp_path: Path) -> None:
    if shutil.which("cage") is None:
        result = start_wrapper(tmp_path, '[screen]\nplatform = "cage"\n')
        assert result.returncode == 78
        assert "cage is not installed" in result.stderr
        return
    result = start_wrapper(tmp_path, '[screen]\nplatform = "cage"\n')
    assert result.returncode == 0, result.stderr
    assert "QT_QPA_PLATFORM=wayland" in result.stdout
    assert "WATCHDOG_PID" not in result.stdout  # the display pings for its parent, cage
    assert "exec cage -d -s -- /opt/pdn/bin/pdn display" in result.stdout


def test_start_wrapper_refuses_an_unknown_platform(tmp_path: Path) -> None:
    result = start_wrapper(tmp_path, '[screen]\nplatform = "vnc"\n')
    assert result.returncode == 78
    assert "unknown [screen] platform 'vnc'" in result.stderr


def test_start_wrapper_survives_a_broken_config(tmp_path: Path) -> None:
    # pdn display reports the broken file itself; the wrapper starts it with defaults.
    result = start_wrapper(tmp_path, "[screen\n")
    assert result.returncode == 0
    assert "using defaults" in result.stderr


def test_example_config_is_valid_for_the_display(tmp_path: Path) -> None:
    """The installed default config loads, also with every commented key switched on."""
    import re

    from player.clocksanity import ClockConfig
    from player.config import ConfigError, load_config
    from player.power import PowerConfig

    example = REPO / "packaging/pdn.toml.example"
    config = load_config(example, environ={})
    assert (config.host, config.port) == ("0.0.0.0", 8080)
    everything = tmp_path / "all.toml"
    everything.write_text(re.sub(r"(?m)^#(\[?[a-z_-]+\]?( =|$))", r"\1", example.read_text()))
    full = load_config(everything, environ={})
    assert full.name == "Lobby screen"
    power = full.power
    assert isinstance(power, PowerConfig) and power.schedule is not None
    assert full.clock == ClockConfig(require_ntp=False)
    bad = tmp_path / "bad.toml"
    bad.write_text('[screen]\nplatform = "vnc"\n')
    with pytest.raises(ConfigError, match="platform"):
        load_config(bad, environ={})
    bad.write_text('[power]\non = "7:00"\noff = "25:00"\n')
    with pytest.raises(ConfigError, match=r"power\.off"):
        load_config(bad, environ={})
    check = run(REPO / ".venv/bin/pdn", "display", "--config", example, "--check-config")
    assert check.returncode == 0, check.stderr
    assert "configuration OK" in check.stdout


def test_start_wrapper_runs_the_pdn_of_its_own_release(tmp_path: Path) -> None:
    """Run through /opt/pdn/current, it starts the release the link named when it started
    (issue 25: a switch meanwhile cannot mix two releases)."""
    libexec = tmp_path / "opt/pdn/releases/0.2.0-abc/libexec"
    libexec.mkdir(parents=True)
    shutil.copy2(START, libexec / "pdn-display-start")
    (tmp_path / "opt/pdn/current").symlink_to("releases/0.2.0-abc")
    config = tmp_path / "pdn.toml"
    config.write_text('[screen]\nplatform = "offscreen"\n')
    result = subprocess.run(
        ["bash", str(tmp_path / "opt/pdn/current/libexec/pdn-display-start")],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env={**os.environ, "PDN_CONFIG": str(config), "PDN_DRY_RUN": "1",
             "PDN_PYTHON": shutil.which("python3") or "python3"},
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    release = tmp_path / "opt/pdn/releases/0.2.0-abc"
    assert f"exec {release}/venv/bin/pdn display --config {config}" in result.stdout

"""install.sh, uninstall.sh and the display's start wrapper, in throwaway roots."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.support.paths import REPO
from tests.support.tools import require_tools

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
    # The parts the scripts source, each checked on its own too: shellcheck follows a sourced
    # file for what it defines but reports nothing in it.
    *sorted((REPO / "packaging").glob("*.d/*.sh")),
    *sorted((REPO / "packaging/lib").glob("*.sh")),
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
    # Beside the releases (the venv step, skipped here, makes one: tests/packaging/test_release.py)
    assert os.access(tmp_path / "opt/pdn/libexec/pdn-release", os.X_OK)
    # The release state: root's own directory, outside the one the roles' users have theirs in.
    assert (tmp_path / "var/lib/pdn-release").is_dir()
    assert not (tmp_path / "var/lib/pdn/release").exists()
    wants = tmp_path / "etc/systemd/system/multi-user.target.wants"
    assert (wants / "pdn-display.service").is_symlink()
    assert not (wants / "pdn-scheduler.service").is_symlink()
    out = result.stdout
    assert "would create the system users pdn (the display's), pdn-scheduler, pdn-content" in out
    # A new display serves HTTPS and says how to pair and pin.
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
    """Secrets at rest: /etc/pdn's files may hold tokens."""
    assert install_into(tmp_path).returncode == 0
    services = tmp_path / "etc/pdn/services.env"
    services.chmod(0o644)
    again = install_into(tmp_path)
    assert again.returncode == 0, again.stderr
    assert oct(services.stat().st_mode & 0o777) == "0o640"
    assert "was mode 644, readable by others" in again.stderr
    assert "pdn ctl pair https://" in again.stdout and "--pairing-code" in again.stdout


def test_a_display_with_a_local_sensor_or_content_server_serves_https_too(tmp_path: Path) -> None:
    """They pair with it like any controller and pin its certificate
    (server.platform.displaycreds)."""
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


def test_sensors_get_a_token_printed_once_whatever_the_umask(tmp_path: Path) -> None:
    """A sensor beyond loopback needs its token: install.sh makes one for every pdn-sensor@
    unit (/etc/pdn/sensor.env, 0640 even under umask 000), shows it once and keeps it."""
    result = run("bash", "-c", f'umask 000; exec bash "{INSTALL}" --root "{tmp_path}" '
                 "--skip packages,venv --services sensor")  # fmt: skip
    assert result.returncode == 0, result.stderr
    env = tmp_path / "etc/pdn/sensor.env"
    assert oct(env.stat().st_mode & 0o777) == "0o640"
    (token,) = [line.split("=", 1)[1] for line in env.read_text().splitlines()
                if line.startswith("PDN_API_TOKEN=")]  # fmt: skip
    assert len(token) == 43 and result.stdout.count(token) == 1
    for name in ("pdn.toml", "services.env"):
        assert oct((tmp_path / "etc/pdn" / name).stat().st_mode & 0o777) == "0o640"
    unit = (tmp_path / "etc/systemd/system/pdn-sensor@.service").read_text()
    assert "EnvironmentFile=-/etc/pdn/sensor.env\n" in unit
    again = install_into(tmp_path, "--services", "sensor")
    assert again.returncode == 0 and token not in again.stdout
    assert f"PDN_API_TOKEN={token}" in env.read_text()


# A real install (not --root) in a mount namespace of its own: /etc a copy, /var/lib and /opt
# empty file systems, so the users, owners and modes are real and this machine keeps its own.
REAL_INSTALL = r"""
set -euo pipefail
work=$1 layout=$2
cp -a /etc "$work/etc"
mount --bind "$work/etc" /etc
mount -t tmpfs -o mode=0755 tmpfs /var/lib
mount -t tmpfs -o mode=0755 tmpfs /opt
# Root's secret, like /etc/shadow (which useradd changes, so not that one).
install -m 0600 /dev/null /etc/pdn-secret
echo "root's secret" >/etc/pdn-secret
old() { install -m 0600 -o pdn -g pdn /dev/null "/var/lib/pdn/$1"; echo "$1" >"/var/lib/pdn/$1"; }
if [ "$layout" != fresh ]; then
    # As install.sh left a machine with every role when one user, pdn, ran them all.
    useradd --system --user-group --home-dir /var/lib/pdn --no-create-home \
        --shell /usr/sbin/nologin pdn
    install -d -m 0750 -o pdn -g pdn /var/lib/pdn /var/lib/pdn/display /var/lib/pdn/scheduler \
        /var/lib/pdn/schedules /var/lib/pdn/apps /var/lib/pdn/sensor-door /var/lib/pdn/.config \
        /var/lib/pdn/.config/pdn
    key=display/tls-key.pem
    if [ "$layout" = 0.1.0 ]; then key=tls-key.pem; old display.db; fi
    for file in "$key" scheduler/scheduler.db schedules/s.xml apps/menu sensor-door/outbox.db \
        .config/pdn/ctl.toml; do old "$file"; done
    ln -s /etc/pdn-secret /var/lib/pdn/scheduler/planted
    chown -h pdn:pdn /var/lib/pdn/scheduler/planted
    install -d -m 0755 /var/lib/pdn/release
    echo current=0.1.0-a >/var/lib/pdn/release/state
    install -d -m 0755 /etc/pdn
    echo PDN_API_TOKEN=kept >/etc/pdn/scheduler.env
    echo PDN_SENSOR_TYPE=door >/etc/pdn/sensor-door.env
    chown root:pdn /etc/pdn/scheduler.env /etc/pdn/sensor-door.env
    chmod 0644 /etc/pdn/sensor-door.env
fi
secret=$(stat -c '%U %G %a %Y' /etc/pdn-secret; cat /etc/pdn-secret)
umask 000
bash "$REPO/packaging/install.sh" --skip packages,venv,enable,start \
    --services display,scheduler,content,sensor >"$work/install.log" 2>&1
umask 022
if [ "$layout" = 0.1.0 ]; then
    echo "before-start $(stat -c %U /var/lib/pdn)"
    /opt/pdn/libexec/pdn-release started 2>>"$work/install.log"
fi
/opt/pdn/libexec/pdn-release check 2>>"$work/install.log"
can() { if runuser -u "$1" -- "${@:2}" >/dev/null 2>&1; then echo yes; else echo no; fi; }
echo "pdn cat-scheduler-env $(can pdn cat /etc/pdn/scheduler.env)"
echo "pdn cat-sensor-env $(can pdn cat /etc/pdn/sensor.env)"
echo "pdn ls-scheduler $(can pdn ls /var/lib/pdn/scheduler)"
echo "pdn ls-schedules $(can pdn ls /var/lib/pdn/schedules)"
echo "pdn ls-apps $(can pdn ls /var/lib/pdn/apps)"
echo "pdn rename-scheduler $(can pdn mv /var/lib/pdn/scheduler /var/lib/pdn/mine)"
echo "pdn write-release-state $(can pdn touch /var/lib/pdn-release/state)"
echo "pdn cat-own-config $(can pdn cat /etc/pdn/pdn.toml)"
echo "pdn-scheduler cat-display-config $(can pdn-scheduler cat /etc/pdn/pdn.toml)"
echo "pdn-scheduler ls-display $(can pdn-scheduler ls /var/lib/pdn/display)"
echo "pdn-scheduler cat-own-env $(can pdn-scheduler cat /etc/pdn/scheduler.env)"
echo "pdn-content cat-scheduler-env $(can pdn-content cat /etc/pdn/scheduler.env)"
echo "pdn-sensor ls-scheduler $(can pdn-sensor ls /var/lib/pdn/scheduler)"
echo "pdn-sensor cat-own-env $(can pdn-sensor cat /etc/pdn/sensor.env)"
if [ "$layout" != fresh ]; then
    echo "pdn cat-own-key $(can pdn cat /var/lib/pdn/display/tls-key.pem)"
    echo "pdn-scheduler cat-own-db $(can pdn-scheduler cat /var/lib/pdn/scheduler/scheduler.db)"
    echo "pdn-sensor cat-own-outbox $(can pdn-sensor cat /var/lib/pdn/sensor-door/outbox.db)"
    echo "pdn-sensor cat-pairings $(can pdn-sensor cat /var/lib/pdn/sensor/.config/pdn/ctl.toml)"
    echo "pdn-content cat-pairings $(can pdn-content cat /var/lib/pdn/content/.config/pdn/ctl.toml)"
    echo "pdn-sensor cat-own-sensor-env $(can pdn-sensor cat /etc/pdn/sensor-door.env)"
    echo "old-release-state $(cat /var/lib/pdn-release/state)"
    echo "old-release-dir $(test -e /var/lib/pdn/release && echo there || echo gone)"
fi
now=$(stat -c '%U %G %a %Y' /etc/pdn-secret; cat /etc/pdn-secret)
echo "secret $(test "$now" = "$secret" && echo unchanged || echo CHANGED)"
for path in /etc/pdn/* /var/lib/pdn /var/lib/pdn/* /var/lib/pdn-release; do
    stat -c 'stat %n %U:%G %a' "$path"
done
"""


@pytest.mark.parametrize("layout", ["fresh", "0.2.0", "0.1.0"])
def test_a_real_install_gives_each_role_a_user_that_reads_only_its_own(
    tmp_path: Path, layout: str
) -> None:
    """install.sh as root, for real, in a mount namespace: fresh, and over a machine where one
    user (pdn) ran every role (0.2.0's layout, and 0.1.0's, whose display kept its data in
    /var/lib/pdn itself). The display's user reads neither the scheduler's nor the sensors'
    secrets or data, and they not the display's; each reads its own; what pdn owned before is
    handed to its role's user (pdn's planted link is not followed), the pairings of pdn ctl pair
    follow the sensor and the content server, and the release state moves to root's directory."""
    require_tools("unshare", "runuser", "useradd")
    if os.getuid() != 0:
        pytest.skip("a real install needs root")
    result = subprocess.run(
        ["unshare", "--mount", "--propagation", "private", "bash", "-c", REAL_INSTALL, "install",
         str(tmp_path), layout],
        capture_output=True, text=True, timeout=300, check=False,
        env={**os.environ, "REPO": str(REPO)},
    )  # fmt: skip
    log = (tmp_path / "install.log").read_text() if (tmp_path / "install.log").exists() else ""
    assert result.returncode == 0, result.stderr + log
    seen = {}
    for line in result.stdout.splitlines():
        key, _, value = line.rpartition(" ")
        seen[key] = value
    denied = ["pdn cat-scheduler-env", "pdn cat-sensor-env", "pdn ls-scheduler",
              "pdn ls-schedules", "pdn ls-apps", "pdn rename-scheduler",
              "pdn write-release-state", "pdn-scheduler cat-display-config",
              "pdn-scheduler ls-display", "pdn-content cat-scheduler-env",
              "pdn-sensor ls-scheduler"]  # fmt: skip
    allowed = ["pdn cat-own-config", "pdn-scheduler cat-own-env", "pdn-sensor cat-own-env"]
    if layout != "fresh":
        allowed += ["pdn cat-own-key", "pdn-scheduler cat-own-db", "pdn-sensor cat-own-outbox",
                    "pdn-sensor cat-pairings", "pdn-content cat-pairings",
                    "pdn-sensor cat-own-sensor-env"]  # fmt: skip
    assert {key: seen[key] for key in denied} == dict.fromkeys(denied, "no"), log
    assert {key: seen[key] for key in allowed} == dict.fromkeys(allowed, "yes"), log
    assert seen["secret"] == "unchanged"
    expected = {
        "/etc/pdn/pdn.toml": "root:pdn 640",
        "/etc/pdn/scheduler.env": "root:pdn-scheduler 640",
        "/etc/pdn/sensor.env": "root:pdn-sensor 640",
        "/etc/pdn/services.env": "root:root 640",
        "/var/lib/pdn": "root:root 755",
        "/var/lib/pdn/display": "pdn:pdn 750",
        "/var/lib/pdn/scheduler": "pdn-scheduler:pdn-scheduler 750",
        "/var/lib/pdn/schedules": "pdn-scheduler:pdn-scheduler 750",
        "/var/lib/pdn/apps": "pdn-content:pdn-content 750",
        "/var/lib/pdn/content": "pdn-content:pdn-content 750",
        "/var/lib/pdn/sensor": "pdn-sensor:pdn-sensor 750",
        "/var/lib/pdn-release": "root:root 755",
    }
    stats = {line.split()[1]: " ".join(line.split()[2:]) for line in result.stdout.splitlines()
             if line.startswith("stat ")}  # fmt: skip
    assert {path: stats.get(path) for path in expected} == expected, result.stdout
    if layout != "fresh":
        assert stats["/etc/pdn/sensor-door.env"] == "root:pdn-sensor 640"
        assert stats["/var/lib/pdn/sensor-door"] == "pdn-sensor:pdn-sensor 750"
        assert seen["old-release-state"] == "current=0.1.0-a"
        assert seen["old-release-dir"] == "gone"
        assert "PDN_API_TOKEN=kept" not in result.stdout  # (kept, and never printed)
    if layout == "0.1.0":
        # The display's data was still in /var/lib/pdn: pdn's until its next start moved it.
        assert seen["before-start"] == "pdn"
        assert "moved the display's data" in log


def test_bad_options_are_refused(tmp_path: Path) -> None:
    assert "unknown option" in install_into(tmp_path, "--frobnicate").stderr
    assert "--platform must be" in install_into(tmp_path, "--platform", "vnc").stderr
    assert "unknown service" in install_into(tmp_path, "--services", "display,printer").stderr
    missing = install_into(tmp_path, "--wheelhouse", str(tmp_path / "nowhere"))
    assert "--wheelhouse: no such directory" in missing.stderr


def test_a_wheelhouse_without_the_locked_pip_installs_nothing(tmp_path: Path) -> None:
    """Offline (--wheelhouse), pip comes from the lock's pip wheel there: without it, no
    release is made and nothing is switched (before any venv is made)."""
    from tests.support.release import BASE_PYTHON, PREVIOUS_WHEEL

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
    (a switch meanwhile cannot mix two releases)."""
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

"""Releases and the unattended rollback, with install.sh --root and real releases.

install.sh installs real wheels into a throwaway root (each release a venv of its own that
reuses this checkout's dependencies: PDN_INSTALL_SITE_PACKAGES), the locked pip from the
session's wheelhouse (install.sh --wheelhouse: nothing downloaded). The wheels are built once a
module; the root with 0.2.0 installed, which three tests upgrade, is installed once and restored
for each (at the same path: a venv cannot move). The display unit is then run as systemd runs
pdn-display.service: its ExecStartPre (pdn-release started, as root) and ExecStart (the
release's start wrapper, a real `pdn display` on the shared Xvfb) read from the installed unit
file, restarted RestartSec after every exit, with pdn-release-check.service's command
(pdn-release check) every second as its timer would, on short deadlines. Nothing of
pdn-release is replaced by a stand-in.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import ssl
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.support.pages import PageServer, json_reply
from tests.support.paths import REPO
from tests.support.ports import free_port
from tests.support.release import (
    BASE_PYTHON,
    PREVIOUS_WHEEL,
    SITE_PACKAGES,
    build_venv,
    build_wheel,
    release_env,
)
from tests.support.waiting import wait_until

INSTALL = REPO / "packaging/install.sh"
UNINSTALL = REPO / "packaging/uninstall.sh"
RELEASE = REPO / "packaging/pdn-release"

pytestmark = pytest.mark.slow


def source_copy(target: Path, version: str) -> Path:
    """This checkout's package sources, at another version."""
    for name in ("player", "server", "cds"):
        shutil.copytree(
            REPO / name, target / name, ignore=shutil.ignore_patterns("__pycache__", "*.pyc")
        )
    shutil.copy2(REPO / "README.md", target / "README.md")
    pyproject = (REPO / "pyproject.toml").read_text()
    (target / "pyproject.toml").write_text(
        re.sub(r'(?m)^version = "[^"]*"', f'version = "{version}"', pyproject)
    )
    return target


# A release whose display cannot start: `pdn display` exits at once (or, with
# PDN_TEST_BROKEN=hang, runs without ever answering); every other command works.
BROKEN_MAIN = """def main(argv: Sequence[str] | None = None) -> int:
    if list(argv if argv is not None else __import__("sys").argv[1:])[:1] == ["display"]:
        if __import__("os").environ.get("PDN_TEST_BROKEN") == "hang":
            __import__("time").sleep(3600)
        raise SystemExit("pdn 0.2.1, a test release, cannot start a display")
"""


@dataclass(frozen=True)
class Wheels:
    """The releases' wheels by name, and the wheelhouse install.sh takes the locked pip from."""

    files: dict[str, Path]
    house: Path

    def __getitem__(self, name: str) -> Path:
        return self.files[name]


@pytest.fixture(scope="module")
def wheels(tmp_path_factory: pytest.TempPathFactory, wheelhouse: Path) -> Wheels:
    base = tmp_path_factory.mktemp("wheels")
    builder = build_venv(base / "build-venv", wheelhouse)
    new = build_wheel(REPO, base / "new", builder)
    broken_source = source_copy(base / "broken-src", "0.2.1")
    cli = broken_source / "server/cli.py"
    cli.write_text(
        cli.read_text().replace(
            "def main(argv: Sequence[str] | None = None) -> int:\n", BROKEN_MAIN, 1
        )
    )
    broken = build_wheel(broken_source, base / "broken", builder)
    # A release pip cannot finish: a dependency it cannot fetch (nothing listens there).
    missing_source = source_copy(base / "missing-src", "0.2.2")
    pyproject = missing_source / "pyproject.toml"
    pyproject.write_text(
        pyproject.read_text().replace(
            "dependencies = [\n",
            'dependencies = [\n    "pdn-test-missing @ http://127.0.0.1:9/pdn_test_missing-1.0-py3-none-any.whl",\n',
            1,
        )
    )
    missing = build_wheel(missing_source, base / "missing", builder)
    # A release pip installs but that does not import.
    unfit_source = source_copy(base / "unfit-src", "0.2.3")
    cds_init = unfit_source / "cds/__init__.py"
    cds_init.write_text('raise ImportError("a test release that does not import")\n')
    unfit = build_wheel(unfit_source, base / "unfit", builder)
    files = {"previous": PREVIOUS_WHEEL, "new": new, "broken": broken, "missing": missing,
             "unfit": unfit}  # fmt: skip
    return Wheels(files, wheelhouse)


def install(
    root: Path, wheels: Wheels, name: str, *options: str, **env: str
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", str(INSTALL), "--root", str(root), "--skip", "packages",
         "--python", BASE_PYTHON, "--platform", "xcb", "--wheel", str(wheels[name]),
         "--wheelhouse", str(wheels.house), *options],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
        env=release_env(PDN_INSTALL_SITE_PACKAGES=SITE_PACKAGES, **env),
    )  # fmt: skip


def installed(root: Path, wheels: Wheels, name: str, *options: str) -> str:
    result = install(root, wheels, name, *options)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-3000:]
    return result.stdout


def current(root: Path) -> str:
    return Path(os.readlink(root / "opt/pdn/current")).name


def state(root: Path) -> dict[str, str]:
    path = root / "var/lib/pdn-release/state"
    return dict(line.split("=", 1) for line in path.read_text().splitlines())


def releases(root: Path) -> list[str]:
    return sorted(p.name for p in (root / "opt/pdn/releases").iterdir())


def pdn_release(root: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", str(RELEASE), *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env={**os.environ, "PDN_ROOT": str(root), **env},
    )


class DisplayUnit:
    """pdn-display.service as systemd runs it, in a root: ExecStartPre, then ExecStart,
    started again RestartSec after it exits; and pdn-release-check.timer's command every
    ``check_every`` seconds. The commands are the installed unit's, their /opt/pdn and /etc/pdn
    paths taken into the root."""

    def __init__(self, root: Path, port: int, deadline: int, restart_sec: float = 0.5) -> None:
        self.root = root
        self.port = port
        self.restart_sec = restart_sec
        unit = (root / "etc/systemd/system/pdn-display.service").read_text()
        self.pre = self._command(unit, "ExecStartPre")
        self.start = self._command(unit, "ExecStart")
        config = root / "etc/pdn/pdn.toml"
        self.env = release_env(
            PDN_ROOT=str(root),
            PDN_CONFIG=str(config),
            PDN_RELEASE_DEADLINE=str(deadline),
            STATE_DIRECTORY=str(root / "var/lib/pdn/display"),
            PDN_RELEASE_STATE=str(root / "var/lib/pdn-release/state"),
            HOME=str(root / "var/lib/pdn/display"),
        )
        self.process: subprocess.Popen[bytes] | None = None
        self.output = root / "display.log"
        self.starts = 0
        self.log: list[str] = []
        self.rolled_back_at: float | None = None

    def _command(self, unit: str, key: str) -> list[str]:
        (line,) = re.findall(rf"(?m)^{key}=(.*)$", unit)
        words = line.lstrip("-+@:!").split()
        return [str(self.root) + w if w.startswith(("/opt/pdn", "/etc/pdn")) else w for w in words]

    def _run_start(self) -> None:
        pre = subprocess.run(
            self.pre, capture_output=True, text=True, timeout=60, env=self.env, check=False
        )
        self.log.append(pre.stderr)
        assert pre.returncode == 0, pre.stderr  # the '-' would let systemd go on; it never fails
        self.starts += 1
        self.output = self.root / f"display-{self.starts}.log"
        with self.output.open("wb") as output:
            self.process = subprocess.Popen(
                self.start, env=self.env, stdout=subprocess.DEVNULL, stderr=output
            )

    def check(self) -> None:
        """pdn-release-check.service, and what its 'systemctl restart' would do."""
        result = subprocess.run(
            [str(self.root / "opt/pdn/libexec/pdn-release"), "check"],
            capture_output=True, text=True, timeout=60, env=self.env, check=False,
        )  # fmt: skip
        self.log.append(result.stderr)
        assert result.returncode == 0, result.stderr
        if "restart pdn-display.service now" in result.stderr:
            self.stop()

    def run_until(self, done: Callable[[], bool], timeout: float) -> float:
        """Supervise until ``done()``; returns the seconds it took."""
        began = time.monotonic()
        next_check = [began]

        def supervised() -> bool:
            if self.process is None or self.process.poll() is not None:
                if self.process is not None:
                    self.log.append(self.output.read_text(errors="replace")[-2000:])
                    time.sleep(self.restart_sec)
                self._run_start()
            if time.monotonic() >= next_check[0]:
                self.check()
                next_check[0] = time.monotonic() + 1.0
            return done()

        wait_until(
            supervised, timeout, lambda: "done; log:\n" + "\n".join(self.log)[-6000:], step=0.2
        )
        return time.monotonic() - began

    def health(self) -> dict[str, Any] | None:
        try:
            body: dict[str, Any] = call(f"https://127.0.0.1:{self.port}/x/health")
        except OSError:
            return None
        return body

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(20)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(10)
        self.process = None


# The display's self-signed certificate (as installed: tls = true), not checked here.
INSECURE = ssl._create_unverified_context()


def call(url: str, body: dict[str, Any] | None = None) -> Any:
    """GET (or POST ``body`` as JSON) to the display, HTTPS unchecked; its JSON answer."""
    request = urllib.request.Request(url, headers={"Accept": "application/json"})
    if body is not None:
        request.data = json.dumps(body).encode()
        request.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(request, timeout=5, context=INSECURE) as answer:
            return json.load(answer)
    except urllib.error.HTTPError as error:  # 503: degraded, with its body
        if error.code != 503:
            raise
        with error:
            return json.load(error)


@pytest.fixture(scope="module")
def installed_new(tmp_path_factory: pytest.TempPathFactory, wheels: Wheels) -> tuple[Path, Path]:
    """0.2.0 installed by install.sh into a root, once a module: the path it was installed at,
    and where that root is kept (moved, untouched)."""
    base = tmp_path_factory.mktemp("installed-0.2.0")
    root = base / "root"
    installed(root, wheels, "new")
    root.rename(base / "copy")
    return root, base / "copy"


@pytest.fixture
def new_root(installed_new: tuple[Path, Path], tmp_path: Path) -> Iterator[Path]:
    """A root as install.sh left it after installing 0.2.0 as the first release: the module's
    root, restored from its copy (modes, times and links as they were) at the path it was
    installed at, which its venv names. Afterwards it is moved to the test's tmp_path (a
    rename: what the display wrote there is not deleted file by file, and stays to be read)."""
    root, copy = installed_new
    shutil.rmtree(root, ignore_errors=True)  # (only there if a test before it was interrupted)
    shutil.copytree(copy, root, symlinks=True)
    yield root
    root.rename(tmp_path / "root")


def on_loopback(root: Path) -> int:
    """The installed display's config, on loopback at a free port (on HTTPS as install.sh
    configures it); the port."""
    port = free_port()
    config = root / "etc/pdn/pdn.toml"
    text = config.read_text().replace('host = "0.0.0.0"', 'host = "127.0.0.1"')
    assert "\ntls = true\n" in text
    config.write_text(text.replace("port = 8080", f"port = {port}"))
    return port


@pytest.fixture
def units() -> Iterator[list[DisplayUnit]]:
    started: list[DisplayUnit] = []
    yield started
    for unit in started:
        unit.stop()


def healthy(unit: DisplayUnit) -> Callable[[], bool]:
    def check() -> bool:
        body = unit.health()
        return bool(body and body.get("status") == "ok")

    return check


def test_a_good_upgrade_switches_and_passes_its_trial(
    tmp_path: Path, wheels: Wheels, units: list[DisplayUnit]
) -> None:
    root = tmp_path / "root"
    installed(root, wheels, "previous")
    port = on_loopback(root)
    (old,) = releases(root)
    assert old.startswith("0.1.0-") and current(root) == old
    assert "trial" not in state(root)  # the first release: nothing to go back to
    out = installed(root, wheels, "new")
    new = current(root)
    assert new.startswith("0.2.0-") and releases(root) == sorted([old, new])
    assert state(root)["trial"] == new and state(root)["previous"] == old
    assert "on trial" in out
    assert os.readlink(root / "opt/pdn/bin/pdn") == "../current/venv/bin/pdn"
    switched = int(state(root)["trial-since"])
    unit = DisplayUnit(root, port, deadline=120)
    units.append(unit)
    unit.run_until(lambda: "trial" not in state(root), timeout=150)
    took = time.time() - switched
    assert current(root) == new and unit.starts == 1
    assert any(f"release {new} is healthy" in line for line in unit.log)
    body = unit.health()
    assert body is not None and body["version"] == "0.2.0"
    assert body["release"] == {
        "name": new, "version": "0.2.0", "rolled-back-from": None,
        "rolled-back-because": None, "on-trial": False,
    }  # fmt: skip
    print(f"good upgrade: trial passed {took:.1f} s after the switch")
    # The same wheel again: the release is reused, nothing switches.
    again = installed(root, wheels, "new")
    assert "is installed already" in again and current(root) == new
    assert "trial" not in state(root)

    # The previous release reads what this one wrote: back to 0.1.0 by hand, its display opens
    # the database 0.2.0 migrated and wrote, and carries on from it.
    base = f"https://127.0.0.1:{port}"
    call(f"{base}/sensing", {"sensor-id": "door", "sensor-type": "presence", "data": True})
    sequence = call(f"{base}/playback/")["sequence"]
    back = pdn_release(root, "rollback", "the test goes back")
    assert back.returncode == 0, back.stderr
    assert current(root) == old and "restart pdn-display.service now" in back.stderr
    unit.stop()  # what systemctl restart does
    unit.run_until(healthy(unit), timeout=150)
    body = unit.health()
    assert body is not None and body["version"] == "0.1.0"
    assert [s["sensor-id"] for s in call(f"{base}/sensing")] == ["door"]
    assert call(f"{base}/playback/")["sequence"] >= sequence
    assert "database schema" not in unit.output.read_text()  # nothing migrated, nothing refused


def test_a_release_whose_display_exits_rolls_back_by_itself(
    new_root: Path, wheels: Wheels, units: list[DisplayUnit]
) -> None:
    root = new_root
    port = on_loopback(root)
    good = current(root)
    installed(root, wheels, "broken")
    bad = current(root)
    assert bad.startswith("0.2.1-") and state(root)["trial"] == bad
    switched = int(state(root)["trial-since"])
    unit = DisplayUnit(root, port, deadline=300)
    units.append(unit)
    unit.run_until(lambda: current(root) == good, timeout=120)
    rolled_back = time.time() - switched
    after = state(root)
    assert after["rolled-back-from"] == bad and "trial" not in after
    assert after["reason"] == "the display exited 4 times"
    assert unit.starts == 5  # 4 exits, then the 5th start runs the previous release
    assert any(f"ROLLED BACK from {bad}" in line for line in unit.log)
    unit.run_until(healthy(unit), timeout=120)
    body = unit.health()
    assert body is not None
    assert body["release"]["name"] == good and body["version"] == "0.2.0"
    assert body["release"]["rolled-back-from"] == bad
    status = pdn_release(root, "status")
    assert f"rolled back from {bad}" in status.stdout
    print(f"exits: rolled back {rolled_back:.1f} s after the switch")


def test_a_release_that_never_answers_rolls_back_at_the_deadline(
    new_root: Path, wheels: Wheels, units: list[DisplayUnit]
) -> None:
    root = new_root
    port = on_loopback(root)
    good = current(root)
    installed(root, wheels, "broken")
    bad = current(root)
    switched = int(state(root)["trial-since"])  # the switch, in whole seconds
    unit = DisplayUnit(root, port, deadline=15)
    unit.env["PDN_TEST_BROKEN"] = "hang"
    units.append(unit)
    unit.run_until(lambda: current(root) == good, timeout=90)
    rolled_back = time.time() - switched
    assert 15 <= rolled_back < 40
    assert state(root)["rolled-back-from"] == bad
    assert "within 15 s" in state(root)["reason"]
    assert unit.starts == 1
    unit.run_until(healthy(unit), timeout=120)  # restarted on the previous release
    assert unit.starts == 2
    print(f"deadline: rolled back {rolled_back:.1f} s after the switch")


def test_a_pip_or_check_failure_changes_nothing(new_root: Path, wheels: Wheels) -> None:
    root = new_root
    before = (current(root), releases(root), state(root))
    # (pip's retries of a refused connection would only make its failure come later)
    result = install(root, wheels, "missing", PIP_RETRIES="0")
    assert result.returncode != 0
    assert "pip could not install" in result.stderr
    assert "the current release is unchanged" in result.stderr
    assert (current(root), releases(root), state(root)) == before
    assert not list((root / "opt/pdn/releases").glob("0.2.2-*"))
    # Installed, but its check fails: the same.
    result = install(root, wheels, "unfit")
    assert result.returncode != 0
    assert "the new release does not import" in result.stderr
    assert "a test release that does not import" in result.stderr
    assert (current(root), releases(root), state(root)) == before


def test_an_install_from_before_releases_becomes_the_release_to_go_back_to(
    tmp_path: Path, wheels: Wheels
) -> None:
    from tests.support.release import release_venv

    root = tmp_path / "root"
    # The layout of pdn 0.1.0's install.sh: the project installed in place.
    release_venv(root / "opt/pdn/venv", wheels["previous"])
    (root / "opt/pdn/libexec").mkdir(parents=True)
    shutil.copy2(REPO / "packaging/pdn-display-start", root / "opt/pdn/libexec/pdn-display-start")
    out = installed(root, wheels, "new")
    assert "moved the install in /opt/pdn/venv (pdn 0.1.0) to the release 0.1.0-legacy" in out
    assert sorted(releases(root)) == sorted(["0.1.0-legacy", current(root)])
    assert state(root)["previous"] == "0.1.0-legacy"
    assert state(root)["trial"] == current(root)
    legacy = root / "opt/pdn/releases/0.1.0-legacy"
    assert (legacy / "libexec/pdn-display-start").is_file()
    # Its scripts name /opt/pdn/venv: a link to where it went.
    assert os.readlink(root / "opt/pdn/venv") == "releases/0.1.0-legacy/venv"
    version = subprocess.run(
        [str(legacy / "venv/bin/pdn"), "--version"], capture_output=True, text=True, check=False
    )
    assert version.stdout.strip() == "pdn 0.1.0"
    result = subprocess.run(["bash", str(UNINSTALL), "--root", str(root)], capture_output=True,
                            text=True, check=False, timeout=60)  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert not (root / "opt/pdn").exists()
    assert not (root / "var/lib/pdn-release").exists()
    assert (root / "etc/pdn/pdn.toml").exists()


# pdn-release alone, on releases made by hand (fast)


def fake_release(root: Path, name: str, age: int) -> None:
    directory = root / "opt/pdn/releases" / name
    (directory / "venv/bin").mkdir(parents=True)
    (directory / "RELEASE").write_text(f"version={name.split('-', maxsplit=1)[0]}\n")
    marker = directory / ".complete"
    marker.touch()
    os.utime(marker, (time.time() - age, time.time() - age))


def test_prune_keeps_the_current_release_and_the_two_before_it(tmp_path: Path) -> None:
    for age, name in enumerate(["0.6.0-f", "0.5.0-e", "0.4.0-d", "0.3.0-c", "0.2.0-b"]):
        fake_release(tmp_path, name, 100 * (age + 1))
    assert pdn_release(tmp_path, "switch", "0.3.0-c").returncode == 0
    # The oldest is the one to go back to: kept with the current one and the newest.
    assert pdn_release(tmp_path, "switch", "0.2.0-b").returncode == 0
    assert pdn_release(tmp_path, "switch", "0.4.0-d", "--trial").returncode == 0
    assert state(tmp_path)["previous"] == "0.2.0-b"
    pruned = pdn_release(tmp_path, "prune")
    assert pruned.returncode == 0, pruned.stderr
    assert releases(tmp_path) == ["0.2.0-b", "0.4.0-d", "0.6.0-f"]
    assert current(tmp_path) == "0.4.0-d"


def test_a_power_cut_in_a_rollback_is_finished_at_the_next_check(tmp_path: Path) -> None:
    fake_release(tmp_path, "0.2.0-b", 200)
    fake_release(tmp_path, "0.3.0-c", 100)
    assert pdn_release(tmp_path, "switch", "0.2.0-b").returncode == 0
    assert pdn_release(tmp_path, "switch", "0.3.0-c", "--trial").returncode == 0
    # The state was replaced (it names the release to go back to), then the power went: the
    # link still names the failed release.
    path = tmp_path / "var/lib/pdn-release/state"
    path.write_text("current=0.2.0-b\nrolled-back-from=0.3.0-c\nreason=test\n")
    assert current(tmp_path) == "0.3.0-c"
    result = pdn_release(tmp_path, "check")
    assert result.returncode == 0, result.stderr
    assert current(tmp_path) == "0.2.0-b"
    assert "finishing a switch that was interrupted" in result.stderr
    # A half-written state file is never read: it is a temporary file until the rename.
    assert not list(path.parent.glob(".state.*"))


def test_too_many_exits_roll_back_before_the_next_start(tmp_path: Path) -> None:
    fake_release(tmp_path, "0.2.0-b", 200)
    fake_release(tmp_path, "0.3.0-c", 100)
    assert pdn_release(tmp_path, "switch", "0.2.0-b").returncode == 0
    assert pdn_release(tmp_path, "switch", "0.3.0-c", "--trial").returncode == 0
    for start in range(1, 5):
        assert pdn_release(tmp_path, "started").returncode == 0
        assert current(tmp_path) == "0.3.0-c" and state(tmp_path)["starts"] == str(start)
    fifth = pdn_release(tmp_path, "started")
    assert fifth.returncode == 0
    assert current(tmp_path) == "0.2.0-b"
    assert "ROLLED BACK from 0.3.0-c (version 0.3.0) to 0.2.0-b" in fifth.stderr
    # Outside a trial a start is not counted, and never fails.
    assert pdn_release(tmp_path, "started").returncode == 0
    assert "starts" not in state(tmp_path)


def test_the_trial_runs_on_the_boot_clock(tmp_path: Path) -> None:
    """Not the wall clock (a Pi without a real-time clock is set by NTP after boot); a reboot
    in the trial gives the release its whole time again."""
    fake_release(tmp_path, "0.2.0-b", 200)
    fake_release(tmp_path, "0.3.0-c", 100)
    assert pdn_release(tmp_path, "switch", "0.2.0-b").returncode == 0
    assert pdn_release(tmp_path, "switch", "0.3.0-c", "--trial").returncode == 0
    config = tmp_path / "pdn.toml"
    config.write_text(f'[listen]\nhost = "127.0.0.1"\nport = {free_port()}\n')  # nobody there
    path = tmp_path / "var/lib/pdn-release/state"

    def check(**changes: str) -> subprocess.CompletedProcess[str]:
        values = {**state(tmp_path), **changes}
        path.write_text("".join(f"{k}={v}\n" for k, v in values.items()))
        return pdn_release(tmp_path, "check", PDN_CONFIG=str(config), PDN_RELEASE_DEADLINE="5")

    # The wall clock jumped by hours since the switch: nothing happens.
    assert check(**{"trial-since": str(int(time.time()) - 36000)}).returncode == 0
    assert current(tmp_path) == "0.3.0-c"
    # Switched during another boot: this one gives the release its 5 s again.
    rebooted = check(**{"trial-boot": "another-boot", "trial-uptime": "0"})
    assert "this boot gives it 5 s again" in rebooted.stderr
    assert current(tmp_path) == "0.3.0-c" and state(tmp_path)["trial-boot"] != "another-boot"
    # 10 s of this boot without a healthy display: back.
    uptime = int(float(Path("/proc/uptime").read_text().split()[0]))
    late = check(**{"trial-uptime": str(uptime - 10)})
    assert current(tmp_path) == "0.2.0-b", late.stderr
    assert "within 5 s" in state(tmp_path)["reason"]


@contextmanager
def answering_health(body: dict[str, Any]) -> Iterator[int]:
    """A display's /x/health on the loopback (plain HTTP), answering ``body`` as it is then;
    yields its port."""
    with PageServer() as health:
        health.handle(lambda request: json_reply(body))
        yield health.port


def test_only_the_release_on_trial_confirms_it(tmp_path: Path) -> None:
    """The display that answers right after a switch may still be the release before: install.sh
    restarts it just after switching (a check can come first), and install.sh --no-start leaves
    it running until a reboot. Its "ok" confirmed the new release, which then crash-looped with
    no way back (seen under a real systemd). Now only the release on trial confirms itself (by
    its name; pdn 0.1.0, which has none, by its version), and its time runs from its first
    start."""
    fake_release(tmp_path, "0.2.0-b", 200)
    fake_release(tmp_path, "0.3.0-c", 100)
    assert pdn_release(tmp_path, "switch", "0.2.0-b").returncode == 0
    assert pdn_release(tmp_path, "switch", "0.3.0-c", "--trial").returncode == 0
    painted = {"alive": True, "last-frame": "2026-11-26T14:00:00+00:00"}
    body: dict[str, Any] = {"status": "ok", "version": "0.2.0", "renderer": painted,
                            "release": {"name": "0.2.0-b"}}  # fmt: skip
    config = tmp_path / "pdn.toml"
    uptime = int(float(Path("/proc/uptime").read_text().split()[0]))

    def check(deadline: int = 300) -> subprocess.CompletedProcess[str]:
        result = pdn_release(tmp_path, "check", PDN_CONFIG=str(config),
                             PDN_RELEASE_DEADLINE=str(deadline))  # fmt: skip
        assert result.returncode == 0, result.stderr
        return result

    with answering_health(body) as port:
        config.write_text(f'[listen]\nhost = "127.0.0.1"\nport = {port}\n')
        # The release before answers; the new one never started: nothing to judge, even late.
        check(deadline=0)
        assert current(tmp_path) == "0.3.0-c" and state(tmp_path)["trial"] == "0.3.0-c"
        # Its first start (a restart, or a boot after --no-start) starts its time.
        path = tmp_path / "var/lib/pdn-release/state"
        path.write_text(re.sub(r"(?m)^trial-uptime=.*$", "trial-uptime=1", path.read_text()))
        assert pdn_release(tmp_path, "started").returncode == 0
        assert int(state(tmp_path)["trial-uptime"]) >= uptime
        # Started, but the release before still answers: not confirmed; at the deadline, back.
        assert "kept" not in check().stderr
        assert state(tmp_path)["trial"] == "0.3.0-c"
        check(deadline=0)
        assert current(tmp_path) == "0.2.0-b"
        assert "answered by 0.2.0-b, not by 0.3.0-c" in state(tmp_path)["reason"]
        # The release on trial answering confirms it.
        assert pdn_release(tmp_path, "switch", "0.3.0-c", "--trial").returncode == 0
        body.update(version="0.3.0", release={"name": "0.3.0-c"})
        assert "release 0.3.0-c is healthy" in check().stderr
        assert "trial" not in state(tmp_path)
        # A release without a name in its health (pdn 0.1.0): its version decides.
        fake_release(tmp_path, "0.1.0-a", 300)
        assert pdn_release(tmp_path, "switch", "0.1.0-a", "--trial").returncode == 0
        assert pdn_release(tmp_path, "started").returncode == 0
        check()
        assert state(tmp_path)["trial"] == "0.1.0-a"  # 0.3.0-c still answers
        body.clear()
        body.update(status="ok", version="0.1.0", renderer=painted)
        assert "release 0.1.0-a is healthy" in check().stderr

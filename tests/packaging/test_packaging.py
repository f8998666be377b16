"""Packaging: the display extra, the lock file and what each set-up installs."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from server.cli import main
from tests.support.paths import REPO

QT = {"pyside6", "pyside6-essentials", "pyside6-addons", "shiboken6"}
INSTALL = REPO / "packaging/install.sh"
DEV = REPO / "packaging/dev.sh"


def pyproject() -> dict[str, Any]:
    with (REPO / "pyproject.toml").open("rb") as handle:
        return tomllib.load(handle)


def locked() -> dict[str, str]:
    pins: dict[str, str] = {}
    for raw in (REPO / "constraints.txt").read_text().splitlines():
        line = raw.split("#")[0].strip()
        if not line:
            continue
        requirement = Requirement(line)
        (specifier,) = requirement.specifier
        assert specifier.operator == "==", line
        pins[canonicalize_name(requirement.name)] = specifier.version
    return pins


def test_qt_is_only_in_the_display_extra() -> None:
    project = pyproject()["project"]
    base = {canonicalize_name(Requirement(entry).name) for entry in project["dependencies"]}
    assert not base & QT
    display = [Requirement(entry) for entry in project["optional-dependencies"]["display"]]
    assert "pyside6" in {canonicalize_name(r.name) for r in display}


def test_build_floor_and_bounded_server() -> None:
    data = pyproject()
    assert "setuptools>=77" in data["build-system"]["requires"]  # SPDX license string
    assert isinstance(data["project"]["license"], str)
    (waitress,) = [
        Requirement(entry)
        for entry in data["project"]["dependencies"]
        if entry.startswith("waitress")
    ]
    assert any(spec.operator in ("<", "<=", "~=", "==") for spec in waitress.specifier)


def test_lock_file_pins_every_dependency_within_its_range() -> None:
    pins = locked()
    project = pyproject()["project"]
    declared = list(project["dependencies"])
    for extra in project["optional-dependencies"].values():
        declared.extend(extra)
    for entry in declared:
        requirement = Requirement(entry)
        name = canonicalize_name(requirement.name)
        assert name in pins, f"{name} is not in constraints.txt: run bash packaging/lock.sh"
        assert requirement.specifier.contains(pins[name], prereleases=True), (
            f"constraints.txt pins {name}=={pins[name]}, outside {requirement.specifier}: "
            "run bash packaging/lock.sh"
        )
    assert "pip" in pins and "setuptools" in pins
    header = (REPO / "constraints.txt").read_text().splitlines()[:3]
    assert any("packaging/lock.sh" in line and "uv" in line for line in header)


def test_setups_install_from_the_lock_file() -> None:
    dev = DEV.read_text()
    assert "x11-xserver-utils" in dev  # xset, for tests/player/test_power.py
    assert '-c "$constraints" -e "${root}[display,test,postgres]"' in dev
    # install.sh and the parts it sources (packaging/install.d).
    install = "\n".join(
        path.read_text() for path in [INSTALL, *sorted(INSTALL.parent.glob("install.d/*.sh"))]
    )
    pip_lines = [line for line in install.splitlines() if "pip install" in line]
    assert pip_lines and all('-c "$constraints"' in line for line in pip_lines)
    assert not any("--upgrade" in line for line in pip_lines)


def sourced(call: str) -> str:
    result = subprocess.run(
        ["bash", "-c", f'source "{INSTALL}"; {call}'],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return result.stdout


def test_installer_installs_qt_only_for_the_display_role() -> None:
    assert "libnss3" in sourced("SERVICES=display; system_packages eglfs").split()
    for role in ("scheduler", "content", "sensor", "scheduler,content"):
        packages = sourced(f"SERVICES={role}; system_packages auto").split()
        assert packages == ["python3-venv", "ca-certificates"], role


def test_installer_takes_the_lock_file_as_it_is() -> None:
    """Every machine gets the locked Qt: Raspberry Pi OS Bookworm, which would need an older
    one, is refused instead (tests/packaging/test_install.py)."""
    assert sourced("constraints_for").strip() == str(REPO / "constraints.txt")


def test_display_without_qt_names_the_command_that_installs_it(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    import importlib.util

    real = importlib.util.find_spec

    def find_spec(name: str, *args: Any, **kwargs: Any) -> Any:
        return None if name == "PySide6" else real(name, *args, **kwargs)

    monkeypatch.setattr(importlib.util, "find_spec", find_spec)
    assert main(["display", "--data-dir", str(tmp_path)]) == 1
    err = capsys.readouterr().err
    assert "PySide6" in err and "'display' extra" in err
    command = err.strip().splitlines()[-1].strip()
    assert command.startswith(f"{sys.executable} -m pip install")
    assert "[display]" in command and "constraints.txt" in command


@pytest.mark.slow
def test_plain_install_pulls_no_qt(tmp_path: Path) -> None:
    """``pip install .`` (no extra), resolved for real against the lock file: no Qt in it; the
    project's metadata puts PySide6 behind the display extra."""
    report = tmp_path / "report.json"
    result = subprocess.run(
        [
            sys.executable, "-m", "pip", "install", "--dry-run", "--ignore-installed",
            "--quiet", "--report", str(report), "-c", str(REPO / "constraints.txt"), str(REPO),
        ],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
        cwd=tmp_path,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-2000:]
    installs = json.loads(report.read_text())["install"]
    names = {canonicalize_name(item["metadata"]["name"]) for item in installs}
    assert {"flask", "waitress", "lxml", "pdn-display"} <= names
    assert not names & QT, names & QT
    (own,) = [item for item in installs if item["metadata"]["name"] == "pdn-display"]
    qt_requirements = [
        entry for entry in own["metadata"]["requires_dist"] if entry.lower().startswith("pyside6")
    ]
    assert qt_requirements and all('extra == "display"' in entry for entry in qt_requirements)


@pytest.mark.slow
def test_the_wheel_carries_every_file_the_code_loads(tmp_path: Path) -> None:
    """install.sh installs a built wheel, not the checkout: every file of the packages that is
    not Python (QML, pages, schemas, templates) must be in it. The QML files were not, and the
    first display installed for real (an emulated Pi, fresh-root.sh --arch arm64) stopped with
    'Stage.qml: No such file or directory'."""
    import zipfile

    # From a copy of the source files, as a fresh clone has them: a checkout's build/ and
    # *.egg-info (left by earlier installs) would carry files the metadata leaves out. The
    # tracked files where git and a clone are here; else (a tarball, no git) the packages' files.
    if shutil.which("git") and (REPO / ".git").exists():
        tracked = subprocess.run(
            ["git", "ls-files"], capture_output=True, text=True, timeout=60, check=True, cwd=REPO
        ).stdout.split()
    else:
        tracked = ["pyproject.toml", "README.md"] + [
            str(path.relative_to(REPO))
            for package in ("player", "server", "cds")
            for path in sorted((REPO / package).rglob("*"))
            if path.is_file() and "__pycache__" not in path.parts and path.suffix != ".pyc"
        ]
    source = tmp_path / "source"
    for name in tracked:
        if (REPO / name).is_file():
            (source / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(REPO / name, source / name)
    result = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--quiet", "-w", str(tmp_path),
         str(source)],
        capture_output=True, text=True, timeout=600, check=False, cwd=tmp_path,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-2000:]
    (wheel,) = tmp_path.glob("pdn_display-*.whl")
    shipped = set(zipfile.ZipFile(wheel).namelist())
    packages = ("player/", "server/", "cds/")
    data = [n for n in tracked if n.startswith(packages) and not n.endswith(".py")]
    assert "player/renderer/qml/Stage.qml" in data
    assert [name for name in data if name not in shipped] == []

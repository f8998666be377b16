"""The layout holds: imports run player -> server -> cds, the engine knows no Qt or Flask, and
no source file grows past what one reader can hold (docs/code.md)."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PACKAGES = ("cds", "server", "player")
MAX_LINES = 800

# What each package may import of the others (the `pdn` entry point names player's
# subcommand as a string, loaded lazily: that is not an import).
ALLOWED = {"cds": set(), "server": {"cds"}, "player": {"server", "cds"}}

# What decides what plays must not load a GUI toolkit or a web framework, even indirectly.
PURE = ("player.engine", "cds.parser", "cds.playlist", "cds.serialise")


def sources(*roots: str) -> list[Path]:
    return sorted(p for root in roots for p in (REPO / root).rglob("*.py"))


def imported_modules(path: Path) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
    return found


@pytest.mark.parametrize("package", PACKAGES)
def test_imports_run_one_way(package: str) -> None:
    wrong = []
    for path in sources(package):
        for module in imported_modules(path):
            top = module.split(".")[0]
            if top in PACKAGES and top != package and top not in ALLOWED[package]:
                wrong.append(f"{path.relative_to(REPO)} imports {module}")
    assert wrong == []


def test_what_decides_what_plays_loads_no_qt_or_flask() -> None:
    probe = (
        f"import sys, importlib; [importlib.import_module(m) for m in {PURE!r}]; "
        "print(sorted({m.split('.')[0] for m in sys.modules} & {'PySide6', 'flask', 'werkzeug'}))"
    )
    loaded = subprocess.run(
        [sys.executable, "-c", probe], cwd=REPO, capture_output=True, text=True, check=True
    )
    assert loaded.stdout.strip() == "[]"


def test_no_source_file_is_over_800_lines() -> None:
    long = {
        str(path.relative_to(REPO)): lines
        for path in sources(*PACKAGES, "tests")
        if (lines := len(path.read_text().splitlines())) > MAX_LINES
    }
    assert long == {}

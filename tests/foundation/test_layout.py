"""The layout holds: imports run player -> server -> cds, no module imports itself through
others (a circle), the engine knows no Qt or Flask, and no source file grows past what one
reader can hold (docs/code.md)."""

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


def module_name(path: Path) -> str:
    parts = path.relative_to(REPO).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def import_graph() -> dict[str, set[str]]:
    """Each module of the packages and the modules of the packages it imports: every import,
    at the top, inside a function or under TYPE_CHECKING; ``from a import b`` counts as
    importing ``a.b`` when that is a module. A module's own packages are not counted."""
    modules = {module_name(path): path for path in sources(*PACKAGES)}
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        found = set()
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                wanted = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                wanted = [node.module, *(f"{node.module}.{alias.name}" for alias in node.names)]
            else:
                continue
            for imported in wanted:
                module = imported
                while module and module not in modules:
                    module = module.rpartition(".")[0]
                if module and not f"{name}.".startswith(f"{module}."):
                    found.add(module)
        graph[name] = found
    return graph


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The import circles: each a path that comes back to its first module."""
    found: list[list[str]] = []
    done: set[str] = set()

    def visit(module: str, path: list[str]) -> None:
        if module in path:
            found.append([*path[path.index(module) :], module])
            return
        if module in done:
            return
        for imported in sorted(graph[module]):
            visit(imported, [*path, module])
        done.add(module)

    for module in sorted(graph):
        visit(module, [])
    return found


def test_no_module_imports_itself_through_others() -> None:
    assert circles(import_graph()) == []


def test_the_circle_finder_finds_circles() -> None:
    assert circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c", "a"]]
    assert circles({"a": {"b"}, "b": set()}) == []


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

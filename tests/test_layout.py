"""The layout holds (docs/code.md draws it).

- Imports run one way, ``player`` -> ``server`` -> ``cds``.
- ``server.platform`` is the room everything stands on: it imports no segment, no controller,
  no ``pdn`` command and no player. The segments (``server.display``, ``server.scheduler``,
  ``server.content``, ``server.sensor``) and the controller (``server.ctl``) use the platform
  (and ``cds``), never one another. The player uses the platform and ``server.display`` only.
- No module imports itself through others, counting imports by name too: a literal
  ``importlib.import_module("x")`` or ``__import__("x")``, a module's name in a table of names
  (``SUBCOMMAND_MODULES``), and pyproject.toml's ``[project.scripts]`` entry points. So the
  loop ``server.cli`` -> ``player.cli`` -> ... -> ``server.cli`` is seen.
- Nothing under ``server/`` reaches Qt, even through other modules, but the ``pdn`` command
  itself (it starts the display, whose screen is Qt).
- What decides what plays loads neither Qt nor Flask.
- Sizes: no product module (``.py``, ``.qml``, ``.js``) over ``MODULE_LIMIT`` lines unless its
  docstring (or, in QML and JavaScript, its opening comment) says why it is one thing, in a
  paragraph that starts with ``ONE_THING``; no file a person writes over ``FILE_LIMIT`` lines,
  shell scripts included.

Each check is a function of a tree's root that returns what is wrong, one line each; the tests
at the end run each on a small tree built to break it.
"""

from __future__ import annotations

import ast
import shutil
import subprocess
import sys
import tomllib
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PACKAGES = ("player", "server", "cds")
PLATFORM = "server.platform"
SEGMENTS = ("server.display", "server.scheduler", "server.content", "server.sensor")
CONTROLLER = "server.ctl"
#: The ``pdn`` command: it names every subcommand's module, the display's included.
COMMAND = "server.cli"
#: The only part of ``server`` the player may use besides the platform.
PLAYER_MAY_USE = (PLATFORM, "server.display")
QT = ("PySide6", "shiboken6")
#: What decides what plays must not load a GUI toolkit or a web framework, even indirectly.
PURE = ("player.engine", "cds.parser", "cds.playlist", "cds.serialise")

MODULE_LIMIT = 600
FILE_LIMIT = 800
#: The paragraph of a long module's docstring that says why it is one thing:
#: ``grep -rn "Why one module:" player server cds`` lists them all.
ONE_THING = "Why one module:"
#: Files no person writes line by line: machine-written data (the OpenAPI documents, the
#: benchmarks' measured figures) and binaries.
DATA_SUFFIXES = frozenset({".json", ".whl", ".png", ".jpg", ".webm", ".mp4", ".ico"})
SKIPPED_DIRS = frozenset({".git", ".venv", "__pycache__", "build", "data", "node_modules"})


# --- the import graph -----------------------------------------------------------------------


@dataclass
class Graph:
    """Each module of the packages, what of the packages it imports (``edges``), what else it
    imports (``outside``, e.g. ``PySide6.QtGui``) and what of it is by name (``by_name``)."""

    edges: dict[str, set[str]] = field(default_factory=dict)
    outside: dict[str, set[str]] = field(default_factory=dict)
    by_name: dict[str, set[str]] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)


def module_paths(root: Path) -> dict[str, Path]:
    """Every Python module of the packages under ``root``, by its dotted name."""
    found: dict[str, Path] = {}
    for package in PACKAGES:
        for path in sorted((root / package).rglob("*.py")):
            parts = path.relative_to(root).with_suffix("").parts
            found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


def _resolve(name: str, modules: dict[str, Path]) -> str | None:
    """The module of the packages that importing ``name`` runs (the longest prefix that is
    one), or None when ``name`` is from outside them."""
    module = name
    while module and module not in modules:
        module = module.rpartition(".")[0]
    return module or None


def _names_imported(tree: ast.AST, here: str, is_package: bool) -> Iterable[tuple[str, bool]]:
    """(name, by name?) for every import in ``tree``: at the top, in a function, under
    TYPE_CHECKING; ``from a import b`` names ``a.b`` as well as ``a``."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, False
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                package = here if is_package else here.rpartition(".")[0]
                for _ in range(node.level - 1):
                    package = package.rpartition(".")[0]
                base = f"{package}.{base}" if base else package
            yield base, False
            for alias in node.names:
                yield f"{base}.{alias.name}", False
        elif isinstance(node, ast.Call) and _loads_by_name(node.func) and node.args:
            first = node.args[0]
            if isinstance(first, ast.Constant) and isinstance(first.value, str):
                yield first.value, True
        elif isinstance(node, ast.Tuple | ast.List | ast.Set | ast.Dict):
            items = node.values if isinstance(node, ast.Dict) else node.elts
            for item in items:
                if isinstance(item, ast.Constant) and isinstance(item.value, str):
                    yield item.value, True


def _loads_by_name(func: ast.expr) -> bool:
    if isinstance(func, ast.Name):
        return func.id in ("import_module", "__import__")
    return isinstance(func, ast.Attribute) and func.attr in ("import_module", "__import__")


def entry_points(root: Path) -> dict[str, str]:
    """pyproject.toml's ``[project.scripts]``: script name -> ``module:function``."""
    pyproject = root / "pyproject.toml"
    if not pyproject.exists():
        return {}
    scripts = tomllib.loads(pyproject.read_text()).get("project", {}).get("scripts", {})
    return {str(name): str(target) for name, target in scripts.items()}


def import_graph(root: Path) -> Graph:
    """The graph of the tree at ``root``, entry points as nodes ``script:NAME``. A string in a
    table counts only when it names a module of the packages exactly; a module's own
    packages are not counted as what it imports."""
    modules = module_paths(root)
    graph = Graph()
    for name, path in modules.items():
        edges: set[str] = set()
        outside: set[str] = set()
        by_name: set[str] = set()
        tree = ast.parse(path.read_text(), str(path))
        for imported, named in _names_imported(tree, name, path.name == "__init__.py"):
            module = _resolve(imported, modules)
            if named and module != imported:
                if imported.split(".")[0] in QT and not module:
                    outside.add(imported)  # import_module("PySide6.QtGui")
                continue  # a string that is not a module's name, or only its prefix
            if module is None:
                outside.add(imported)
            elif not f"{name}.".startswith(f"{module}."):
                edges.add(module)
                if named:
                    by_name.add(module)
        graph.edges[name] = edges
        graph.outside[name] = outside
        graph.by_name[name] = by_name
    for script, target in entry_points(root).items():
        module, _, function = target.partition(":")
        node = f"script:{script}"
        graph.edges[node], graph.outside[node] = {module}, set()
        graph.by_name[node] = {module}
        script_path = modules.get(module)
        if script_path is None:
            graph.problems.append(f"{node} names {module}, which is not a module here")
        elif function and function not in {
            n.name
            for n in ast.parse(script_path.read_text()).body
            if isinstance(n, ast.FunctionDef)
        }:
            graph.problems.append(f"{node} names {target}, and {module} has no {function}")
    return graph


def _within(module: str, package: str) -> bool:
    return module == package or module.startswith(f"{package}.")


def _room(module: str) -> str:
    """The room of a module of ``server``: the platform, a segment, the controller, the
    command, the package itself, or '' (a module in no room)."""
    for room in (PLATFORM, *SEGMENTS, CONTROLLER):
        if _within(module, room):
            return room
    return module if module in (COMMAND, "server") else ""


def _shown(graph: Graph, module: str, imported: str) -> str:
    how = " by name" if imported in graph.by_name.get(module, set()) else ""
    return f"{module} imports{how} {imported}"


# --- the checks -----------------------------------------------------------------------------


def check_direction(root: Path) -> list[str]:
    """player -> server -> cds: cds imports neither, server no player, but the ``pdn``
    command, which names the display's subcommand (``player.cli``) among the others."""
    graph = import_graph(root)
    wrong = list(graph.problems)
    for module, imported in sorted(graph.edges.items()):
        top = module.split(".")[0]
        for target in sorted(imported):
            under = target.split(".")[0]
            backwards = under == "player" and module != COMMAND
            if (top == "cds" and under != "cds") or (top == "server" and backwards):
                wrong.append(_shown(graph, module, target))
    return wrong


def check_rooms(root: Path) -> list[str]:
    """The platform imports no segment, controller, command or player; a segment or the
    controller imports, of ``server``, only itself and the platform; the player only the
    platform and ``server.display``; every module of ``server`` is in a room."""
    graph = import_graph(root)
    wrong = []
    for module, imported in sorted(graph.edges.items()):
        if module.startswith("script:"):
            continue
        if _within(module, "server"):
            room = _room(module)
            if not room:
                wrong.append(f"{module} is in no room of server (platform, segment, ctl)")
                continue
            if room in (COMMAND, "server"):
                continue
            for target in sorted(imported):
                other_room = _within(target, "server") and _room(target) not in (room, PLATFORM)
                if _within(target, "player") or other_room:
                    wrong.append(_shown(graph, module, target))
        elif _within(module, "player"):
            for target in sorted(imported):
                if _within(target, "server") and not any(
                    _within(target, allowed) for allowed in PLAYER_MAY_USE
                ):
                    wrong.append(_shown(graph, module, target))
    return wrong


def circles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The import circles: each a path that comes back to its first module."""
    found: list[list[str]] = []
    done: set[str] = set()

    def visit(module: str, path: list[str]) -> None:
        if module in path:
            found.append([*path[path.index(module) :], module])
            return
        if module in done:
            return
        for imported in sorted(edges.get(module, set())):
            visit(imported, [*path, module])
        done.add(module)

    for module in sorted(edges):
        visit(module, [])
    return found


def check_no_loops(root: Path) -> list[str]:
    """No module imports itself through others, imports by name and entry points counted."""
    graph = import_graph(root)
    return graph.problems + [" -> ".join(circle) for circle in circles(graph.edges)]


def reach(graph: Graph, module: str) -> set[str]:
    """Every module of the packages that importing ``module`` may run, itself included."""
    seen = {module}
    todo = [module]
    while todo:
        for imported in graph.edges.get(todo.pop(), set()):
            if imported not in seen:
                seen.add(imported)
                todo.append(imported)
    return seen


def check_no_qt_in_server(root: Path) -> list[str]:
    """No module under ``server/`` (but the ``pdn`` command) reaches Qt: one line per module
    that does, with the module that imports Qt."""
    graph = import_graph(root)
    wrong = []
    for module in sorted(graph.edges):
        if not _within(module, "server") or module == COMMAND:
            continue
        for reached in sorted(reach(graph, module)):
            qt = sorted(n for n in graph.outside.get(reached, set()) if n.split(".")[0] in QT)
            if qt:
                through = "" if reached == module else f" through {reached}"
                wrong.append(f"{module} reaches {qt[0]}{through}")
                break
    return wrong


def repository_files(root: Path) -> list[Path]:
    """The repository's files: what git knows of (tracked, or new and not ignored) in a
    checkout with git, else (a copy, or no git installed) every file under ``root`` but build
    output, caches and data."""
    git = shutil.which("git")
    if git and (root / ".git").exists():
        listed = subprocess.run(
            [git, "ls-files", "--cached", "--others", "--exclude-standard", "-z"],
            cwd=root,
            capture_output=True,
            check=True,
        )
        names = [n for n in listed.stdout.decode().split("\0") if n]
        return sorted(root / n for n in names if (root / n).is_file())
    return sorted(
        path
        for path in root.rglob("*")
        if path.is_file()
        and not any(
            part in SKIPPED_DIRS or part.endswith(".egg-info")
            for part in path.relative_to(root).parts
        )
    )


def _text_lines(path: Path) -> list[str] | None:
    """The file's lines, None for data and binaries."""
    if path.suffix in DATA_SUFFIXES:
        return None
    raw = path.read_bytes()
    if b"\0" in raw:
        return None
    try:
        return raw.decode().splitlines()
    except UnicodeDecodeError:
        return None


def says_why_one_thing(path: Path, lines: list[str]) -> bool:
    """Whether the module's docstring (Python) or opening comment (QML, JavaScript) has a
    paragraph that starts with :data:`ONE_THING`."""
    if path.suffix == ".py":
        text = ast.get_docstring(ast.parse("\n".join(lines), str(path))) or ""
        return any(p.lstrip().startswith(ONE_THING) for p in text.split("\n\n"))
    opening: list[str] = []
    for line in lines:
        stripped = line.strip()
        if stripped.startswith(("//", "/*", "*")) or (not stripped and not opening):
            opening.append(stripped.lstrip("/* ").rstrip("*/ "))
        elif stripped.startswith(("import ", "pragma ", ".pragma", ".import")):
            continue
        else:
            break
    return any(p.lstrip().startswith(ONE_THING) for p in "\n".join(opening).split("\n\n"))


def check_sizes(root: Path) -> list[str]:
    """Product modules over MODULE_LIMIT lines that do not say why they are one thing, and
    any file a person writes (shell scripts too) over FILE_LIMIT."""
    wrong = []
    for path in repository_files(root):
        lines = _text_lines(path)
        if lines is None:
            continue
        shown = path.relative_to(root)
        if len(lines) > FILE_LIMIT:
            wrong.append(f"{shown}: {len(lines)} lines, over {FILE_LIMIT}")
        elif (
            len(lines) > MODULE_LIMIT
            and shown.parts[0] in PACKAGES
            and path.suffix in (".py", ".qml", ".js")
            and not says_why_one_thing(path, lines)
        ):
            wrong.append(
                f"{shown}: {len(lines)} lines, over {MODULE_LIMIT}, and its docstring does not"
                f" say why it is one thing ({ONE_THING!r})"
            )
    return wrong


# --- the tree as it is ----------------------------------------------------------------------


def test_imports_run_player_server_cds() -> None:
    assert check_direction(REPO) == []


def test_segments_stand_on_the_platform_and_not_on_each_other() -> None:
    assert check_rooms(REPO) == []


def test_no_module_imports_itself_through_others() -> None:
    assert check_no_loops(REPO) == []


def test_the_command_loads_the_display_by_name_and_the_graph_sees_it() -> None:
    graph = import_graph(REPO)
    assert "player.cli" in graph.by_name[COMMAND]
    assert graph.edges["script:pdn"] == {COMMAND}


def test_nothing_under_server_reaches_qt() -> None:
    assert check_no_qt_in_server(REPO) == []


def test_what_decides_what_plays_loads_no_qt_or_flask() -> None:
    probe = (
        f"import sys, importlib; [importlib.import_module(m) for m in {PURE!r}]; "
        "print(sorted({m.split('.')[0] for m in sys.modules} & {'PySide6', 'flask', 'werkzeug'}))"
    )
    loaded = subprocess.run(
        [sys.executable, "-c", probe], cwd=REPO, capture_output=True, text=True, check=True
    )
    assert loaded.stdout.strip() == "[]"


def test_files_are_sized_by_what_they_are_about() -> None:
    assert check_sizes(REPO) == []


# --- the checks find what they are for ------------------------------------------------------


def write(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


#: A tree laid out as it should be, each test below breaks it once.
GOOD = {
    "pyproject.toml": '[project]\nname = "x"\n[project.scripts]\npdn = "server.cli:main"\n',
    "cds/__init__.py": "",
    "cds/parser.py": "import lxml\n",
    "server/__init__.py": "",
    "server/cli.py": (
        "import importlib\n"
        'SUBCOMMAND_MODULES = ("player.cli", "server.scheduler.cli")\n'
        "def main() -> None:\n"
        "    for name in SUBCOMMAND_MODULES:\n"
        "        importlib.import_module(name)\n"
    ),
    "server/platform/__init__.py": "",
    "server/platform/http.py": "import flask\nimport cds.parser\n",
    "server/display/__init__.py": "",
    "server/display/api.py": "from server.platform import http\n",
    "server/scheduler/__init__.py": "",
    "server/scheduler/cli.py": "from server.scheduler import fleetstatus\n",
    "server/scheduler/fleetstatus.py": "from server.platform.http import flask\n",
    "player/__init__.py": "",
    "player/cli.py": "def add_parser() -> None:\n    from player import app\n",
    "player/app.py": "from PySide6 import QtGui\nfrom server.display import api\n",
    "packaging/install.sh": "#!/bin/sh\necho hello\n",
}

ALL_CHECKS = (check_direction, check_rooms, check_no_loops, check_no_qt_in_server, check_sizes)


def test_a_good_tree_passes_every_check(tmp_path: Path) -> None:
    root = write(tmp_path, GOOD)
    assert {check.__name__: check(root) for check in ALL_CHECKS} == {
        check.__name__: [] for check in ALL_CHECKS
    }


def test_a_loop_through_the_command_by_name_is_found(tmp_path: Path) -> None:
    root = write(tmp_path, {**GOOD, "player/app.py": "from server.cli import main\n"})
    assert check_no_loops(root) == ["player.app -> server.cli -> player.cli -> player.app"]
    assert check_rooms(root) == ["player.app imports server.cli"]


def test_a_loop_through_import_module_is_found(tmp_path: Path) -> None:
    root = write(
        tmp_path,
        {**GOOD, "cds/parser.py": 'import importlib\nimportlib.import_module("cds.walk")\n'},
    )
    write(root, {"cds/walk.py": "__import__('cds.parser')\n"})
    assert check_no_loops(root) == ["cds.parser -> cds.walk -> cds.parser"]


def test_an_entry_point_to_nowhere_is_found(tmp_path: Path) -> None:
    pyproject = '[project]\nname = "x"\n[project.scripts]\npdn = "server.command:main"\n'
    root = write(tmp_path, {**GOOD, "pyproject.toml": pyproject})
    assert check_no_loops(root) == ["script:pdn names server.command, which is not a module here"]


def test_qt_under_the_scheduler_is_found_even_through_the_platform(tmp_path: Path) -> None:
    root = write(
        tmp_path,
        {
            **GOOD,
            "server/platform/thumbnails.py": (
                "def shrink() -> None:\n    from PySide6.QtGui import QImage\n"
            ),
            "server/scheduler/fleetstatus.py": "from server.platform import thumbnails\n",
        },
    )
    assert check_no_qt_in_server(root) == [
        "server.platform.thumbnails reaches PySide6.QtGui",
        "server.scheduler.cli reaches PySide6.QtGui through server.platform.thumbnails",
        "server.scheduler.fleetstatus reaches PySide6.QtGui through server.platform.thumbnails",
    ]


def test_qt_loaded_by_name_is_found(tmp_path: Path) -> None:
    code = 'import importlib\nimportlib.import_module("shiboken6")\n'
    root = write(tmp_path, {**GOOD, "server/scheduler/fleetstatus.py": code})
    assert check_no_qt_in_server(root) == [
        "server.scheduler.cli reaches shiboken6 through server.scheduler.fleetstatus",
        "server.scheduler.fleetstatus reaches shiboken6",
    ]


def test_a_segment_importing_another_is_found(tmp_path: Path) -> None:
    code = "from server.display.api import http\n"
    root = write(tmp_path, {**GOOD, "server/scheduler/fleetstatus.py": code})
    assert check_rooms(root) == ["server.scheduler.fleetstatus imports server.display.api"]


def test_the_platform_importing_a_segment_or_the_player_is_found(tmp_path: Path) -> None:
    code = "import player.app\nfrom server import ctl\n"
    root = write(tmp_path, {**GOOD, "server/platform/http.py": code, "server/ctl/__init__.py": ""})
    assert check_rooms(root) == [
        "server.platform.http imports player.app",
        "server.platform.http imports server.ctl",
    ]
    assert check_direction(root) == ["server.platform.http imports player.app"]


def test_the_player_using_more_of_server_is_found(tmp_path: Path) -> None:
    code = "from server.scheduler import fleetstatus\n"
    root = write(tmp_path, {**GOOD, "player/app.py": code})
    assert check_rooms(root) == [
        "player.app imports server.scheduler",
        "player.app imports server.scheduler.fleetstatus",
    ]


def test_a_module_in_no_room_is_found(tmp_path: Path) -> None:
    root = write(tmp_path, {**GOOD, "server/helpers.py": ""})
    assert check_rooms(root) == ["server.helpers is in no room of server (platform, segment, ctl)"]


def test_a_file_over_a_limit_is_found(tmp_path: Path) -> None:
    long_module = "x = 1\n" * (MODULE_LIMIT + 1)
    one_thing = f'"""Moves.\n\n{ONE_THING} the states of one machine.\n"""\n' + long_module
    root = write(
        tmp_path,
        {
            **GOOD,
            "player/engine.py": long_module,
            "player/stage.py": one_thing,
            "player/qml/Scene.qml": f"// {ONE_THING} one scene.\n" + "Item {}\n" * 700,
            "player/qml/Other.qml": "Item {}\n" * 700,
            "packaging/install.sh": "echo\n" * (FILE_LIMIT + 1),
            "server/openapi/display.json": "{}\n" * (FILE_LIMIT + 1),
        },
    )
    assert check_sizes(root) == [
        f"packaging/install.sh: {FILE_LIMIT + 1} lines, over {FILE_LIMIT}",
        f"player/engine.py: {MODULE_LIMIT + 1} lines, over {MODULE_LIMIT}, and its docstring"
        f" does not say why it is one thing ({ONE_THING!r})",
        f"player/qml/Other.qml: 700 lines, over {MODULE_LIMIT}, and its docstring"
        f" does not say why it is one thing ({ONE_THING!r})",
    ]


def test_the_circle_finder_finds_circles() -> None:
    assert circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c", "a"]]
    assert circles({"a": {"b"}, "b": set()}) == []


def test_the_checks_read_the_real_tree() -> None:
    """An empty answer above means a clean tree, not a tree the checks did not find."""
    graph = import_graph(REPO)
    assert {"player.engine", "server.platform.db", "cds.parser", COMMAND} <= set(graph.edges)
    assert any(p.name == "install.sh" for p in repository_files(REPO))

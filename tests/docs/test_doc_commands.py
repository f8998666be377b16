"""Every command the README and ``docs/`` show, checked; every relative link they hold, resolved.

The documents are read as a newcomer reads them: fenced code blocks. A line of a shell block
(``sh``, ``bash`` or no language) that starts with ``pdn `` (or a path ending in ``/pdn ``) or
``curl `` is a command; ``\\`` continuations and quoted strings running over several lines are
joined, here-document bodies skipped.

- Every ``pdn`` command is parsed by the real ``pdn`` argument parser (the subcommand and its
  flags must exist, the positional arguments must fit), every ``curl`` command's options must be
  options of the installed curl. Nothing is sent anywhere.
- A block right after the line ``<!-- runnable -->`` is run, as written, by bash with ``set -e``
  against real ``pdn display`` processes started here on loopback (with the session's Xvfb):
  one on plain HTTP, as ``dev.sh display`` serves it, one on HTTPS with its self-signed
  certificate, as an installed display serves it. ``pdn`` is on ``PATH``, a ``.curlrc`` makes an
  HTTP error a failure, and each block has a pairing store of its own. The documents' example
  addresses are replaced by the test's (``DISPLAY_ADDRESSES`` plain, ``TLS_DISPLAY_ADDRESS``
  HTTPS, ``CONTENT_ADDRESS`` a page on loopback), the example pairing code by the one the
  display shows now. Every ``*.png`` the block names must then be a PNG.
- A block right after ``<!-- file: NAME -->`` is written to ``NAME`` in the directory the
  runnable blocks run in (the CDS the ``pdn cds`` examples read).
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import io
import os
import re
import shlex
import shutil
import subprocess
import sys
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import requests
import urllib3

from server.cli import build_parser
from tests.support.display import DisplayProcess
from tests.support.pages import one_page
from tests.support.process import CREDENTIALS

ROOT = Path(__file__).resolve().parents[2]
DOCUMENTS = [ROOT / "README.md", ROOT / "SECURITY.md", *sorted((ROOT / "docs").glob("*.md"))]
SHELL_LANGUAGES = {"", "sh", "bash", "shell", "console"}
RUNNABLE = "<!-- runnable -->"
FILE_MARKER = re.compile(r"<!-- file: (\S+) -->")
PDN_COMMAND = re.compile(r"^(?:sudo -u \S+ )?(?:\S*/)?pdn ")
# The documents' example addresses, and the test's stand-ins (filled in by the fixtures).
DISPLAY_ADDRESSES = ("http://127.0.0.1:8080", "http://192.0.2.10:8080")
TLS_DISPLAY_ADDRESS = "https://192.0.2.10:8080"
CONTENT_ADDRESS = "https://example.org/"
PLACEHOLDER_CODE = "K7QM-2XPA"
SHELL_OPERATORS = {"|", "||", "&&", ";", ">", ">>", "<", "2>", "2>&1", "&"}
PAGE = b"<!doctype html><html><body style='background:#246'><h1>A page</h1></body></html>"


@dataclass(frozen=True)
class Block:
    document: Path
    line: int  # of the opening fence, 1-based
    language: str
    text: str
    marker: str  # "runnable", "file:NAME" or ""

    @property
    def where(self) -> str:
        return f"{self.document.relative_to(ROOT)}:{self.line}"


def blocks(document: Path) -> list[Block]:
    found: list[Block] = []
    lines = document.read_text(encoding="utf-8").splitlines()
    index = 0
    while index < len(lines):
        fence = re.match(r"^\s*(```+)\s*(\S*)", lines[index])
        if not fence:
            index += 1
            continue
        start = index
        body: list[str] = []
        index += 1
        while index < len(lines) and not lines[index].strip().startswith(fence.group(1)):
            body.append(lines[index])
            index += 1
        previous = next(
            (lines[i].strip() for i in range(start - 1, -1, -1) if lines[i].strip()), ""
        )
        marker = ""
        if previous == RUNNABLE:
            marker = "runnable"
        elif named := FILE_MARKER.fullmatch(previous):
            marker = f"file:{named.group(1)}"
        # A fence indented in a list item: its lines carry the item's indent.
        indent = len(lines[start]) - len(lines[start].lstrip())
        text = "\n".join(line[indent:] if line[:indent].isspace() else line for line in body)
        found.append(Block(document, start + 1, fence.group(2).lower(), text + "\n", marker))
        index += 1
    return found


def commands(block: Block) -> list[str]:
    """The ``pdn`` and ``curl`` commands of a shell block, each joined onto one line."""
    if block.language not in SHELL_LANGUAGES:
        return []
    found: list[str] = []
    lines = block.text.splitlines()
    index = 0
    while index < len(lines):
        line = lines[index].strip()
        index += 1
        heredoc = re.search(r"<<-?\s*'?(\w+)'?", line)
        if heredoc:  # skip the document's body, up to its terminator
            while index < len(lines) and lines[index].strip() != heredoc.group(1):
                index += 1
            index += 1
        if not (PDN_COMMAND.match(line) or line.startswith("curl ")):
            continue
        while True:
            if line.endswith("\\") and index < len(lines):
                line = line[:-1] + " " + lines[index].strip()
                index += 1
                continue
            try:
                shlex.split(line, comments=True)
            except ValueError:  # a quoted string that goes on to the next line
                if index >= len(lines):
                    raise
                line = line + "\n" + lines[index]
                index += 1
                continue
            break
        found.append(line)
    return found


def words(command: str) -> list[str]:
    """The command's own words: up to the first shell operator, without a redirection."""
    lexer = shlex.shlex(command, posix=True, punctuation_chars="|&;<>")
    lexer.whitespace_split = True
    lexer.commenters = "#"
    out: list[str] = []
    for word in lexer:
        if word in SHELL_OPERATORS or word.strip("0123456789") in SHELL_OPERATORS:
            break
        out.append(word)
    return out


def all_blocks() -> list[Block]:
    return [block for document in DOCUMENTS for block in blocks(document)]


def all_commands() -> list[tuple[str, str]]:
    return [(block.where, command) for block in all_blocks() for command in commands(block)]


def curl_options() -> set[str]:
    help_text = subprocess.run(
        ["curl", "--help", "all"], capture_output=True, text=True, check=True
    ).stdout
    return set(re.findall(r"(?<![\w-])(--?[A-Za-z0-9][\w.-]*)", help_text))


def test_the_documents_have_commands_and_runnable_blocks() -> None:
    found = all_commands()
    assert len(found) > 50, found
    runnable = [block.where for block in all_blocks() if block.marker == "runnable"]
    readme = [where for where in runnable if where.startswith("README.md")]
    assert len(readme) >= 2, runnable  # the quick start's request, the four commands


@pytest.mark.parametrize(("where", "command"), all_commands())
def test_a_documented_command_parses(where: str, command: str) -> None:
    argv = words(command)
    if argv[0] == "curl":
        require_curl()
        options = {word.split("=", 1)[0] for word in argv[1:] if re.match(r"^--?[A-Za-z]", word)}
        unknown = options - curl_options()
        assert not unknown, f"{where}: curl has no {sorted(unknown)}: {command}"
        assert any(re.match(r"^(https?://|\"?\$)", word) for word in argv), (where, command)
        return
    if argv[0] == "sudo":  # sudo -u pdn /opt/pdn/venv/bin/pdn ...
        argv = argv[3:] if argv[1] == "-u" else argv[1:]
    parser = build_parser()
    errors = io.StringIO()
    with contextlib.redirect_stderr(errors), contextlib.redirect_stdout(io.StringIO()):
        try:
            parser.parse_args(argv[1:])
        except SystemExit as exit:
            pytest.fail(f"{where}: pdn refuses {command!r} ({exit.code}):\n{errors.getvalue()}")


def test_words_stop_at_shell_operators() -> None:
    assert words("pdn ctl plays $S --csv > plays.csv  # a comment") == [
        "pdn",
        "ctl",
        "plays",
        "$S",
        "--csv",
    ]
    assert words("git pull && pdn x") == ["git", "pull"]
    assert isinstance(build_parser(), argparse.ArgumentParser)


# -- Links ----------------------------------------------------------------------------------


def anchors(document: Path) -> set[str]:
    """GitHub's anchors for the document's headings."""
    found: set[str] = set()
    inside = False
    for line in document.read_text(encoding="utf-8").splitlines():
        if line.lstrip().startswith("```"):
            inside = not inside
        heading = re.match(r"^#{1,6}\s+(.*)$", line)
        if heading and not inside:
            slug = re.sub(r"[^\w\- ]", "", heading.group(1).strip().lower()).replace(" ", "-")
            found.add(slug)
    return found


def links(document: Path) -> list[str]:
    text = re.sub(r"```.*?```", "", document.read_text(encoding="utf-8"), flags=re.S)
    text = re.sub(r"`[^`\n]*`", "", text)
    return re.findall(r"\]\(([^)\s]+)\)", text)


@pytest.mark.parametrize("document", DOCUMENTS, ids=lambda path: str(path.relative_to(ROOT)))
def test_every_relative_link_resolves(document: Path) -> None:
    broken: list[str] = []
    for link in links(document):
        if re.match(r"^[a-z][a-z0-9+.-]*:", link):
            continue  # https:, mailto:
        path, _, anchor = link.partition("#")
        target = (document.parent / path).resolve() if path else document
        if not target.exists():
            broken.append(f"{link}: no {target}")
        elif anchor and target.suffix == ".md" and anchor not in anchors(target):
            broken.append(f"{link}: no heading #{anchor} in {target.name}")
    assert not broken, f"{document.relative_to(ROOT)}: " + "; ".join(broken)


def test_the_readme_is_short_and_keeps_the_test_command() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(readme.encode()) <= 15 * 1024
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    command = next(line for line in ci.splitlines() if line.startswith("bash packaging/dev.sh"))
    assert command in readme.splitlines()  # .ci/run runs exactly the README's test command


# -- Runnable blocks, against a real display ------------------------------------------------


def require_curl() -> None:
    if shutil.which("curl") is None:
        pytest.fail("curl is missing (bash packaging/dev.sh setup installs it)")


@dataclass
class Stage:
    display: str  # plain HTTP, as `bash packaging/dev.sh display` serves it
    tls_display: str  # HTTPS with a self-signed certificate, as an installed display serves it
    content: str
    workdir: Path
    env: dict[str, str]

    def code(self, url: str) -> str:
        """The pairing code the display at ``url`` shows now."""
        data_dir = self.workdir.parent / ("tls" if url == self.tls_display else "plain")
        return (data_dir / "pairing-code").read_text(encoding="ascii").splitlines()[0].strip()


def start_display(base: Path, name: str, tls: bool) -> DisplayProcess:
    """A display with its data in ``base/name`` (where ``Stage.code`` reads its pairing code)."""
    display = DisplayProcess(
        base / f"{name}-run",
        config=f'name = "Docs {name}"\n[listen]\ntls = {str(tls).lower()}\n',
        data_dir=base / name,
        scheme="https" if tls else "http",
        unset=(*CREDENTIALS, "PDN_CONFIG"),
    )
    return display.start()


def answers(url: str) -> bool:
    with contextlib.suppress(requests.ConnectionError, requests.Timeout):
        # verify=False: the self-signed certificate is what pdn ctl pair pins, later.
        return requests.get(url + "/", timeout=2, verify=False).status_code == 200
    return False


@pytest.fixture(scope="module")
def stage(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stage]:
    require_curl()
    base = tmp_path_factory.mktemp("doc-commands")
    env = {**os.environ, "QTWEBENGINE_DISABLE_SANDBOX": "1"}
    for name in ("PDN_API_TOKEN", "PDN_CONFIG", "PDN_DISPLAY_TOKEN"):
        env.pop(name, None)
    started = [start_display(base, "plain", tls=False)]
    started.append(start_display(base, "tls", tls=True))
    content = one_page(PAGE)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", urllib3.exceptions.InsecureRequestWarning)
            for display in started:
                display.wait_ready(functools.partial(answers, display.url), timeout=90)
        # `pdn` as the documents write it, the project's own; curl that fails on an HTTP error.
        bin_dir = base / "bin"
        bin_dir.mkdir()
        shim = bin_dir / "pdn"
        shim.write_text(f'#!/bin/sh\nexec {shlex.quote(sys.executable)} -m server.cli "$@"\n')
        shim.chmod(0o755)
        home = base / "home"
        home.mkdir()
        (home / ".curlrc").write_text("--fail-with-body\n--silent\n--show-error\n")
        workdir = base / "work"
        workdir.mkdir()
        for block in all_blocks():
            if block.marker.startswith("file:"):
                (workdir / block.marker.removeprefix("file:")).write_text(block.text)
        run_env = {
            **env,
            "PATH": f"{bin_dir}{os.pathsep}{env.get('PATH', '')}",
            "HOME": str(home),
            "CURL_HOME": str(home),
            "PYTHONPATH": str(ROOT),
        }
        yield Stage(started[0].url, started[1].url, content.url + "/", workdir, run_env)
    finally:
        content.close()
        for display in started:
            display.stop()


RUNNABLE_BLOCKS = [block for block in all_blocks() if block.marker == "runnable"]


@pytest.mark.qt
@pytest.mark.parametrize("block", RUNNABLE_BLOCKS, ids=lambda block: block.where)
def test_a_runnable_block_runs_against_a_real_display(stage: Stage, block: Block) -> None:
    assert commands(block), f"{block.where}: a runnable block with no pdn or curl command"
    script = block.text
    for address in DISPLAY_ADDRESSES:
        script = script.replace(address, stage.display)
    # An installed display serves HTTPS: the documents' https:// display is the TLS one.
    target = stage.tls_display if TLS_DISPLAY_ADDRESS in script else stage.display
    script = script.replace(TLS_DISPLAY_ADDRESS, stage.tls_display)
    script = script.replace(CONTENT_ADDRESS, stage.content)
    script = script.replace(PLACEHOLDER_CODE, stage.code(target))
    # Each block is a controller of its own: its pairings are its own.
    config = stage.workdir.parent / "config" / block.where.replace("/", "_")
    done = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", script],
        check=False,
        cwd=stage.workdir,
        env={**stage.env, "XDG_CONFIG_HOME": str(config)},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, (
        f"{block.where} failed ({done.returncode}):\n{script}\n"
        f"stdout:\n{done.stdout}\nstderr:\n{done.stderr}"
    )
    if target == stage.tls_display and "pdn ctl pair" in script:  # "pins its certificate"
        assert "tls-fingerprint" in (config / "pdn" / "ctl.toml").read_text(), block.where
    for name in set(re.findall(r"[\w.-]+\.png\b", script)):
        picture = stage.workdir / name
        assert picture.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", f"{block.where}: {name}"


def test_the_installed_readme_has_its_pages_beside_it(tmp_path: Path) -> None:
    """install.sh puts the README in /opt/pdn/share (the units' Documentation=): its links work."""
    from tests.packaging.test_install import install_into

    result = install_into(tmp_path, "--platform", "eglfs", "--no-start")
    assert result.returncode == 0, result.stderr
    share = tmp_path / "opt/pdn/share"
    installed = share / "README.md"
    assert installed.read_bytes() == (ROOT / "README.md").read_bytes()
    for link in links(installed):
        if not re.match(r"^[a-z][a-z0-9+.-]*:", link):
            assert (share / link.partition("#")[0]).exists(), link

"""The pdn command as a user meets it."""

from __future__ import annotations

import subprocess
import sys

from server.cli import build_parser, main


def run_pdn(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "server.cli", *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_help_and_version() -> None:
    result = run_pdn("--help")
    assert result.returncode == 0
    assert "usage: pdn" in result.stdout
    version = run_pdn("--version")
    assert version.returncode == 0
    assert version.stdout.startswith("pdn ")


def test_every_subcommand_explains_itself() -> None:
    parser = build_parser()
    for action in parser._subparsers._group_actions if parser._subparsers else []:
        for name in getattr(action, "choices", {}) or {}:
            result = run_pdn(name, "--help")
            assert result.returncode == 0, (name, result.stderr)
            assert f"pdn {name}" in result.stdout


def test_unknown_subcommand_is_a_usage_error() -> None:
    result = run_pdn("frobnicate")
    assert result.returncode == 2
    assert "invalid choice" in result.stderr
    assert "Traceback" not in result.stderr


def test_no_subcommand_prints_help(capsys) -> None:
    assert main([]) == 0
    assert "usage: pdn" in capsys.readouterr().out

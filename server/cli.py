"""``pdn``: one command for every part of a Public Display Network.

Each subcommand lives with the code it runs and registers itself here through an
``add_parser(subparsers)`` function; heavy imports (Qt) happen only inside the subcommand
that needs them, so ``pdn cds check`` or ``pdn ctl`` start fast on a Pi.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import sys
from collections.abc import Sequence

from server.platform.exitcodes import EPILOG, EXIT_INTERRUPTED, EXIT_OK, EXIT_USAGE
from server.platform.logs import setup_logging
from server.platform.release import package_version

log = logging.getLogger("pdn.cli")

# Modules with an add_parser(subparsers) function, in the order `pdn --help` lists them.
SUBCOMMAND_MODULES: tuple[str, ...] = (
    "player.cli",
    "server.scheduler.cli",
    "server.content.cli",
    "server.sensor.cli",
    "cds.cli",
    "server.ctl.cli",
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="pdn",
        description=(
            "Public Display Network: run a display (a fullscreen signage player with the "
            "Display Segment API), a scheduler, a content server or a sensor, check CDS "
            "schedules, and control displays remotely."
        ),
        epilog=(
            "Run 'pdn COMMAND --help' for the options of each command. "
            f"{EPILOG} 'pdn ctl' and 'pdn cds' add codes of their own (see their --help)."
        ),
    )
    parser.add_argument("--version", action="version", version=f"pdn {package_version()}")
    verbosity = parser.add_mutually_exclusive_group()
    verbosity.add_argument(
        "-v", "--verbose", action="count", default=0, help="more detail in the log (debug)"
    )
    verbosity.add_argument(
        "-q", "--quiet", action="store_true", help="log warnings and errors only"
    )
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for module_name in SUBCOMMAND_MODULES:
        importlib.import_module(module_name).add_parser(subparsers)
    for subparser in _all_subparsers(parser):
        _add_verbosity(subparser)
    return parser


def _all_subparsers(parser: argparse.ArgumentParser) -> list[argparse.ArgumentParser]:
    found: list[argparse.ArgumentParser] = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for child in dict.fromkeys(action.choices.values()):
                found.append(child)
                found.extend(_all_subparsers(child))
    return found


def _add_verbosity(parser: argparse.ArgumentParser) -> None:
    """Let -v/-q follow the subcommand too (`pdn display -v`), as people type it."""
    taken = {option for action in parser._actions for option in action.option_strings}
    if "-v" not in taken and "--verbose" not in taken:
        parser.add_argument(
            "-v", "--verbose", action="count", default=argparse.SUPPRESS, help=argparse.SUPPRESS
        )
    if "-q" not in taken and "--quiet" not in taken:
        parser.add_argument(
            "-q", "--quiet", action="store_true", default=argparse.SUPPRESS, help=argparse.SUPPRESS
        )


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    setup_logging(-1 if args.quiet else args.verbose)
    func = getattr(args, "func", None)
    if func is None:
        parser.print_help()
        return EXIT_OK if args.command is None else EXIT_USAGE
    try:
        code: int = func(args)
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED
    return code


if __name__ == "__main__":
    sys.exit(main())

"""``pdn cds check`` and ``pdn cds explain``: the operator's tools for CDS schedules.

``check`` says, per file, whether it is a CDS this player accepts (one summary line, exit 0)
or what is wrong with it (``FILE:LINE: message`` per problem, exit 1). ``explain`` says what a
display would play at a given time and why, naming the constraint that keeps each item off
the screen. Neither ever prints a traceback, whatever the input.
"""

from __future__ import annotations

import argparse
import datetime
import os
import sys
import zoneinfo
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TextIO

from cds.errors import CdsError, Problem
from cds.model import DAY_NAMES, PRIORITY_NAMES, Constraints, ContentItem, Document
from cds.parser import parse
from cds.playlist import Playlist, describe_duration
from cds.timezone import system_timezone_name

__all__ = ["add_parser", "main"]

EXIT_OK = 0
EXIT_INVALID = 1
EXIT_USAGE = 2


def add_parser(subparsers: Any) -> None:
    """Register ``cds`` and its actions on the ``pdn`` command line."""
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "cds",
        help="check CDS schedules and explain what a display would play",
        description=(
            "Work with Content Descriptor Sets (CDS), the XML schedules a display plays: "
            "check that files are valid, or explain what would play at a given time and why."
        ),
    )
    _add_actions(parser)


def _add_actions(parser: argparse.ArgumentParser) -> None:
    parser.set_defaults(func=lambda _args: _usage(parser))
    actions = parser.add_subparsers(dest="cds_action", metavar="ACTION")

    check = actions.add_parser(
        "check",
        help="check CDS files; print a summary per valid file, or each problem with its line",
        description=(
            "Check CDS files. For each valid file print one line (its sets, items and "
            "constraints) and exit 0; otherwise print FILE:LINE: message for every problem "
            "and exit 1. Warnings (unknown elements, which are kept) go to standard error."
        ),
    )
    check.add_argument("files", nargs="+", metavar="FILE", help="CDS file(s) to check")
    check.add_argument(
        "--video-zones",
        type=_video_zones,
        metavar="N",
        help="refuse a layout whose zones could play more than N videos at once, as a display "
        "with [screen] video-zones = N does (1 on a Raspberry Pi, 2 elsewhere)",
    )
    check.set_defaults(func=run_check)

    explain = actions.add_parser(
        "explain",
        help="what would play at a given time, and why the other items would not",
        description=(
            "Show what a display playing these CDS file(s) would play at a given time, in "
            "which order and for how long, which constraint keeps each other item off the "
            "screen, and when the answer next changes. Every file is assumed to be in the "
            "display's cache."
        ),
    )
    explain.add_argument("files", nargs="+", metavar="FILE", help="CDS file(s) the display plays")
    explain.add_argument(
        "--at",
        metavar="TIME",
        help="the moment to explain: RFC 3339 (2026-11-22T09:30:00+00:00) or "
        "'YYYY-MM-DD HH:MM' on the display's clock (default: now)",
    )
    explain.add_argument(
        "--tz",
        metavar="ZONE",
        help="the display's IANA time zone, like Europe/London (default: this machine's)",
    )
    explain.set_defaults(func=run_explain)


def _usage(parser: argparse.ArgumentParser) -> int:
    parser.print_help(sys.stderr)
    return EXIT_USAGE


def _say(text: str, stream: TextIO | None = None) -> None:
    """Print, whatever the terminal's encoding and even when the reader has gone away."""
    stream = stream or sys.stdout
    try:
        stream.write(text + "\n")
    except UnicodeEncodeError:
        encoding = stream.encoding or "ascii"
        stream.write(text.encode(encoding, errors="replace").decode(encoding) + "\n")


def _shown_path(name: str) -> str:
    return name.encode("utf-8", errors="surrogateescape").decode("utf-8", errors="replace")


def _problem_line(name: str, problem: Problem, warning: bool = False) -> str:
    where = f"{name}:{problem.line}" if problem.line is not None else name
    return f"{where}: {'warning: ' if warning else ''}{problem.message}"


def _load(name: str, video_zones: int | None = None) -> Document:
    return parse(Path(name), filename=_shown_path(name), video_zones=video_zones)


def _video_zones(text: str) -> int:
    if not text.isdigit() or not 1 <= int(text) <= 8:
        raise argparse.ArgumentTypeError(f"must be a number from 1 to 8, not {text!r}")
    return int(text)


# ----------------------------------------------------------------------------- check


def run_check(args: argparse.Namespace) -> int:
    return _guard(lambda: _check(args.files, args.video_zones))


def _check(files: Sequence[str], video_zones: int | None = None) -> int:
    code = EXIT_OK
    for name in files:
        shown = _shown_path(name)
        try:
            document = _load(name, video_zones)
        except CdsError as error:
            code = EXIT_INVALID
            for problem in error.problems:
                _say(_problem_line(shown, problem))
            continue
        for warning in document.warnings:
            _say(_problem_line(shown, warning, warning=True), sys.stderr)
        _say(f"{shown}: {summary(document)}")
    return code


def summary(document: Document) -> str:
    """One line: what the CDS holds, for ``check``."""
    root = document.root
    sets = root.walk_sets()
    items = root.walk_items()
    every: list[Constraints] = [s.constraints for s in sets] + [i.constraints for i in items]
    counted: dict[str, Callable[[Constraints], bool]] = {
        "playback": lambda c: (
            c.order is not None or c.avoid_context_switch is not None or c.transition is not None
        ),
        "time": lambda c: bool(c.times),
        "day-of-week": lambda c: bool(c.days),
        "date": lambda c: bool(c.dates),
        "priority": lambda c: c.priority is not None,
        "preferred-duration": lambda c: c.preferred_duration is not None,
    }
    kinds: dict[str, int] = {}
    for kind, present in counted.items():
        number = sum(1 for c in every if present(c))
        if number:
            kinds[kind] = number
    total = sum(kinds.values())
    name = f"'{root.name}'" if root.name is not None else "(unnamed)"
    remote = sum(1 for s in sets if s.type == "remote")
    parts = [
        _count(len(sets), "set") + (f" ({remote} remote)" if remote else ""),
        _count(len(items), "item"),
        _count(total, "constraint")
        + (" (" + ", ".join(f"{kind} {n}" for kind, n in kinds.items()) + ")" if kinds else ""),
    ]
    if root.layout is not None:
        template = f" {root.layout.template}" if root.layout.template else ""
        zones = ", ".join(zone.name for zone in root.layout.zones)
        parts.append(f"layout{template} (zones {zones})")
    if document.warnings:
        parts.append(_count(len(document.warnings), "warning"))
    return f"valid CDS {name}: " + ", ".join(parts)


def _count(number: int, noun: str) -> str:
    return f"{number} {noun}{'' if number == 1 else 's'}"


# ----------------------------------------------------------------------------- explain


def run_explain(args: argparse.Namespace) -> int:
    return _guard(lambda: _explain(args.files, args.at, args.tz))


def _zone(name: str | None) -> datetime.tzinfo:
    if name is None:
        return _zone(system_timezone_name())
    if name.upper() in ("UTC", "Z"):
        return datetime.UTC
    try:
        return zoneinfo.ZoneInfo(name)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError) as error:
        raise _UsageError(
            f"unknown time zone '{name}'; use an IANA name like Europe/London or UTC"
        ) from error


def _moment(text: str | None, tz: datetime.tzinfo) -> datetime.datetime:
    if text is None:
        return datetime.datetime.now(tz)
    value = text.strip()
    if value.endswith(("z", "Z")):
        value = value[:-1] + "+00:00"
    try:
        moment = datetime.datetime.fromisoformat(value)
    except ValueError as error:
        raise _UsageError(
            f"--at '{text}' is not a time; write 2026-11-22T09:30:00+00:00 or '2026-11-22 09:30'"
        ) from error
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=tz)
    return moment.astimezone(tz)


class _UsageError(Exception):
    pass


def _explain(files: Sequence[str], at: str | None, zone_name: str | None) -> int:
    tz = _zone(zone_name)
    now = _moment(at, tz)
    documents: list[Document] = []
    failed = False
    for name in files:
        try:
            documents.append(_load(name))
        except CdsError as error:
            failed = True
            for problem in error.problems:
                _say(_problem_line(_shown_path(name), problem))
    if failed:
        return EXIT_INVALID

    def available(_item: ContentItem) -> bool:
        return True

    playlist = Playlist(tz)
    playlist.set_documents(documents)
    zone = getattr(tz, "key", None) or str(tz)
    when = f"{DAY_NAMES[now.weekday()].capitalize()} {now.strftime('%Y-%m-%d %H:%M:%S')} {zone}"
    _say(f"At {when} (assuming every file is in the display's cache):")
    verdicts = playlist.explain(now, available)
    playing = sorted(
        (v for v in verdicts if v.eligible),
        key=lambda v: v.position if v.position is not None else 0,
    )
    if playing:
        level = PRIORITY_NAMES[playing[0].priority]
        _say(f"Plays now, in this order (priority {level}):")
        for number, verdict in enumerate(playing, start=1):
            path = " > ".join(name or "(unnamed)" for name in verdict.set_path)
            _say(f"  {number}. {verdict.url}")
            _say(f"     {verdict.key}, set {path}, {describe_duration(verdict.duration)}")
    else:
        _say("Nothing can play: the display shows its idle page.")
    waiting = [v for v in verdicts if not v.eligible]
    if waiting:
        _say("Not playing:")
        for verdict in waiting:
            _say(f"  {verdict.url or verdict.key} ({verdict.key})")
            for reason in verdict.reasons:
                _say(f"     - {reason}")
    change = playlist.next_change(now)
    if change is None:
        _say("No time, day or date window ever opens or closes from here.")
    else:
        change = change.astimezone(tz)
        day = DAY_NAMES[change.weekday()].capitalize()
        _say(f"Next change: {day} {change.strftime('%Y-%m-%d %H:%M:%S')} {zone}")
    return EXIT_OK


# ----------------------------------------------------------------------------- plumbing


def _guard(action: Any) -> int:
    """Run an action; turn anything unexpected into a message and an exit code."""
    try:
        result: int = action()
        sys.stdout.flush()
        return result
    except _UsageError as error:
        _say(f"pdn cds: {error}", sys.stderr)
        return EXIT_USAGE
    except BrokenPipeError:
        # The reader (head, less) went away: not an error of ours.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return EXIT_OK
    except Exception as error:
        _say(f"pdn cds: internal error: {type(error).__name__}: {error}", sys.stderr)
        return EXIT_INVALID


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m cds.cli check FILE...``: the same as ``pdn cds``, without the rest of pdn."""
    parser = argparse.ArgumentParser(prog="pdn cds", description="Check and explain CDS files.")
    _add_actions(parser)
    args = parser.parse_args(argv)
    code: int = args.func(args)
    return code


if __name__ == "__main__":
    sys.exit(main())

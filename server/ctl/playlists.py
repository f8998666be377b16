"""``pdn ctl playlist ...``: a scheduler's playlists from the command line (``/x/playlists``).

pdn ctl playlist list SCHEDULER_URL [--json]
pdn ctl playlist show SCHEDULER_URL ID [--json | --cds]
pdn ctl playlist put SCHEDULER_URL ID (--file FILE | --item ITEM[:DURATION] --link URL[:DURATION]
                     ...) [--order inorder|shuffle] [--priority LEVEL] [--name NAME]
pdn ctl playlist delete SCHEDULER_URL ID
pdn ctl playlist assign SCHEDULER_URL ID (--display DISPLAY_URL | --group NAME)
pdn ctl playlist unassign SCHEDULER_URL ID (--display DISPLAY_URL | --group NAME)

``--item`` and ``--link`` may be repeated and mixed; the entries keep the order they are given
in. An item is a media item's SHA-256 or its name in the library (``red.png``). A duration
follows the last ``:`` and has a unit (``:10s``, ``:1 min``, ``:PT20S``), so an address's port
is never taken for one. A playlist is a schedule of the same id: assigning it is assigning that
schedule (``pdn ctl assign``). Like the other fleet commands it needs the scheduler's operator
token (PDN_API_TOKEN) beyond loopback.
"""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path
from typing import Any
from urllib.parse import quote

from server.ctl.client import (
    EXIT_OK,
    EXIT_REFUSED,
    EXIT_USAGE,
    CtlError,
    base_url,
    call,
    check,
    get_json,
    print_json,
)
from server.ctl.fleet import add_target_arguments, cmd_assign, cmd_unassign

__all__ = ["add_playlist_commands"]

JSON = "application/json"
_SHA256 = re.compile(r"^[0-9a-f]{64}$")
# A duration after the last ':' has a unit: a port (":8080") is part of the address.
_DURATION = re.compile(r"^\s*(?:[0-9.]+\s*[A-Za-z]+[\s,0-9.A-Za-z]*|P[0-9A-Za-z.]+)\s*$")
MAX_FILE = 4 << 20


def add_playlist_commands(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    playlist = commands.add_parser(
        "playlist",
        help="list, show, put, delete and assign a scheduler's playlists",
        description=(
            "A playlist is an ordered list of media items and web links, each with a "
            "duration; the scheduler makes a schedule (a CDS) of it with the same id and "
            "pushes it to the displays it is assigned to."
        ),
    )
    actions = playlist.add_subparsers(dest="playlist_action", metavar="ACTION", required=True)

    listing = actions.add_parser("list", help="every playlist, in short")
    listing.add_argument("scheduler", metavar="SCHEDULER_URL")
    listing.add_argument("--json", action="store_true", help="print the JSON answer")
    listing.set_defaults(ctl_func=cmd_list)

    show = actions.add_parser("show", help="one playlist's entries, or its CDS")
    show.add_argument("scheduler", metavar="SCHEDULER_URL")
    show.add_argument("playlist", metavar="ID")
    shown = show.add_mutually_exclusive_group()
    shown.add_argument("--json", action="store_true", help="print the JSON answer")
    shown.add_argument("--cds", action="store_true", help="print the CDS made of it")
    show.set_defaults(ctl_func=cmd_show)

    put = actions.add_parser(
        "put",
        help="create or replace a playlist",
        description=(
            "From a JSON file (the body of PUT /x/playlists/ID, docs/fleet.md) or from "
            "--item and --link, in the order given."
        ),
    )
    put.add_argument("scheduler", metavar="SCHEDULER_URL")
    put.add_argument("playlist", metavar="ID")
    put.add_argument("--file", metavar="FILE", help="the playlist as JSON ('-': standard input)")
    put.add_argument(
        "--item",
        dest="entries",
        action="append",
        type=lambda text: ("media", text),
        metavar="ITEM[:DURATION]",
        help="a media item (SHA-256 or name), e.g. red.png:10s",
    )
    put.add_argument(
        "--link",
        dest="entries",
        action="append",
        type=lambda text: ("link", text),
        metavar="URL[:DURATION]",
        help="a web page, e.g. https://example.org/menu:20s",
    )
    put.add_argument("--order", choices=("inorder", "shuffle"), help="default: inorder")
    put.add_argument(
        "--priority",
        choices=("lowest", "low", "medium", "high", "highest"),
        help="default: medium",
    )
    put.add_argument("--name", help="a name to show in the console")
    put.set_defaults(ctl_func=cmd_put)

    delete = actions.add_parser("delete", help="delete a playlist (its displays drop it)")
    delete.add_argument("scheduler", metavar="SCHEDULER_URL")
    delete.add_argument("playlist", metavar="ID")
    delete.set_defaults(ctl_func=cmd_delete)

    for name, help_text, func in (
        ("assign", "assign a playlist to a display or a group", cmd_assign),
        ("unassign", "take a playlist off a display or a group", cmd_unassign),
    ):
        command = actions.add_parser(name, help=help_text)
        command.add_argument("scheduler", metavar="SCHEDULER_URL")
        command.add_argument("schedule", metavar="ID")
        add_target_arguments(command)
        command.set_defaults(ctl_func=func)


def _path(playlist_id: str) -> str:
    return f"/x/playlists/{quote(playlist_id, safe='')}"


def _seconds(value: float) -> str:
    return f"{value:g} s"


def cmd_list(args: argparse.Namespace) -> int:
    scheduler = base_url(args.scheduler, "SCHEDULER_URL")
    answer = get_json(scheduler, "/x/playlists", list)
    if args.json:
        print_json(answer)
        return EXIT_OK
    if not answer:
        print("no playlists")
    for playlist in answer:
        name = f"  ({playlist['name']})" if playlist.get("name") else ""
        print(
            f"{playlist['id']}{name}  {playlist['count']} item(s), "
            f"{_seconds(playlist['duration'])}, {playlist['order']}, {playlist['priority']}"
        )
    return EXIT_OK


def cmd_show(args: argparse.Namespace) -> int:
    scheduler = base_url(args.scheduler, "SCHEDULER_URL")
    if args.cds:
        response = call(
            "GET", f"{scheduler}/schedule/{quote(args.playlist, safe='')}/", accept="text/xml"
        )
        if response.status_code != 200:
            check(response)
        print(response.text, end="")
        return EXIT_OK
    answer = get_json(scheduler, _path(args.playlist), dict)
    if args.json:
        print_json(answer)
        return EXIT_OK
    name = f" ({answer['name']})" if answer.get("name") else ""
    print(
        f"{answer['id']}{name}: {len(answer['items'])} item(s), {_seconds(answer['duration'])}, "
        f"{answer['order']}, priority {answer['priority']}"
    )
    for index, (entry, seconds) in enumerate(zip(answer["items"], answer["seconds"], strict=False)):
        what = f"media {entry['media']}" if "media" in entry else f"link {entry['link']}"
        limits = [f"{key} {entry[key]}" for key in ("from", "until") if entry.get(key) is not None]
        limits += [f"{w['start']}-{w['end']}" for w in entry.get("windows") or []]
        if entry.get("days"):
            limits.append(",".join(day[:3] for day in entry["days"]))
        extra = f"  [{'; '.join(limits)}]" if limits else ""
        print(f"  {index + 1}. {what}  {_seconds(seconds)}  {entry['transition']}{extra}")
    return EXIT_OK


def _split(text: str) -> tuple[str, str | None]:
    """``WHAT[:DURATION]``: the duration after the last ':' when it has a unit."""
    head, colon, tail = text.rpartition(":")
    if colon and head and _DURATION.match(tail):
        return head, tail.strip()
    return text, None


def _media_by_name(scheduler: str, name: str, library: list[dict[str, Any]]) -> str:
    matches = [item["sha256"] for item in library if item.get("name") == name]
    if len(matches) != 1:
        problem = "no media item" if not matches else f"{len(matches)} media items"
        raise CtlError(
            EXIT_USAGE,
            f"--item {name}: {problem} of that name on {scheduler}; give its SHA-256"
            " ('pdn ctl upload' prints it)",
        )
    return str(matches[0])


def _from_arguments(scheduler: str, args: argparse.Namespace) -> dict[str, Any]:
    library: list[dict[str, Any]] | None = None
    items = []
    for kind, text in args.entries:
        what, duration = _split(text)
        if kind == "media" and not _SHA256.match(what):
            if library is None:
                library = get_json(scheduler, "/x/media", dict).get("items") or []
            what = _media_by_name(scheduler, what, library)
        entry: dict[str, Any] = {kind: what}
        if duration is not None:
            entry["duration"] = duration
        items.append(entry)
    body: dict[str, Any] = {"items": items}
    for key in ("order", "priority", "name"):
        if getattr(args, key) is not None:
            body[key] = getattr(args, key)
    return body


def _from_file(args: argparse.Namespace) -> dict[str, Any]:
    import sys

    try:
        if args.file == "-":
            text = sys.stdin.read(MAX_FILE + 1)
        else:
            with open(Path(args.file), encoding="utf-8") as handle:
                text = handle.read(MAX_FILE + 1)
    except (OSError, UnicodeDecodeError) as error:
        raise CtlError(EXIT_USAGE, f"--file {args.file}: {error}") from None
    if len(text) > MAX_FILE:
        raise CtlError(EXIT_USAGE, f"--file {args.file}: over {MAX_FILE} bytes")
    try:
        body = json.loads(text)
    except ValueError as error:
        raise CtlError(EXIT_USAGE, f"--file {args.file}: not JSON: {error}") from None
    if not isinstance(body, dict):
        raise CtlError(EXIT_USAGE, f"--file {args.file}: a playlist is a JSON object")
    for key in ("order", "priority", "name"):
        if getattr(args, key) is not None:
            body[key] = getattr(args, key)
    return body


def cmd_put(args: argparse.Namespace) -> int:
    scheduler = base_url(args.scheduler, "SCHEDULER_URL")
    if (args.file is None) == (not args.entries):
        raise CtlError(EXIT_USAGE, "give either --file or --item/--link entries")
    body = _from_file(args) if args.file is not None else _from_arguments(scheduler, args)
    response = call(
        "PUT",
        f"{scheduler}{_path(args.playlist)}",
        body=json.dumps(body).encode(),
        content_type=JSON,
    )
    answer = check(response)
    if not isinstance(answer, dict) or "seconds" not in answer:
        raise CtlError(EXIT_REFUSED, f"unexpected answer from {scheduler}: {answer!r}")
    verb = "created" if response.status_code == 201 else "replaced"
    print(
        f"playlist {args.playlist} {verb}: {len(answer['items'])} item(s), "
        f"{_seconds(answer['duration'])}; its schedule is {scheduler}{answer['schedule']}"
    )
    return EXIT_OK


def cmd_delete(args: argparse.Namespace) -> int:
    scheduler = base_url(args.scheduler, "SCHEDULER_URL")
    response = call("DELETE", f"{scheduler}{_path(args.playlist)}")
    if response.status_code != 204:
        check(response)
    print(f"playlist {args.playlist} deleted")
    return EXIT_OK

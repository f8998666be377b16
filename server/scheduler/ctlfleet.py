"""``pdn ctl`` subcommands that talk to a scheduler about its fleet (``server.ctl`` adds them).

pdn ctl assign SCHEDULER_URL (--display DISPLAY_URL | --group NAME) SCHEDULE_ID
pdn ctl unassign SCHEDULER_URL (--display DISPLAY_URL | --group NAME) SCHEDULE_ID
pdn ctl group SCHEDULER_URL DISPLAY_URL NAME [--remove]
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from server.ctl import EXIT_OK, _base, _call, _check

JSON = "application/json"


def add_fleet_commands(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    for name, help_text, func in (
        ("assign", "assign a schedule to a display or a group", cmd_assign),
        ("unassign", "take a schedule off a display or a group", cmd_unassign),
    ):
        command = commands.add_parser(
            name,
            help=help_text,
            description=(
                f"{help_text[0].upper()}{help_text[1:]} (POST or DELETE /x/assignments on the "
                "scheduler). Every display concerned gets the change within seconds; a display "
                "that is off gets it when it is back."
            ),
        )
        command.add_argument("scheduler", metavar="SCHEDULER_URL")
        target = command.add_mutually_exclusive_group(required=True)
        target.add_argument("--display", metavar="DISPLAY_URL", help="one display")
        target.add_argument("--group", metavar="NAME", help="every display of a group")
        command.add_argument("schedule", metavar="SCHEDULE_ID")
        command.set_defaults(ctl_func=func)

    group = commands.add_parser(
        "group",
        help="put a display in a group (or take it out with --remove)",
        description="POST (or DELETE) /x/groups/NAME/displays on the scheduler.",
    )
    group.add_argument("scheduler", metavar="SCHEDULER_URL")
    group.add_argument("display", metavar="DISPLAY_URL")
    group.add_argument("name", metavar="NAME")
    group.add_argument("--remove", action="store_true", help="take the display out of the group")
    group.set_defaults(ctl_func=cmd_group)


def _body(value: dict[str, Any]) -> bytes:
    return json.dumps(value).encode()


def _assignment(args: argparse.Namespace) -> dict[str, Any]:
    body: dict[str, Any] = {"schedule": args.schedule}
    if args.display:
        body["display"] = _base(args.display, "--display")
    else:
        body["group"] = args.group
    return body


def _target(body: dict[str, Any]) -> str:
    return f"display {body['display']}" if "display" in body else f"group {body['group']}"


def cmd_assign(args: argparse.Namespace) -> int:
    scheduler = _base(args.scheduler, "SCHEDULER_URL")
    body = _assignment(args)
    response = _call("POST", f"{scheduler}/x/assignments", body=_body(body), content_type=JSON)
    _check(response)
    already = " (it already was)" if response.status_code == 200 else ""
    print(f"schedule {args.schedule} assigned to {_target(body)}{already}")
    return EXIT_OK


def cmd_unassign(args: argparse.Namespace) -> int:
    scheduler = _base(args.scheduler, "SCHEDULER_URL")
    body = _assignment(args)
    _check(_call("DELETE", f"{scheduler}/x/assignments", body=_body(body), content_type=JSON))
    print(f"schedule {args.schedule} no longer assigned to {_target(body)}")
    return EXIT_OK


def cmd_group(args: argparse.Namespace) -> int:
    scheduler = _base(args.scheduler, "SCHEDULER_URL")
    display = _base(args.display, "DISPLAY_URL")
    method = "DELETE" if args.remove else "POST"
    response = _call(
        method,
        f"{scheduler}/x/groups/{args.name}/displays",
        body=_body({"display": display}),
        content_type=JSON,
    )
    _check(response)
    if args.remove:
        print(f"{display} is no longer in the group {args.name}")
    else:
        already = " (it already was)" if response.status_code == 200 else ""
        print(f"{display} is in the group {args.name}{already}")
    return EXIT_OK

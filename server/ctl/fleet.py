"""``pdn ctl`` subcommands that talk to a scheduler about its fleet (``server.ctl.cli`` adds them).

pdn ctl assign SCHEDULER_URL (--display DISPLAY_URL | --group NAME) SCHEDULE_ID
pdn ctl unassign SCHEDULER_URL (--display DISPLAY_URL | --group NAME) SCHEDULE_ID
pdn ctl group SCHEDULER_URL DISPLAY_URL NAME [--remove]
pdn ctl fleet SCHEDULER_URL [--json] [--thumbnail DISPLAY_URL -o FILE]
pdn ctl approve SCHEDULER_URL DISPLAY_URL
pdn ctl add-display SCHEDULER_URL DISPLAY_URL CODE [--pin sha256:HEX]

Each needs the scheduler's operator token in PDN_API_TOKEN, with PDN_API_URL naming the scheduler
(pdn ctl sends the token to that origin alone).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from datetime import datetime
from typing import Any
from urllib.parse import urlencode

from server.ctl.client import (
    EXIT_OK,
    EXIT_REFUSED,
    EXIT_UNEXPECTED,
    EXIT_USAGE,
    CtlError,
    base_url,
    call,
    check,
    get_json,
    print_json,
)
from server.platform.clockspread import clock_spread, describe_spread

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
        add_target_arguments(command)
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

    approve = commands.add_parser(
        "approve",
        help="approve a display waiting for it (registered without the enrolment token)",
        description=(
            "POST /x/displays/approve on the scheduler: the display joins the fleet and gets "
            "its schedules at once. 'pdn ctl fleet' lists those waiting."
        ),
    )
    approve.add_argument("scheduler", metavar="SCHEDULER_URL")
    approve.add_argument("display", metavar="DISPLAY_URL")
    approve.set_defaults(ctl_func=cmd_approve)

    add = commands.add_parser(
        "add-display",
        help="have the scheduler pair with a display, using the code on its screen",
        description=(
            "POST /x/displays/pair on the scheduler: it pairs with the display, keeps the token "
            "it gives, pins its certificate (HTTPS) and pushes its schedules to it."
        ),
    )
    add.add_argument("scheduler", metavar="SCHEDULER_URL")
    add.add_argument("display", metavar="DISPLAY_URL")
    add.add_argument("code", metavar="CODE", help="the pairing code on the display's screen")
    add.add_argument("--pin", metavar="sha256:HEX", help="the certificate the display must have")
    add.set_defaults(ctl_func=cmd_add_display)

    plays = commands.add_parser(
        "plays",
        help="proof of play: what the displays showed, and when (GET /x/plays)",
        description=(
            "Every playback update the scheduler received, by display and sequence. A jump in "
            "a display's sequence (updates that never arrived) is printed as a gap."
        ),
    )
    plays.add_argument("scheduler", metavar="SCHEDULER_URL")
    plays.add_argument("--display", metavar="DISPLAY_URL", help="one display only")
    plays.add_argument("--since", metavar="TIME", help="ISO 8601 ('2026-05-01T08:00Z') or epoch")
    plays.add_argument("--until", metavar="TIME", help="the same; exclusive")
    plays.add_argument("--zone", metavar="NAME", help="one zone of the screens only ('main')")
    output = plays.add_mutually_exclusive_group()
    output.add_argument("--csv", action="store_true", help="print CSV (Accept: text/csv)")
    output.add_argument("--json", action="store_true", help="print the JSON answer")
    plays.set_defaults(ctl_func=cmd_plays)

    broadcast = commands.add_parser(
        "broadcast",
        help="show an urgent item on every display of a group, confirmed screen by screen",
        description=(
            "POST /x/broadcasts: the item plays at the highest priority on every display of "
            "the group for the duration. Then waits for each screen's confirmation (its "
            "playback update, sent once the item is painted) and prints it per display. Exit "
            "code 0 when every screen confirmed within the time-out, 1 when one did not."
        ),
    )
    broadcast.add_argument("scheduler", metavar="SCHEDULER_URL")
    broadcast.add_argument("--group", required=True, metavar="NAME")
    broadcast.add_argument("content", metavar="CONTENT_URL")
    broadcast.add_argument(
        "--for", dest="duration", required=True, metavar="DURATION", help="e.g. '2 minutes'"
    )
    broadcast.add_argument(
        "--timeout",
        type=float,
        default=30.0,
        metavar="SECONDS",
        help="how long a screen has to confirm (30)",
    )
    broadcast.set_defaults(ctl_func=cmd_broadcast)

    fleet = commands.add_parser(
        "fleet",
        help="every display: online, what it shows since when, health, version (GET /x/fleet)",
        description=(
            "The scheduler's view of each registered display, re-read every few seconds: "
            "online or offline (last seen), what it shows now and since when, its health "
            "(and the first problem), its version, and when its thumbnail was taken. With "
            "--thumbnail: take a new thumbnail of one display now and save it as a PNG."
        ),
    )
    fleet.add_argument("scheduler", metavar="SCHEDULER_URL")
    fleet.add_argument("--json", action="store_true", help="print the JSON answer")
    fleet.add_argument("--thumbnail", metavar="DISPLAY_URL", help="take its thumbnail now")
    fleet.add_argument("-o", "--output", metavar="FILE", help="where the thumbnail goes")
    fleet.set_defaults(ctl_func=cmd_fleet)


def add_target_arguments(command: argparse.ArgumentParser) -> None:
    """What an assignment is to: ``--display DISPLAY_URL`` or ``--group NAME``."""
    target = command.add_mutually_exclusive_group(required=True)
    target.add_argument("--display", metavar="DISPLAY_URL", help="one display")
    target.add_argument("--group", metavar="NAME", help="every display of a group")


def _body(value: dict[str, Any]) -> bytes:
    return json.dumps(value).encode()


def _assignment(args: argparse.Namespace) -> dict[str, Any]:
    body: dict[str, Any] = {"schedule": args.schedule}
    if args.display:
        body["display"] = base_url(args.display, "--display")
    else:
        body["group"] = args.group
    return body


def _target(body: dict[str, Any]) -> str:
    return f"display {body['display']}" if "display" in body else f"group {body['group']}"


def cmd_assign(args: argparse.Namespace) -> int:
    scheduler = base_url(args.scheduler, "SCHEDULER_URL")
    body = _assignment(args)
    response = call("POST", f"{scheduler}/x/assignments", body=_body(body), content_type=JSON)
    check(response)
    already = " (it already was)" if response.status_code == 200 else ""
    print(f"schedule {args.schedule} assigned to {_target(body)}{already}")
    return EXIT_OK


def cmd_unassign(args: argparse.Namespace) -> int:
    scheduler = base_url(args.scheduler, "SCHEDULER_URL")
    body = _assignment(args)
    check(call("DELETE", f"{scheduler}/x/assignments", body=_body(body), content_type=JSON))
    print(f"schedule {args.schedule} no longer assigned to {_target(body)}")
    return EXIT_OK


def cmd_group(args: argparse.Namespace) -> int:
    scheduler = base_url(args.scheduler, "SCHEDULER_URL")
    display = base_url(args.display, "DISPLAY_URL")
    method = "DELETE" if args.remove else "POST"
    response = call(
        method,
        f"{scheduler}/x/groups/{args.name}/displays",
        body=_body({"display": display}),
        content_type=JSON,
    )
    check(response)
    if args.remove:
        print(f"{display} is no longer in the group {args.name}")
    else:
        already = " (it already was)" if response.status_code == 200 else ""
        print(f"{display} is in the group {args.name}{already}")
    return EXIT_OK


def cmd_approve(args: argparse.Namespace) -> int:
    scheduler = base_url(args.scheduler, "SCHEDULER_URL")
    display = base_url(args.display, "DISPLAY_URL")
    body = _body({"display": display})
    check(call("POST", f"{scheduler}/x/displays/approve", body=body, content_type=JSON))
    print(f"{display} is approved: it gets its schedules now")
    return EXIT_OK


def cmd_add_display(args: argparse.Namespace) -> int:
    scheduler = base_url(args.scheduler, "SCHEDULER_URL")
    body: dict[str, Any] = {"url": base_url(args.display, "DISPLAY_URL"), "code": args.code}
    if args.pin:
        body["pin"] = args.pin.lower()
    answer = check(
        call("POST", f"{scheduler}/x/displays/pair", body=_body(body), content_type=JSON)
    )
    pinned = (
        f", certificate {answer['tls-fingerprint']} pinned" if "tls-fingerprint" in answer else ""
    )
    print(f"the scheduler paired with {body['url']}{pinned}")
    return EXIT_OK


def _rfc3339(option: str, text: str | None) -> str | None:
    """'2026-05-01', '2026-05-01 08:00', '...Z' or an offset; no offset: this machine's time."""
    if not text:
        return None
    try:
        value = datetime.fromisoformat(text.strip())
    except ValueError:
        raise CtlError(
            EXIT_USAGE, f"{option}: {text!r} is not a date or time like '2026-05-01 08:00'"
        ) from None
    if value.tzinfo is None:
        value = value.astimezone()
    return value.isoformat()


def cmd_plays(args: argparse.Namespace) -> int:
    scheduler = base_url(args.scheduler, "SCHEDULER_URL")
    query = {
        key: value
        for key, value in (
            ("display", args.display),
            ("since", _rfc3339("--since", args.since)),
            ("until", _rfc3339("--until", args.until)),
            ("zone", args.zone),
        )
        if value
    }
    url = f"{scheduler}/x/plays"
    if query:
        url += "?" + urlencode(query)
    if args.csv:
        response = call("GET", url, accept="text/csv")
        if response.status_code >= 400:
            check(response)
        sys.stdout.write(response.text)
        return EXIT_OK
    answer = check(call("GET", url))
    if not isinstance(answer, dict) or not isinstance(answer.get("plays"), list):
        raise CtlError(EXIT_UNEXPECTED, f"unexpected answer from {scheduler}: {answer!r}")
    if args.json:
        print_json(answer)
        return EXIT_OK
    if not answer["plays"]:
        print("no plays recorded")
    reasons = {
        (gap.get("display"), gap.get("before-sequence")): gap.get("reason")
        for gap in answer.get("gaps") or []
        if isinstance(gap, dict)
    }
    for play in answer["plays"]:
        if play.get("gap-before"):
            reason = reasons.get((play["display"], play["sequence"]))
            print(
                f"  -- {play['gap-before']} update(s) of {play['display']} missing "
                f"(sequence {play['sequence'] - play['gap-before']} to {play['sequence'] - 1})"
                + (f": {reason}" if reason else "")
                + " --"
            )
        what = play.get("content-item") or "(idle page)"
        ended = play.get("ended") or "..."
        where = f" [{play['set']}]" if play.get("set") else ""
        painted = "" if play.get("painted") else " (not confirmed painted)"
        zone = play.get("zone") or "main"
        layout = f" {{{play['layout']}: {zone}}}" if play.get("layout") else ""
        print(
            f"{play['display']}  #{play['sequence']}  {play['started']} -> {ended}  "
            f"{play['origin']}{layout}{where}  {what}{painted}"
        )
    return EXIT_OK


def cmd_broadcast(args: argparse.Namespace) -> int:
    scheduler = base_url(args.scheduler, "SCHEDULER_URL")
    content = base_url(args.content, "CONTENT_URL")
    if not 0 < args.timeout <= 3600:
        raise CtlError(EXIT_USAGE, "--timeout must be between 0 and 3600 seconds")
    body = {
        "group": args.group,
        "content-item": content,
        "duration": args.duration,
        "timeout": args.timeout,
    }
    report = check(call("POST", f"{scheduler}/x/broadcasts", body=_body(body), content_type=JSON))
    broadcast_id = report.get("id") if isinstance(report, dict) else None
    if not isinstance(broadcast_id, int):
        raise CtlError(EXIT_UNEXPECTED, f"unexpected answer from {scheduler}: {report!r}")
    print(f"broadcast {broadcast_id}: {content} on {len(report['displays'])} display(s) "
          f"of {args.group} for {args.duration}")  # fmt: skip
    told: set[str] = set()
    deadline = time.monotonic() + args.timeout + 5
    while True:
        for entry in report["displays"]:
            if entry["status"] != "waiting" and entry["display"] not in told:
                told.add(entry["display"])
                if entry["status"] == "confirmed":
                    print(f"  {entry['display']}: shown after {entry['after']:.2f} s")
                else:
                    print(f"  {entry['display']}: NOT confirmed within {args.timeout:g} s")
        if len(told) == len(report["displays"]) or time.monotonic() > deadline:
            break
        time.sleep(0.2)
        report = check(call("GET", f"{scheduler}/x/broadcasts/{broadcast_id}"))
    missing = [e["display"] for e in report["displays"] if e["status"] != "confirmed"]
    if missing:
        print(f"{len(missing)} of {len(report['displays'])} screen(s) did not confirm")
        return EXIT_REFUSED
    print(f"all {len(report['displays'])} screen(s) confirmed")
    return EXIT_OK


def cmd_fleet(args: argparse.Namespace) -> int:
    scheduler = base_url(args.scheduler, "SCHEDULER_URL")
    if args.thumbnail:
        if not args.output:
            raise CtlError(EXIT_USAGE, "--thumbnail needs -o FILE")
        query = urlencode({"display": base_url(args.thumbnail, "--thumbnail")})
        taken = check(call("POST", f"{scheduler}/x/displays/thumbnail?{query}"))
        problem = (taken.get("thumbnail") or {}).get("error") if isinstance(taken, dict) else None
        if problem:
            raise CtlError(EXIT_REFUSED, f"no new thumbnail: {problem}")
        response = call("GET", f"{scheduler}/x/displays/thumbnail?{query}", accept="image/png")
        if response.status_code != 200:
            check(response)
        with open(args.output, "wb") as out:
            out.write(response.content)
        print(f"{args.output}: {len(response.content)} bytes")
        return EXIT_OK
    answer = get_json(scheduler, "/x/fleet", list)
    if args.json:
        print_json(answer)
        return EXIT_OK
    if not answer:
        print("no display has registered")
    for display in answer:
        print(describe_fleet_entry(display))
    if answer:
        print(describe_spread(clock_spread(answer)))
    return EXIT_OK


def describe_fleet_entry(display: dict[str, Any]) -> str:
    """Two lines: who and in what state; what it shows."""
    name = f"{display['name']}  " if display.get("name") else ""
    if display.get("pending"):
        state = "WAITING FOR APPROVAL (pdn ctl approve)"
        if display.get("tls-fingerprint"):
            state += f", certificate {display['tls-fingerprint']}"
    elif display.get("online"):
        state = f"online (seen {display.get('last-seen')})"
    elif display.get("online") is None:
        state = "not read yet"
    else:
        state = f"OFFLINE since {display.get('offline-since')}: {display.get('last-error')}"
    health = display.get("health") or {}
    verdict = health.get("status") or "?"
    if health.get("problem"):
        verdict += f" ({health['problem']})"
    playing = display.get("playing") or {}
    what = playing.get("content-item") or "(idle page)"
    where = f" [{playing['set']}]" if playing.get("set") else ""
    thumbnail = display.get("thumbnail") or {}
    picture = "no thumbnail"
    if thumbnail.get("available"):
        picture = f"thumbnail {thumbnail.get('taken')}"
    version = display.get("version") or "?"
    if display.get("rolled-back-from"):
        version += f" (ROLLED BACK from {display['rolled-back-from']})"
    clock = display.get("clock") or {}
    offset = clock.get("offset-ms")
    timing = f"clock {offset:+g} ms ({clock.get('source')})" if offset is not None else "clock ?"
    return (
        f"{name}{display['display']}  {state}  health {verdict}  "
        f"version {version}  {timing}\n"
        f"    shows {what}{where} since {playing.get('started') or '?'}; {picture}"
    )

"""``pdn ctl pair``: pair with a display, keep its token, and use it from then on.

    pdn ctl pair DISPLAY_URL CODE [--name NAME] [--role ROLE]
                                                    pair with the code shown on the screen
    pdn ctl pairings DISPLAY_URL                    the controllers paired, with their roles
    pdn ctl unpair DISPLAY_URL NAME                 revoke one (its token stops working)

What pairing gives is kept in the user's config, ``$XDG_CONFIG_HOME/pdn/ctl.toml`` (default
``~/.config/pdn/ctl.toml``), mode 0600, one table per display origin::

    [displays."http://192.0.2.10:8080"]
    name = "ana@laptop"
    role = "control"
    token = "pdn_..."
    paired = "2026-11-26T01:00:00+00:00"

Every ``pdn ctl`` request to that display then carries its token (``PDN_API_TOKEN`` wins only
when ``PDN_API_URL`` names that display). The file is rewritten whole and renamed into place, so
it is never half written.

HTTPS: a display's certificate is usually self-signed, so it is pinned instead of checked
against certificate authorities. ``pdn ctl pair https://...`` takes the certificate the display
presents (trust on first use, or the one ``--pin sha256:...`` names), checks that the pairing
answer names the same fingerprint, and keeps it as ``tls-fingerprint``; every later request to
that display is refused, with a clear error, if its certificate is another one (pair again
after replacing it on purpose).
"""

from __future__ import annotations

import argparse
import getpass
import json
import re
import socket
import ssl
import sys
from datetime import UTC, datetime
from urllib.parse import quote, urlsplit

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
    load,
    origin,
    print_json,
    save,
)
from server.platform.pairing import NAME_PATTERN, ROLES
from server.platform.pins import presented_fingerprint as fetch_fingerprint

__all__ = ["add_pair_commands"]


def presented_fingerprint(url: str) -> str:
    """``sha256:...`` of the certificate the server at ``url`` presents now (not verified:
    trust on first use); CtlError when it cannot be had."""
    try:
        return fetch_fingerprint(url)
    except (OSError, ssl.SSLError) as error:
        raise CtlError(3, f"cannot reach {url} over TLS: {error}") from None


def default_name() -> str:
    """``user@host``, cut to what a display takes as a controller's name."""
    try:
        user = getpass.getuser()
    except (KeyError, OSError):
        user = "pdn"
    name = re.sub(r"[^A-Za-z0-9 ._@-]", "-", f"{user}@{socket.gethostname()}")
    return name.lstrip(" ._@-")[:100] or "pdn-ctl"


def add_pair_commands(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    pair = commands.add_parser(
        "pair",
        help="pair with a display using the code on its screen; keep its token for later",
        description=(
            "POST /x/pair with the code the display shows (also in its data directory's "
            "pairing-code file); the token it gives is kept in ~/.config/pdn/ctl.toml (0600) "
            "and sent with every later pdn ctl request to that display."
        ),
    )
    pair.add_argument("display", metavar="DISPLAY_URL")
    pair.add_argument("code", metavar="CODE", help="the pairing code, e.g. ABCD-EFGH")
    pair.add_argument("--name", help="this controller's name on the display (user@host)")
    pair.add_argument(
        "--role",
        choices=ROLES,
        default="control",
        help="what the token may do: control (everything, the default), sensor (POST /sensing),"
        " content (request content: POST /schedule) or read (reads and playback subscriptions)",
    )
    pair.add_argument(
        "--pin",
        metavar="sha256:HEX",
        help="the display's certificate fingerprint (on its idle page and in its --check-config);"
        " without it, the certificate it presents now is trusted and pinned",
    )
    pair.set_defaults(ctl_func=cmd_pair)

    pairings = commands.add_parser("pairings", help="the controllers paired with a display")
    pairings.add_argument("display", metavar="DISPLAY_URL")
    pairings.add_argument("--json", action="store_true", help="print the list as JSON")
    pairings.set_defaults(ctl_func=cmd_pairings)

    unpair = commands.add_parser("unpair", help="revoke a controller's pairing with a display")
    unpair.add_argument("display", metavar="DISPLAY_URL")
    unpair.add_argument("name", metavar="NAME", help="the controller's name (pdn ctl pairings)")
    unpair.set_defaults(ctl_func=cmd_unpair)


def cmd_pair(args: argparse.Namespace) -> int:
    display = base_url(args.display, "DISPLAY_URL")
    name = args.name or default_name()
    if not NAME_PATTERN.match(name):
        raise CtlError(EXIT_USAGE, f"--name {name!r}: use letters, digits, spaces or '._@-'")
    try:
        displays = load()
    except ValueError as error:
        raise CtlError(EXIT_USAGE, str(error)) from None
    pin: str | None = None
    if urlsplit(display).scheme == "https":
        pin = presented_fingerprint(display)
        if args.pin and args.pin.lower() != pin:
            raise CtlError(
                EXIT_REFUSED,
                f"{display} presents the certificate {pin}, not {args.pin}: refusing to pair"
                " (someone may be in between)",
            )
    body = json.dumps({"code": args.code, "name": name, "role": args.role}).encode()
    answer = check(
        call("POST", f"{display}/x/pair", body=body, content_type="application/json", pin=pin)
    )
    token = answer.get("token") if isinstance(answer, dict) else None
    if not isinstance(token, str) or not token:
        raise CtlError(EXIT_UNEXPECTED, f"{display} answered the pairing without a token")
    if pin is not None and answer.get("tls-fingerprint") != pin:
        raise CtlError(
            EXIT_UNEXPECTED,
            f"{display} says its certificate is {answer.get('tls-fingerprint')}, but it presented"
            f" {pin}: not kept (someone may be in between)",
        )
    role = answer.get("role", args.role)
    entry = {"name": name, "role": role, "token": token, "paired": datetime.now(UTC).isoformat()}
    if pin is not None:
        entry["tls-fingerprint"] = pin
    displays[origin(display)] = entry
    path = save(displays)
    print(f"paired with {display} as {name!r}, role {role}; its token is kept in {path}")
    return EXIT_OK


def cmd_pairings(args: argparse.Namespace) -> int:
    display = base_url(args.display, "DISPLAY_URL")
    answer = get_json(display, "/x/pairings", list)
    if args.json:
        print_json(answer)
    elif not answer:
        print("no controller is paired", file=sys.stderr)
    for entry in answer if not args.json else []:
        role = entry.get("role", "control")
        print(f"{entry.get('name')}  role {role}  (paired {entry.get('paired')})")
    return EXIT_OK


def cmd_unpair(args: argparse.Namespace) -> int:
    display = base_url(args.display, "DISPLAY_URL")
    check(call("DELETE", f"{display}/x/pairings/{quote(args.name, safe='')}"))
    print(f"{args.name!r} is no longer paired with {display}")
    return EXIT_OK

"""``pdn display``: run a display (the fullscreen player and its Display Segment API)."""

from __future__ import annotations

import argparse
from typing import Any

from player.config import DEFAULT_HOST, DEFAULT_PORT


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "display",
        help="run a display: fullscreen player and Display Segment API",
        description=(
            "Run a display: a fullscreen Qt WebEngine player on this machine's screen, with "
            "the Display Segment API (served by waitress) to schedule it, feed it sensor "
            "readings and subscribe to what it shows. Flags override the config file; the "
            "API token comes from the config file or $PDN_API_TOKEN, never from a flag."
        ),
        epilog=(
            "Data directory default: $STATE_DIRECTORY when systemd sets it (StateDirectory=), "
            "else ./data. Exit codes: 0 stopped cleanly, 1 could not start, 2 bad config."
        ),
    )
    parser.add_argument(
        "--host", help=f"address to listen on (default {DEFAULT_HOST}; 0.0.0.0 for all)"
    )
    parser.add_argument("--port", type=int, help=f"port to listen on (default {DEFAULT_PORT})")
    parser.add_argument("--data-dir", metavar="DIR", help="where the state database lives")
    parser.add_argument(
        "--config", metavar="FILE", help="TOML configuration file (default: $PDN_CONFIG if set)"
    )
    parser.add_argument("--name", help="the display's name (GET / and the idle page)")
    parser.add_argument("--timezone", metavar="ZONE", help="IANA time zone for CDS schedules")
    parser.add_argument(
        "--public-url", metavar="URL", help="how others reach this display (webhook payloads)"
    )
    parser.add_argument(
        "--schedule",
        metavar="URL",
        help="follow this schedule of a scheduler (http://HOST:PORT/schedule/<id>/): fetch it, "
        "subscribe to its updates, keep the last copy for a start without network",
    )
    parser.add_argument(
        "--register",
        metavar="SCHEDULER_URL",
        help="register this display (URL, location, name) with the scheduler at this base URL",
    )
    parser.add_argument(
        "--check-config",
        action="store_true",
        help="validate the configuration, print the effective settings and exit",
    )
    parser.set_defaults(func=run)
    return parser


def run(args: argparse.Namespace) -> int:
    from player.app import main

    return main(args)

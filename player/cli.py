"""``pdn display``: run a display (the fullscreen player and its Display Segment API)."""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path
from typing import Any

from player.config import DEFAULT_HOST, DEFAULT_PORT, ConfigError, DisplayConfig, load_config
from server.exitcodes import EPILOG, EXIT_OK, EXIT_USAGE

log = logging.getLogger("pdn.display")


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
            f"else ./data. {EPILOG}"
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


def load(args: argparse.Namespace) -> DisplayConfig:
    """The configuration from the file, the environment and the flags."""
    return load_config(
        Path(args.config) if args.config else None,
        overrides={
            "host": args.host,
            "port": args.port,
            "data_dir": args.data_dir,
            "name": args.name,
            "timezone": args.timezone,
            "public_url": args.public_url,
        },
    )


def run(args: argparse.Namespace) -> int:
    try:
        config = load(args)
    except ConfigError as error:
        if args.check_config:
            print(f"pdn display: {error}", file=sys.stderr)
        else:
            log.error("%s", error)
        return EXIT_USAGE
    if args.check_config:
        print_config(config)
        return EXIT_OK
    from player.app import run as run_display  # Qt: only when a display really starts

    code: int = run_display(config, schedule_url=args.schedule, register_url=args.register)
    return code


def print_config(config: DisplayConfig) -> None:
    """``pdn display --check-config``: the effective settings."""
    print(f"configuration OK{f' ({config.source})' if config.source else ''}")
    print(f"  name:            {config.name or '(none)'}")
    print(f"  listen:          {config.host}:{config.port}")
    print(f"  data dir:        {config.data_dir}")
    print(f"  time zone:       {config.timezone}")
    print(f"  location:        {config.location or '(none)'}")
    print(f"  accept CDS:      {'yes' if config.accept_cds else 'no (single items only)'}")
    print(f"  allowed origins: {', '.join(config.allowed_origins) or 'any'}")
    print(f"  API token:       {'set' if config.api_token else 'none (open)'}")

"""``pdn display``: run a display (the fullscreen player and its Display Segment API)."""

from __future__ import annotations

import argparse
import importlib.util
import logging
import shlex
import sys
from datetime import UTC, datetime
from importlib.metadata import PackageNotFoundError, requires
from pathlib import Path
from typing import Any

from player import videodecode
from player.config import DEFAULT_HOST, DEFAULT_PORT, ConfigError, DisplayConfig, load_config
from player.power import describe
from server.platform.exitcodes import EPILOG, EXIT_OK, EXIT_START_FAILED, EXIT_USAGE
from server.platform.net import is_loopback
from server.platform.pairing import read_code_file

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
            f"else ./data. {EPILOG} The display also exits 3 when its screen is lost (the "
            "web engine's processes are gone), so that systemd starts it afresh."
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
        "subscribe to its updates, keep the last copy for a start without network "
        "(config key: schedule)",
    )
    parser.add_argument(
        "--register",
        "--scheduler",
        dest="register",
        metavar="SCHEDULER_URL",
        help="register this display (URL, location, name) with the scheduler at this base URL; "
        "needs a [location] in the config; it then plays what the scheduler assigns to it "
        "(config keys: register or scheduler, groups)",
    )
    parser.add_argument(
        "--check-config",
        action="store_true",
        help="validate the configuration, print the effective settings and exit",
    )
    parser.add_argument(
        "--pairing-code",
        action="store_true",
        help="print the pairing code the running display shows now (read from its data "
        "directory) and exit",
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
            "schedule_url": args.schedule,
            "register_url": args.register,
        },
    )


def run(args: argparse.Namespace) -> int:
    try:
        config = load(args)
    except ConfigError as error:
        count = len(error.problems)
        heading = f"pdn display: {count} configuration problem{'s' if count > 1 else ''}:"
        if args.check_config:
            print(heading, file=sys.stderr)
            for problem in error.problems:
                print(f"  {problem}", file=sys.stderr)
        else:
            log.error("%s", heading)
            for problem in error.problems:
                log.error("  %s", problem)
        return EXIT_USAGE
    if args.check_config:
        print_config(config)
        return EXIT_OK
    if args.pairing_code:
        return print_pairing_code(config)
    if importlib.util.find_spec("PySide6") is None:
        print(
            "pdn display: the screen needs Qt (PySide6), which this installation lacks: it was "
            "installed without the 'display' extra. Install it with:\n"
            f"  {install_display_command()}",
            file=sys.stderr,
        )
        return EXIT_START_FAILED
    from player.app import run as run_display  # Qt: only when a display really starts

    code: int = run_display(
        config, schedule_url=config.schedule_url, register_url=config.register_url
    )
    return code


def print_pairing_code(config: DisplayConfig, now: datetime | None = None) -> int:
    """``pdn display --pairing-code``: the code in the data directory, if still valid."""
    data_dir = config.data_dir.resolve()
    try:
        code, expires = read_code_file(data_dir)
    except FileNotFoundError:
        print(
            f"pdn display: no pairing code in {data_dir}: the display makes one when it starts;"
            " is it running with this data directory?",
            file=sys.stderr,
        )
        return EXIT_START_FAILED
    except (OSError, ValueError) as error:
        print(f"pdn display: cannot read the pairing code: {error}", file=sys.stderr)
        return EXIT_START_FAILED
    if expires <= (now or datetime.now(UTC)):
        print(
            f"pdn display: the pairing code in {data_dir} expired at {expires.isoformat()}; a"
            " running display makes a new one within seconds: is it running?",
            file=sys.stderr,
        )
        return EXIT_START_FAILED
    print(code)
    print(f"valid once, until {expires.isoformat()}", file=sys.stderr)
    return EXIT_OK


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
    print(f"  API token:       {'set' if config.api_token else 'none'}")
    print(f"  changes need:    {describe_access(config)}")
    print(f"  TLS:             {describe_tls(config)}")
    print(f"  schedule:        {config.schedule_url or '(none: only what is sent to it)'}")
    print(f"  register with:   {config.register_url or '(no scheduler)'}")
    print(f"  groups:          {', '.join(config.groups) or '(none)'}")
    screen = config.screen
    print(
        f"  [screen]:        index {screen.index}, rotation {screen.rotation}, "
        f"cross-fade {screen.crossfade:g} s, audio {'on' if screen.audio else 'off'}"
    )
    print(f"  video:           {videodecode.plan(screen.video_backend).describe()}")
    how = "[screen] video-zones" if screen.video_zones is not None else "auto"
    print(f"  video zones:     {screen.video_zone_limit()} at once in a layout ({how})")
    if screen.wall is not None:
        print(f"  video wall:      {screen.wall.describe()}")
    power = config.power
    if power.schedule is None:
        print("  [power]:         always on (no on/off times)")
    else:
        methods = ", ".join(power.methods)
        print(f"  [power]:         {describe(power.schedule)}; methods {methods}")
        print(f"                   CEC device {power.cec_device}")
    clock = config.clock
    print(
        "  [clock]:         "
        + ("only NTP sets the clock" if clock.require_ntp else "NTP or a plausible date")
    )


def describe_tls(config: DisplayConfig) -> str:
    """``--check-config``: plain HTTP, or HTTPS and the fingerprint clients pin."""
    if not config.tls:
        return "off (plain HTTP)"
    from server.platform.tls import CERT_FILE, fingerprint  # waitress: only when TLS is on

    cert = config.tls_cert or config.data_dir.resolve() / CERT_FILE
    try:
        return f"on, certificate {cert}, fingerprint {fingerprint(cert)}"
    except FileNotFoundError:
        return f"on, a self-signed certificate is made at first start ({cert})"
    except (OSError, ValueError) as error:
        return f"on, but the certificate {cert} cannot be read: {error}"


def describe_access(config: DisplayConfig) -> str:
    """Who may change the display, as ``--check-config`` says it."""
    if config.api_token:
        return "the API token or a paired controller's token"
    if is_loopback(config.host):
        return "nothing: open (listening on loopback only)"
    return "a paired controller's token (pair with the code on the idle page)"


# A checkout (an editable install, or running from the source tree) has the lock file here.
_CHECKOUT = Path(__file__).resolve().parent.parent


def install_display_command() -> str:
    """The one command that adds the 'display' extra to the Python running ``pdn``: from the
    checkout with its lock file when there is one, else the extra's own requirements."""
    python = shlex.quote(sys.executable)
    constraints = _CHECKOUT / "constraints.txt"
    if constraints.is_file() and (_CHECKOUT / "pyproject.toml").is_file():
        target = shlex.quote(f"{_CHECKOUT}[display]")
        return f"{python} -m pip install -c {shlex.quote(str(constraints))} -e {target}"
    try:
        declared = requires("pdn-display") or []
    except PackageNotFoundError:
        declared = []
    wanted = [
        entry.split(";")[0].strip()
        for entry in declared
        if "extra" in entry and "display" in entry.split(";", 1)[-1]
    ] or ["PySide6"]
    return f"{python} -m pip install " + " ".join(shlex.quote(entry) for entry in wanted)

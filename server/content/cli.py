"""``pdn content``: run the Content Segment (hosted applications)."""

from __future__ import annotations

import argparse
import logging
from functools import partial
from pathlib import Path

from server.platform.exitcodes import EXIT_USAGE
from server.platform.standalone import add_segment_parser, run_service
from server.platform.validation import HTTP, check_uri

log = logging.getLogger("pdn.content")


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = add_segment_parser(
        subparsers,
        "content",
        port=8091,
        run=run,
        help="run the Content Segment (applications that schedule themselves onto displays)",
        description=(
            "Run the Content Segment. Each folder DIR/<app>/ holding an index.html is an "
            "application served at /<app>/; the built-in application 'message' shows "
            "application-params.text on application-params.background. POST /<app>/schedule "
            "asks an application to schedule itself onto a display (display-uri): only onto "
            "a display named by --display, in the displays file (PDN_DISPLAYS_FILE, default "
            "the pairing store of 'pdn ctl pair', ~/.config/pdn/ctl.toml) or registered with "
            "--scheduler; others get 403. Each display gets its own token (pair with it: pdn "
            "ctl pair); PDN_DISPLAY_TOKEN goes to the listed displays (--display, the file) "
            "without one. Set PDN_API_TOKEN to require a bearer token on other POSTs."
        ),
    )
    parser.add_argument(
        "--apps",
        type=Path,
        default=None,
        metavar="DIR",
        help="directory of applications, one folder each (an app named like a built-in wins)",
    )
    parser.add_argument(
        "--public-url",
        default=None,
        metavar="URL",
        help=(
            "base URL displays use to reach this server, e.g. http://content.example:8091 "
            "(default: the listen address; with 0.0.0.0, this machine's address on the route "
            "to each display)"
        ),
    )
    parser.add_argument(
        "--display",
        dest="displays",
        action="append",
        default=[],
        metavar="URL",
        help="a display requests may be forwarded to, http(s)://host:port (repeat for more)",
    )
    parser.add_argument(
        "--scheduler",
        default=None,
        metavar="URL",
        help=(
            "a scheduler whose registered displays requests may be forwarded to "
            "(its GET /displays; PDN_SCHEDULER_TOKEN is sent to it when set)"
        ),
    )


def run(args: argparse.Namespace) -> int:
    from server.content.app import BUILTIN_APPS
    from server.content.displays import display_origin
    from server.content.service import ContentService
    from server.platform.validation import ValidationError

    directories: list[Path] = []
    if args.apps is not None:
        if not args.apps.is_dir():
            log.error("--apps %s is not a directory", args.apps)
            return EXIT_USAGE
        directories.append(args.apps)
    directories.append(BUILTIN_APPS)
    if args.public_url:
        problem = check_uri(args.public_url, HTTP)
        if problem:
            log.error("--public-url %s", problem)
            return EXIT_USAGE
    for url in args.displays:
        problem = check_uri(url, HTTP)
        if problem is None:
            try:
                display_origin(url)
            except ValidationError as error:
                problem = error.message
        if problem:
            log.error("--display %s: %s", url, problem)
            return EXIT_USAGE
    if args.scheduler:
        problem = check_uri(args.scheduler, HTTP)
        if problem:
            log.error("--scheduler %s", problem)
            return EXIT_USAGE
    return run_service(
        args,
        partial(
            ContentService,
            directories,
            public_url=args.public_url,
            displays=args.displays,
            scheduler=args.scheduler,
        ),
        logger=log,
        ready=lambda service: (
            f"content server ready at {service.url}: "
            f"applications {', '.join(service.catalog.names())}; "
            f"forwarding to {service.displays.describe()}"
        ),
    )

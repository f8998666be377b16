"""``pdn content``: run the Content Segment (hosted applications)."""

from __future__ import annotations

import argparse
import logging
from functools import partial
from pathlib import Path

from server.exitcodes import EXIT_USAGE
from server.standalone import add_segment_parser, run_service
from server.validation import HTTP, check_uri

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
            "asks an application to schedule itself onto a display (display-uri). Set "
            "PDN_API_TOKEN to require a bearer token on POSTs, and PDN_DISPLAY_TOKEN to send "
            "one to displays that need it."
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


def run(args: argparse.Namespace) -> int:
    from server.content.app import BUILTIN_APPS
    from server.content.service import ContentService

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
    return run_service(
        args,
        partial(ContentService, directories, public_url=args.public_url),
        logger=log,
        ready=lambda service: (
            f"content server ready at {service.url}: "
            f"applications {', '.join(service.catalog.names())}"
        ),
    )

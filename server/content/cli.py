"""``pdn content``: run the Content Segment (hosted applications)."""

from __future__ import annotations

import argparse
import logging
import os
from pathlib import Path

from server.standalone import EXIT_START_FAILED, EXIT_USAGE, api_token, serve_until_stopped
from server.validation import HTTP, check_uri

log = logging.getLogger("pdn.content")


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "content",
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
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on (127.0.0.1)")
    parser.add_argument("--port", type=int, default=8091, help="port to listen on (8091)")
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
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from server.content.app import (
        BUILTIN_APPS,
        AppCatalog,
        DisplayForwarder,
        advertised_base,
        create_app,
    )
    from server.wsgi import WsgiServer

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
    catalog = AppCatalog(directories)
    forwarder = DisplayForwarder(token=os.environ.get("PDN_DISPLAY_TOKEN") or None)
    bound: list[WsgiServer] = []
    base_url_for = advertised_base(args.public_url, args.host, lambda: bound[0].port)
    app = create_app(catalog, forwarder, base_url_for, token=api_token())
    try:
        server = WsgiServer(app, args.host, args.port, name="content")
    except OSError as error:
        log.error("cannot listen on %s:%s: %s", args.host, args.port, error)
        return EXIT_START_FAILED
    bound.append(server)
    return serve_until_stopped(
        server,
        on_stop=[forwarder.close],
        ready_message=(
            f"content server ready at {server.url}: applications {', '.join(catalog.names())}"
        ),
    )

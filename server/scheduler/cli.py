"""``pdn scheduler``: run the Scheduling and Management Segment."""

from __future__ import annotations

import argparse
import logging
from pathlib import Path

from server.standalone import (
    EXIT_START_FAILED,
    EXIT_USAGE,
    api_token,
    default_data_dir,
    serve_until_stopped,
)

log = logging.getLogger("pdn.scheduler")


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "scheduler",
        help="run the Scheduling and Management Segment (display registry, CDS schedules)",
        description=(
            "Run the Scheduling and Management Segment: a registry of displays (POST/GET "
            "/displays) and the schedules, one CDS file <id>.xml per schedule in --schedules, "
            "served at /schedule/<id>/ and pushed to subscribers within a second of a change. "
            "A file that does not validate is logged with its line and the last good version "
            "keeps being served. Set PDN_API_TOKEN in the environment to require "
            "'Authorization: Bearer <token>' on every POST, and PDN_DISPLAY_TOKEN to send one "
            "with the schedule updates it pushes to displays that need it."
        ),
    )
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on (127.0.0.1)")
    parser.add_argument("--port", type=int, default=8090, help="port to listen on (8090)")
    parser.add_argument(
        "--data-dir",
        type=Path,
        default=None,
        help="where the registry and subscriptions live (default ~/.local/state/pdn/scheduler)",
    )
    parser.add_argument(
        "--schedules",
        type=Path,
        required=True,
        help="directory of schedules: each <id>.xml file is the schedule <id>",
    )
    parser.add_argument(
        "--refresh",
        type=float,
        default=300.0,
        metavar="SECONDS",
        help="how often to re-read each display's GET / for its name and sensors (300)",
    )
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from server.scheduler.service import SchedulerService

    schedules_dir: Path = args.schedules
    if not schedules_dir.is_dir():
        log.error("--schedules %s is not a directory; create it first", schedules_dir)
        return EXIT_USAGE
    if args.refresh <= 0:
        log.error("--refresh must be a positive number of seconds")
        return EXIT_USAGE
    data_dir: Path = args.data_dir or default_data_dir("scheduler")
    try:
        service = SchedulerService(
            data_dir=data_dir,
            schedules_dir=schedules_dir,
            host=args.host,
            port=args.port,
            token=api_token(),
            refresh_interval=args.refresh,
        )
    except OSError as error:
        log.error(
            "cannot start on %s:%s with data in %s: %s", args.host, args.port, data_dir, error
        )
        return EXIT_START_FAILED
    service.start()
    return serve_until_stopped(
        service.server,
        on_stop=[service.stop],
        ready_message=(
            f"scheduler ready at {service.url}: {len(service.library.all())} schedules from "
            f"{schedules_dir}, data in {data_dir}"
        ),
    )

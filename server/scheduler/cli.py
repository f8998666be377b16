"""``pdn scheduler``: run the Scheduling and Management Segment."""

from __future__ import annotations

import argparse
import logging
import os
from functools import partial
from pathlib import Path

from server.exitcodes import EXIT_USAGE
from server.standalone import add_segment_parser, default_data_dir, run_service

log = logging.getLogger("pdn.scheduler")


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = add_segment_parser(
        subparsers,
        "scheduler",
        port=8090,
        run=run,
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
        data_dir="where the registry and subscriptions live (default ~/.local/state/pdn/scheduler)",
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
        help="how often to re-read each display's GET / for its name and sensors, and renew "
        "the subscription to its playback updates (300)",
    )
    parser.add_argument(
        "--database",
        metavar="URL",
        default=os.environ.get("PDN_DATABASE_URL") or None,
        help="postgresql://user@host/db: keep the registry, schedules, fleet and webhook outbox "
        "in PostgreSQL, shared by every scheduler process on it (needs the 'postgres' extra); "
        "default: PDN_DATABASE_URL, else SQLite files in --data-dir",
    )
    parser.add_argument(
        "--public-url",
        metavar="URL",
        help="how displays reach this scheduler (their playback updates are sent there); "
        "default: the listen address, this machine's own for 0.0.0.0",
    )


def is_postgres_url(url: str) -> bool:
    return url.startswith(("postgresql://", "postgres://"))


def run(args: argparse.Namespace) -> int:
    from server.scheduler.service import SchedulerService

    schedules_dir: Path = args.schedules
    if not schedules_dir.is_dir():
        log.error("--schedules %s is not a directory; create it first", schedules_dir)
        return EXIT_USAGE
    if args.refresh <= 0:
        log.error("--refresh must be a positive number of seconds")
        return EXIT_USAGE
    if args.database and not is_postgres_url(args.database):
        log.error("--database must be a postgresql:// URL")
        return EXIT_USAGE
    data_dir: Path = args.data_dir or default_data_dir("scheduler")
    return run_service(
        args,
        partial(
            SchedulerService,
            schedules_dir=schedules_dir,
            refresh_interval=args.refresh,
            public_url=args.public_url,
            database=args.database,
        ),
        logger=log,
        data_dir=data_dir,
        ready=lambda service: (
            f"scheduler ready at {service.url}: {len(service.library.all())} schedules from "
            f"{schedules_dir}, data in {'PostgreSQL' if args.database else data_dir}"
        ),
    )

"""``pdn scheduler``: run the Scheduling and Management Segment."""

from __future__ import annotations

import argparse
import logging
import os
from functools import partial
from pathlib import Path

from server.platform.exitcodes import EXIT_USAGE
from server.platform.standalone import add_segment_parser, default_data_dir, run_service

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
            "/displays) and the schedules, kept in its storage (SQLite in --data-dir, or "
            "PostgreSQL: --database), written through PUT /x/schedules/<id> or imported from "
            "--schedules, a folder with one CDS file <id>.xml per schedule; served at "
            "/schedule/<id>/ and pushed to subscribers within a second of a change. "
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
        default=None,
        help="a folder to import schedules from and watch: each <id>.xml file is the schedule "
        "<id> (optional: schedules also come through PUT /x/schedules/<id>)",
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
        "--migrate-to",
        metavar="URL",
        help="copy this scheduler's registry (displays, schedules, groups, assignments, proof "
        "of play, subscriptions and undelivered pushes) from the SQLite files in --data-dir "
        "into the empty PostgreSQL database at URL, then exit; stop the scheduler first",
    )
    parser.add_argument(
        "--public-url",
        metavar="URL",
        help="how displays reach this scheduler (their playback updates are sent there); "
        "default: the listen address, this machine's own for 0.0.0.0",
    )
    parser.add_argument(
        "--welcome",
        metavar="GROUP",
        help="at the first start, make the playlist 'welcome' (a picture saying where the "
        "console is) and assign it to the group GROUP: the one-box install's display declares "
        "it (install.sh --services display,scheduler)",
    )


def is_postgres_url(url: str) -> bool:
    return url.startswith(("postgresql://", "postgres://"))


def migrate_to(url: str, data_dir: Path) -> int:
    """``--migrate-to``: copy the SQLite registry in ``data_dir`` into PostgreSQL."""
    from server.platform.pg import open_pool
    from server.scheduler.migrate import MigrationRefusedError, copy_to_postgres

    if not is_postgres_url(url):
        log.error("--migrate-to must be a postgresql:// URL")
        return EXIT_USAGE
    pool = open_pool(url, name="scheduler-migrate", max_size=2)
    try:
        counts = copy_to_postgres(data_dir, pool)
    except MigrationRefusedError as error:
        log.error("%s", error)
        return EXIT_USAGE
    finally:
        pool.close()
    print(
        f"copied {', '.join(f'{n} {what}' for what, n in counts.items())} from {data_dir} to "
        "PostgreSQL; now start the schedulers with --database (or PDN_DATABASE_URL)"
    )
    return 0


def run(args: argparse.Namespace) -> int:
    from server.scheduler.service import SchedulerService

    if args.migrate_to:
        return migrate_to(args.migrate_to, args.data_dir or default_data_dir("scheduler"))
    schedules_dir: Path | None = args.schedules
    if schedules_dir is not None and not schedules_dir.is_dir():
        log.error("--schedules %s is not a directory; create it first", schedules_dir)
        return EXIT_USAGE
    if args.refresh <= 0:
        log.error("--refresh must be a positive number of seconds")
        return EXIT_USAGE
    if args.database and not is_postgres_url(args.database):
        log.error("--database must be a postgresql:// URL")
        return EXIT_USAGE
    from server.scheduler.fleetapi import GROUP_NAME, GROUP_NAME_TEXT

    if args.welcome is not None and not GROUP_NAME.match(args.welcome):
        log.error("--welcome must be a group name: %s", GROUP_NAME_TEXT)
        return EXIT_USAGE
    from server.scheduler.registration import RegistrationPolicy
    from server.scheduler.sessions import idle_from_env

    try:  # the environment's settings, checked before anything starts
        RegistrationPolicy.from_env()
        idle_from_env()
    except ValueError as error:
        log.error("%s", error)
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
            welcome_group=args.welcome,
        ),
        logger=log,
        data_dir=data_dir,
        ready=lambda service: (
            f"scheduler ready at {service.url}: {len(service.library.all())} schedules"
            + (f" (watching {schedules_dir})" if schedules_dir is not None else "")
            + f", data in {'PostgreSQL' if args.database else data_dir}"
        ),
    )

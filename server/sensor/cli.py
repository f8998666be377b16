"""``pdn sensor``: run one sensor of the Environment Segment."""

from __future__ import annotations

import argparse
import logging
import re
from functools import partial
from pathlib import Path

from server.platform.exitcodes import EXIT_USAGE
from server.platform.standalone import add_segment_parser, default_data_dir, run_service
from server.platform.validation import check_uri

log = logging.getLogger("pdn.sensor")


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = add_segment_parser(
        subparsers,
        "sensor",
        port=8092,
        run=run,
        help="run a sensor of the Environment Segment (pushes readings to subscribers)",
        description=(
            "Run one sensor: it reads its source (a command's output, a file, or a fixed "
            "data-source URI), answers GET / with the current reading and pushes readings to "
            "subscribers (POST /subscribe, e.g. a display's /sensing) every --interval "
            "seconds and at once when the reading changes. Example, a Raspberry Pi's own "
            "temperature in degrees Celsius: pdn sensor --sensor-id pi-cpu --sensor-type "
            "'cpu temperature' --file /sys/class/thermal/thermal_zone0/temp --scale 0.001. "
            "PDN_API_TOKEN requires a bearer token on POSTs; listening beyond loopback "
            "without it, the sensor takes no subscription (401). Readings go to a display "
            "with its own token (pair the sensor's user with it: pdn ctl pair), or "
            "PDN_DISPLAY_TOKEN to the displays the displays file lists; to any other "
            "subscriber with no token."
        ),
        data_dir="where subscriptions and undelivered updates live "
        "(default ~/.local/state/pdn/sensor-<id>)",
    )
    parser.add_argument("--sensor-id", required=True, help="unique identifier of the sensor")
    parser.add_argument(
        "--sensor-type", required=True, help="what it measures, e.g. 'air temperature'"
    )
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument(
        "--command", metavar="CMD", help="shell command whose output is the reading"
    )
    source.add_argument(
        "--file", type=Path, metavar="PATH", help="file whose content is the reading"
    )
    source.add_argument(
        "--data-source", metavar="URI", help="a URI the data is read from (e.g. a video stream)"
    )
    parser.add_argument(
        "--interval",
        type=float,
        default=10.0,
        metavar="SECONDS",
        help="push the reading to subscribers this often (10); changes go at once",
    )
    parser.add_argument(
        "--poll",
        type=float,
        default=1.0,
        metavar="SECONDS",
        help="read the source this often to notice changes (1)",
    )
    parser.add_argument(
        "--scale",
        type=float,
        default=None,
        metavar="FACTOR",
        help="multiply numeric readings, e.g. 0.001 for a thermal zone's millidegrees",
    )


def run(args: argparse.Namespace) -> int:
    from server.sensor.service import SensorService
    from server.sensor.source import CommandSource, DataSourceUri, FileSource, Source

    if not args.sensor_id.strip() or not args.sensor_type.strip():
        log.error("--sensor-id and --sensor-type must not be empty")
        return EXIT_USAGE
    if args.interval <= 0 or args.poll <= 0:
        log.error("--interval and --poll must be positive numbers of seconds")
        return EXIT_USAGE
    source: Source
    if args.command is not None:
        source = CommandSource(args.command, timeout=min(30.0, args.interval), scale=args.scale)
    elif args.file is not None:
        source = FileSource(args.file, scale=args.scale)
    else:
        problem = check_uri(args.data_source)
        if problem:
            log.error("--data-source %s", problem)
            return EXIT_USAGE
        source = DataSourceUri(args.data_source)

    safe_id = re.sub(r"[^A-Za-z0-9._-]+", "_", args.sensor_id)
    data_dir: Path = args.data_dir or default_data_dir(f"sensor-{safe_id}")
    return run_service(
        args,
        partial(
            SensorService,
            source,
            sensor_id=args.sensor_id,
            sensor_type=args.sensor_type,
            interval=args.interval,
            poll=args.poll,
        ),
        logger=log,
        data_dir=data_dir,
        ready=lambda service: (
            f"sensor {args.sensor_id!r} ready at {service.url}, reading {source.describe()}"
        ),
    )

"""``pdn ctl``: run displays from a terminal or a script (the remote controller).

    pdn ctl schedule DISPLAY_URL CONTENT_URL [--for DURATION]   show a page or file now
    pdn ctl schedule DISPLAY_URL FILE.xml                        send a CDS schedule
    pdn ctl playing DISPLAY_URL                                  what is on screen
    pdn ctl displays SCHEDULER_URL [--full]                      the scheduler's registry
    pdn ctl watch DISPLAY_URL                                    print every playback change
    pdn ctl health DISPLAY_URL [--json]                          is it working, and why not
    pdn ctl screenshot DISPLAY_URL FILE.png                      what the screen shows
    pdn ctl sensing DISPLAY_URL [--json]                         the sensors it knows
    pdn ctl assign SCHEDULER_URL (--display URL | --group NAME) SCHEDULE_ID   what plays where
    pdn ctl unassign SCHEDULER_URL (--display URL | --group NAME) SCHEDULE_ID
    pdn ctl group SCHEDULER_URL DISPLAY_URL NAME [--remove]      a display in a group
    pdn ctl plays SCHEDULER_URL [--display URL] [--since T] [--until T] [--csv]  proof of play
    pdn ctl broadcast SCHEDULER_URL --group NAME CONTENT_URL --for DURATION   urgent, confirmed
    pdn ctl playlist list|show|put|delete|assign|unassign SCHEDULER_URL ...   playlists
    pdn ctl pair DISPLAY_URL CODE [--name NAME]                  pair; its token is kept
    pdn ctl pairings DISPLAY_URL / unpair DISPLAY_URL NAME       paired controllers
    pdn ctl upload SCHEDULER_URL FILE... [--tag T]               into the media library

Exit codes (for scripts):
      0  done (the display accepted the request)
      1  refused: the display rejected the request or answered 4xx (the message says why);
         for health: the display reports itself degraded
      2  usage: wrong arguments, an unreadable file, a bad duration
      3  unreachable: no answer from the display or scheduler (connection refused, timed out)
      4  unexpected answer: a 5xx or something that is not the Display Segment API
    130  interrupted (Ctrl-C) before it was done
A display beyond loopback takes changes only from paired controllers: `pdn ctl pair DISPLAY_URL
CODE` (the code on its screen; no token is sent with it) keeps a token in ~/.config/pdn/ctl.toml,
sent from then on to that display alone. A token in the environment is bound to one URL:
PDN_API_TOKEN (a scheduler's operator token, or a display's api_token) goes only to the origin of
PDN_API_URL (export PDN_API_URL=http://scheduler:8090); set without PDN_API_URL, it is refused.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import os
import signal
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import Any, TextIO
from urllib.parse import urlsplit

import requests

from cds.durations import parse_duration
from server.ctl.client import (
    CONNECT_TIMEOUT,
    EXIT_OK,
    EXIT_REFUSED,
    EXIT_UNEXPECTED,
    EXIT_UNREACHABLE,
    EXIT_USAGE,
    CtlError,
    base_url,
    call,
    check,
    get_json,
    headers_for,
    json_answer,
    print_json,
    reason_of,
    session_for,
)
from server.ctl.fleet import add_fleet_commands
from server.ctl.media import add_media_commands
from server.ctl.pair import add_pair_commands
from server.ctl.playlists import add_playlist_commands

__all__ = [
    "EXIT_OK",
    "EXIT_REFUSED",
    "EXIT_UNEXPECTED",
    "EXIT_UNREACHABLE",
    "EXIT_USAGE",
    "CtlError",
    "ServerEvent",
    "add_parser",
    "describe_health",
    "describe_playback",
    "read_events",
]

log = logging.getLogger("pdn.ctl")


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "ctl",
        help="control displays remotely: schedule content, see what plays, watch changes",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    commands = parser.add_subparsers(dest="ctl_command", metavar="ACTION", required=True)

    schedule = commands.add_parser(
        "schedule",
        help="show a content URL now (it interrupts the schedule) or send a CDS file",
        description=(
            "With a URL: POST /schedule {content-item, preferred-duration}; the display shows "
            "it at once (or after earlier requests) for the duration, then returns to its "
            "schedule. With a .xml file: POST the CDS, which replaces the display's schedule "
            "of the same name."
        ),
    )
    schedule.add_argument("display", metavar="DISPLAY_URL", help="e.g. http://192.0.2.10:8080")
    schedule.add_argument("content", metavar="CONTENT_URL|FILE.xml")
    schedule.add_argument(
        "--for",
        dest="duration",
        metavar="DURATION",
        help="how long to show a URL: '30 seconds', '2 minutes', 'PT1M' (display default: 30 s)",
    )
    schedule.set_defaults(ctl_func=cmd_schedule)

    playing = commands.add_parser("playing", help="what the display shows now (GET /playback/)")
    playing.add_argument("display", metavar="DISPLAY_URL")
    playing.add_argument("--json", action="store_true", help="print the playback record as JSON")
    playing.set_defaults(ctl_func=cmd_playing)

    displays = commands.add_parser(
        "displays", help="the displays a scheduler knows (GET /displays)"
    )
    displays.add_argument("scheduler", metavar="SCHEDULER_URL")
    displays.add_argument("--full", action="store_true", help="with sensors (url-only false)")
    displays.add_argument("--json", action="store_true", help="print the records as JSON")
    displays.set_defaults(ctl_func=cmd_displays)

    watch = commands.add_parser(
        "watch",
        help="print every playback change as it happens, until Ctrl-C",
        description=(
            "Follows the display's event stream (GET /x/playback/events): prints what plays "
            "now, then each change. Only this machine connects (it works across NAT and "
            "VPNs); a lost connection is resumed where it stopped (Last-Event-ID)."
        ),
    )
    watch.add_argument("display", metavar="DISPLAY_URL")
    watch.add_argument("--json", action="store_true", help="print each update as one JSON line")
    watch.set_defaults(ctl_func=cmd_watch)

    health = commands.add_parser(
        "health",
        help="is the display working: renderer, schedule, downloads and why they fail, disk",
        description="GET /x/health. Exit code 0 when healthy, 1 when degraded.",
    )
    health.add_argument("display", metavar="DISPLAY_URL")
    health.add_argument("--json", action="store_true", help="print the health report as JSON")
    health.set_defaults(ctl_func=cmd_health)

    screenshot = commands.add_parser(
        "screenshot", help="save a PNG of what the screen shows (GET /x/screenshot)"
    )
    screenshot.add_argument("display", metavar="DISPLAY_URL")
    screenshot.add_argument("file", metavar="FILE", help="where to write the PNG ('-': stdout)")
    screenshot.set_defaults(ctl_func=cmd_screenshot)

    sensing = commands.add_parser("sensing", help="the sensors a display knows (GET /sensing)")
    sensing.add_argument("display", metavar="DISPLAY_URL")
    sensing.add_argument("--json", action="store_true", help="print the list as JSON")
    sensing.set_defaults(ctl_func=cmd_sensing)

    add_fleet_commands(commands)  # assign, unassign, group, plays, broadcast: the fleet
    add_playlist_commands(commands)  # playlist list|show|put|delete|assign|unassign
    add_pair_commands(commands)  # pair, pairings, unpair
    add_media_commands(commands)  # upload: the scheduler's media library

    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    func: Callable[[argparse.Namespace], int] = args.ctl_func
    try:
        return func(args)
    except CtlError as error:
        print(f"pdn ctl: {error.message}", file=sys.stderr)
        return error.code


# -- commands --------------------------------------------------------------------------------


def cmd_schedule(args: argparse.Namespace) -> int:
    display = base_url(args.display, "DISPLAY_URL")
    content: str = args.content
    is_url = urlsplit(content).scheme in ("http", "https")
    if is_url:
        body: dict[str, Any] = {"content-item": content}
        if args.duration is not None:
            try:
                parse_duration(args.duration)
            except ValueError as error:
                raise CtlError(EXIT_USAGE, f"--for: {error}") from None
            body["preferred-duration"] = args.duration
        response = call(
            "POST",
            f"{display}/schedule",
            body=json.dumps(body).encode(),
            content_type="application/json",
        )
    else:
        if args.duration is not None:
            raise CtlError(EXIT_USAGE, "--for applies to a URL; a CDS file sets its own durations")
        path = Path(content)
        try:
            data = path.read_bytes()
        except OSError as error:
            raise CtlError(
                EXIT_USAGE,
                f"{content} is neither an http(s) URL nor a readable file: "
                f"{error.strerror or error}",
            ) from None
        response = call("POST", f"{display}/schedule", body=data, content_type="text/xml")
    answer = check(response)
    status = answer.get("request-status") if isinstance(answer, dict) else None
    if status == "rejected":
        reason = answer.get("reason") or "no reason given"
        print(f"rejected by {display}: {reason}", file=sys.stderr)
        return EXIT_REFUSED
    if status != "scheduling":
        raise CtlError(EXIT_UNEXPECTED, f"unexpected answer from {display}: {answer!r}")
    what = content if is_url else f"schedule {content}"
    print(f"scheduling on {display}: {what}")
    return EXIT_OK


def describe_playback(record: dict[str, Any]) -> str:
    """One line a person reads: what, from where, since when, for how long."""
    item = record.get("content-item")
    origin = record.get("origin")
    if origin == "idle" or not item:
        what = "idle page (nothing scheduled)"
    else:
        what = str(item)
        if origin == "request":
            what += "  [request]"
        elif origin == "schedule":
            what += f"  [schedule {record.get('set')!r}]" if record.get("set") else "  [schedule]"
    details = []
    if record.get("started"):
        details.append(f"since {record['started']}")
    if isinstance(record.get("duration"), int | float):
        details.append(f"for {record['duration']:g} s")
    if record.get("sequence") is not None:
        details.append(f"#{record['sequence']}")
    return what + (f"  ({', '.join(details)})" if details else "")


def cmd_playing(args: argparse.Namespace) -> int:
    display = base_url(args.display, "DISPLAY_URL")
    record = get_json(display, "/playback/", dict)
    if args.json:
        print_json(record)
        return EXIT_OK
    print(describe_playback(record))
    zones = record.get("zones")
    if record.get("layout") and isinstance(zones, dict):  # the screen split: each zone
        print(f"  layout {record['layout']!r}, zone {record.get('zone')!r} changed last")
        for name, zone in zones.items():
            if name != "main" and isinstance(zone, dict):
                print(f"  {name}: {describe_playback(zone)}")
    return EXIT_OK


def cmd_displays(args: argparse.Namespace) -> int:
    scheduler = base_url(args.scheduler, "SCHEDULER_URL")
    url_only = "false" if args.full else "true"
    records = get_json(scheduler, f"/displays?url-only={url_only}", list)
    if args.json:
        print_json(records)
        return EXIT_OK
    if not records:
        print("no displays registered")
        return EXIT_OK
    for record in records:
        location = record.get("location") or {}
        line = (
            f"{record.get('url')}  {record.get('name') or '(no name)'}  "
            f"{location.get('latitude', '?')} {location.get('longitude', '?')}"
        )
        if args.full:
            sensors = ", ".join(
                f"{s.get('sensor-id')} ({s.get('sensor-type', '?')})"
                for s in record.get("sensors") or []
            )
            line += f"  sensors: {sensors or 'none'}"
        print(line)
    return EXIT_OK


# -- watch: the display's event stream -------------------------------------------------------

STREAM_READ_TIMEOUT = 45.0  # three missed heartbeats (the display sends one every 15 s)
RECONNECT_MAX = 30.0


@dataclass(frozen=True)
class ServerEvent:
    """One server-sent event (``data`` lines joined by newlines)."""

    id: str | None
    event: str
    data: str


def read_events(chunks: Iterable[bytes]) -> Iterator[ServerEvent | None]:
    """Server-sent events from a byte stream, as the HTML standard parses them; ``None`` for
    each comment (a heartbeat), so a reader can tell the stream is alive."""
    buffer = b""
    event_id: str | None = None
    kind = ""
    data: list[str] = []
    for chunk in chunks:
        buffer += chunk
        while True:
            cut = min((i for i in (buffer.find(b"\n"), buffer.find(b"\r")) if i >= 0), default=-1)
            if cut < 0:
                break
            raw = buffer[:cut]
            skip = 2 if buffer[cut : cut + 2] == b"\r\n" else 1
            buffer = buffer[cut + skip :]
            line = raw.decode("utf-8", "replace")
            if not line:
                if data:
                    yield ServerEvent(event_id, kind or "message", "\n".join(data))
                kind, data = "", []
                continue
            if line.startswith(":"):
                yield None
                continue
            name, _, value = line.partition(":")
            value = value[1:] if value.startswith(" ") else value
            if name == "data":
                data.append(value)
            elif name == "event":
                kind = value
            elif name == "id" and "\0" not in value:
                event_id = value


class _StopError(Exception):
    """SIGTERM or Ctrl-C: stop watching."""


def cmd_watch(args: argparse.Namespace, *, out: TextIO | None = None) -> int:
    out = out or sys.stdout
    display = base_url(args.display, "DISPLAY_URL")
    url = f"{display}/x/playback/events"

    def _stop(signum: int, frame: FrameType | None) -> None:
        raise _StopError

    previous = {sig: signal.signal(sig, _stop) for sig in (signal.SIGINT, signal.SIGTERM)}
    last_id: str | None = None
    last_sequence: int | None = None
    connected_once = False
    delay = 1.0
    try:
        while True:
            headers = headers_for(url, accept="text/event-stream")
            if last_id is not None:
                headers["Last-Event-ID"] = last_id
            try:
                with session_for(url).get(
                    url,
                    headers=headers,
                    stream=True,
                    timeout=(CONNECT_TIMEOUT, STREAM_READ_TIMEOUT),
                    allow_redirects=False,
                ) as response:
                    if response.status_code != 200 or not response.headers.get(
                        "Content-Type", ""
                    ).startswith("text/event-stream"):
                        if response.status_code == 404:
                            raise CtlError(
                                EXIT_UNEXPECTED,
                                f"{display} has no event stream (GET /x/playback/events: 404);"
                                " is it a pdn display of this version?",
                            )
                        if response.status_code != 503 or not connected_once:
                            check(response)
                            raise CtlError(
                                EXIT_UNEXPECTED, f"{url} did not answer with an event stream"
                            )
                        raise requests.ConnectionError(_check_message(response))
                    if not connected_once:
                        print(f"watching {display}; Ctrl-C to stop", file=sys.stderr)
                    elif delay > 1.0:
                        print("reconnected", file=sys.stderr)
                    connected_once = True
                    delay = 1.0
                    for event in read_events(response.iter_content(chunk_size=None)):
                        if event is None or event.event != "playback":
                            continue
                        last_id = event.id if event.id is not None else last_id
                        try:
                            record = json.loads(event.data)
                        except ValueError:
                            continue
                        if not isinstance(record, dict):
                            continue
                        sequence = record.get("sequence")
                        if isinstance(sequence, int):
                            if sequence == last_sequence:
                                continue  # printed already
                            last_sequence = sequence
                        _print_update(record, out, as_json=args.json)
            except requests.RequestException as error:
                if not connected_once:
                    raise CtlError(
                        EXIT_UNREACHABLE,
                        f"cannot reach {url}: {reason_of(error)}. Is it running, and is the "
                        "address right?",
                    ) from None
                print(
                    f"pdn ctl: lost {display} ({reason_of(error)}); retrying in {delay:g} s",
                    file=sys.stderr,
                )
            else:
                print(f"pdn ctl: {display} closed the stream; reconnecting", file=sys.stderr)
            time.sleep(delay)
            delay = min(RECONNECT_MAX, delay * 2)
    except _StopError:
        print("stopped", file=sys.stderr)
        return EXIT_OK
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _check_message(response: requests.Response) -> str:
    try:
        check(response)
    except CtlError as error:
        return error.message
    return f"{response.status_code}"


def _print_update(record: dict[str, Any], out: TextIO, *, as_json: bool) -> None:
    if as_json:
        print(json.dumps(record, ensure_ascii=False), file=out, flush=True)
    else:
        print(describe_playback(record), file=out, flush=True)


# -- health, screenshot, sensing ---------------------------------------------------------------


def _size(count: Any) -> str:
    if not isinstance(count, int | float):
        return "?"
    value = float(count)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if value < 1024 or unit == "GiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{value:.1f} GiB"


def describe_health(report: dict[str, Any]) -> list[str]:
    """The health report as lines a person reads."""
    lines = [f"status: {report.get('status', '?')}  (up {report.get('uptime', '?')} s)"]
    renderer = report.get("renderer") or {}
    lines.append(
        "renderer: "
        + ("alive" if renderer.get("alive") else "NOT ANSWERING")
        + (f", last frame {renderer['last-frame']}" if renderer.get("last-frame") else "")
    )
    if isinstance(report.get("playback"), dict):
        lines.append("playing: " + describe_playback(report["playback"]))
    schedule = report.get("schedule") or {}
    sets = ", ".join(repr(s) for s in schedule.get("sets") or []) or "none"
    lines.append(f"schedule: {sets}; last received {schedule.get('last-received') or 'never'}")
    cache = report.get("cache")
    if isinstance(cache, dict):
        line = (
            f"cache: {cache.get('files', '?')} files, {_size(cache.get('bytes'))}"
            f" of {_size(cache.get('max-bytes'))}"
        )
        wanted, ready = cache.get("wanted"), cache.get("ready")
        if isinstance(wanted, int) and isinstance(ready, int) and wanted:
            line += f"; {ready} of {wanted} needed files ready"
        lines.append(line)
        for entry in cache.get("downloads") or []:
            if not isinstance(entry, dict) or entry.get("state") == "ready":
                continue
            progress = ""
            if entry.get("received"):
                total = entry.get("total")
                progress = f" {_size(entry['received'])}" + (f" of {_size(total)}" if total else "")
            error = f": {entry['error']}" if entry.get("error") else ""
            lines.append(f"  {entry.get('state')}{progress}  {entry.get('url')}{error}")
    disk = report.get("disk") or {}
    if disk:
        lines.append(f"disk: {_size(disk.get('free'))} free of {_size(disk.get('total'))}")
    webhooks = report.get("webhooks")
    if isinstance(webhooks, dict) and webhooks:
        lines.append("webhooks: " + ", ".join(f"{k} {v}" for k, v in webhooks.items()))
    return lines


def cmd_health(args: argparse.Namespace) -> int:
    display = base_url(args.display, "DISPLAY_URL")
    response = call("GET", f"{display}/x/health")
    if response.status_code not in (200, 503):
        check(response)
    report = json_answer(response)
    if not isinstance(report, dict) or report.get("status") not in ("ok", "degraded"):
        if response.status_code == 503:
            check(response)
        raise CtlError(EXIT_UNEXPECTED, f"unexpected answer from {display}: {report!r}")
    if args.json:
        print_json(report)
    else:
        print("\n".join(describe_health(report)))
    return EXIT_OK if report["status"] == "ok" else EXIT_REFUSED


PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def cmd_screenshot(args: argparse.Namespace) -> int:
    display = base_url(args.display, "DISPLAY_URL")
    response = call("GET", f"{display}/x/screenshot", accept="image/png")
    if response.status_code >= 400:
        check(response)
    png = response.content
    if not png.startswith(PNG_MAGIC):
        raise CtlError(EXIT_UNEXPECTED, f"{display}/x/screenshot did not answer with a PNG")
    if args.file == "-":
        sys.stdout.buffer.write(png)
        sys.stdout.buffer.flush()
        return EXIT_OK
    target = Path(args.file)
    try:
        with tempfile.NamedTemporaryFile(
            dir=target.parent, prefix=f".{target.name}.", delete=False
        ) as handle:
            handle.write(png)
        os.replace(handle.name, target)
    except OSError as error:
        with contextlib.suppress(OSError, UnboundLocalError):
            os.unlink(handle.name)
        raise CtlError(EXIT_USAGE, f"cannot write {target}: {error.strerror or error}") from None
    print(f"saved {target} ({len(png)} bytes)", file=sys.stderr)
    return EXIT_OK


def cmd_sensing(args: argparse.Namespace) -> int:
    display = base_url(args.display, "DISPLAY_URL")
    sensors = get_json(display, "/sensing", list)
    if args.json:
        print_json(sensors)
    elif not sensors:
        print("no sensors known")
    else:
        for sensor in sensors:
            if isinstance(sensor, dict):
                print(f"{sensor.get('sensor-id')}  ({sensor.get('sensor-type', '?')})")
    return EXIT_OK

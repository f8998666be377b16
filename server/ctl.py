"""``pdn ctl``: run displays from a terminal or a script (the remote controller).

    pdn ctl schedule DISPLAY_URL CONTENT_URL [--for DURATION]   show a page or file now
    pdn ctl schedule DISPLAY_URL FILE.xml                        send a CDS schedule
    pdn ctl playing DISPLAY_URL                                  what is on screen
    pdn ctl displays SCHEDULER_URL [--full]                      the scheduler's registry
    pdn ctl watch DISPLAY_URL                                    print every playback change

Exit codes (for scripts):
      0  done (the display accepted the request)
      1  refused: the display rejected the request or answered 4xx (the message says why)
      2  usage: wrong arguments, an unreadable file, a bad duration
      3  unreachable: no answer from the display or scheduler (connection refused, timed out)
      4  unexpected answer: a 5xx or something that is not the Display Segment API
    130  interrupted (Ctrl-C) before it was done
Set PDN_API_TOKEN when the display requires a bearer token for changes.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import os
import queue
import signal
import sys
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import FrameType
from typing import Any, TextIO
from urllib.parse import urlsplit

import requests

from cds.durations import parse_duration
from server import exitcodes
from server.net import local_address, url_host

log = logging.getLogger("pdn.ctl")

# 0, 2 and 130 as every pdn command has them (server.exitcodes); 1, 3 and 4 are ctl's own.
EXIT_OK = exitcodes.EXIT_OK
EXIT_REFUSED = 1
EXIT_USAGE = exitcodes.EXIT_USAGE
EXIT_UNREACHABLE = 3
EXIT_UNEXPECTED = 4

CONNECT_TIMEOUT = 5.0
READ_TIMEOUT = 15.0


class CtlError(Exception):
    """A failure to report in one line, with the exit code it means."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


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
            "Starts a temporary HTTP endpoint on this machine, subscribes it to the display's "
            "playback updates, prints each change, and unsubscribes on Ctrl-C or SIGTERM. The "
            "display must be able to reach this machine: by default the endpoint listens on "
            "this machine's address on the route to the display."
        ),
    )
    watch.add_argument("display", metavar="DISPLAY_URL")
    watch.add_argument(
        "--listen",
        metavar="HOST:PORT",
        help="where the endpoint listens (default: the address facing the display, any port)",
    )
    watch.add_argument(
        "--callback-url",
        metavar="URL",
        help="the endpoint's URL as the display must call it (behind NAT or a proxy)",
    )
    watch.add_argument("--json", action="store_true", help="print each update as one JSON line")
    watch.set_defaults(ctl_func=cmd_watch)

    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    func: Callable[[argparse.Namespace], int] = args.ctl_func
    try:
        return func(args)
    except CtlError as error:
        print(f"pdn ctl: {error.message}", file=sys.stderr)
        return error.code


# -- HTTP ------------------------------------------------------------------------------------


def _base(url: str, what: str) -> str:
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise CtlError(EXIT_USAGE, f"{what} must be an http:// or https:// URL, not {url!r}")
    return url.rstrip("/")


def _headers(*, change: bool, content_type: str | None = None) -> dict[str, str]:
    headers = {"Accept": "application/json"}
    if content_type:
        headers["Content-Type"] = content_type
    token = os.environ.get("PDN_API_TOKEN", "").strip()
    if change and token:
        headers["Authorization"] = f"Bearer {token}"
    return headers


def _call(
    method: str, url: str, *, body: bytes | None = None, content_type: str | None = None
) -> requests.Response:
    try:
        return requests.request(
            method,
            url,
            data=body,
            headers=_headers(change=method != "GET", content_type=content_type),
            timeout=(CONNECT_TIMEOUT, READ_TIMEOUT),
            allow_redirects=False,
        )
    except requests.ConnectionError as error:
        raise CtlError(
            EXIT_UNREACHABLE,
            f"cannot reach {url}: {_reason(error)}. Is it running, and is the address right?",
        ) from None
    except requests.Timeout:
        raise CtlError(EXIT_UNREACHABLE, f"{url} did not answer in time") from None
    except requests.RequestException as error:
        raise CtlError(EXIT_UNREACHABLE, f"cannot reach {url}: {error}") from None


def _reason(error: Exception) -> str:
    text = str(error)
    for marker in (
        "Connection refused",
        "Name or service not known",
        "No route to host",
        "timed out",
        "Network is unreachable",
        "Temporary failure in name resolution",
    ):
        if marker in text:
            return marker.lower()
    return text if len(text) < 200 else text[:200] + "..."


def _json(response: requests.Response) -> Any:
    try:
        return response.json()
    except ValueError:
        raise CtlError(
            EXIT_UNEXPECTED,
            f"{response.url} answered {response.status_code} without JSON; "
            "is it a pdn display or scheduler?",
        ) from None


def _check(response: requests.Response) -> Any:
    """The JSON answer of a 2xx; a CtlError for anything else."""
    if response.status_code >= 400:
        answer: Any = None
        with contextlib.suppress(ValueError):
            answer = response.json()
        message = answer.get("message") if isinstance(answer, dict) else None
        detail = message or response.reason
        code = EXIT_REFUSED if response.status_code < 500 else EXIT_UNEXPECTED
        if response.status_code == 401:
            detail += " (set PDN_API_TOKEN to the display's token)"
        raise CtlError(code, f"{response.status_code}: {detail}")
    return _json(response)


# -- commands --------------------------------------------------------------------------------


def cmd_schedule(args: argparse.Namespace) -> int:
    display = _base(args.display, "DISPLAY_URL")
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
        response = _call(
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
        response = _call("POST", f"{display}/schedule", body=data, content_type="text/xml")
    answer = _check(response)
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
    display = _base(args.display, "DISPLAY_URL")
    record = _check(_call("GET", f"{display}/playback/"))
    if not isinstance(record, dict):
        raise CtlError(EXIT_UNEXPECTED, f"unexpected answer from {display}: {record!r}")
    if args.json:
        print(json.dumps(record, indent=2, ensure_ascii=False))
    else:
        print(describe_playback(record))
    return EXIT_OK


def cmd_displays(args: argparse.Namespace) -> int:
    scheduler = _base(args.scheduler, "SCHEDULER_URL")
    url_only = "false" if args.full else "true"
    records = _check(_call("GET", f"{scheduler}/displays?url-only={url_only}"))
    if not isinstance(records, list):
        raise CtlError(EXIT_UNEXPECTED, f"unexpected answer from {scheduler}: {records!r}")
    if args.json:
        print(json.dumps(records, indent=2, ensure_ascii=False))
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


# -- watch -----------------------------------------------------------------------------------


def _listen_address(display: str, listen: str | None) -> tuple[str, int]:
    if listen:
        host, sep, port = listen.rpartition(":")
        if not sep or not port.isdigit():
            raise CtlError(EXIT_USAGE, f"--listen wants HOST:PORT, not {listen!r}")
        return host.strip("[]") or "0.0.0.0", int(port)
    hostname = urlsplit(display).hostname or "127.0.0.1"
    if hostname in ("localhost", "127.0.0.1", "::1"):
        return "127.0.0.1", 0
    try:
        import socket

        address = str(socket.getaddrinfo(hostname, None)[0][4][0])
    except OSError:
        raise CtlError(EXIT_UNREACHABLE, f"cannot resolve {hostname}") from None
    local = local_address(address, or_hostname=False)
    if local is None:
        raise CtlError(EXIT_UNREACHABLE, f"no route to {hostname}")
    return local, 0


def _make_receiver(updates: queue.Queue[bytes]) -> type[BaseHTTPRequestHandler]:
    class Receiver(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(min(length, 1 << 20))
            event_id = self.headers.get("X-PDN-Event-Id") or ""
            updates.put(json.dumps({"id": event_id}).encode() + b"\n" + body)
            reply = b"{}\n"
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(reply)))
            self.end_headers()
            self.wfile.write(reply)

        def log_message(self, format: str, *args: Any) -> None:
            log.debug("watch endpoint: " + format, *args)

    return Receiver


def cmd_watch(args: argparse.Namespace, *, out: TextIO | None = None) -> int:
    out = out or sys.stdout
    display = _base(args.display, "DISPLAY_URL")
    host, port = _listen_address(display, args.listen)
    updates: queue.Queue[bytes] = queue.Queue()
    try:
        server = ThreadingHTTPServer((host, port), _make_receiver(updates))
    except OSError as error:
        raise CtlError(EXIT_USAGE, f"cannot listen on {host}:{port}: {error.strerror}") from None
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, name="watch-endpoint", daemon=True)
    thread.start()
    bound_host = url_host(host)
    if host in ("0.0.0.0", "::") and not args.callback_url:
        local = local_address(urlsplit(display).hostname or "127.0.0.1", or_hostname=False)
        bound_host = url_host(local) if local else host
    callback = args.callback_url or f"http://{bound_host}:{server.server_address[1]}/"
    stop = threading.Event()

    def _stop(signum: int, frame: FrameType | None) -> None:
        stop.set()

    previous = {sig: signal.signal(sig, _stop) for sig in (signal.SIGINT, signal.SIGTERM)}
    subscribed = False
    try:
        subscription = json.dumps({"subscriber-uri": callback}).encode()
        _check(
            _call(
                "POST",
                f"{display}/playback/subscribe/",
                body=subscription,
                content_type="application/json",
            )
        )
        subscribed = True
        record = _check(_call("GET", f"{display}/playback/"))
        print(f"watching {display} (updates to {callback}); Ctrl-C to stop", file=sys.stderr)
        if isinstance(record, dict):
            _print_update(record, out, as_json=args.json)
        seen: set[str] = set()
        last_sequence = record.get("sequence") if isinstance(record, dict) else None
        while not stop.is_set():
            try:
                raw = updates.get(timeout=0.25)
            except queue.Empty:
                continue
            header, _, body = raw.partition(b"\n")
            event_id = json.loads(header)["id"]
            if event_id and event_id in seen:
                continue  # a retry of something already printed
            seen.add(event_id)
            try:
                update = json.loads(body)
            except ValueError:
                continue
            if not isinstance(update, dict):
                continue
            sequence = update.get("sequence")
            if (
                isinstance(sequence, int)
                and isinstance(last_sequence, int)
                and sequence <= last_sequence
            ):
                continue
            last_sequence = sequence
            _print_update(update, out, as_json=args.json)
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        if subscribed:
            try:
                _check(
                    _call(
                        "POST",
                        f"{display}/playback/unsubscribe/",
                        body=subscription,
                        content_type="application/json",
                    )
                )
                print("unsubscribed", file=sys.stderr)
            except CtlError as error:
                print(f"pdn ctl: could not unsubscribe: {error.message}", file=sys.stderr)
        server.shutdown()
        server.server_close()
    return EXIT_OK


def _print_update(record: dict[str, Any], out: TextIO, *, as_json: bool) -> None:
    if as_json:
        print(json.dumps(record, ensure_ascii=False), file=out, flush=True)
    else:
        print(describe_playback(record), file=out, flush=True)

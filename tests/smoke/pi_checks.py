"""Checks on an installed display in an emulated Raspberry Pi, run from the machine outside it
by ``packaging/fresh-root.sh --arch arm64``, one step per call:

    python3 -m tests.smoke.pi_checks answers DISPLAY_URL NAME
    python3 -m tests.smoke.pi_checks idle DISPLAY_URL --ctl CTL_TOML --save FILE.png
    python3 -m tests.smoke.pi_checks shows DISPLAY_URL CONTENT_URL --colour R,G,B \\
        --ctl CTL_TOML --save FILE.png [--codec H264]

``answers``: GET / answers with the display's name. ``idle``: ``/x/health`` says the idle page
is on screen and ``/x/screenshot`` reads it back (not black, not white). ``shows``:
``/playback/`` names CONTENT_URL and the screenshot's centre is its colour (and, for a video,
``/x/health`` names its codec). The screenshot of the step is saved in FILE.png either way.

The display serves HTTPS with its own certificate, and ``/x/screenshot`` needs a paired
controller: the token and the certificate's pin come from the ctl.toml that ``pdn ctl pair``
wrote inside the root. Only Python's standard library and ffmpeg (to read pixels) are used,
from the checkout (PYTHONPATH): the machine outside has no venv of this project. Exit 0 when
the step passed; each step waits up to ``--timeout`` seconds, since everything is slow under
emulation.
"""

from __future__ import annotations

import argparse
import hashlib
import http.client
import json
import ssl
import sys
import time
import tomllib
import urllib.parse
from pathlib import Path
from typing import Any

from tests.smoke.screenpoints import BLACK, RGB, near, read_points

WHITE = 240  # every channel over this: a white (unpainted) page


class CheckError(Exception):
    pass


class Display:
    """HTTPS (or HTTP) requests to one display, with a paired controller's token and pin."""

    def __init__(self, url: str, ctl: Path | None = None) -> None:
        self.url = url.rstrip("/")
        parts = urllib.parse.urlsplit(self.url)
        self.https = parts.scheme == "https"
        self.host = parts.hostname or "127.0.0.1"
        self.port = parts.port or (443 if self.https else 80)
        self.token = ""
        self.pin = ""
        if ctl is not None:
            paired = tomllib.loads(ctl.read_text()).get("displays", {}).get(self.url)
            if not paired:
                raise CheckError(f"{ctl} has no pairing with {self.url} (pdn ctl pair)")
            self.token = str(paired["token"])
            self.pin = str(paired.get("tls-fingerprint", ""))

    def get(self, path: str, timeout: float = 30) -> tuple[int, bytes]:
        if self.https:
            context = ssl.create_default_context()
            context.check_hostname = False
            context.verify_mode = ssl.CERT_NONE  # a self-signed certificate: pinned below
            connection: http.client.HTTPConnection = http.client.HTTPSConnection(
                self.host, self.port, timeout=timeout, context=context
            )
        else:
            connection = http.client.HTTPConnection(self.host, self.port, timeout=timeout)
        try:
            headers = {"Authorization": f"Bearer {self.token}"} if self.token else {}
            connection.request("GET", path, headers=headers)
            if self.https and self.pin:
                der = connection.sock.getpeercert(binary_form=True)  # type: ignore[union-attr]
                seen = "sha256:" + hashlib.sha256(der or b"").hexdigest()
                if seen != self.pin:
                    raise CheckError(f"certificate {seen}, not the pinned {self.pin}")
            response = connection.getresponse()
            return response.status, response.read()
        finally:
            connection.close()

    def json(self, path: str) -> Any:
        status, body = self.get(path)
        if status != 200:
            raise CheckError(f"GET {path}: HTTP {status}")
        return json.loads(body)

    def screenshot(self, save: Path) -> list[RGB]:
        status, body = self.get("/x/screenshot", timeout=120)
        if status != 200 or not body.startswith(b"\x89PNG"):
            raise CheckError(f"GET /x/screenshot: HTTP {status}, {body[:200]!r}")
        save.write_bytes(body)
        return read_points(save)


def until(timeout: float, what: str, probe: Any) -> Any:
    """Call ``probe`` every 3 s until it returns something true; its last problem on failure."""
    deadline = time.monotonic() + timeout
    last = "no answer yet"
    while time.monotonic() < deadline:
        try:
            result = probe()
        except (OSError, CheckError, ValueError, http.client.HTTPException) as error:
            result, last = None, f"{type(error).__name__}: {error}"
        if result:
            return result
        time.sleep(3)
    raise CheckError(f"{what} not within {timeout:g} s ({last})")


def answers(args: argparse.Namespace) -> str:
    display = Display(args.display)

    def probe() -> str | None:
        status, body = display.get("/", timeout=10)
        text = body.decode("utf-8", "replace")
        return text if status == 200 and args.name in text else None

    body: str = until(args.timeout, f"GET / naming {args.name!r}", probe)
    return f"GET / answers: {body[:300]}"


def idle(args: argparse.Namespace) -> str:
    display = Display(args.display, args.ctl)
    showing = until(args.timeout, "the idle page on screen", lambda: idle_showing(display))
    points = display.screenshot(args.save)
    if all(max(p) < BLACK for p in points):
        raise CheckError(f"/x/health says {showing!r}, but the screenshot is black: {points}")
    if all(min(p) > WHITE for p in points):
        raise CheckError(f"/x/health says {showing!r}, but the screenshot is white: {points}")
    size = len(args.save.read_bytes())
    return f"/x/health: showing {showing!r}; screenshot {args.save} ({size} bytes)"


def idle_showing(display: Display) -> str | None:
    screen = display.json("/x/health")["renderer"]["screen"]
    return str(screen["showing"]) if screen.get("showing") == "the idle page" else None


def shows(args: argparse.Namespace) -> str:
    display = Display(args.display, args.ctl)
    colour: RGB = tuple(int(c) for c in args.colour.split(","))  # type: ignore[assignment]
    seen: list[str] = []

    def probe() -> str | None:
        playback = display.json("/playback/")
        if playback.get("content-item") != args.content:
            seen[:] = [f"/playback/ shows {playback.get('content-item')}"]
            return None
        points = display.screenshot(args.save)
        if not near(points[2], colour):
            seen[:] = [f"the screen's centre is {points[2]}, not {colour}"]
            return None
        if args.codec:
            video = display.json("/x/health")["renderer"]["screen"].get("video") or {}
            if video.get("codec") != args.codec:
                seen[:] = [f"/x/health says video {video}"]
                return None
            backend, decoding = video.get("backend"), video.get("decoding")
            return f"{video['codec']} by {backend}, decoded in {decoding}"
        return f"centre {points[2]}"

    try:
        found: str = until(args.timeout, f"{args.content} on screen", probe)
    except CheckError as error:
        raise CheckError(f"{error}; last seen: {'; '.join(seen) or 'nothing'}") from None
    return f"{args.content} on screen: {found}; screenshot {args.save}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    steps = parser.add_subparsers(dest="step", required=True)
    step = steps.add_parser("answers")
    step.add_argument("display")
    step.add_argument("name")
    step.set_defaults(func=answers)
    step = steps.add_parser("idle")
    step.add_argument("display")
    step.set_defaults(func=idle)
    step = steps.add_parser("shows")
    step.add_argument("display")
    step.add_argument("content")
    step.add_argument("--colour", required=True, help="R,G,B at the screen's centre")
    step.add_argument("--codec", default="", help="for a video: the codec /x/health names")
    step.set_defaults(func=shows)
    for each in (steps.choices["idle"], steps.choices["shows"]):
        each.add_argument("--ctl", type=Path, required=True, help="ctl.toml of pdn ctl pair")
        each.add_argument("--save", type=Path, required=True, help="the screenshot, a PNG")
    parser.add_argument("--timeout", type=float, default=1800)
    args = parser.parse_args(argv)
    try:
        print(args.func(args))
    except CheckError as error:
        print(f"pi_checks: {args.step}: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

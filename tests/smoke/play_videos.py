"""Videos on a running display, as a new user sends them: an H.264 MP4, an HEVC MP4 and a VP9
WebM (each with sound), one by one with ``POST /schedule`` and then together in a CDS; the
screen is read back (``GET /x/screenshot``) the whole time.

    python -m tests.smoke.play_videos [--display http://127.0.0.1:8080] [--seconds 4]

The videos are made with Debian's ffmpeg (a solid colour each, so the screen says which one is
on it) and served whole from 127.0.0.1 by tests/support's page server, without range requests,
as the simplest web server a user has. Passes (exit 0) when every video is reported shown by
``/playback/``, its colour is read on the screen, ``/x/health`` names its codec, and no
screenshot taken from the first request to the end of the CDS is black.
``packaging/fresh-root.sh`` runs it against the display of ``bash packaging/dev.sh display`` on
a bare Debian root.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import requests

from tests.smoke.screenpoints import BLACK, RGB, near, read_points
from tests.support.pages import PageServer
from tests.support.videofiles import solid_video
from tests.support.waiting import poll_until

# name -> (colour, file name, ffmpeg codecs, content type, QtMultimedia's codec name)
VIDEOS: dict[str, tuple[RGB, str, tuple[str, str], str, str]] = {
    "h264": ((210, 40, 40), "h264.mp4", ("libx264", "aac"), "video/mp4", "H264"),
    "hevc": ((40, 70, 210), "hevc.mp4", ("libx265", "aac"), "video/mp4", "H265"),
    "vp9": ((220, 200, 40), "vp9.webm", ("libvpx-vp9", "libopus"), "video/webm", "VP9"),
}


class SmokeError(Exception):
    pass


def make_videos(folder: Path, seconds: float) -> dict[str, Path]:
    ffmpeg = shutil.which("ffmpeg")
    if ffmpeg is None:
        raise SmokeError("ffmpeg is missing (apt-get install ffmpeg; packaging/dev.sh installs it)")
    made = {}
    for name, (colour, file_name, codecs, _, _) in VIDEOS.items():
        path = folder / file_name
        solid_video(ffmpeg, path, colour, (1280, 720), seconds, codecs)
        made[name] = path
    return made


def serve(files: dict[str, Path]) -> PageServer:
    """The videos on a page server of 127.0.0.1 (tests/support's), each file whole: no byte
    ranges, as the simplest web server a user has."""
    pages = PageServer()
    for name, path in files.items():
        pages.page(f"/{path.name}", path.read_bytes(), VIDEOS[name][3])
    return pages


class Screen:
    """Screenshots of the display, read at five points, on a thread of their own."""

    def __init__(self, display: str, work: Path) -> None:
        self.display = display
        self.work = work
        self.samples: list[tuple[float, list[RGB]]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=30)

    def points(self) -> list[RGB]:
        shot = self.work / "screen.png"
        answer = requests.get(f"{self.display}/x/screenshot", timeout=10)
        answer.raise_for_status()
        shot.write_bytes(answer.content)
        return read_points(shot)

    def _run(self) -> None:
        while not self._stop.is_set():
            with contextlib.suppress(requests.RequestException, subprocess.SubprocessError):
                self.samples.append((time.monotonic(), self.points()))

    def black(self) -> list[float]:
        return [t for t, points in self.samples if all(max(p) < BLACK for p in points)]


#: (time.monotonic(), what happened): said beside black samples, to place them.
EVENTS: list[tuple[float, str]] = []


def wait_shown(display: str, url: str, timeout: float) -> dict[str, Any]:
    def shown() -> dict[str, Any] | None:
        record = requests.get(f"{display}/playback/", timeout=10).json()
        return dict(record) if record.get("content-item") == url else None

    record = poll_until(shown, timeout, step=0.1)
    if record is None:
        raise SmokeError(f"{url} was not shown within {timeout:g} s")
    EVENTS.append((time.monotonic(), f"{url.rsplit('/', 1)[-1]} shown"))
    return record


def check_playing(display: str, screen: Screen, name: str, url: str) -> str:
    colour, _, _, _, codec = VIDEOS[name]
    wait_shown(display, url, 30)
    time.sleep(1.0)  # past the cross-fade
    points = screen.points()
    if not near(points[2], colour):
        raise SmokeError(f"{name}: the screen shows {points[2]} at its centre, not {colour}")
    video = requests.get(f"{display}/x/health", timeout=10).json()["renderer"]["screen"]["video"]
    if not video or video.get("codec") != codec:
        raise SmokeError(f"{name}: /x/health says {video}")
    return f"{video['codec']} by {video['backend']}, decoded in {video['decoding']}"


def cds(base: str, files: dict[str, Path]) -> str:
    items = []
    for name, path in files.items():
        digest = hashlib.sha256(path.read_bytes()).hexdigest()
        items.append(
            f'  <content-item content-type="{VIDEOS[name][3]}"><requires-file>'
            f'<hashes><hash type="sha256">{digest}</hash></hashes>'
            f"<sources><uri>{base}/{path.name}</uri></sources></requires-file></content-item>"
        )
    order = "<constraints><scheduling-constraints><playback order='inorder'/>"
    order += "</scheduling-constraints></constraints>"
    return f'<content-set name="smoke-videos">{order}\n' + "\n".join(items) + "\n</content-set>"


def run(display: str, seconds: float) -> list[str]:
    lines = []
    with tempfile.TemporaryDirectory(prefix="pdn-play-videos-") as work:
        folder = Path(work)
        files = make_videos(folder, seconds)
        server = serve(files)
        base = server.url
        screen = Screen(display, folder)
        screen.start()
        try:
            for name, path in files.items():
                url = f"{base}/{path.name}"
                request = {"content-item": url}
                answer = requests.post(f"{display}/schedule", json=request, timeout=10)
                if answer.status_code != 202:
                    raise SmokeError(f"POST /schedule {url}: {answer.status_code} {answer.text}")
                playing = check_playing(display, screen, name, url)
                lines.append(f"POST /schedule {path.name}: {playing}")
                time.sleep(seconds)  # it plays to its own end
            answer = requests.post(
                f"{display}/schedule",
                data=cds(base, files),
                headers={"Content-Type": "text/xml"},
                timeout=10,
            )
            if answer.status_code != 202:
                raise SmokeError(f"POST /schedule (CDS): {answer.status_code} {answer.text}")
            seen = []
            for path in files.values():  # downloaded and verified, then played in order
                url = f"{base}/{path.name}"
                wait_shown(display, url, 120)
                seen.append(path.name)
            lines.append(f"CDS of {', '.join(files)}: each shown in turn ({', '.join(seen)})")
            time.sleep(seconds)
        finally:
            screen.stop()
            requests.post(
                f"{display}/schedule",
                data='<content-set name="smoke-videos"/>',
                headers={"Content-Type": "text/xml"},
                timeout=10,
            )
            server.close()
        black = screen.black()
        lines.append(f"screenshots: {len(screen.samples)}, black: {len(black)}")
        if not screen.samples or black:
            start = screen.samples[0][0] if screen.samples else 0.0
            when = ", ".join(f"{t - start:.2f} s" for t in black)
            events = ", ".join(f"{t - start:.2f} s {what}" for t, what in EVENTS)
            raise SmokeError(f"{lines[-1]} (black at {when}; {events})")
    return lines


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--display", default="http://127.0.0.1:8080")
    parser.add_argument("--seconds", type=float, default=4.0, help="each video's length")
    args = parser.parse_args()
    try:
        for line in run(args.display.rstrip("/"), args.seconds):
            print(f"play_videos: {line}")
    except (SmokeError, requests.RequestException, subprocess.SubprocessError) as error:
        print(f"play_videos: FAILED: {error}", file=sys.stderr)
        return 1
    print("play_videos: passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())

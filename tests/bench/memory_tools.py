"""What the memory benchmark (bench_memory.py) needs besides its driver: a bare X server whose
screen can be read without asking it, the process tree's memory by Chromium role, and a
display or a bare web view started on that server from any checkout.

No Qt is imported here: the benchmark's own process must not map Qt's libraries, or the
measured processes' PSS would shrink by the share our process takes of those pages.
"""

from __future__ import annotations

import http.client
import importlib.metadata
import importlib.util
import json
import mmap
import os
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from player.framepoints import DARK, sample_points
from tests.support.display import DisplayProcess
from tests.support.process import CREDENTIALS

T = TypeVar("T")
# What the developer's session may set that would turn a benchmark's display to another screen.
FOREIGN = ("WAYLAND_DISPLAY", "QTWEBENGINE_CHROMIUM_FLAGS", "QT_QUICK_BACKEND")

ROOT = Path(__file__).resolve().parents[2]


# -- the X server and its framebuffer -------------------------------------------------------


@dataclass
class XServer:
    display: str  # the DISPLAY value
    framebuffer: Path  # Xvfb's screen as an XWD file (-fbdir), updated in place


@contextmanager
def xvfb(width: int, height: int) -> Iterator[XServer]:
    """An Xvfb of its own (black root, no window manager) that also keeps its screen in a file
    in /dev/shm, so the screen can be sampled by reading memory instead of asking the server
    for a grab (which would cost the X server, and so the display, a copy of 8 MB a time)."""
    if shutil.which("Xvfb") is None:
        raise SystemExit("Xvfb is not installed: apt-get install -y xvfb")
    fbdir = Path(tempfile.mkdtemp(prefix="pdn-bench-fb-", dir="/dev/shm"))
    read, write = os.pipe()
    server = subprocess.Popen(
        [
            "Xvfb",
            "-displayfd",
            str(write),
            "-screen",
            "0",
            f"{width}x{height}x24",
            "-fbdir",
            str(fbdir),
            "-nolisten",
            "tcp",
            "-noreset",
            "-br",
        ],
        pass_fds=(write,),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    os.close(write)
    with os.fdopen(read) as stream:
        number = stream.readline().strip()
    try:
        if not number:
            raise SystemExit("Xvfb did not start")
        yield XServer(f":{number}", fbdir / "Xvfb_screen0")
    finally:
        server.terminate()
        server.wait(10)
        shutil.rmtree(fbdir, ignore_errors=True)


class Framebuffer:
    """Xvfb's screen, mapped read-only: reading a pixel costs nothing to the X server."""

    def __init__(self, path: Path, points: list[tuple[int, int]] | None = None) -> None:
        """``points``: the (x, y) pixels :meth:`pixels` reads; by default
        :func:`sample_points` of the screen."""
        with path.open("rb") as stream:
            self._map = mmap.mmap(stream.fileno(), 0, access=mmap.ACCESS_READ)
        # XWD header: 25 big-endian 32-bit fields, then the window name, then the colour map.
        fields = struct.unpack(">25I", self._map[:100])
        header_size, width, height = fields[0], fields[4], fields[5]
        byte_order, bits_per_pixel, bytes_per_line, colours = (
            fields[7],
            fields[11],
            fields[12],
            fields[19],
        )
        if bits_per_pixel != 32:
            raise SystemExit(f"Xvfb framebuffer has {bits_per_pixel} bits per pixel, not 32")
        self.width, self.height = width, height
        self._stride = bytes_per_line
        self._offset = header_size + colours * 12
        self._format = "<I" if byte_order == 0 else ">I"
        self._points = [
            self._offset + y * self._stride + x * 4
            for x, y in (points if points is not None else sample_points(width, height))
        ]

    def pixels(self) -> list[tuple[int, int, int]]:
        """The colour at each sample point (24-bit TrueColor: red in bits 16-23)."""
        found = []
        for at in self._points:
            (value,) = struct.unpack_from(self._format, self._map, at)
            found.append(((value >> 16) & 255, (value >> 8) & 255, value & 255))
        return found

    def snapshot(self) -> bytes:
        """The whole screen as it is now: the mapped pixels, copied in one go (a few hundred
        microseconds at 480x270)."""
        return self._map[self._offset : self._offset + self._stride * self.height]

    def to_ppm(self, raw: bytes) -> bytes:
        """A :meth:`snapshot` as a binary PPM (24-bit TrueColor, red in bits 16-23)."""
        view, width, stride = memoryview(raw), self.width * 4, self._stride
        pixels = b"".join(view[at : at + width] for at in range(0, stride * self.height, stride))
        rgb = bytearray(self.width * self.height * 3)
        first, last = (2, 0) if self._format == "<I" else (1, 3)
        step = -1 if first > last else 1
        for channel, at in enumerate(range(first, last + step, step)):
            rgb[channel::3] = pixels[at::4]
        return f"P6 {self.width} {self.height} 255\n".encode() + bytes(rgb)

    def close(self) -> None:
        self._map.close()


def classify(pixels: list[tuple[int, int, int]]) -> str:
    """ "black" (every point near black: an unpainted view, a cleared window, the bare root,
    or a black frame), "white" (every point near white: a page before its styles), else
    "content". A cross-fade between two items of ours is never either."""
    if all(max(pixel) < DARK for pixel in pixels):
        return "black"
    if all(min(pixel) > 239 for pixel in pixels):
        return "white"
    return "content"


# -- processes under test -------------------------------------------------------------------


def private_qt(directory: Path) -> Path:
    """A copy of this environment's PySide6 (with Qt and QtWebEngineProcess) and shiboken6 in
    ``directory``, made once. PSS divides a file's pages among every process mapping them, so
    other programs running Qt WebEngine from the shared virtual environment (tests, other
    benchmarks) would lower the measured tree's PSS; a copy of its own is mapped by nobody else.
    The libraries find each other through $ORIGIN-relative paths, so the copy is complete."""
    version = importlib.metadata.version("PySide6")
    target = directory / version
    if not (target / "PySide6").is_dir():
        partial = directory / f"{version}.partial"
        shutil.rmtree(partial, ignore_errors=True)
        for name in ("PySide6", "shiboken6"):
            spec = importlib.util.find_spec(name)  # where it is, without loading it
            if spec is None or spec.origin is None:
                raise SystemExit(f"{name} is not installed in this environment")
            source = Path(spec.origin).parent
            shutil.copytree(source, partial / name, symlinks=True)
        partial.rename(target)
    return target


def while_alive(display: Display, test: Callable[[], T]) -> Callable[[], T]:
    """``test``, which fails at once when ``display`` has exited (no waiting out the timeout
    on a process that is gone)."""

    def check() -> T:
        if not display.alive():
            raise RuntimeError(f"pdn display exited; see {display.log_path}")
        return test()

    return check


def _environment(server: XServer, checkout: Path, qt: Path | None) -> dict[str, str]:
    env = {"DISPLAY": server.display}
    # The checkout's packages first, whatever the virtual environment has installed.
    env["PYTHONPATH"] = os.pathsep.join([str(checkout), *([str(qt)] if qt else [])])
    return env


def _process_environment(server: XServer, qt: Path | None) -> dict[str, str]:
    """The whole environment of a process of this checkout on ``server`` (the bare view)."""
    env = {k: v for k, v in os.environ.items() if k not in FOREIGN}
    env["QT_QPA_PLATFORM"] = "xcb"
    if os.geteuid() == 0:  # Chromium refuses its sandbox as root
        env["QTWEBENGINE_DISABLE_SANDBOX"] = "1"
    return {**env, **_environment(server, ROOT, qt)}


def _stop(process: subprocess.Popen[bytes], timeout: float = 20) -> None:
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


class Display(DisplayProcess):
    """``pdn display`` of ``checkout`` on the X server (tests/support's display process, run
    from the checkout), in ``workdir/name``, named "bench", in UTC; ``qt``: a private copy
    of PySide6 it runs on (:func:`private_qt`)."""

    def __init__(
        self,
        server: XServer,
        checkout: Path,
        workdir: Path,
        config: str,
        name: str,
        qt: Path | None = None,
    ) -> None:
        super().__init__(
            workdir / name,
            ["--name", "bench", "--timezone", "UTC"],
            config=config,
            platform="xcb",
            env=_environment(server, checkout, qt),
            unset=(*CREDENTIALS, *FOREIGN),
            cwd=checkout,
        )
        self.log_path = self.log
        self.start().wait_ready(timeout=90)

    def request(
        self, method: str, path: str, body: bytes | None = None, content_type: str = ""
    ) -> tuple[int, Any]:
        connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
        try:
            headers = {"Content-Type": content_type} if content_type else {}
            connection.request(method, path, body=body, headers=headers)
            response = connection.getresponse()
            text = response.read()
            try:
                return response.status, json.loads(text) if text else None
            except ValueError:
                return response.status, text
        finally:
            connection.close()

    def schedule_json(self, url: str, seconds: float) -> None:
        body = json.dumps({"content-item": url, "preferred-duration": f"{seconds:g} seconds"})
        status, answer = self.request("POST", "/schedule", body.encode(), "application/json")
        if status != 202 or answer.get("request-status") != "scheduling":
            raise RuntimeError(f"POST /schedule {url}: {status} {answer}")

    def schedule_cds(self, document: bytes) -> None:
        status, answer = self.request("POST", "/schedule", document, "text/xml")
        if status != 202:
            raise RuntimeError(f"POST /schedule (CDS): {status} {answer}")

    def alive(self) -> bool:
        return self.running


class BareView:
    """The floor: one bare QWebEngineView, fullscreen on the same X server, showing ``url``."""

    def __init__(self, server: XServer, url: str, workdir: Path, qt: Path | None = None) -> None:
        self.log_path = workdir / "floor.log"
        self._log = self.log_path.open("wb")
        self.process = subprocess.Popen(
            [sys.executable, "-m", "tests.bench.bench_memory", "--floor-child", url],
            stdout=subprocess.PIPE,
            stderr=self._log,
            env=_process_environment(server, qt),
            cwd=ROOT,
        )
        assert self.process.stdout is not None
        line = self.process.stdout.readline().decode().strip()
        if line != "LOADED":
            raise SystemExit(f"the bare view did not load its page ({line!r}); see {self.log_path}")

    def stop(self) -> None:
        _stop(self.process)
        self._log.close()


def run_bare_view(url: str) -> int:
    """The floor's process: a QApplication and one QWebEngineView, nothing else."""
    from PySide6.QtCore import QCoreApplication, Qt, QUrl
    from PySide6.QtWebEngineWidgets import QWebEngineView
    from PySide6.QtWidgets import QApplication

    QCoreApplication.setAttribute(Qt.ApplicationAttribute.AA_ShareOpenGLContexts)
    app = QApplication(["bench-memory-floor"])
    view = QWebEngineView()

    def loaded(ok: bool) -> None:
        print("LOADED" if ok else "FAILED", flush=True)

    view.loadFinished.connect(loaded)
    view.load(QUrl(url))
    # With no window manager, "fullscreen" is only a hint nobody acts on: size it ourselves.
    view.setGeometry(app.primaryScreen().geometry())
    view.showFullScreen()
    signal.signal(signal.SIGTERM, lambda *_: app.quit())
    # Python signal handlers run only between bytecodes: a timer keeps some coming.
    from PySide6.QtCore import QTimer

    tick = QTimer()
    tick.start(200)
    tick.timeout.connect(lambda: None)
    app.exec()
    sys.stdout.flush()
    os._exit(0)

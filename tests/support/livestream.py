"""Live streams on loopback whose server a test can cut: HLS made by Debian's ffmpeg, and an
RTSP camera (GStreamer's RTSP server, ``rtsp_serve.py``).

ffmpeg encodes a test source in real time (one flat colour with a white box moving along its
top, so the screen read back tells the stream from other items and shows it moving) into a
sliding-window playlist (``-f hls -hls_flags delete_segments``: a few one-second segments,
the old ones deleted), as a live camera or channel is served. A :class:`PageServer` serves the
folder; :meth:`HlsStream.cut` closes it (connection refused) and :meth:`HlsStream.restore`
opens it again on the same port, while ffmpeg goes on writing.

:class:`RtspStream` runs ``rtsp_serve.py`` with Debian's ``python3`` (one flat colour, H.264
over RTP); :meth:`RtspStream.cut` ends the server (the client's session is gone, the port
refuses), :meth:`RtspStream.restore` starts it again on the same port.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from tests.support.pages import PageServer, Reply, Request
from tests.support.ports import free_port
from tests.support.waiting import wait_until

RTSP_SERVER = Path(__file__).with_name("rtsp_serve.py")
SYSTEM_PYTHON = "/usr/bin/python3"  # Debian's, with python3-gi

TYPES = {".m3u8": "application/vnd.apple.mpegurl", ".ts": "video/mp2t"}


def live_source(colour: tuple[int, int, int], size: tuple[int, int], fps: int) -> str:
    """An lavfi source: ``colour`` with a white box crossing its top, 80 px a second."""
    r, g, b = colour
    box = min(40, size[1] // 4)
    return (
        f"color=c=0x{r:02x}{g:02x}{b:02x}:size={size[0]}x{size[1]}:rate={fps}[bg];"
        f"color=c=white:size={box}x{box}:rate={fps}[box];"
        f"[bg][box]overlay=x='mod(t*80,{size[0] - box})':y=4:shortest=1"
    )


class HlsStream:
    """ffmpeg writing a live playlist into ``folder``, served at :attr:`url` (until
    :meth:`close`: ``contextlib.closing`` makes it a context)."""

    def __init__(
        self,
        folder: Path,
        colour: tuple[int, int, int],
        size: tuple[int, int] = (320, 240),
        fps: int = 25,
    ) -> None:
        ffmpeg = shutil.which("ffmpeg")
        assert ffmpeg, "ffmpeg is missing: bash packaging/dev.sh setup installs it"
        folder.mkdir(parents=True, exist_ok=True)
        self.folder = folder
        self.encoder = subprocess.Popen(
            [ffmpeg, "-v", "error", "-nostdin", "-re", "-f", "lavfi",
             "-i", live_source(colour, size, fps),
             "-c:v", "libx264", "-preset", "ultrafast", "-tune", "zerolatency",
             "-g", str(fps), "-pix_fmt", "yuv420p",
             "-f", "hls", "-hls_time", "1", "-hls_list_size", "4",
             "-hls_flags", "delete_segments", str(folder / "live.m3u8")],
            stdin=subprocess.DEVNULL,
        )  # fmt: skip
        self.server: PageServer | None = None
        self.port = 0
        self.restore()
        assert wait_until((folder / "live.m3u8").exists, 20), "ffmpeg wrote no playlist"

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/live.m3u8"

    def _serve(self, request: Request) -> Reply | None:
        path = self.folder / request.route.lstrip("/")
        if path.parent != self.folder or path.suffix not in TYPES:
            return None
        try:
            body = path.read_bytes()
        except OSError:
            return None
        return Reply(200, body, TYPES[path.suffix], headers={"Cache-Control": "no-cache"})

    def cut(self) -> None:
        """Stop serving: the port refuses connections."""
        if self.server is not None:
            self.server.close()
            self.server = None

    def restore(self) -> None:
        """Serve again, on the same port."""
        if self.server is None:
            self.server = PageServer(port=self.port)
            self.port = self.server.port
            self.server.handle(self._serve)

    def close(self) -> None:
        self.cut()
        self.encoder.terminate()
        try:
            self.encoder.wait(10)
        except subprocess.TimeoutExpired:
            self.encoder.kill()
            self.encoder.wait()


class RtspStream:
    """An RTSP camera sending ``colour`` at :attr:`url` (until :meth:`close`:
    ``contextlib.closing`` makes it a context). Fails the test where GStreamer's RTSP server
    is not installed (``bash packaging/dev.sh setup`` installs it)."""

    def __init__(self, colour: tuple[int, int, int]) -> None:
        check = subprocess.run(
            [SYSTEM_PYTHON, "-c", _CAN_SERVE], capture_output=True, text=True, check=False
        )
        if check.returncode != 0:
            pytest.fail(
                "GStreamer's RTSP server is not installed (bash packaging/dev.sh setup installs"
                f" it): {check.stderr.strip()[-200:]}"
            )
        self.colour = "{:02x}{:02x}{:02x}".format(*colour)
        self.port = free_port()
        self.server: subprocess.Popen[str] | None = None
        self.restore()

    @property
    def url(self) -> str:
        return f"rtsp://127.0.0.1:{self.port}/live"

    def restore(self) -> None:
        """Serve again, on the same port; returns once it listens."""
        if self.server is not None:
            return
        self.server = subprocess.Popen(
            [SYSTEM_PYTHON, str(RTSP_SERVER), str(self.port), self.colour],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self.server.stdout is not None
        line = self.server.stdout.readline().strip()
        assert line == "ready", f"the RTSP server did not start: {line!r}"

    def cut(self) -> None:
        """End the server: the session is gone and the port refuses connections."""
        server, self.server = self.server, None
        if server is not None:
            server.terminate()
            try:
                server.wait(10)
            except subprocess.TimeoutExpired:
                server.kill()
                server.wait()
            if server.stdout is not None:
                server.stdout.close()

    def close(self) -> None:
        self.cut()


_CAN_SERVE = (
    "import gi; gi.require_version('Gst', '1.0'); gi.require_version('GstRtspServer', '1.0');"
    "from gi.repository import Gst, GstRtspServer; Gst.init(None);"
    "missing = [e for e in ('videotestsrc', 'x264enc', 'rtph264pay')"
    " if Gst.ElementFactory.find(e) is None];"
    "assert not missing, 'missing GStreamer elements: ' + ', '.join(missing)"
)

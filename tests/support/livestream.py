"""A live HLS stream on loopback, made by Debian's ffmpeg, whose server a test can cut.

ffmpeg encodes a test source in real time (one flat colour with a white box moving along its
top, so the screen read back tells the stream from other items and shows it moving) into a
sliding-window playlist (``-f hls -hls_flags delete_segments``: a few one-second segments,
the old ones deleted), as a live camera or channel is served. A :class:`PageServer` serves the
folder; :meth:`HlsStream.cut` closes it (connection refused) and :meth:`HlsStream.restore`
opens it again on the same port, while ffmpeg goes on writing.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from tests.support.pages import PageServer, Reply, Request
from tests.support.waiting import wait_until

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

"""What the synchronised-screens benchmark (bench_sync.py) needs: media whose frames say their
number, a recording of each screen by ``ffmpeg -f x11grab`` with each frame's wall-clock time,
what each recorded frame shows, and the grid the displays should follow.

The screens are read as a grid of 16 x 9 cells (ffmpeg averages each cell to one pixel while
recording). A solid-colour page or picture is all cells one colour of :data:`PALETTE`. The
video's top two rows of cells are its code: cell ``i`` of the first row white where bit ``i``
of ``frame + 4096 * VIDEO_NUMBER`` is 1, the cell under it the opposite; below, its frame
number drawn by ffmpeg's drawtext, for people looking at the recording.

Times: x11grab stamps each frame with the wall clock (``av_gettime``) as it grabs it; ffmpeg
prints the first one (``start:``) and the file keeps the others relative to it, to the
microsecond (``-fps_mode passthrough``: no frame added or dropped; ``-enc_time_base
1:1000000``: without it the muxer rounds every time to 1/60 s, and two frames may share one).
A switch on a screen is known to within a recording interval (~16.7 ms at 60 fps): it happened
between the last frame of the old item and the first of the new; the midpoint is taken, so each
screen's instant is within +-8.3 ms.

No Qt is imported here.
"""

from __future__ import annotations

import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

from tests.bench.signage_content import lavfi_image
from tests.bench.video_tools import require_ffmpeg, stop_recording

COLUMNS, ROWS = 16, 9
FPS = 30
VIDEO_NUMBER = 5
FRAME_BITS = 12
RGB = tuple[int, int, int]
PALETTE: dict[str, RGB] = {
    "red": (255, 0, 0),
    "green": (0, 255, 0),
    "blue": (0, 0, 255),
    "yellow": (255, 255, 0),
    "magenta": (255, 0, 255),
}
FONT = "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf"


def numbered_video(path: Path, size: tuple[int, int], seconds: float, fps: int = FPS) -> Path:
    """H.264 (High, yuv420p, a key frame every half second, index first): the code rows, then
    the frame number drawn large on grey."""
    width, height = size
    cell_w, cell_h = width // COLUMNS, height // ROWS
    value = f"(N+{VIDEO_NUMBER << FRAME_BITS})"
    bit = f"mod(floor({value}/pow(2,floor(X/{cell_w}))),2)"
    graph = (
        f"color=c=gray:s={width}x{height}:r={fps}:d={seconds:g},format=gray,"
        f"geq=lum='if(lt(Y,{cell_h}),255*{bit},if(lt(Y,{2 * cell_h}),255*(1-{bit}),60))',"
        f"format=yuv420p,drawtext=fontfile={FONT}:text='%{{frame_num}}':"
        f"fontsize={height // 3}:fontcolor=white:x=(w-tw)/2:y={2 * cell_h}+(h-{2 * cell_h}-th)/2"
    )
    subprocess.run(
        [require_ffmpeg(), "-v", "error", "-y", "-f", "lavfi", "-i", graph,
         "-c:v", "libx264", "-profile:v", "high", "-pix_fmt", "yuv420p", "-g", str(fps // 2),
         "-movflags", "+faststart", str(path)],
        check=True, timeout=600,
    )  # fmt: skip
    return path


def picture_video(path: Path, size: tuple[int, int], seconds: float, fps: int = FPS) -> Path:
    """For a wall's montage: ffmpeg's testsrc2 (colour bars and a moving pattern) with a grid of
    lines and the frame number across the middle, so a tile's part and its neighbour's meet."""
    width, height = size
    graph = (
        f"testsrc2=s={width}x{height}:r={fps}:d={seconds:g},"
        f"drawgrid=w={width // 8}:h={height // 6}:t=3:c=white@0.9,"
        f"drawtext=fontfile={FONT}:text='frame %{{frame_num}}':fontsize={height // 5}:"
        "fontcolor=white:borderw=6:bordercolor=black:x=(w-tw)/2:y=(h-th)/2"
    )
    subprocess.run(
        [require_ffmpeg(), "-v", "error", "-y", "-f", "lavfi", "-i", graph,
         "-c:v", "libx264", "-pix_fmt", "yuv420p", "-g", str(fps // 2),
         "-movflags", "+faststart", str(path)],
        check=True, timeout=600,
    )  # fmt: skip
    return path


def solid_png(path: Path, size: tuple[int, int], colour: RGB) -> Path:
    hex_colour = "".join(f"{c:02x}" for c in colour)
    return lavfi_image(f"color=c=0x{hex_colour}:s={size[0]}x{size[1]}", path)


@dataclass(frozen=True)
class Seen:
    """What one recorded frame shows."""

    kind: str  # a PALETTE name, "video", "black" or "other" (the idle page, a torn frame)
    frame: int | None = None  # the video's frame number

    @property
    def item(self) -> str | None:
        """The item it is a frame of (None: cannot say)."""
        return None if self.kind in ("black", "other") else self.kind


def _luma(colour: RGB) -> float:
    r, g, b = colour
    return 0.299 * r + 0.587 * g + 0.114 * b


def read_cells(cells: list[RGB]) -> Seen:
    """A frame of 16 x 9 cells, row after row."""
    upper, lower = cells[:COLUMNS], cells[COLUMNS : 2 * COLUMNS]
    diffs = [_luma(a) - _luma(b) for a, b in zip(upper, lower, strict=True)]
    if min(abs(d) for d in diffs) > 100:
        value = sum(1 << i for i, d in enumerate(diffs) if d > 0)
        if value >> FRAME_BITS == VIDEO_NUMBER:
            return Seen("video", value & ((1 << FRAME_BITS) - 1))
        return Seen("other")
    if all(max(c) < 24 for c in cells):
        return Seen("black")
    for name, colour in PALETTE.items():
        if all(all(abs(p - q) < 40 for p, q in zip(c, colour, strict=True)) for c in cells):
            return Seen(name)
    return Seen("other")


class ScreenRecorder:
    """``ffmpeg -f x11grab -framerate 60`` of a whole screen, each frame averaged to 16 x 9
    cells and kept raw with its time, until :meth:`stop`. It runs at the benchmark's own
    priority (on a shared machine, not above anyone's): a late grab widens the interval a
    switch is known to, which the figures report (the recording's intervals)."""

    def __init__(
        self,
        x_display: str,
        size: tuple[int, int],
        path: Path,
        fps: int = 60,
    ) -> None:
        self.path = path
        self.log = path.with_suffix(".log")
        self._log = self.log.open("wb")
        width, height = size
        outputs = [
            "-map", "[cells]", "-c:v", "rawvideo", "-pix_fmt", "rgb24",
            "-fps_mode", "passthrough", "-enc_time_base", "1:1000000", "-f", "nut", str(path),
        ]  # fmt: skip
        graph = f"scale={COLUMNS}:{ROWS}:flags=area[cells]"
        self.process = subprocess.Popen(
            [require_ffmpeg(), "-hide_banner", "-y", "-f", "x11grab", "-framerate", str(fps),
             "-video_size", f"{width}x{height}", "-draw_mouse", "0",
             "-i", f"{x_display}.0+0,0", "-filter_complex", graph, *outputs],
            stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=self._log,
        )  # fmt: skip
        self.cpu_s = 0.0

    def stop(self) -> None:
        self.cpu_s = stop_recording(self.process, 30)
        self._log.close()

    def start_time(self) -> float:
        """The wall-clock time of the first frame, as ffmpeg printed it."""
        found = re.search(r"start: (\d+\.\d+)", self.log.read_text(errors="replace"))
        if found is None:
            raise RuntimeError(f"no start time in {self.log}")
        return float(found.group(1))

    def frames(self) -> list[tuple[float, Seen]]:
        """(wall-clock time, what it shows) of every frame recorded."""
        start = self.start_time()
        ffmpeg = require_ffmpeg()
        probe = subprocess.run(
            [ffmpeg.removesuffix("ffmpeg") + "ffprobe", "-v", "error", "-show_entries",
             "frame=pts_time", "-of", "csv=p=0", str(self.path)],
            capture_output=True, text=True, timeout=300, check=True,
        )  # fmt: skip
        times = [float(v) for v in probe.stdout.split() if v.strip() and v != "N/A"]
        raw = subprocess.run(
            [ffmpeg, "-v", "error", "-i", str(self.path), "-fps_mode", "passthrough",
             "-f", "rawvideo", "-pix_fmt", "rgb24", "-"],
            capture_output=True, timeout=300, check=True,
        ).stdout  # fmt: skip
        size = COLUMNS * ROWS * 3
        found = []
        for index in range(min(len(times), len(raw) // size)):
            data = raw[index * size : (index + 1) * size]
            cells = [(data[k], data[k + 1], data[k + 2]) for k in range(0, size, 3)]
            found.append((start + times[index], read_cells(cells)))
        return found

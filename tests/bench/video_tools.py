"""What the video benchmark (bench_video.py) needs: test videos whose frames carry their own
number, a web server for them that answers byte ranges, ffmpeg's decoding floor, a recording of
the screen's code strip, the strip read from Xvfb's framebuffer, the recorded frames decoded and
cut into plays and boundaries, and the names of a process tree's decoding threads.

The frame code. The top 128 rows of every 1920x1080 frame are a strip of 16 blocks of 120x64
pixels over 16 more: block ``i`` of the upper row is white where bit ``i`` of the frame's value
is 1 and black where it is 0, the block below it the opposite. The value is the frame's index
(bits 0-11) and the video's number (bits 12-15). A block is read as its mean colour (ffmpeg
averages each block to one pixel while recording; the framebuffer reader averages 15 points of
it) and a bit as the sign of upper minus lower: anything drawn evenly over both rows (a page
fading in or out) cancels, so a video is read from about a tenth of its opacity on, and the
complement rows make a misread unlikely. Below the strip: ffmpeg's testsrc2 with noise on
every frame, so every pixel changes and the bitrate is what camera footage needs.

No Qt is imported here: the measured display's CPU is read beside this process.
"""

from __future__ import annotations

import contextlib
import hashlib
import mmap
import os
import re
import resource
import signal
import struct
import subprocess
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from itertools import pairwise
from pathlib import Path
from typing import Any

from tests.bench.proctree import process_tree
from tests.bench.signage_content import require_ffmpeg as require_ffmpeg_for
from tests.bench.stats import percentile
from tests.support.pages import PageServer, Reply, Request

WIDTH, HEIGHT, FPS = 1920, 1080, 30
BLOCKS, BLOCK_W, ROW_H = 16, 120, 64
STRIP_H = 2 * ROW_H
FRAME_BITS = 12
RGB = tuple[int, int, int]


@dataclass(frozen=True)
class Codec:
    name: str  # h264, hevc, vp9
    number: int  # drawn into its frames (bits 12-15)
    suffix: str
    content_type: str
    video: tuple[str, ...]  # ffmpeg's encoder options
    audio: tuple[str, ...]


CODECS = {
    "h264": Codec(
        "h264", 1, "mp4", "video/mp4",
        ("-c:v", "libx264", "-preset", "veryfast", "-profile:v", "high"),
        ("-c:a", "aac", "-b:a", "128k"),
    ),
    "hevc": Codec(
        "hevc", 2, "mp4", "video/mp4",
        ("-c:v", "libx265", "-preset", "ultrafast", "-tag:v", "hvc1",
         "-x265-params", "log-level=error"),
        ("-c:a", "aac", "-b:a", "128k"),
    ),
    "vp9": Codec(
        "vp9", 3, "webm", "video/webm",
        ("-c:v", "libvpx-vp9", "-deadline", "realtime", "-cpu-used", "8", "-row-mt", "1"),
        ("-c:a", "libopus", "-b:a", "96k"),
    ),
}  # fmt: skip
NUMBERS = {codec.number: name for name, codec in CODECS.items()}


def require_ffmpeg() -> str:
    return require_ffmpeg_for("to make the video benchmark's videos and record the screen")


# -- the videos ------------------------------------------------------------------------------


def reap(process: subprocess.Popen[bytes], timeout: float) -> float:
    """Waits up to ``timeout`` s for ``process`` to end, else kills it (SIGKILL); the CPU
    seconds it used (0 when it was killed: its usage is then not read)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        pid, status, usage = os.wait4(process.pid, os.WNOHANG)
        if pid:
            process.returncode = os.waitstatus_to_exitcode(status)
            return usage.ru_utime + usage.ru_stime
        time.sleep(0.05)
    process.send_signal(signal.SIGKILL)
    process.wait()
    return 0.0


def stop_recording(process: subprocess.Popen[bytes], timeout: float) -> float:
    """Ends an ffmpeg recording (``q`` on its input, so the file is complete) and reaps it:
    the CPU seconds it used (:func:`reap`)."""
    with contextlib.suppress(OSError):
        assert process.stdin is not None
        process.stdin.write(b"q")
        process.stdin.close()
    return reap(process, timeout)


@dataclass(frozen=True)
class Video:
    codec: Codec
    path: Path
    sha256: str
    frames: int  # in the file (ffprobe)
    seconds: float
    bitrate_mbps: float

    @property
    def name(self) -> str:
        return self.path.name


def code_filter(number: int, seconds: float) -> str:
    """The strip (gray, then 4:2:0): block X/120 of the upper 64 rows white where that bit of
    N + number * 4096 is 1; the lower rows the opposite."""
    value = f"(N+{number * (1 << FRAME_BITS)})"
    bit = f"mod(floor({value}/pow(2,floor(X/{BLOCK_W}))),2)"
    return (
        f"color=c=black:s={WIDTH}x{STRIP_H}:r={FPS}:d={seconds:g},format=gray,"
        f"geq=lum='if(eq({bit},lt(Y,{ROW_H})),255,0)',format=yuv420p"
    )


def make_video(codec: Codec, path: Path, seconds: float, rate: str = "6M") -> None:
    """1920x1080 at 30 fps, ``rate`` (constrained), a key frame every 2 s, a 440 Hz tone."""
    samples = 960 if "libopus" in codec.audio else 1024  # the audio encoder's frame
    graph = (
        f"testsrc2=s={WIDTH}x{HEIGHT}:r={FPS}:d={seconds:g},noise=alls=12:allf=t[picture];"
        f"{code_filter(codec.number, seconds)}[code];"
        "[picture][code]overlay=0:0:shortest=1,format=yuv420p[out];"
        f"sine=f=440:d={seconds:g}:sample_rate=48000:samples_per_frame={samples}[sound]"
    )
    subprocess.run(
        [require_ffmpeg(), "-hide_banner", "-loglevel", "error", "-y",
         "-filter_complex", graph, "-map", "[out]", "-map", "[sound]",
         *codec.video, "-b:v", rate, "-maxrate", rate, "-bufsize", "12M", "-g", str(2 * FPS),
         *codec.audio,
         *(["-movflags", "+faststart"] if codec.suffix == "mp4" else []), str(path)],
        check=True,
        timeout=1800,
    )  # fmt: skip


def probe(path: Path) -> tuple[int, float]:
    """(video frames, seconds) of a file, counted by decoding it."""
    done = subprocess.run(
        [require_ffmpeg().removesuffix("ffmpeg") + "ffprobe", "-v", "error",
         "-select_streams", "v:0", "-count_frames",
         "-show_entries", "stream=nb_read_frames:format=duration", "-of", "default=nw=1",
         str(path)],
        capture_output=True, text=True, check=True, timeout=300,
    )  # fmt: skip
    found = dict(line.split("=", 1) for line in done.stdout.split() if "=" in line)
    return int(found["nb_read_frames"]), float(found["duration"])


def make_media(folder: Path, names: Iterable[str], seconds: float) -> dict[str, Video]:
    """One video per codec in ``folder``; a file already there is reused."""
    folder.mkdir(parents=True, exist_ok=True)
    videos: dict[str, Video] = {}
    for name in names:
        codec = CODECS[name]
        path = folder / f"{name}-1080p30-{seconds:g}s.{codec.suffix}"
        if not path.exists():
            print(f"making {path.name} (ffmpeg) ...", flush=True)
            started = time.monotonic()
            partial = path.with_name(f"partial-{path.name}")
            make_video(codec, partial, seconds)
            partial.rename(path)
            print(f"  {time.monotonic() - started:.0f} s", flush=True)
        frames, length = probe(path)
        digest = hashlib.sha256(path.read_bytes()).hexdigest()
        rate = path.stat().st_size * 8 / length / 1e6
        videos[name] = Video(codec, path, digest, frames, length, round(rate, 2))
    return videos


# -- serving them -----------------------------------------------------------------------------


class MediaSite:
    """On 127.0.0.1, as a web server serves files: ``/media/<name>`` with its type, its
    length, and byte ranges (206) when asked, as players streaming a video ask; and
    ``/solid/<rrggbb>.html``, a page of one colour. HEAD too."""

    def __init__(self, files: dict[str, tuple[bytes, str]]) -> None:
        def answer(request: Request) -> Reply | None:
            path = request.route
            name = path.rsplit("/", 1)[-1]
            if request.method not in ("GET", "HEAD"):
                return None
            if path.startswith("/media/") and name in files:
                data, kind = files[name]
            elif path.startswith("/solid/") and len(name) == len("rrggbb.html"):
                data, kind = solid_page(name[:6]), "text/html; charset=utf-8"
            else:
                return None
            start, end, status = 0, len(data) - 1, 200
            headers = {
                "Accept-Ranges": "bytes",
                "Cache-Control": "no-store" if kind.startswith("text") else "max-age=3600",
            }
            asked = re.fullmatch(
                r"bytes=(\d*)-(\d*)",
                next((v for k, v in request.headers.items() if k.lower() == "range"), ""),
            )
            if asked and path.startswith("/media/") and (asked[1] or asked[2]):
                if asked[1]:
                    start = int(asked[1])
                    end = min(int(asked[2]), end) if asked[2] else end
                else:
                    start = max(0, len(data) - int(asked[2]))
                if start > end:
                    return Reply(416, b"", kind, {"Content-Range": f"bytes */{len(data)}"})
                status = 206
                headers["Content-Range"] = f"bytes {start}-{end}/{len(data)}"
            return Reply(status, data[start : end + 1], kind, headers)

        self.pages = PageServer(keep_alive=True)
        self.pages.handle(answer)
        self.base = self.pages.url

    def stop(self) -> None:
        self.pages.close()


def solid_page(colour: str) -> bytes:
    return (
        "<!doctype html><html><head><meta charset='utf-8'><title>solid</title></head>"
        f"<body style='margin:0;height:100vh;background:#{colour}'></body></html>"
    ).encode()


# -- ffmpeg's floor --------------------------------------------------------------------------

BENCH = re.compile(r"bench: utime=([\d.]+)s stime=([\d.]+)s rtime=([\d.]+)s")


def decode_floor(path: Path, threads: int | None) -> dict[str, float]:
    """``ffmpeg -benchmark -i FILE -f null -``: CPU seconds (user + system) and wall seconds
    of decoding the whole file, video and sound, with ``threads`` decoding threads (None:
    ffmpeg's own choice, one per core and one more)."""
    thread_options = [] if threads is None else ["-threads", str(threads)]
    done = subprocess.run(
        [require_ffmpeg(), "-hide_banner", "-nostats", "-benchmark", *thread_options,
         "-i", str(path), "-f", "null", "-"],
        capture_output=True, text=True, check=True, timeout=600,
    )  # fmt: skip
    match = BENCH.search(done.stderr)
    if match is None:
        raise RuntimeError(f"ffmpeg -benchmark printed no figures: {done.stderr[-500:]}")
    user, system, wall = (float(value) for value in match.groups())
    return {"cpu_s": round(user + system, 3), "wall_s": round(wall, 3)}


# -- reading the code --------------------------------------------------------------------------


def luma(colour: Iterable[int]) -> float:
    r, g, b = colour
    return 0.299 * r + 0.587 * g + 0.114 * b


@dataclass
class Sample:
    """What one look at the strip showed."""

    kind: str  # video, black, page, dim, blend (not readable, not blank)
    value: int | None = None  # the code, for video
    contrast: float = 0.0  # the smallest |upper - lower| over the blocks, in levels
    also: int | None = None  # in a cross-fade between two videos: the other one's code

    @property
    def number(self) -> int | None:
        return None if self.value is None else self.value >> FRAME_BITS

    @property
    def frame(self) -> int | None:
        return None if self.value is None else self.value & ((1 << FRAME_BITS) - 1)


FULL_CONTRAST = 220.0  # white over black as it reaches the screen (about 253)
READABLE = 0.08  # the share of full contrast from which a block is read
BLACK = 24  # every block darker than this in every channel: a black frame


class CodeReader:
    """Reads the 32 block colours of a strip into a :class:`Sample`.

    A value is read directly when every block's upper and lower halves differ by at least
    ``READABLE`` of full contrast: the stronger of two videos in a cross-fade. In such a fade
    the two codes mix: a block where both have the same bit keeps full contrast, one where
    they differ is pulled toward zero from the stronger side. Knowing one value (the last one
    read directly), the other is that one with the pulled blocks flipped; it is taken (as
    ``also``) when the blocks fall cleanly into the two groups and it names a known video and
    frame, so a frame of the incoming video is read from about a tenth of its opacity on."""

    def __init__(self, frames: dict[int, int], page: RGB) -> None:
        self.frames = frames  # video number -> frames it has
        self.page = page
        self.last: int | None = None

    def known(self, value: int) -> bool:
        number, frame = value >> FRAME_BITS, value & ((1 << FRAME_BITS) - 1)
        return number in self.frames and frame < self.frames[number]

    def read(self, blocks: list[RGB]) -> Sample:
        upper, lower = blocks[:BLOCKS], blocks[BLOCKS:]
        diffs = [luma(a) - luma(b) for a, b in zip(upper, lower, strict=True)]
        contrast = min(abs(d) for d in diffs)
        other = self._fading(diffs)
        direct = None
        if contrast >= READABLE * FULL_CONTRAST:
            direct = sum(1 << i for i, d in enumerate(diffs) if d > 0)
            direct = direct if self.known(direct) else None
        if direct is not None:
            self.last = direct
            return Sample("video", direct, contrast, other if other != direct else None)
        if other is not None and self.last is not None:  # halfway through a cross-fade
            return Sample("video", other, contrast, self.last)
        if all(max(colour) < BLACK for colour in blocks):
            return Sample("black", None, contrast)
        page = luma(self.page)
        if all(abs(luma(colour) - page) < 12 for colour in blocks):
            return Sample("page", None, contrast)
        # Dimmed: even the brightest block is darker than half of what either side of a
        # fade would show there (a fade through black).
        if max(luma(colour) for colour in blocks) < 0.5 * min(page, FULL_CONTRAST):
            return Sample("dim", None, contrast)
        return Sample("blend", None, contrast)

    def _fading(self, diffs: list[float]) -> int | None:
        if self.last is None:
            return None
        signs = [1 if self.last >> i & 1 else -1 for i in range(BLOCKS)]
        # Against the strongest block's contrast: a block both codes agree on keeps it.
        strongest = max(abs(d) for d in diffs)
        if strongest < READABLE * FULL_CONTRAST:
            return None
        kept = [d * s / strongest for d, s in zip(diffs, signs, strict=True)]
        ordered = sorted(kept)
        # The widest gap between neighbouring values splits the pulled blocks from the kept.
        gap, split = max((b - a, i + 1) for i, (a, b) in enumerate(pairwise(ordered)))
        if gap < 0.1 or ordered[split] < 0.85 or ordered[split - 1] > 0.85:
            return None
        limit = ordered[split - 1]
        flipped = sum(1 << i for i, k in enumerate(kept) if k <= limit)
        value = self.last ^ flipped
        return value if self.known(value) else None


class BlankLog:
    """Black and dim reads of the screen, and their episodes (ms after the POST)."""

    def __init__(self) -> None:
        self.counts = {"black": 0, "dim": 0, "samples": 0}
        self.episodes: list[dict[str, Any]] = []
        self._open: dict[str, Any] | None = None

    def note(self, kind: str, seconds: float, phase: str) -> None:
        self.counts["samples"] += 1
        if kind not in ("black", "dim"):
            self._open = None
            return
        self.counts[kind] += 1
        ms = round(seconds * 1000)
        if self._open is None or self._open["kind"] != kind:
            self._open = {"kind": kind, "phase": phase, "from_ms": ms, "to_ms": ms}
            self.episodes.append(self._open)
        self._open["to_ms"] = ms

    def describe(self) -> str:
        return (
            ", ".join(
                f"{e['kind']} {e['from_ms']}-{e['to_ms']} ms ({e['phase']})" for e in self.episodes
            )
            or "none"
        )

    def summary(self) -> dict[str, Any]:
        return {
            "black_samples": self.counts["black"],
            "dim_samples": self.counts["dim"],
            "samples": self.counts["samples"],
            "blank_episodes": self.episodes[:20],
        }


def _thread_files(root: int, name: str) -> Iterator[tuple[int, int, str]]:
    """(pid, tid, the text of /proc/PID/task/TID/NAME) of every thread of the tree still there."""
    for pid, _ in process_tree(root):
        try:
            tasks = os.listdir(f"/proc/{pid}/task")
        except OSError:
            continue
        for task in tasks:
            try:
                yield pid, int(task), Path(f"/proc/{pid}/task/{task}/{name}").read_text()
            except OSError:
                continue


def decoder_threads(root: int) -> list[str]:
    """The names of the display tree's threads that look like FFmpeg's decoding threads."""
    names = (text.strip() for _, _, text in _thread_files(root, "comm"))
    return sorted(n for n in names if n.startswith("av:") or "Decod" in n or "Media" in n)


def thread_cpu(root: int) -> dict[tuple[int, int], tuple[str, float]]:
    """Every thread of the tree: (pid, tid) -> (its name, CPU seconds so far)."""
    ticks = os.sysconf("SC_CLK_TCK")
    found: dict[tuple[int, int], tuple[str, float]] = {}
    for pid, tid, stat in _thread_files(root, "stat"):
        name = stat[stat.index("(") + 1 : stat.rindex(")")]
        fields = stat[stat.rindex(")") + 2 :].split()
        found[pid, tid] = (name, (int(fields[11]) + int(fields[12])) / ticks)
    return found


def thread_shares(
    before: dict[tuple[int, int], tuple[str, float]],
    after: dict[tuple[int, int], tuple[str, float]],
    seconds: float,
) -> dict[str, float]:
    """CPU seconds per second between two :func:`thread_cpu` readings, by thread name with its
    last number dropped (llvmpipe-0 and llvmpipe-1 are llvmpipe-#), the largest first."""
    shares: dict[str, float] = {}
    for key, (name, used) in after.items():
        spent = used - before.get(key, (name, 0.0))[1]
        group = re.sub(r"\d+$", "#", name)
        shares[group] = shares.get(group, 0.0) + spent / seconds
    ordered = sorted(shares.items(), key=lambda item: -item[1])
    return {name: round(share, 3) for name, share in ordered if share >= 0.005}


ENDED = re.compile(r"video ended: (\d+) of (\d+) frames dropped \(([^)]*)\): (\S+)")


def by_role(shares: dict[str, float]) -> dict[str, float | None]:
    """FFmpeg's decoding threads (av:CODEC:df#, the native player's) and llvmpipe's (the
    software GL drawing the scene), CPU s/s, from :func:`thread_shares`."""
    if not shares:
        return {"decode_cpu_s_per_s": None, "gl_cpu_s_per_s": None}
    decoders = [v for name, v in shares.items() if name.startswith("av:")]
    gl = sum(v for name, v in shares.items() if name.startswith("llvmpipe"))
    return {  # no av: threads (the web engine's decoders have names of their own): None
        "decode_cpu_s_per_s": round(sum(decoders), 3) if decoders else None,
        "gl_cpu_s_per_s": round(gl, 3),
    }


def ended_lines(log: Path) -> list[dict[str, Any]]:
    """The display's ``video ended`` lines, in order, with the file's sha256 from its URL."""
    text = log.read_text(errors="replace")
    found = []
    for match in ENDED.finditer(text):
        digest = re.search(r"[0-9a-f]{64}", match[4])
        found.append(
            {
                "dropped": int(match[1]),
                "frames": int(match[2]),
                "shown_percent": round(100 - int(match[1]) / max(int(match[2]), 1) * 100, 2),
                "detail": match[3],
                "digest": digest[0] if digest else "",
                "text": match[0].split(": http")[0].split(": file")[0],
            }
        )
    return found


# -- recording the strip -----------------------------------------------------------------------


class StripRecorder:
    """``ffmpeg -f x11grab -framerate 60`` of the top 1920x128 rows of the screen, each frame
    averaged by ffmpeg to 16x2 pixels (one per block: ``scale`` with area averaging) and
    stored raw with its time. Runs until :meth:`stop`; its own CPU time is kept."""

    def __init__(self, x_display: str, path: Path, fps: int = 60) -> None:
        self.path = path
        self.fps = fps
        self.started = time.time()
        self.process = subprocess.Popen(
            [require_ffmpeg(), "-v", "error", "-y", "-f", "x11grab", "-framerate", str(fps),
             "-video_size", f"{WIDTH}x{STRIP_H}", "-draw_mouse", "0",
             "-i", f"{x_display}.0+0,0", "-vf", f"scale={BLOCKS}:2:flags=area",
             "-c:v", "rawvideo", "-pix_fmt", "rgb24", "-f", "nut", str(path)],
            stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
        )  # fmt: skip
        # Ahead of the display when it wakes (as root), so it misses fewer frames on two busy
        # cores; it is as much work either way.
        with contextlib.suppress(OSError):
            os.setpriority(os.PRIO_PROCESS, self.process.pid, -10)
        self.cpu_s = 0.0
        self.seconds = 0.0

    def stop(self) -> None:
        """Ends the recording (``q``, so the file is complete) and reaps ffmpeg."""
        self.cpu_s = stop_recording(self.process, 20)
        self.seconds = time.time() - self.started
        if self.process.stderr is not None:
            errors = self.process.stderr.read().decode(errors="replace").strip()
            self.process.stderr.close()
            if errors and not self.path.exists():
                raise RuntimeError(f"ffmpeg x11grab failed: {errors[-500:]}")

    def frames(self) -> list[tuple[float, list[RGB]]]:
        """(seconds into the recording, the 32 block colours) of every frame recorded."""
        ffprobe = require_ffmpeg().removesuffix("ffmpeg") + "ffprobe"
        probe = subprocess.run(
            [ffprobe, "-v", "error", "-show_entries", "frame=pts_time", "-of", "csv=p=0",
             str(self.path)],
            capture_output=True, text=True, timeout=120, check=True,
        )  # fmt: skip
        times = [float(value) for value in probe.stdout.split() if value.strip()]
        raw = subprocess.run(
            [require_ffmpeg(), "-v", "error", "-i", str(self.path), "-fps_mode", "passthrough",
             "-f", "rawvideo", "-pix_fmt", "rgb24", "-"],
            capture_output=True, timeout=120, check=True,
        ).stdout  # fmt: skip
        size = BLOCKS * 2 * 3
        frames = []
        for index, at in enumerate(range(0, len(raw) - size + 1, size)):
            data = raw[at : at + size]
            blocks = [(data[k], data[k + 1], data[k + 2]) for k in range(0, size, 3)]
            frames.append((times[index] if index < len(times) else float("nan"), blocks))
        return frames


def child_cpu() -> float:
    """CPU seconds of this process's reaped children (the ffmpeg floors)."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


# -- reading the strip from Xvfb's framebuffer -------------------------------------------------


class StripFramebuffer:
    """Xvfb's screen (-fbdir), mapped read-only: the 32 blocks, each the mean of 15 points,
    read without asking the X server anything."""

    def __init__(self, path: Path) -> None:
        with path.open("rb") as stream:
            self._map = mmap.mmap(stream.fileno(), 0, access=mmap.ACCESS_READ)
        fields = struct.unpack(">25I", self._map[:100])  # the XWD header
        header, width, bits, stride, colours = (
            fields[0],
            fields[4],
            fields[11],
            fields[12],
            fields[19],
        )
        if bits != 32 or width != WIDTH:
            raise SystemExit(f"Xvfb's framebuffer is {width} wide at {bits} bits, not {WIDTH}/32")
        offset = header + colours * 12
        self._format = "<I" if fields[7] == 0 else ">I"
        self._blocks: list[list[int]] = []
        for row in range(2):
            for block in range(BLOCKS):
                self._blocks.append([
                    offset + (row * ROW_H + y) * stride + (block * BLOCK_W + x) * 4
                    for x in (20, 40, 60, 80, 100)
                    for y in (16, 32, 48)
                ])  # fmt: skip

    def blocks(self) -> list[RGB]:
        found: list[RGB] = []
        for points in self._blocks:
            r = g = b = 0
            for at in points:
                (value,) = struct.unpack_from(self._format, self._map, at)
                r += (value >> 16) & 255
                g += (value >> 8) & 255
                b += value & 255
            n = len(points)
            found.append((r // n, g // n, b // n))
        return found

    def close(self) -> None:
        self._map.close()


# -- plays and boundaries in a recording ---------------------------------------------------------


@dataclass
class Play:
    """One video's run on the recorded screen."""

    number: int
    first_index: int  # in the recording
    last_index: int
    frames: set[int] = field(default_factory=set)
    first_at: float = 0.0
    last_at: float = 0.0

    def figures(self, source_frames: int) -> dict[str, Any]:
        seen = sorted(self.frames)
        missing = [n for n in range(source_frames) if n not in self.frames]
        runs: list[int] = []  # lengths of runs of consecutive missing frames
        for n in missing:
            if runs and n - 1 in self.frames:
                runs.append(1)
            elif runs:
                runs[-1] += 1
            else:
                runs.append(1)
        return {
            "video": NUMBERS.get(self.number, str(self.number)),
            "source_frames": source_frames,
            "frames_seen": len(seen),
            "shown_percent": round(len(seen) / source_frames * 100, 2) if source_frames else None,
            "first_frame_seen": seen[0] if seen else None,
            "last_frame_seen": seen[-1] if seen else None,
            "missing_frames": len(missing),
            "longest_missing_run": max(runs, default=0),
            "missing_examples": missing[:20],
            "seconds_on_screen": round(self.last_at - self.first_at, 2),
        }


def confirmed(samples: list[tuple[float, Sample]]) -> list[bool]:
    """Whether each sample read a value that a neighbouring video sample agrees with (the
    same video, within 3 frames): a lone misread does not start a play of its own."""
    values = [s.value if s.kind == "video" else None for _, s in samples]
    ok = []
    for index, value in enumerate(values):
        near = [values[k] for k in (index - 1, index + 1) if 0 <= k < len(values)]
        ok.append(
            value is not None
            and any(n is not None and n >> FRAME_BITS == value >> FRAME_BITS
                    and abs(n - value) <= 3 for n in near)
        )  # fmt: skip
    return ok


def plays(samples: list[tuple[float, Sample]]) -> list[Play]:
    """The runs of each video: a new one where the video's number changes or its frame goes
    back by more than a second (the same video again). Unconfirmed samples are left out."""
    found: list[Play] = []
    agreed = confirmed(samples)
    for index, (at, sample) in enumerate(samples):
        if not agreed[index] or sample.number is None or sample.frame is None:
            continue
        current = found[-1] if found else None
        if (
            current is None
            or current.number != sample.number
            or sample.frame < max(current.frames) - FPS
        ):
            current = Play(sample.number, index, index, first_at=at)
            found.append(current)
        current.frames.add(sample.frame)
        current.last_index, current.last_at = index, at
    # The weaker video of a cross-fade: to the nearest play of it, within two seconds.
    for index, (_, sample) in enumerate(samples):
        if sample.also is None:
            continue
        number, frame = sample.also >> FRAME_BITS, sample.also & ((1 << FRAME_BITS) - 1)

        def distance(play: Play, index: int = index) -> int:
            return max(play.first_index - index, index - play.last_index, 0)

        nearest = min((p for p in found if p.number == number), key=distance, default=None)
        if nearest is not None and distance(nearest) <= 2 * 60:
            nearest.frames.add(frame)
    return found


def boundaries(samples: list[tuple[float, Sample]], found: list[Play]) -> list[dict[str, Any]]:
    """Each change on the recorded screen between a play and what follows or precedes it (a
    page, or the next play): the samples in between by kind, how long the screen showed
    neither side readable, and black or dimmed samples within a second of the change."""
    # (kind, from, to, last index before, first index after)
    edges: list[tuple[str, str, str, int, int]] = []
    pages = [i for i, (_, s) in enumerate(samples) if s.kind == "page"]
    for k, play in enumerate(found):
        name = NUMBERS.get(play.number, str(play.number))
        before = found[k - 1].last_index if k else -1
        page_before = [i for i in pages if before < i < play.first_index]
        if page_before:
            edges.append(("page to video", "page", name, page_before[-1], play.first_index))
        elif k:
            previous = NUMBERS.get(found[k - 1].number, "?")
            edges.append(("video to video", previous, name, before, play.first_index))
        after = found[k + 1].first_index if k + 1 < len(found) else len(samples)
        page_after = [i for i in pages if play.last_index < i < after]
        if page_after:
            edges.append(("video to page", name, "page", play.last_index, page_after[0]))
    out = []
    for kind, side_a, side_b, start, end in edges:
        between = [s.kind for _, s in samples[start + 1 : end]]
        t0, t1 = samples[start][0], samples[end][0]
        near = [s.kind for t, s in samples if t0 - 1.0 <= t <= t1 + 1.0]
        out.append(
            {
                "kind": kind,
                "from": side_a,
                "to": side_b,
                "at_s": round(t0, 3),
                "samples_between": len(between),
                "between": {k: between.count(k) for k in sorted(set(between))},
                "unreadable_ms": round((t1 - t0) * 1000),
                "black_samples": near.count("black"),
                "dim_samples": near.count("dim"),
            }
        )
    return out


def sample_intervals(times: list[float]) -> dict[str, Any]:
    gaps = [(b - a) * 1000 for a, b in pairwise(times)]
    if not gaps:
        return {"fps": None, "interval_ms_p50": None, "interval_ms_max": None}
    return {
        "fps": round((len(times) - 1) / (times[-1] - times[0]), 1),
        "interval_ms_p50": round(percentile(gaps, 0.5), 1),
        "interval_ms_p99": round(percentile(gaps, 0.99), 1),
        "interval_ms_max": round(max(gaps), 1),
    }

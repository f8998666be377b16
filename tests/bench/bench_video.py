"""Video on the real display at 1920x1080 on Xvfb: dropped frames, and gaps between videos.

    .venv/bin/python -m tests.bench.bench_video [--seconds 20] [--boundaries 20] [--media DIR]

Needs ffmpeg to make its videos (``apt-get install -y ffmpeg``) and Xvfb (``bash
packaging/dev.sh setup``). The videos are made into ``--media`` (default: a temporary
folder; a file already there is reused, so a second run can skip the encoding).

It runs ``pdn display`` as it runs on a screen (fullscreen, its default configuration, on a
1920x1080 Xvfb), and schedules it with a CDS whose items carry sha256 hashes, so every video
plays from the display's cache, each for its own length, as a real schedule would.

(a) Dropped frames: a 30 fps, 1920x1080 WebM of ffmpeg's testsrc2 with noise on every frame
    (real motion, 6-7 Mbit/s) in VP9 and in VP8, and the same at 1280x720 as the baseline,
    each played once, with nothing reading the screen meanwhile. The figures are the page's
    own ``video.getVideoPlaybackQuality()``: the display's video page reports it with the
    video's end and the display logs it (``video ended: D of N frames dropped``), which is
    how an operator reads it too. The CPU used by the display's process tree (browser,
    render, GPU and zygote processes) and by Xvfb while each video plays is read from /proc.

(b) Gaps: two 3 s 1080p VP9 clips (a red or blue top half, testsrc2 below) alternate for
    ``--boundaries`` video-to-video boundaries while this process reads the X server's
    framebuffer (three full-width rows of the top half) as often as it can. A sample is video
    when it shows one clip's colour or, during the display's crossfade (0.3 s by default),
    the two mixed; the longest non-video stretch at each boundary (ms, from the last video
    sample before it to the first after it), the longest interval between samples there (the
    resolution: a gap shorter than that could be missed) and the black samples are counted.

Prints the figures and writes them to ``bench-results/bench_video.json``.
"""

from __future__ import annotations

import argparse
import hashlib
import http.client
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from itertools import pairwise
from pathlib import Path
from typing import Any

from PySide6.QtGui import QColor, QGuiApplication

from tests.bench.bench_api import ROOT, free_port
from tests.bench.stats import percentile
from tests.renderer.pixels import near
from tests.renderer.videoscreen import blend_of
from tests.tools import xvfb

WIDTH, HEIGHT = 1920, 1080
FPS = 30
CLIP_SECONDS = 3
RED, BLUE = (220, 20, 20), (20, 40, 220)
ROWS = (60, 270, 480)  # in the clips' solid top half
COLUMNS = (40, 480, 960, 1440, 1880)
ENDED = re.compile(r"video ended: (\d+) of (\d+) frames dropped \(([\d.]+) %\): (\S+)")
RGB = tuple[int, int, int]
GL_LIBRARIES = (
    "swrast_dri",
    "llvmpipe",
    "swiftshader",
    "libvk_swiftshader",
    "iris_dri",
    "radeonsi_dri",
    "v3d_dri",
    "vc4_dri",
    "libGLX_nvidia",
)


# -- the videos ------------------------------------------------------------------------------


def ffmpeg(*args: str) -> None:
    command = ["ffmpeg", "-hide_banner", "-loglevel", "error", "-y", *args]
    subprocess.run(command, check=True)


def motion_video(path: Path, codec: str, size: tuple[int, int], seconds: int) -> None:
    """testsrc2 with noise on every frame: every pixel changes, as in camera footage."""
    width, height = size
    rate = "6M" if width >= 1920 else "3M"
    encoder = ["-c:v", "libvpx-vp9", "-row-mt", "1"] if codec == "vp9" else ["-c:v", "libvpx"]
    ffmpeg(
        "-f", "lavfi", "-i", f"testsrc2=s={width}x{height}:r={FPS}:d={seconds}",
        "-vf", "noise=alls=10:allf=t,format=yuv420p",
        *encoder, "-b:v", rate, "-maxrate", rate, "-bufsize", rate,
        "-deadline", "realtime", "-cpu-used", "8", "-g", "60", "-an", str(path),
    )  # fmt: skip


def colour_clip(path: Path, rgb: RGB) -> None:
    """A solid colour on top, testsrc2 (moving) below, 1920x1080 VP9."""
    colour = "0x{:02X}{:02X}{:02X}".format(*rgb)
    half = f"{WIDTH}x{HEIGHT // 2}"
    ffmpeg(
        "-f", "lavfi", "-i", f"color=c={colour}:s={half}:r={FPS}:d={CLIP_SECONDS}",
        "-f", "lavfi", "-i", f"testsrc2=s={half}:r={FPS}:d={CLIP_SECONDS}",
        "-filter_complex", "[0][1]vstack,format=yuv420p",
        "-c:v", "libvpx-vp9", "-row-mt", "1", "-b:v", "4M", "-deadline", "realtime",
        "-cpu-used", "8", "-g", "30", "-an", str(path),
    )  # fmt: skip


def make_media(folder: Path, seconds: int) -> dict[str, Path]:
    folder.mkdir(parents=True, exist_ok=True)
    wanted: dict[str, Any] = {}
    for codec in ("vp9", "vp8"):
        for size in ((1920, 1080), (1280, 720)):
            name = f"{codec}-{size[1]}p-{seconds}s.webm"
            wanted[name] = partial(motion_video, codec=codec, size=size, seconds=seconds)
    wanted["red.webm"] = partial(colour_clip, rgb=RED)
    wanted["blue.webm"] = partial(colour_clip, rgb=BLUE)
    for name, make in wanted.items():
        path = folder / name
        if not path.exists():
            print(f"making {name} ...", flush=True)
            started = time.monotonic()
            partial_path = path.with_suffix(".part.webm")
            make(partial_path)
            partial_path.rename(path)
            print(f"  {path.stat().st_size / 1e6:.1f} MB in {time.monotonic() - started:.0f} s")
    return {name: folder / name for name in wanted}


def serve(folder: Path) -> tuple[ThreadingHTTPServer, str]:
    class Quiet(SimpleHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:
            return None

    server = ThreadingHTTPServer(("127.0.0.1", 0), partial(Quiet, directory=str(folder)))
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}"


def cds(name: str, base: str, files: list[Path]) -> str:
    items = "".join(
        f'<content-item content-type="video/webm"><requires-file><hashes><hash type="sha256">'
        f"{hashlib.sha256(path.read_bytes()).hexdigest()}</hash></hashes><sources>"
        f"<uri>{base}/{path.name}</uri></sources></requires-file></content-item>"
        for path in files
    )
    return (
        f'<content-set name="{name}"><constraints><scheduling-constraints>'
        '<playback order="inorder"/></scheduling-constraints></constraints>'
        f"{items}</content-set>"
    )


# -- the display and its processes -------------------------------------------------------------


class XDisplay:
    """``pdn display`` on an X server, as on a screen (its defaults, fullscreen)."""

    def __init__(self, x_display: str, data_dir: Path, log_path: Path) -> None:
        self.port = free_port()
        env = dict(os.environ, QT_QPA_PLATFORM="xcb", DISPLAY=x_display)
        env.setdefault("QTWEBENGINE_DISABLE_SANDBOX", "1")
        for name in ("WAYLAND_DISPLAY", "JOURNAL_STREAM"):
            env.pop(name, None)
        self.log_path = log_path
        self._log = log_path.open("wb")
        self.process = subprocess.Popen(
            [sys.executable, "-m", "server.cli", "display", "--port", str(self.port),
             "--data-dir", str(data_dir), "--name", "bench-video", "--timezone", "UTC"],
            stdout=self._log, stderr=subprocess.STDOUT, env=env, cwd=ROOT,
        )  # fmt: skip
        deadline = time.monotonic() + 60
        while True:
            try:
                if self.request("GET", "/")[0] == 200:
                    return
            except OSError:
                pass
            if self.process.poll() is not None or time.monotonic() > deadline:
                raise SystemExit(f"pdn display did not start; see {log_path}")
            time.sleep(0.1)

    def request(
        self, method: str, path: str, body: str | None = None, kind: str = "text/xml"
    ) -> tuple[int, Any]:
        connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
        try:
            headers = {"Content-Type": kind} if body is not None else {}
            connection.request(method, path, body=body, headers=headers)
            response = connection.getresponse()
            text = response.read()
            return response.status, json.loads(text) if text else None
        finally:
            connection.close()

    def schedule(self, document: str) -> None:
        status, answer = self.request("POST", "/schedule", document)
        if status >= 300:
            raise SystemExit(f"the display refused the schedule: {status} {answer}")

    def playing(self) -> str:
        record = self.request("GET", "/playback/")[1] or {}
        return str(record.get("content-item") or "")

    def ended_lines(self) -> list[tuple[int, int, str]]:
        """(dropped, frames, url) of every video the display logged as ended."""
        text = self.log_path.read_text(errors="replace")
        return [(int(m[1]), int(m[2]), m[4]) for m in ENDED.finditer(text)]

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self._log.close()


def process_tree(root: int) -> dict[int, float]:
    """``root`` and every process below it, each with its user + system CPU seconds."""
    parents: dict[int, int] = {}
    times: dict[int, float] = {}
    ticks = os.sysconf("SC_CLK_TCK")
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2 :].split()
        parents[int(entry)] = int(fields[1])
        times[int(entry)] = (int(fields[11]) + int(fields[12])) / ticks
    tree: dict[int, float] = {}
    for pid, seconds in times.items():
        walk = pid
        while walk > 1 and walk != root:
            walk = parents.get(walk, 0)
        if walk == root:
            tree[pid] = seconds
    return tree


def cpu_seconds(root: int) -> float:
    return sum(process_tree(root).values())


def libraries(root: int, names: tuple[str, ...]) -> list[str]:
    """Which of the shared libraries ``names`` the process tree of ``root`` has loaded."""
    found: set[str] = set()
    for pid in process_tree(root):
        try:
            maps = Path(f"/proc/{pid}/maps").read_text()
        except OSError:
            continue
        found.update(name for name in names if name in maps)
    return sorted(found)


def load_average() -> float:
    return os.getloadavg()[0]


@dataclass
class Played:
    name: str
    dropped: int
    frames: int
    display_cpu_percent: float  # of one core, while it played
    xvfb_cpu_percent: float
    load: float


def dropped_frames(
    display: XDisplay, xvfb_pid: int, base: str, files: list[Path], seconds: int
) -> list[Played]:
    """Each file once, nothing else reading the screen; the figures the display logged.

    The display logs a video's figures when it ends; one it had to cut short (its end came
    more than the engine's grace after its length: a badly starved machine) has none."""
    display.schedule(cds("bench-video", base, files))
    by_digest = {hashlib.sha256(path.read_bytes()).hexdigest(): path.name for path in files}
    results: list[Played] = []
    done: set[str] = set()
    deadline = time.monotonic() + 120 + len(files) * (seconds + 30)
    while len(done) < len(files) and time.monotonic() < deadline:
        name = display.playing().rsplit("/", 1)[-1]
        if name not in by_digest.values() or name in done:
            time.sleep(0.2)
            continue
        done.add(name)
        # From 1 s in to 1.5 s before the end: the steady state of decoding and drawing.
        time.sleep(1.0)
        start_cpu, start_x = cpu_seconds(display.process.pid), cpu_seconds(xvfb_pid)
        start = time.monotonic()
        time.sleep(max(1.0, seconds - 2.5))
        elapsed = time.monotonic() - start
        display_cpu = (cpu_seconds(display.process.pid) - start_cpu) / elapsed * 100
        xvfb_cpu = (cpu_seconds(xvfb_pid) - start_x) / elapsed * 100
        load = load_average()
        logged: tuple[int, int] | None = None
        until = time.monotonic() + 10
        while logged is None and time.monotonic() < until:
            for dropped, frames, url in display.ended_lines():
                if by_digest.get(url.rsplit("sha256-", 1)[-1].removesuffix(".webm")) == name:
                    logged = (dropped, frames)
            time.sleep(0.2)
        if logged is None:
            print(f"  {name}: no figures (cut short by the clock), load {load:.2f}")
            continue
        dropped, frames = logged
        results.append(Played(name, dropped, frames, display_cpu, xvfb_cpu, load))
        share = dropped / frames * 100 if frames else 0.0
        print(
            f"  {name}: {dropped} of {frames} frames dropped ({share:.1f} %), display "
            f"{display_cpu:.0f} % CPU, Xvfb {xvfb_cpu:.0f} %, load {load:.2f}",
            flush=True,
        )
    return results


# -- reading the X server's framebuffer ----------------------------------------------------------


def classify(rows: list[list[RGB]]) -> str:
    """What a sample shows, from the points of each row read. The rows are read one after
    the other, so the screen may change between them (as it tears on a screen without
    vsync): a crossfade is each row mixed in its own proportion."""
    points = [point for row in rows for point in row]
    if all(near(p, RED, 30) for p in points):
        return "red"
    if all(near(p, BLUE, 30) for p in points):
        return "blue"
    if all(max(p) < 40 for p in points):
        return "black"
    if all(
        all(near(p, RED, 30) for p in row)
        or all(near(p, BLUE, 30) for p in row)
        or blend_of(row, RED, BLUE)
        for row in rows
    ):
        return "blend"
    return "other"


def sample_screen(
    until: Callable[[list[tuple[float, str]]], bool], interval: float = 0.015
) -> list[tuple[float, str]]:
    """Read the X server's framebuffer (three rows) every ``interval`` s until ``until``
    says so of the samples taken."""
    screen = QGuiApplication.primaryScreen()
    samples: list[tuple[float, str]] = []
    next_at = time.monotonic()
    while not until(samples):
        rows: list[list[RGB]] = []
        for y in ROWS:
            image = screen.grabWindow(0, 0, y, WIDTH, 1).toImage()
            colours = [QColor(image.pixel(x, 0)) for x in COLUMNS]
            rows.append([(c.red(), c.green(), c.blue()) for c in colours])
        samples.append((time.monotonic(), classify(rows)))
        next_at += interval
        time.sleep(max(0.0, next_at - time.monotonic()))
        next_at = max(next_at, time.monotonic() - interval)
    return samples


def boundaries(samples: list[tuple[float, str]], wanted: int) -> dict[str, Any]:
    """Per boundary between runs of the two clips: the longest non-video stretch and the
    sampling resolution there; over the whole run: black and other samples."""
    pure = [(i, kind) for i, (_, kind) in enumerate(samples) if kind in ("red", "blue")]
    changes = [
        (pure[k][0], pure[k + 1][0]) for k in range(len(pure) - 1) if pure[k][1] != pure[k + 1][1]
    ][:wanted]
    gaps_ms: list[float] = []
    resolution_ms: list[float] = []
    for last_old, first_new in changes:
        window = samples[last_old : first_new + 1]
        # A stretch of non-video samples counts from the last video sample before it to the
        # first after it; consecutive video samples (no stretch) count 0.
        stretch = 0.0
        video_at = window[0][0]
        inside = False
        for at, kind in window:
            if kind in ("red", "blue", "blend"):
                if inside:
                    stretch = max(stretch, at - video_at)
                inside = False
                video_at = at
            else:
                inside = True
        gaps_ms.append(stretch * 1000)
        around = [at for at, _ in samples if window[0][0] - 0.1 <= at <= window[-1][0] + 0.1]
        resolution_ms.append(
            max((b - a) * 1000 for a, b in pairwise(around)) if len(around) > 1 else 0.0
        )
    intervals = [(b[0] - a[0]) * 1000 for a, b in pairwise(samples)]
    kinds = [kind for _, kind in samples]
    return {
        "boundaries": len(changes),
        "samples": len(samples),
        "sample_interval_ms_p50": round(percentile(intervals, 0.5), 1) if intervals else None,
        "sample_interval_ms_p95": round(percentile(intervals, 0.95), 1) if intervals else None,
        "non_video_ms_p50": round(percentile(gaps_ms, 0.5), 1) if gaps_ms else None,
        "non_video_ms_p95": round(percentile(gaps_ms, 0.95), 1) if gaps_ms else None,
        "non_video_ms_max": round(max(gaps_ms), 1) if gaps_ms else None,
        "resolution_ms_p50": round(percentile(resolution_ms, 0.5), 1) if resolution_ms else None,
        "resolution_ms_max": round(max(resolution_ms), 1) if resolution_ms else None,
        "black_samples": kinds.count("black"),
        "other_samples": kinds.count("other"),
        "blend_samples": kinds.count("blend"),
    }


class ChangeCounter:
    """Counts changes from one clip's colour to the other's in the samples, as they come."""

    def __init__(self) -> None:
        self.changes = 0
        self._last = ""
        self._read = 0

    def update(self, samples: list[tuple[float, str]]) -> int:
        for _, kind in samples[self._read :]:
            if kind in ("red", "blue") and kind != self._last:
                self.changes += bool(self._last)
                self._last = kind
        self._read = len(samples)
        return self.changes


def gaps(display: XDisplay, base: str, clips: list[Path], wanted: int) -> dict[str, Any]:
    display.schedule(cds("bench-video", base, clips))
    names = {path.name for path in clips}
    seen: set[str] = set()
    deadline = time.monotonic() + 120
    while seen != names:  # both clips cached and played once: every boundary is a colour change
        if time.monotonic() > deadline:
            raise SystemExit(f"the clips never both played; see {display.log_path}")
        playing = display.playing().rsplit("/", 1)[-1]
        if playing in names:
            seen.add(playing)
        time.sleep(0.1)
    load_before = load_average()
    counter = ChangeCounter()
    run_deadline = time.monotonic() + (wanted + 3) * (CLIP_SECONDS + 2) + 30
    # One boundary more than wanted: the last one counted is then followed by a whole run.
    samples = sample_screen(
        lambda taken: counter.update(taken) > wanted or time.monotonic() > run_deadline
    )
    result = boundaries(samples, wanted)
    result["load_before"] = round(load_before, 2)
    result["load_after"] = round(load_average(), 2)
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=int, default=20, help="length of the (a) videos")
    parser.add_argument("--boundaries", type=int, default=20)
    parser.add_argument("--media", type=Path, help="where the videos are made (and reused)")
    args = parser.parse_args()
    # A terminated benchmark still stops its display and its X server (the finally blocks).
    signal.signal(signal.SIGTERM, lambda number, frame: sys.exit(128 + number))
    if shutil.which("ffmpeg") is None:
        raise SystemExit("ffmpeg is missing: apt-get install -y ffmpeg")
    if shutil.which("Xvfb") is None:
        raise SystemExit("Xvfb is missing: bash packaging/dev.sh setup (or apt-get install xvfb)")
    work = Path(tempfile.mkdtemp(prefix="pdn-bench-video-"))
    media = make_media(args.media or work / "media", args.seconds)
    server, base = serve(next(iter(media.values())).parent)
    with xvfb(WIDTH, HEIGHT) as x_display:
        xvfb_pid = child_process("Xvfb")
        os.environ.update(QT_QPA_PLATFORM="xcb", DISPLAY=x_display)
        app = QGuiApplication(["bench-video"])  # reads the X server's framebuffer
        display = XDisplay(x_display, work / "data", work / "display.log")
        try:
            print(f"load average at the start: {load_average():.2f}")
            print("(a) dropped frames, 30 fps, each video once:")
            motion = [path for name, path in media.items() if name.startswith("vp")]
            played = dropped_frames(display, xvfb_pid, base, motion, args.seconds)
            drawing = libraries(display.process.pid, GL_LIBRARIES)
            print(f"  drawn with: {', '.join(drawing) or 'no GL library'}")
            print(f"(b) {args.boundaries} video-to-video boundaries, read from the X server:")
            clips = [media["red.webm"], media["blue.webm"]]
            gap = gaps(display, base, clips, args.boundaries)
            print(json.dumps(gap, indent=2))
        finally:
            display.stop()
            server.shutdown()
            del app
    results = {
        "screen": f"{WIDTH}x{HEIGHT} Xvfb",
        "cpus": os.cpu_count(),
        "drawn_with": drawing,
        "dropped_frames": [played_fields(p) for p in played],
        "boundaries": gap,
        "display_log": str(work / "display.log"),
    }
    out = ROOT / "bench-results" / "bench_video.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps(results, indent=2) + "\n")
    print(f"written to {out}")
    return 0


def child_process(name: str) -> int:
    """The pid of this process's child called ``name`` (the Xvfb tests.tools.xvfb started)."""
    for entry in os.listdir("/proc"):
        try:
            stat = Path(f"/proc/{entry}/stat").read_text() if entry.isdigit() else ""
        except OSError:
            continue
        if (
            stat
            and stat[stat.index("(") + 1 : stat.rindex(")")] == name
            and int(stat[stat.rindex(")") + 2 :].split()[1]) == os.getpid()
        ):
            return int(entry)
    raise SystemExit(f"no child process {name}")


def played_fields(played: Played) -> dict[str, Any]:
    return {
        "video": played.name,
        "frames": played.frames,
        "dropped": played.dropped,
        "dropped_percent": round(played.dropped / played.frames * 100, 2)
        if played.frames
        else None,
        "display_cpu_percent": round(played.display_cpu_percent),
        "xvfb_cpu_percent": round(played.xvfb_cpu_percent),
        "load": round(played.load, 2),
    }


if __name__ == "__main__":
    sys.exit(main())

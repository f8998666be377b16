"""Video on the real display at 1920x1080 on Xvfb, counted from the screen: native (QtMultimedia)
H.264, HEVC and VP9 against the old web engine's VP9, in one run.

    .venv/bin/python -m tests.bench.bench_video [--stages old,new] [--codecs h264,hevc,vp9]
        [--seconds 20] [--cycles 1] [--first-frames 3] [--old-commit 473fd45]
        [--new PATH | --new-commit COMMIT] [--media DIR] [--keep] [--no-ceiling]

Two stages: *old* is a copy of ``git archive 473fd45`` (main before native video: WebM only,
played by a ``<video>`` page in the web engine), which plays the VP9 file; *new* is this
checkout (``--new``), copied at the start (bench_memory.snapshot), or ``git archive`` of
``--new-commit``, which plays every codec. Each runs ``pdn display`` as on a screen (its
default configuration: fullscreen, a 0.3 s cross-fade, audio on; this machine has no audio
device) on an Xvfb of its own at 1920x1080. Media and pages come from a web server on
127.0.0.1 that answers byte ranges, as a real one does (video_tools.MediaSite).

The videos (made once by Debian's ffmpeg into ``--media``, default
``bench-results/bench_video_media``; a file there is reused): 1920x1080, 30 fps, ``--seconds``
long, about 6 Mbit/s (testsrc2 with noise on every frame, so every pixel moves), a key frame
every 2 s and a sound track: H.264 High + AAC in MP4, HEVC + AAC in MP4 (hvc1), VP9 + Opus in
WebM. Each frame carries its number and its video's in a strip of black and white blocks along
its top (video_tools: read from about a tenth of its opacity on, through a cross-fade too).

Figures, per stage and codec:

- **frames shown, from the screen**: the display plays a CDS in order (a solid-colour page
  for 5 s, then each video for its own length, the last one twice: the same video again, as in
  a loop of one video; the old stage: the page, VP9, VP9), sha256-hashed so the videos play from
  the display's cache, for ``--cycles`` loops, while ``ffmpeg -f x11grab -framerate 60``
  records the screen's top 128 rows (each block averaged to one pixel by ffmpeg). The share
  of the source's frames whose number was read in the recording (a mean over a video's plays),
  the first and last frame read, the longest run of frames never seen. A frame on screen for
  less than a recording interval (about 17 ms) can be missed: the recording's rate and longest
  interval are kept. Beside it: the display's own ``video ended: D of N frames dropped`` line.
  Target (H.264): >= 99 %.
- **CPU against the floor**: the CPU seconds per second of the display's process tree (from
  /proc: the Python process with Qt's render thread and QtMultimedia's decoder, and the web
  engine's processes) from 1.5 s after a video's start to 1 s before the next item's, over the
  CPU seconds per second of video of ``ffmpeg -benchmark -i FILE -f null -`` decoding the same
  file (its video and sound), run here before the displays, with ffmpeg's own thread count
  (one per core and one more: the native player's FFmpeg uses as many, see the decoding
  threads listed from /proc) and with one thread (beside). On this machine the display also
  draws in software (llvmpipe: the frame's upload and its conversion to RGB, each frame):
  that is in the display's figure and in no floor. The display's CPU on the still page, and
  the ratio of what playing adds to it, are beside; so are Xvfb's and the recorder's CPU,
  which are not in the figure. Target: <= 1.5x.
- **time to first frame**: ``--first-frames`` times per video, from a still page, ``POST
  /schedule`` of the video's URL (JSON, for 3 s, so it is cut while playing; fetched over HTTP
  as a request is), reading Xvfb's framebuffer (-fbdir, mapped) every 2 ms: *first frame* is
  the first read of the video's code (the fade-in at about a tenth of its opacity), *in full*
  the first at full contrast (the fade done); the number of the first frame read is kept (0:
  it starts at its start). The playback record's ``started`` is kept beside.
- **black frames at boundaries**: in the recording, around each page-to-video,
  video-to-video and video-to-page change (from 1 s before to 1 s after), the samples whose
  every block is near black (< 24 in every channel), and *dim* ones (the brightest block
  under half of either side's: a dip toward black); the time neither side was readable. And in
  the first-frame part, every 2 ms read from the POST until the page is back: black and dim
  reads, with when they came (ms after the POST). Target: 0 black.
- **the ceiling** (video_ceiling.py; ``--no-ceiling`` skips it): a bare Qt Quick scene, one
  ``MediaPlayer`` and ``VideoOutput`` and nothing else, playing each file once on an Xvfb of
  its own, recorded and read the same way: its frames shown and its CPU, what QtMultimedia
  with this machine's decoder and software GL reaches at best, beside the native columns.

Beside the figures, each video's CPU is split by thread name (FFmpeg's decoding threads,
llvmpipe's, Qt's render thread, ...; /proc), so the share of decoding and of drawing shows.

Prints a table (old VP9 web engine, then native per codec, the targets, pass or fail) and
writes ``bench-results/bench_video.json``; with ``--keep``, every recording and its decoded
samples stay in the run's folder. A default run (the ceiling, both stages, three codecs, 20 s
videos, the media already made) took 5.4 to 5.7 minutes on this 2-core machine; making the
media the first time takes about 5 more. Needs Xvfb and ffmpeg (apt-get install -y xvfb
ffmpeg). Network: 127.0.0.1 only.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from tests.bench.memory_tools import Display, XServer, while_alive, xvfb
from tests.bench.stage_tools import (
    CpuTrace,
    Stage,
    hex_of,
    new_stage,
    old_stage,
    started_at,
    xvfb_pid,
)
from tests.bench.stats import percentile
from tests.bench.video_ceiling import bare_player
from tests.bench.video_tools import (
    CODECS,
    FULL_CONTRAST,
    RGB,
    BlankLog,
    CodeReader,
    MediaSite,
    StripFramebuffer,
    StripRecorder,
    Video,
    boundaries,
    by_role,
    decode_floor,
    decoder_threads,
    ended_lines,
    luma,
    make_media,
    plays,
    require_ffmpeg,
    sample_intervals,
    thread_cpu,
    thread_shares,
)
from tests.support.waiting import wait_until

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "bench-results"
OLD_COMMIT = "473fd45"
PAGE: RGB = (200, 120, 40)  # the loop's page
BASE: RGB = (40, 110, 170)  # the page the first-frame part starts from
PAGE_SECONDS = 5.0
REQUEST_SECONDS = 3.0
SHOWN_TARGET = 99.0  # % of frames, H.264
CPU_RATIO_TARGET = 1.5


@dataclass
class Bench:
    args: argparse.Namespace
    workdir: Path
    videos: dict[str, Video]
    site: MediaSite

    def url(self, video: Video) -> str:
        return f"{self.site.base}/media/{video.name}"

    def page(self, colour: RGB, tag: str) -> str:
        return f"{self.site.base}/solid/{hex_of(colour)}.html?n={tag}"


def serve(videos: dict[str, Video]) -> MediaSite:
    """The videos (``/media/<name>``, with their content type, ranges answered) and pages."""
    return MediaSite(
        {
            video.name: (video.path.read_bytes(), video.codec.content_type)
            for video in videos.values()
        }
    )


def loop_cds(bench: Bench, page: str, videos: list[Video]) -> bytes:
    """In order: the page for PAGE_SECONDS, then each video for its own length (no duration),
    from the display's cache (sha256)."""
    items = [
        f'<content-item content-type="text/html"><constraints><scheduling-constraints>'
        f"<preferred-duration>{PAGE_SECONDS:g} seconds</preferred-duration>"
        f"</scheduling-constraints></constraints><requires-file><sources><uri>{page}</uri>"
        "</sources></requires-file></content-item>"
    ]
    items += [
        f'<content-item content-type="{video.codec.content_type}"><requires-file><hashes>'
        f'<hash type="sha256">{video.sha256}</hash></hashes><sources>'
        f"<uri>{bench.url(video)}</uri></sources></requires-file></content-item>"
        for video in videos
    ]
    return (
        '<content-set name="bench-video"><constraints><scheduling-constraints>'
        '<playback order="inorder"/></scheduling-constraints></constraints>'
        f"{''.join(items)}</content-set>"
    ).encode()


def base_cds(page: str) -> bytes:
    return (
        '<content-set name="bench-video"><content-item content-type="text/html"><constraints>'
        "<scheduling-constraints><preferred-duration>3600 seconds</preferred-duration>"
        "</scheduling-constraints></constraints><requires-file><sources>"
        f"<uri>{page}</uri></sources></requires-file></content-item></content-set>"
    ).encode()


# -- the display -------------------------------------------------------------------------------


@contextmanager
def running(bench: Bench, stage: Stage) -> Iterator[tuple[XServer, Display]]:
    with xvfb(1920, 1080) as server:
        # A display that never answers is stopped by wait_ready.
        display = Display(server, stage.tree, bench.workdir, "", stage.name)
        print(
            f"[{stage.name}] pdn display of {stage.source} ({stage.commit}), pid {display.pid}",
            flush=True,
        )
        try:
            yield server, display
        finally:
            display.stop()


def wait_for(
    what: str, display: Display, test: Callable[[], bool], timeout: float, poll: float = 0.1
) -> None:
    wait_until(while_alive(display, test), timeout, what, poll)


def find_key(data: Any, key: str) -> Any:
    """The first value of ``key`` anywhere in nested dicts (health's video description)."""
    if isinstance(data, dict):
        if isinstance(data.get(key), dict):
            return data[key]
        for value in data.values():
            found = find_key(value, key)
            if found is not None:
                return found
    return None


# -- frames shown, CPU, boundaries: the loop, recorded --------------------------------------------


def loop_part(
    bench: Bench, server: XServer, display: Display, trace: CpuTrace, videos: list[Video]
) -> dict[str, Any]:
    args = bench.args
    page = bench.page(PAGE, "loop")
    display.schedule_cds(loop_cds(bench, page, videos))
    distinct = len({video.sha256 for video in videos})

    def cached() -> bool:
        cache = display.health().get("cache") or {}
        return int(cache.get("ready") or 0) >= distinct

    wait_for("the videos in the display's cache", display, cached, 300, 0.5)
    wait_for(
        "the loop's page", display, lambda: display.playback().get("content-item") == page, 120
    )
    logged_before = len(ended_lines(display.log_path))  # videos that ended before the recording
    recorder = StripRecorder(
        server.display, bench.workdir / f"loop-{len(os.listdir(bench.workdir))}.nut"
    )
    records: list[dict[str, Any]] = []
    urls = {bench.url(video) for video in videos}
    cycles = 0
    deadline = (
        time.monotonic() + args.cycles * (PAGE_SECONDS + sum(v.seconds + 10 for v in videos)) + 120
    )
    threads_at: tuple[float, dict[tuple[int, int], tuple[str, float]]] | None = None
    seen: dict[tuple[int, int], tuple[str, float]] = {}
    try:
        while cycles < args.cycles:
            record = display.playback()
            item = str(record.get("content-item") or "")
            # Every thread seen so far, a thread that has ended with its last figure.
            seen.update(thread_cpu(display.pid))
            latest = (time.time(), dict(seen))
            if not records or records[-1]["sequence"] != record.get("sequence"):
                if threads_at is not None and records and latest[0] > threads_at[0] + 1:
                    # The video that just ended: CPU by thread, from 0.6 s in to its end.
                    seconds = latest[0] - threads_at[0]
                    records[-1]["thread_cpu"] = thread_shares(threads_at[1], latest[1], seconds)
                threads_at = None
                records.append(
                    {
                        "item": item,
                        "sequence": record.get("sequence"),
                        "started": started_at(record),
                    }
                )
                if item == page and any(r["item"] in urls for r in records):
                    cycles += 1
            elif (
                item in urls
                and time.time() - records[-1]["started"] > 0.6  # before the CPU window
                and "health" not in records[-1]
            ):
                records[-1]["health"] = find_key(display.health(), "video")
                records[-1]["threads"] = decoder_threads(display.pid)
                seen.update(thread_cpu(display.pid))
                threads_at = (time.time(), dict(seen))
            if time.monotonic() > deadline or not display.alive():
                raise RuntimeError(f"the loop did not come round; see {display.log_path}")
            time.sleep(0.25)
        time.sleep(1.5)  # the fade to the page, in full
    finally:
        recorder.stop()
    frames = recorder.frames()
    if not args.keep:
        recorder.path.unlink()
    by_number = {video.codec.number: video.frames for video in videos}
    reader = CodeReader(by_number, PAGE)
    samples = [(at, reader.read(blocks)) for at, blocks in frames]
    if args.keep:  # every recorded frame: its time, what it showed, its blocks
        with recorder.path.with_suffix(".samples.jsonl").open("w") as out:
            for (at, sample), (_, blocks) in zip(samples, frames, strict=True):
                line = [round(at, 4), sample.kind, sample.value, sample.also, blocks]
                out.write(json.dumps(line) + "\n")
    found = plays(samples)
    played = [r for r in records if r["item"] in urls]
    results: list[dict[str, Any]] = []
    ended = ended_lines(display.log_path)[logged_before:]
    unclaimed = list(found)
    for k, record in enumerate(played):
        video = next(v for v in videos if bench.url(v) == record["item"])
        later = [r for r in records if r["started"] > record["started"]]
        end = later[0]["started"] if later else time.time()
        start = record["started"] + 1.5
        tree, xserver = trace.between(start, end - 1.0)
        seconds = max(0.1, end - 1.0 - start)
        # The plays on the recording in their order: the next one of this video.
        play = next((p for p in unclaimed if p.number == video.codec.number), None)
        if play is not None:
            unclaimed = unclaimed[unclaimed.index(play) + 1 :]
        row: dict[str, Any] = {
            "video": video.codec.name,
            "file": video.name,
            **(play.figures(video.frames) if play else {"frames_seen": 0, "shown_percent": 0.0}),
            "cpu_window_s": round(seconds, 1),
            "cpu_s_per_s": round(tree / seconds, 3),
            "xvfb_cpu_s_per_s": round(xserver / seconds, 3),
            "health": record.get("health"),
            "decoder_threads": record.get("threads"),
            "thread_cpu_s_per_s": record.get("thread_cpu"),
            **by_role(record.get("thread_cpu") or {}),
        }
        logged = [line for line in ended if line["digest"] == video.sha256]
        same_before = sum(1 for r in played[:k] if r["item"] == record["item"])
        if same_before < len(logged):
            row["log"] = logged[same_before]
        results.append(row)
        print(
            f"  {video.codec.name}: {row.get('frames_seen')} of {video.frames} frames seen on the "
            f"screen ({row.get('shown_percent')} %), first {row.get('first_frame_seen')}, last "
            f"{row.get('last_frame_seen')}, longest run missing {row.get('longest_missing_run')}"
            f"; the display's log: {row.get('log', {}).get('text', 'none')}; tree "
            f"{row['cpu_s_per_s']:.2f} CPU s/s, Xvfb {row['xvfb_cpu_s_per_s']:.2f}; decoding "
            f"threads {' '.join(sorted(set(row['decoder_threads'] or []))) or 'none seen'}",
            flush=True,
        )
        top = list((row["thread_cpu_s_per_s"] or {}).items())[:6]
        print(f"    CPU s/s by thread: {', '.join(f'{n} {v:.2f}' for n, v in top)}", flush=True)
    pages = [r for r in records if r["item"] == page]
    page_cpu = []
    for record in pages:
        later = [r for r in records if r["started"] > record["started"]]
        if later:
            start, end = record["started"] + 1.5, later[0]["started"] - 0.5
            if end - start >= 1:
                page_cpu.append(trace.between(start, end)[0] / (end - start))
    edges = boundaries(samples, found)
    kinds = [s.kind for _, s in samples]
    recorded = sample_intervals([at for at, _ in samples])
    print(
        f"  recorded {len(samples)} frames at {recorded['fps']} fps (longest interval "
        f"{recorded['interval_ms_max']} ms; ffmpeg used "
        f"{recorder.cpu_s / max(recorder.seconds, 1):.2f} CPU s/s); {len(edges)} boundaries, "
        f"black samples {kinds.count('black')}, dim {kinds.count('dim')}",
        flush=True,
    )
    for edge in edges:
        print(
            f"    {edge['from']} to {edge['to']}: neither readable for {edge['unreadable_ms']} "
            f"ms, black samples {edge['black_samples']}, dim {edge['dim_samples']}",
            flush=True,
        )
    return {
        "videos": results,
        "page_cpu_s_per_s": round(percentile(page_cpu, 0.5), 3) if page_cpu else None,
        "boundaries": edges,
        "recording": {
            **recorded,
            "frames": len(samples),
            "seconds": round(recorder.seconds, 1),
            "recorder_cpu_s_per_s": round(recorder.cpu_s / max(recorder.seconds, 1), 3),
            "kinds": {kind: kinds.count(kind) for kind in sorted(set(kinds))},
        },
        "records": records,
    }


# -- time to first frame -------------------------------------------------------------------------


def first_frame_part(
    bench: Bench, server: XServer, display: Display, videos: list[Video]
) -> dict[str, Any]:
    """From the still BASE page, POST /schedule of each video's URL, ``--first-frames`` times
    each; the framebuffer read every 2 ms."""
    base = bench.page(BASE, "base")
    display.schedule_cds(base_cds(base))
    framebuffer = StripFramebuffer(server.framebuffer)
    base_luma = luma(BASE)

    def on_base() -> bool:
        return all(abs(luma(c) - base_luma) < 12 for c in framebuffer.blocks())

    results: dict[str, Any] = {}
    try:
        wait_for(
            "the base page", display, lambda: display.playback().get("content-item") == base, 120
        )
        wait_for("the base page on screen", display, on_base, 30)
        for video in videos:
            reader = CodeReader({video.codec.number: video.frames}, BASE)
            firsts: list[float] = []
            fulls: list[float] = []
            records: list[float] = []
            first_numbers: list[int | None] = []
            missed = 0
            blank = BlankLog()
            for _ in range(bench.args.first_frames):
                time.sleep(1.0)
                reader.last = None
                sent, sent_wall = time.monotonic(), time.time()
                body = json.dumps(
                    {
                        "content-item": bench.url(video),
                        "preferred-duration": f"{REQUEST_SECONDS:g} s",
                    }
                )
                status, answer = display.request(
                    "POST", "/schedule", body.encode(), "application/json"
                )
                if status != 202:
                    raise RuntimeError(f"POST /schedule: {status} {answer}")
                first = full = None
                number = None
                while time.monotonic() < sent + 15 and full is None:
                    sample = reader.read(framebuffer.blocks())
                    now = time.monotonic()
                    blank.note(sample.kind, now - sent, "after the POST")
                    if sample.kind == "video" and first is None:
                        first, number = now - sent, sample.frame
                    if first is not None and sample.contrast >= 0.8 * FULL_CONTRAST:
                        full = now - sent
                    time.sleep(0.002)
                if first is None or full is None:
                    missed += 1
                else:
                    firsts.append(first * 1000)
                    fulls.append(full * 1000)
                    first_numbers.append(number)
                record = display.playback()
                if record.get("content-item") == bench.url(video):
                    records.append((started_at(record) - sent_wall) * 1000)
                # Back to the base page; black or dim samples on the way are counted too.
                until = time.monotonic() + REQUEST_SECONDS + 15
                while time.monotonic() < until:
                    blocks = framebuffer.blocks()
                    blank.note(reader.read(blocks).kind, time.monotonic() - sent, "going back")
                    if all(abs(luma(c) - base_luma) < 12 for c in blocks):
                        break
                    time.sleep(0.002)
            results[video.codec.name] = {
                "tries": bench.args.first_frames,
                "missed": missed,
                "first_frame_ms_p50": round(percentile(firsts, 0.5)) if firsts else None,
                "first_frame_ms_max": round(max(firsts)) if firsts else None,
                "in_full_ms_p50": round(percentile(fulls, 0.5)) if fulls else None,
                "record_started_ms_p50": round(percentile(records, 0.5)) if records else None,
                "first_frame_numbers": first_numbers,
                "first_frame_ms": [round(value) for value in firsts],
                **blank.summary(),
            }
            print(
                f"  {video.codec.name}: POST /schedule to first frame "
                f"{results[video.codec.name]['first_frame_ms']} ms (in full "
                f"{[round(value) for value in fulls]} ms), first frame numbers {first_numbers}, "
                f"the record's start {[round(value) for value in records]} ms; black or dim: "
                f"{blank.describe()}",
                flush=True,
            )
    finally:
        framebuffer.close()
    return results


# -- one stage -----------------------------------------------------------------------------------


def stage_session(bench: Bench, stage: Stage, names: list[str]) -> dict[str, Any]:
    """One display: the recorded loop, then the first frames."""
    videos = [bench.videos[name] for name in names]
    loop = [*videos, videos[-1]]  # the last one twice: the same video again, as a loop of one
    result: dict[str, Any] = {
        "commit": stage.commit,
        "source": stage.source,
        "load_average_start": [round(value, 2) for value in os.getloadavg()],
    }
    with running(bench, stage) as (server, display):
        trace = CpuTrace(display.pid, xvfb_pid(server))
        trace.start()
        try:
            print(f"  the loop: page, {', '.join(v.codec.name for v in loop)}", flush=True)
            result["loop"] = loop_part(bench, server, display, trace, loop)
            print("  time to first frame:", flush=True)
            result["first_frame"] = first_frame_part(bench, server, display, videos)
        finally:
            trace.stop()
        result["display_log"] = str(display.log_path)
    result["load_average_end"] = [round(value, 2) for value in os.getloadavg()]
    return result


# -- the floor and the table ---------------------------------------------------------------------


def floors(videos: dict[str, Video]) -> dict[str, Any]:
    """ffmpeg decoding each file, with its own thread count and with one thread: CPU seconds
    per second of video."""
    found: dict[str, Any] = {}
    for name, video in videos.items():
        auto, single = decode_floor(video.path, None), decode_floor(video.path, 1)
        found[name] = {
            "threads_auto": {**auto, "cpu_s_per_s": round(auto["cpu_s"] / video.seconds, 3)},
            "threads_1": {**single, "cpu_s_per_s": round(single["cpu_s"] / video.seconds, 3)},
        }
        print(
            f"  {name}: {found[name]['threads_auto']['cpu_s_per_s']:.3f} CPU s per s of video "
            f"(ffmpeg's threads), {found[name]['threads_1']['cpu_s_per_s']:.3f} (one thread)",
            flush=True,
        )
    return found


@dataclass(frozen=True)
class Column:
    label: str
    stage: str
    codec: str


def column_figures(results: dict[str, Any], column: Column) -> dict[str, Any]:
    """The figures of one column (a stage's video, the first play of it in the loop)."""
    stage = results["stages"].get(column.stage) or {}
    loop = stage.get("loop") or {}
    rows = [r for r in loop.get("videos", []) if r["video"] == column.codec]
    row = rows[0] if rows else {}

    def mean(key: str, within: str | None = None) -> float | None:
        """Over every play of the video (``--cycles``, or the old stage's two)."""
        values = [(r.get(within) or {}).get(key) if within else r.get(key) for r in rows]
        numbers = [float(v) for v in values if isinstance(v, int | float)]
        return round(sum(numbers) / len(numbers), 3) if numbers else None

    floor = (results.get("floors") or {}).get(column.codec, {})
    auto = floor.get("threads_auto", {}).get("cpu_s_per_s")
    first = (stage.get("first_frame") or {}).get(column.codec, {})
    edges = [e for e in loop.get("boundaries", []) if column.codec in (e["from"], e["to"])]
    health = row.get("health") or {}
    bare = (results.get("ceiling") or {}).get(column.codec, {}) if column.stage == "new" else {}
    cpu, page = mean("cpu_s_per_s"), loop.get("page_cpu_s_per_s")
    return {
        "shown_percent": mean("shown_percent"),
        "log_shown_percent": mean("shown_percent", "log"),
        "longest_missing_run": max((r.get("longest_missing_run") or 0 for r in rows), default=None),
        "cpu_s_per_s": cpu,
        "floor_cpu_s_per_s": auto,
        "floor_1_thread_cpu_s_per_s": floor.get("threads_1", {}).get("cpu_s_per_s"),
        "cpu_over_floor": round(cpu / auto, 2) if cpu and auto else None,
        "decode_cpu_s_per_s": mean("decode_cpu_s_per_s"),
        "gl_cpu_s_per_s": mean("gl_cpu_s_per_s"),
        "decode_over_floor": (
            round(decode / auto, 2) if (decode := mean("decode_cpu_s_per_s")) and auto else None
        ),
        "xvfb_cpu_s_per_s": mean("xvfb_cpu_s_per_s"),
        "page_cpu_s_per_s": page,
        "above_page_over_floor": round((cpu - page) / auto, 2) if cpu and page and auto else None,
        "first_frame_ms": first.get("first_frame_ms_p50"),
        "in_full_ms": first.get("in_full_ms_p50"),
        "first_frame_number": max(first.get("first_frame_numbers") or [None], key=lambda n: n or 0),
        "boundaries": len(edges),
        "black_samples": sum(e["black_samples"] for e in edges) if edges else None,
        "dim_samples": sum(e["dim_samples"] for e in edges) if edges else None,
        "unreadable_ms_max": max((e["unreadable_ms"] for e in edges), default=None),
        "first_frame_black": first.get("black_samples"),
        "bare_shown_percent": bare.get("shown_percent"),
        "bare_cpu_s_per_s": bare.get("cpu_s_per_s"),
        "decoding": health.get("decoding") or ("web engine" if column.stage == "old" else None),
    }


ROWS: list[tuple[str, str, int, str | None]] = [  # label, figure, digits, target
    ("frames shown, from the screen, %", "shown_percent", 2, ">= 99 (H.264)"),
    ("frames shown, the display's log, %", "log_shown_percent", 2, None),
    ("longest run of frames missing", "longest_missing_run", 0, None),
    ("  bare QML player: frames shown, %", "bare_shown_percent", 2, None),
    ("display tree CPU s/s while playing", "cpu_s_per_s", 3, None),
    ("  floor: ffmpeg decoding, CPU s/s", "floor_cpu_s_per_s", 3, None),
    ("  floor with one thread, CPU s/s", "floor_1_thread_cpu_s_per_s", 3, None),
    ("display CPU / floor", "cpu_over_floor", 2, "<= 1.5"),
    ("  of it FFmpeg's decoding threads", "decode_cpu_s_per_s", 3, None),
    ("  of it llvmpipe (software GL)", "gl_cpu_s_per_s", 3, None),
    ("  decoding threads / floor", "decode_over_floor", 2, None),
    ("  bare QML player: CPU s/s", "bare_cpu_s_per_s", 3, None),
    ("  Xvfb CPU s/s while playing", "xvfb_cpu_s_per_s", 3, None),
    ("  display CPU s/s on the still page", "page_cpu_s_per_s", 3, None),
    ("  (display CPU - still page) / floor", "above_page_over_floor", 2, None),
    ("POST to first frame, ms (p50)", "first_frame_ms", 0, None),
    ("POST to video in full, ms (p50)", "in_full_ms", 0, None),
    ("highest first frame number read", "first_frame_number", 0, None),
    ("boundaries recorded", "boundaries", 0, None),
    ("black samples at boundaries", "black_samples", 0, "== 0"),
    ("dim samples at boundaries", "dim_samples", 0, None),
    ("black samples, first-frame part", "first_frame_black", 0, "== 0"),
    ("longest unreadable stretch, ms", "unreadable_ms_max", 0, None),
]


def passes(figure: str, column: Column, value: Any) -> bool | None:
    if not isinstance(value, int | float):
        return None
    if figure == "shown_percent":
        return value >= SHOWN_TARGET if column.codec == "h264" else None
    if figure == "cpu_over_floor":
        return value <= CPU_RATIO_TARGET
    if figure in ("black_samples", "first_frame_black"):
        return value == 0
    return None


def table(results: dict[str, Any], columns: list[Column]) -> list[dict[str, Any]]:
    figures = {column.label: column_figures(results, column) for column in columns}
    print(f"\n{'':<38}" + "".join(f"{c.label:>13}" for c in columns) + "  target    pass")
    out = []
    for label, figure, digits, target in ROWS:
        values = {c.label: figures[c.label][figure] for c in columns}
        cells = [
            "-" if not isinstance(v, int | float) else f"{v:.{digits}f}" for v in values.values()
        ]
        verdicts = {c.label: passes(figure, c, values[c.label]) for c in columns}
        verdict = " ".join(
            f"{label_of}:{'PASS' if ok else 'FAIL'}"
            for label_of, ok in verdicts.items()
            if ok is not None
        )
        print(
            f"{label:<38}"
            + "".join(f"{cell:>13}" for cell in cells)
            + f"  {target or '':<9} {verdict}"
        )
        out.append({"metric": label, "values": values, "target": target, "pass": verdicts})
    decoding = {c.label: figures[c.label]["decoding"] for c in columns}
    print(f"{'decoded in':<38}" + "".join(f"{d or '-'!s:>13}" for d in decoding.values()))
    out.append({"metric": "decoded in", "values": decoding, "target": None, "pass": None})
    return out


# -- main ------------------------------------------------------------------------------------------


def arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    add = parser.add_argument
    add("--stages", default="old,new", help="which stages, comma-separated: old, new")
    add("--codecs", default="h264,hevc,vp9", help="the native stage's codecs (old: vp9 only)")
    add("--seconds", type=float, default=20.0, help="length of each video")
    add("--cycles", type=int, default=1, help="loops of the recorded CDS per stage")
    add("--first-frames", type=int, default=3, help="POST /schedule per video, first frame")
    add("--old-commit", default=OLD_COMMIT, help="the old stage's commit (git archive)")
    add("--new", type=Path, default=ROOT, help="the new stage's checkout (copied at the start)")
    add("--new-commit", help="the new stage from this commit (git archive) instead of --new")
    add("--media", type=Path, default=RESULTS / "bench_video_media")
    add("--output", type=Path, default=RESULTS / "bench_video.json")
    add("--keep", action="store_true", help="keep the recordings and their decoded samples")
    add("--no-ceiling", action="store_true", help="skip the bare QML player (video_ceiling)")
    return parser.parse_args()


def main() -> int:
    args = arguments()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # finally clauses still run
    names = [name for name in args.codecs.split(",") if name]
    stage_names = [name for name in args.stages.split(",") if name]
    if set(names) - set(CODECS) or set(stage_names) - {"old", "new"} or not stage_names:
        raise SystemExit(f"--codecs is a list of {', '.join(CODECS)}; --stages of old, new")
    require_ffmpeg()
    begun = time.monotonic()
    workdir = Path(tempfile.mkdtemp(prefix="pdn-bench-video-"))
    wanted = sorted({*names, *(["vp9"] if "old" in stage_names else [])}, key=list(CODECS).index)
    videos = make_media(args.media, wanted, args.seconds)
    for video in videos.values():
        print(f"{video.name}: {video.frames} frames, {video.bitrate_mbps} Mbit/s", flush=True)
    results: dict[str, Any] = {
        "screen": "1920x1080 Xvfb",
        "cpus": os.cpu_count(),
        "load_average_start": [round(value, 2) for value in os.getloadavg()],
        "options": {key: str(value) for key, value in vars(args).items()},
        "videos": {
            name: {
                "file": str(v.path),
                "frames": v.frames,
                "seconds": v.seconds,
                "mbit_per_s": v.bitrate_mbps,
            }
            for name, v in videos.items()
        },
        "stages": {},
        "workdir": str(workdir),
    }
    args.output.parent.mkdir(parents=True, exist_ok=True)

    def save() -> None:
        results["elapsed_s"] = round(time.monotonic() - begun, 1)
        results["load_average_end"] = [round(value, 2) for value in os.getloadavg()]
        args.output.write_text(json.dumps(results, indent=1) + "\n")

    print("the floor: ffmpeg -benchmark decoding each file", flush=True)
    results["floors"] = floors(videos)
    save()
    if not args.no_ceiling and "new" in stage_names:
        print("the ceiling: a bare QML player (video_ceiling) playing each file", flush=True)
        results["ceiling"] = {}
        for name in names:
            found = bare_player(videos[name], workdir / "ceiling")
            results["ceiling"][name] = found
            print(
                f"  {name}: {found.get('shown_percent')} % of frames seen, "
                f"{found.get('cpu_s_per_s')} CPU s/s",
                flush=True,
            )
            save()
    site = serve(videos)
    bench = Bench(args, workdir, videos, site)
    try:
        for name in stage_names:
            if name == "old":
                stage = old_stage(args.old_commit, workdir / "old")
            elif args.new_commit:
                archived = old_stage(args.new_commit, workdir / "new")
                stage = replace(archived, name="new")
            else:
                stage = new_stage(args.new.resolve(), workdir / "new")
            print(f"== {name} stage: {stage.source} ({stage.commit})", flush=True)
            try:
                results["stages"][name] = stage_session(
                    bench, stage, ["vp9"] if name == "old" else names
                )
            except (Exception, SystemExit) as error:  # one failed stage must not end the run
                if isinstance(error, SystemExit) and error.code == 143:
                    raise
                print(f"  FAILED: {error}", flush=True)
                results["stages"][name] = {"error": str(error)}
            save()
    finally:
        site.stop()
    columns = [Column("old VP9 web", "old", "vp9")] if "old" in stage_names else []
    if "new" in stage_names:
        columns += [Column(f"{CODECS[n].name.upper()} native", "new", n) for n in names]
    results["table"] = table(results, columns)
    save()
    print(
        f"\n{results['elapsed_s'] / 60:.1f} minutes; load average {results['load_average_end']}; "
        f"written to {args.output}; logs in {workdir}",
        flush=True,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())

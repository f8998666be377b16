"""Benchmark of the scheduler's media library: upload, serving, and a save reaching a screen.

    .venv/bin/python -m tests.bench.bench_library [--serve-mb 200] [--clients 20] [--real 2]
        [--displays 20] [--rounds 20] [--skip-screen | --screen-only]

1. Upload: a few MP4 files (one of ``--serve-mb`` MB and two of half that, H.264 made with
   Debian's ffmpeg, looped with ``-c copy`` to their size) are uploaded one by one to a
   ``pdn scheduler`` process (SQLite) with ``POST /x/media``, streamed from disk. Against
   ``cp`` of the same files in the same run: MB/s of each, and CPU seconds per GB (the
   scheduler process's own; ``cp``'s from the children's rusage).
2. Serving: the large video to ``--clients`` readers at once: ``--real`` real ``pdn display``
   processes (offscreen), each sent a CDS naming the video with its hash and done when its
   cache holds it verified, and HTTP clients, each from a source address of its own
   (127.0.0.2, 127.0.0.3, ...), each reading it whole. The scheduler's RSS and PSS
   (``/proc/<pid>/smaps_rollup``) are sampled every 50 ms from before the first request to
   after the last byte: flat when the bytes are streamed chunk by chunk, never read whole.
3. Save to screen: ``--displays`` displays registered with a scheduler (in this process): one
   real ``pdn display`` (offscreen, cross-fade off) and the rest display segments in this
   process (tests/support/fleet.py), all in one group that a playlist is assigned to. Each
   round replaces the playlist (``PUT /x/playlists/<id>``) with the other of two pictures from
   the library; the time is from before the PUT to the ``started`` stamp of the real
   display's playback record, which its renderer sets once the new picture's pixels are on
   screen (one clock). The first two rounds cache both pictures and are not counted.

Prints the figures and writes them to ``bench-results/bench_library.json``.
"""

from __future__ import annotations

import argparse
import functools
import hashlib
import http.client
import io
import logging
import os
import platform
import resource
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from datetime import datetime
from pathlib import Path
from typing import Any

import requests
from PIL import Image

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))  # run as a script, the checkout's packages come first

from tests.bench.proctree import rollup, tree_cpu  # noqa: E402
from tests.bench.results import write_figures  # noqa: E402
from tests.bench.stats import percentile  # noqa: E402
from tests.support.display import DisplayProcess  # noqa: E402
from tests.support.fleet import start_screen  # noqa: E402
from tests.support.process import CREDENTIALS  # noqa: E402
from tests.support.scheduler import SchedulerProcess, start  # noqa: E402
from tests.support.waiting import wait_until  # noqa: E402

MB = 1_000_000
GROUP = "bench"
COLOURS = {"red": (220, 30, 30), "blue": (30, 60, 220)}


# -- files ------------------------------------------------------------------------------------


def make_videos(folder: Path, serve_mb: int) -> list[Path]:
    """One MP4 of about ``serve_mb`` MB and two of half that: a 4 s H.264 segment (lossless,
    so it is large) looped with ``-c copy``."""
    ffmpeg = shutil.which("ffmpeg")
    if ffmpeg is None:
        raise SystemExit("Debian's ffmpeg is needed to make the benchmark's videos")
    segment = folder / "segment.mp4"
    subprocess.run(
        [ffmpeg, "-v", "error", "-y", "-f", "lavfi", "-i", "testsrc2=size=1280x720:rate=30",
         "-t", "4", "-c:v", "libx264", "-preset", "ultrafast", "-qp", "0",
         "-pix_fmt", "yuv420p", str(segment)],
        check=True, timeout=600,
    )  # fmt: skip
    made = []
    for index, target in enumerate((serve_mb, serve_mb // 2, serve_mb // 2 + 1)):
        loops = max(1, round(target * MB / segment.stat().st_size)) + index  # distinct files
        path = folder / f"video{index}.mp4"
        subprocess.run(
            [ffmpeg, "-v", "error", "-y", "-stream_loop", str(loops - 1), "-i", str(segment),
             "-c", "copy", "-movflags", "+faststart", str(path)],
            check=True, timeout=600,
        )  # fmt: skip
        made.append(path)
    return made


def picture(colour: tuple[int, int, int]) -> bytes:
    out = io.BytesIO()
    Image.new("RGB", (640, 360), colour).save(out, "PNG")
    return out.getvalue()


# -- 1. upload --------------------------------------------------------------------------------


def upload_phase(scheduler: SchedulerProcess, files: list[Path], scratch: Path) -> dict[str, Any]:
    assert scheduler.process is not None
    pid = scheduler.process.pid
    total = sum(path.stat().st_size for path in files)
    cpu_before, started = tree_cpu(pid), time.monotonic()
    answers = []
    for path in files:
        with path.open("rb") as body:
            answer = requests.post(
                f"{scheduler.url}/x/media", data=body, headers={"X-Filename": path.name},
                timeout=900,
            )  # fmt: skip
        if answer.status_code != 201:
            raise SystemExit(f"upload of {path.name}: {answer.status_code} {answer.text}")
        answers.append(answer.json())
    upload_s, upload_cpu = time.monotonic() - started, tree_cpu(pid) - cpu_before

    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    cp_cpu_before = children.ru_utime + children.ru_stime
    started = time.monotonic()
    for path in files:
        subprocess.run(["cp", str(path), str(scratch / path.name)], check=True)
    subprocess.run(["sync"], check=True)  # the scheduler's commit is durable: so is cp's
    cp_s = time.monotonic() - started
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    cp_cpu = children.ru_utime + children.ru_stime - cp_cpu_before
    gigabytes = total / 1e9
    return {
        "files": len(files),
        "bytes": total,
        "upload_s": round(upload_s, 2),
        "upload_mb_per_s": round(total / MB / upload_s, 1),
        "scheduler_cpu_s": round(upload_cpu, 2),
        "scheduler_cpu_s_per_gb": round(upload_cpu / gigabytes, 2),
        "cp_s": round(cp_s, 2),
        "cp_mb_per_s": round(total / MB / cp_s, 1),
        "cp_cpu_s_per_gb": round(cp_cpu / gigabytes, 2),
        "upload_time_over_cp": round(upload_s / cp_s, 1),
        "items": [{"name": a["name"], "size": a["size"], "sha256": a["sha256"]} for a in answers],
    }


# -- 2. serving -------------------------------------------------------------------------------


class MemorySampler:
    """RSS and PSS (MB) of one process every ``period`` seconds, in a thread."""

    def __init__(self, pid: int, period: float = 0.05) -> None:
        self.pid, self.period = pid, period
        self.samples: list[tuple[float, float, float]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> MemorySampler:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        start = time.monotonic()
        while not self._stop.is_set():
            figures = rollup(self.pid)
            if figures is not None:
                self.samples.append((time.monotonic() - start, figures["Rss"], figures["Pss"]))
            self._stop.wait(self.period)


def fetch(port: int, path: str, source: str, results: list[dict[str, Any]], check: bool) -> None:
    started = time.monotonic()
    connection = http.client.HTTPConnection(
        "127.0.0.1", port, timeout=300, source_address=(source, 0)
    )
    digest = hashlib.sha256() if check else None
    size = 0
    try:
        connection.request("GET", path)
        response = connection.getresponse()
        while piece := response.read(1 << 20):
            size += len(piece)
            if digest is not None:
                digest.update(piece)
        status = response.status
    finally:
        connection.close()
    results.append({
        "source": source, "status": status, "bytes": size,
        "seconds": time.monotonic() - started,
        "sha256": digest.hexdigest() if digest is not None else None,
    })  # fmt: skip


def display_fetch(
    display: DisplayProcess, url: str, item: dict[str, Any], results: list[dict[str, Any]]
) -> None:
    """A real display is sent a CDS naming the video with its hash; done when its cache says
    it holds the file (downloaded and verified)."""
    started = time.monotonic()
    document = (
        '<content-set name="bench"><content-item content-type="video/mp4"><requires-file>'
        f'<hashes><hash type="sha256">{item["sha256"]}</hash></hashes>'
        f"<sources><uri>{url}</uri></sources></requires-file></content-item></content-set>"
    )
    answer = display.post("/schedule", data=document, headers={"Content-Type": "text/xml"})
    cached = f"cached sha256-{item['sha256']}"
    try:
        wait_until(lambda: cached in display.text(), 600, "the display cached the video")
        status = 200 if answer.status_code == 202 else answer.status_code
    except AssertionError:
        status = 0
    results.append({
        "source": f"pdn display {display.url}", "status": status,
        "bytes": item["size"] if status == 200 else 0,
        "seconds": time.monotonic() - started, "sha256": None,
    })  # fmt: skip


def serving_phase(
    scheduler: SchedulerProcess,
    item: dict[str, Any],
    clients: int,
    displays: list[DisplayProcess],
) -> dict[str, Any]:
    """``clients`` readers of the video at once: ``displays`` (real ones) and HTTP clients."""
    assert scheduler.process is not None
    pid = scheduler.process.pid
    path = f"/media/{item['sha256']}/{item['name']}"
    results: list[dict[str, Any]] = []
    threads = [
        threading.Thread(target=display_fetch, args=(d, scheduler.url + path, item, results))
        for d in displays
    ] + [
        threading.Thread(
            target=fetch, args=(scheduler.port, path, f"127.0.0.{n + 2}", results, n == 0)
        )
        for n in range(clients - len(displays))
    ]
    with MemorySampler(pid) as sampler:
        time.sleep(0.5)  # the baseline, before any request
        cpu_before, started = tree_cpu(pid), time.monotonic()
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        elapsed, cpu = time.monotonic() - started, tree_cpu(pid) - cpu_before
        time.sleep(0.5)
    complete = [r for r in results if r["status"] == 200 and r["bytes"] == item["size"]]
    verified = [r for r in results if r["sha256"] is not None]
    baseline = [rss for t, rss, _ in sampler.samples if t < 0.5] or [sampler.samples[0][1]]
    rss = [sample[1] for sample in sampler.samples]
    pss = [sample[2] for sample in sampler.samples]
    seconds = [r["seconds"] for r in results]
    return {
        "clients": clients,
        "real_displays": len(displays),
        "real_display_s": [
            round(r["seconds"], 2)
            for r in results
            if r["sha256"] is None and r["source"].startswith("pdn display")
        ],
        "file_mb": round(item["size"] / MB, 1),
        "complete": len(complete),
        "hash_verified": bool(verified) and verified[0]["sha256"] == item["sha256"],
        "wall_s": round(elapsed, 2),
        "total_mb_per_s": round(len(complete) * item["size"] / MB / elapsed, 1),
        "client_s_p50": round(percentile(seconds, 0.5), 2),
        "client_s_max": round(max(seconds), 2),
        "scheduler_cpu_s": round(cpu, 2),
        "scheduler_cpu_s_per_gb_served": round(cpu / (len(complete) * item["size"] / 1e9), 2),
        "rss_mb_before": round(max(baseline), 1),
        "rss_mb_max": round(max(rss), 1),
        "rss_mb_growth": round(max(rss) - max(baseline), 1),
        # Flat: no higher in the second half of the transfer than in the first.
        "rss_mb_max_first_half": round(max(_half(sampler.samples, elapsed, 0)), 1),
        "rss_mb_max_second_half": round(max(_half(sampler.samples, elapsed, 1)), 1),
        "pss_mb_max": round(max(pss), 1),
        "samples": len(sampler.samples),
    }


def _half(samples: list[tuple[float, float, float]], elapsed: float, which: int) -> list[float]:
    """The RSS samples of the first (0) or second (1) half of the transfer (it starts at
    0.5 s)."""
    middle = 0.5 + elapsed / 2
    bounds = (0.5, middle) if which == 0 else (middle, 0.5 + elapsed)
    return [rss for t, rss, _ in samples if bounds[0] <= t < bounds[1]] or [0.0]


# -- 3. save to screen ------------------------------------------------------------------------


def epoch(iso: str) -> float:
    return datetime.fromisoformat(iso).timestamp()


def screen_phase(folder: Path, displays: int, rounds: int) -> dict[str, Any]:
    scheduler = start(folder / "scheduler", None)
    screens: list[Any] = []
    display = None
    try:
        base = scheduler.url
        shas = {}
        for name, colour in COLOURS.items():
            answer = requests.post(
                f"{base}/x/media", data=picture(colour), headers={"X-Filename": f"{name}.png"},
                timeout=30,
            )  # fmt: skip
            shas[name] = answer.json()["sha256"]
        display = bench_display(folder / "display", base)
        for index in range(displays - 1):
            screens.append(start_screen(folder / f"screen{index}", scheduler, f"s{index}", [GROUP]))
        wait_until(lambda: len(scheduler.storage.displays()) == displays, 60, "all registered")
        latencies = []
        for number in range(rounds + 2):
            name = ("red", "blue")[number % 2]
            body = {"items": [{"media": shas[name], "duration": "10 min"}]}
            saved = time.time()
            answer = requests.put(f"{base}/x/playlists/wall", json=body, timeout=30)
            if answer.status_code not in (200, 201):
                raise SystemExit(f"PUT /x/playlists/wall: {answer.status_code} {answer.text}")
            if number == 0:
                assigned = requests.post(
                    f"{base}/x/assignments", json={"schedule": "wall", "group": GROUP}, timeout=30
                )
                assert assigned.ok, assigned.text
            shows = functools.partial(_shows, display, shas[name])
            record = wait_until(shows, 120, f"the display shows {name}", step=0.02)
            if number >= 2:
                latencies.append(epoch(record["started"]) - saved)
        return {
            "displays": displays,
            "real_displays": 1,
            "rounds": rounds,
            "saved_with": "PUT /x/playlists/<id>",
            "save_to_screen_s_p50": round(percentile(latencies, 0.5), 3),
            "save_to_screen_s_p95": round(percentile(latencies, 0.95), 3),
            "save_to_screen_s_max": round(max(latencies), 3),
            "save_to_screen_s": [round(value, 3) for value in latencies],
        }
    finally:
        for screen in screens:
            screen.close()
        if display is not None:
            display.stop()
        scheduler.stop()


def bench_display(folder: Path, register: str | None = None) -> DisplayProcess:
    """A real ``pdn display``, offscreen, cross-fade off, started; registered with the
    scheduler at ``register`` in the benchmark's group when given."""
    config = 'name = "bench"\ntimezone = "UTC"\n'
    if register is not None:
        config += (
            f'register = "{register}"\ngroups = ["{GROUP}"]\n'
            '[location]\nlatitude = "N54.0104"\nlongitude = "W2.7883"\n'
        )
    config += "[screen]\ncrossfade = 0\n"
    display = DisplayProcess(
        folder, config=config, platform="offscreen", unset=(*CREDENTIALS, "PDN_DATABASE_URL")
    )
    display.start().wait_ready(timeout=120)
    return display


def _shows(display: DisplayProcess, sha256: str) -> dict[str, Any] | None:
    record = display.playback()
    item = record.get("content-item") or ""
    return record if sha256 in item and record.get("started") else None


# -- main -------------------------------------------------------------------------------------


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--serve-mb", type=int, default=200)
    parser.add_argument("--clients", type=int, default=20)
    parser.add_argument("--displays", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--skip-screen", action="store_true", help="phases 1 and 2 only")
    parser.add_argument("--screen-only", action="store_true", help="phase 3 only")
    parser.add_argument(
        "--real", type=int, default=2, help="real pdn displays among the serving phase's clients"
    )
    parser.add_argument("--out", type=Path, default=ROOT / "bench-results" / "bench_library.json")
    args = parser.parse_args()
    # The in-process scheduler's server says when its queue is deep: the figures say enough.
    logging.getLogger("waitress.queue").setLevel(logging.ERROR)
    figures: dict[str, Any] = {
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version(),
                    "load": os.getloadavg()},
    }  # fmt: skip
    with tempfile.TemporaryDirectory(prefix="pdn-bench-library-") as work:
        folder = Path(work)
        if not args.screen_only:
            files = make_videos(folder, args.serve_mb)
            scratch = folder / "cp"
            scratch.mkdir()
            limits = {"PDN_MEDIA_MAX_BYTES": str(4 << 30), "PDN_MEDIA_QUOTA_BYTES": str(16 << 30)}
            with SchedulerProcess(folder / "scheduler", env=limits) as scheduler:
                figures["upload"] = upload_phase(scheduler, files, scratch)
                print("upload:", figures["upload"], flush=True)
                largest = figures["upload"]["items"][0]
                displays = [bench_display(folder / f"display{n}") for n in range(args.real)]
                try:
                    figures["serving"] = serving_phase(scheduler, largest, args.clients, displays)
                finally:
                    for display in displays:
                        display.stop()
                print("serving:", figures["serving"], flush=True)
        if not args.skip_screen:
            figures["save_to_screen"] = screen_phase(folder / "screen", args.displays, args.rounds)
            print("save to screen:", figures["save_to_screen"], flush=True)
    write_figures(args.out, figures, echo=True)


if __name__ == "__main__":
    main()

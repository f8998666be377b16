"""Where the display's browser process memory goes, by content kind and Chromium flag.

Runs a real ``pdn display`` fullscreen on its own Xvfb (1920x1080) over ``--items`` items of ONE
kind (``page``: DOM-and-script signage pages; ``image``: cached 1920x1080 pictures shown by the
native image layer; ``video``: 720p/1080p VP8/VP9 WebMs), ``--seconds`` each, and every
``--every`` transitions reads the browser process (the display's own process, which also hosts
Chromium's browser side and its in-process GPU thread) by mapping from /proc/PID/smaps:

- heap: glibc's main arena (``[heap]``)
- anon: anonymous mmaps (glibc's other arenas, PartitionAlloc, V8, Mesa's software buffers)
- screen: anonymous mappings of at least one 1920x1080x4 frame (8100 KiB): frame buffers
- shm: ``/memfd:``, ``/dev/shm``, ``/SYSV`` (shared with render processes: bitmaps, video frames)
- dri: ``/dev/dri`` mappings
- file: everything file-backed (libraries, fonts)

and the other processes of the tree by role. Figures in MiB: Anonymous, Private_Dirty and PSS;
anonymous memory is the one to compare (other processes mapping the same files change PSS).

``--flags`` are added to QTWEBENGINE_CHROMIUM_FLAGS (the display keeps them and adds its own);
``--env NAME=VALUE`` sets the display's environment. Runs of several variants alternate
(``--variants 'base=;nogpu=--disable-gpu'``, ``--rounds 2``) so they share the same sitting.
Results: bench-results/bench_memory_probe.json (appended per run).

    .venv/bin/python -m tests.bench.bench_memory_probe --kind page --items 60 \\
        --variants 'base=;nogpu=--disable-gpu --disable-gpu-compositing' --rounds 2
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from tests.bench import memory_tools
from tests.bench.memory_tools import (
    ROOT,
    Display,
    XServer,
    private_qt,
    process_tree,
    role_of,
    xvfb,
)
from tests.bench.signage_content import ContentServer, make_media

RESULTS = ROOT / "bench-results"
SCREEN_KIB = 1920 * 1080 * 4 // 1024  # one 1920x1080 RGBA frame
FIELDS = ("Rss", "Pss", "Private_Dirty", "Anonymous")
HEADER = re.compile(r"^[0-9a-f]+-[0-9a-f]+ ")


def mapping_kind(name: str, size_kib: int) -> str:
    if name == "[heap]":
        return "heap"
    if name.startswith("/dev/dri"):
        return "dri"
    if name.startswith(("/memfd:", "/dev/shm", "/SYSV")):
        return "shm"
    if name.startswith("["):
        return "stack" if name.startswith("[stack") else "anon"
    if name == "":
        return "screen" if size_kib >= SCREEN_KIB else "anon"
    return "file"


def smaps_by_kind(pid: int) -> dict[str, Any]:
    """MiB per mapping kind (``mapping_kind``) of one process, plus a count of mappings."""
    kinds: dict[str, dict[str, float]] = {}
    current: dict[str, float] | None = None
    sizes: list[int] = []
    try:
        with open(f"/proc/{pid}/smaps") as stream:
            for line in stream:
                if HEADER.match(line):
                    parts = line.split(None, 5)
                    start, end = (int(x, 16) for x in parts[0].split("-"))
                    name = parts[5].strip() if len(parts) > 5 else ""
                    kind = mapping_kind(name, (end - start) // 1024)
                    current = kinds.setdefault(kind, {"count": 0.0, **dict.fromkeys(FIELDS, 0.0)})
                    current["count"] += 1
                    if kind == "screen":  # its size, to tell frames from arenas
                        sizes.append((end - start) // 1024)
                    continue
                key, _, value = line.partition(":")
                if current is not None and key in FIELDS:
                    current[key] += int(value.split()[0]) / 1024
    except OSError:
        return {}
    result: dict[str, Any] = {
        kind: {k: round(v, 1) for k, v in f.items()} for kind, f in sorted(kinds.items())
    }
    result["screen_sizes_kib"] = sorted(sizes)
    return result


def rollup(pid: int) -> dict[str, float]:
    figures = dict.fromkeys(FIELDS, 0.0)
    try:
        with open(f"/proc/{pid}/smaps_rollup") as stream:
            for line in stream:
                key, _, value = line.partition(":")
                if key in FIELDS:
                    figures[key] = round(int(value.split()[0]) / 1024, 1)
    except OSError:
        pass
    return figures


def point(root: int, transitions: int) -> dict[str, Any]:
    roles: dict[str, dict[str, float]] = {}
    for pid, parent in process_tree(root):
        if pid == root:
            continue
        figures = rollup(pid)
        role = roles.setdefault(
            role_of(pid, parent, root), {"count": 0, **dict.fromkeys(FIELDS, 0.0)}
        )
        role["count"] += 1
        for key in FIELDS:
            role[key] = round(role[key] + figures[key], 1)
    return {
        "transitions": transitions,
        "browser": rollup(root),
        "browser_by_kind": smaps_by_kind(root),
        "children": roles,
        "load": os.getloadavg()[0],
    }


def run_one(
    server: XServer,
    qt: Path | None,
    content: ContentServer,
    images: list[Any],
    videos: list[str],
    args: argparse.Namespace,
    name: str,
    flags: str,
    env: dict[str, str],
    workdir: Path,
) -> dict[str, Any]:
    original = memory_tools._environment

    def environment(server: XServer, checkout: Path, qt: Path | None) -> dict[str, str]:
        values = original(server, checkout, qt)
        if flags:
            values["QTWEBENGINE_CHROMIUM_FLAGS"] = flags
        values.update(env)
        return values

    memory_tools._environment = environment
    try:
        display = Display(server, args.checkout, workdir, args.config, f"probe-{name}", qt)
    finally:
        memory_tools._environment = original
    points: list[dict[str, Any]] = []
    try:
        if args.kind == "image":
            display.schedule_cds(content.image_schedule(images, args.seconds))
        first: int | None = None
        sent = 0
        pending = 0
        last_sequence = 0
        next_point = 0
        deadline = time.monotonic() + args.items * (args.seconds + 6) + 120
        while True:
            record = display.playback()
            sequence = int(record.get("sequence") or 0)
            origin = record.get("origin")
            if first is None:
                ready = origin == "schedule" if args.kind == "image" else True
                if ready:
                    first = sequence
                else:
                    time.sleep(0.2)
                    continue
            if sequence != last_sequence:
                pending = max(0, pending - (sequence - last_sequence))
                last_sequence = sequence
            transitions = sequence - first
            if transitions >= next_point:
                points.append(point(display.process.pid, transitions))
                b = points[-1]["browser"]
                print(
                    f"[{name} {args.kind}] {transitions}: browser anon {b['Anonymous']:.0f} "
                    f"dirty {b['Private_Dirty']:.0f} pss {b['Pss']:.0f}; "
                    + " ".join(
                        f"{k}={v['Anonymous']:.0f}"
                        for k, v in points[-1]["browser_by_kind"].items()
                        if isinstance(v, dict) and v["Anonymous"] >= 1
                    )
                    + f"; load {points[-1]['load']:.0f}",
                    flush=True,
                )
                next_point += args.every
            if transitions >= args.items:
                break
            if time.monotonic() > deadline or not display.alive():
                raise SystemExit(f"{name}: stalled at {transitions}; see {display.log_path}")
            if args.kind != "image" and pending < 2:
                if args.kind == "page":
                    url = f"{content.url}/page/{sent}.html"
                else:
                    url = f"{content.url}/media/{videos[sent % len(videos)]}?n={sent}"
                display.schedule_json(url, args.seconds)
                sent += 1
                pending += 1
            time.sleep(0.1)
        # The display trims its heap every 20 s: a last point after one trim.
        time.sleep(args.settle)
        points.append(point(display.process.pid, -1))
        b = points[-1]["browser"]
        print(
            f"[{name} {args.kind}] settled: browser anon {b['Anonymous']:.0f}; "
            + " ".join(
                f"{k}={v['Anonymous']:.0f}"
                for k, v in points[-1]["browser_by_kind"].items()
                if isinstance(v, dict) and v["Anonymous"] >= 1
            ),
            flush=True,
        )
    finally:
        display.stop()
    return {"variant": name, "flags": flags, "env": env, "kind": args.kind, "points": points}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--kind", choices=("page", "image", "video"), default="page")
    parser.add_argument("--items", type=int, default=60)
    parser.add_argument("--every", type=int, default=10)
    parser.add_argument("--seconds", type=float, default=1.0)
    parser.add_argument("--settle", type=float, default=25.0)
    parser.add_argument("--variants", default="base=", help="name=flags;name=flags")
    parser.add_argument("--env", action="append", default=[], help="name:NAME=VALUE")
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--config", default='[screen]\nlow-memory = "off"\n')
    parser.add_argument("--checkout", type=Path, default=ROOT)
    parser.add_argument("--shared-qt", action="store_true")
    args = parser.parse_args()
    variants = [v.split("=", 1) for v in args.variants.split(";") if v]
    envs: dict[str, dict[str, str]] = {}
    for item in args.env:
        variant, _, assignment = item.partition(":")
        key, _, value = assignment.partition("=")
        envs.setdefault(variant, {})[key] = value
    RESULTS.mkdir(exist_ok=True)
    qt = None if args.shared_qt else private_qt(RESULTS / "bench_memory_qt")
    images, videos = make_media(RESULTS / "bench_memory_media")
    content = ContentServer(RESULTS / "bench_memory_media")
    out = RESULTS / "bench_memory_probe.json"
    try:
        with xvfb(1920, 1080) as server, tempfile.TemporaryDirectory() as work:
            for round_ in range(args.rounds):
                for name, flags in variants:
                    result = run_one(
                        server, qt, content, images, videos, args, name, flags,
                        envs.get(name, {}), Path(work),
                    )  # fmt: skip
                    result["round"] = round_
                    previous = json.loads(out.read_text()) if out.exists() else []
                    out.write_text(json.dumps([*previous, result], indent=1))
    finally:
        content.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())

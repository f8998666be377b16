"""The most in-between steps a cross-fade can show on this machine: the same recording as
bench_stage's fade part, of a bare Qt Quick scene with nothing else in it.

Two full-screen pictures (red under blue) in a ``QQuickView`` on Xvfb at 1920x1080, the blue
one faded in by an ``OpacityAnimator`` of the stage's length, and the same with two plain
rectangles. Pictures are what the stage draws during a fade (a web view's frame is a texture,
as a picture is); rectangles are what the machine's GL can do when nothing is sampled. With no
web engine, no display and no Python deciding anything, this is the ceiling the stage's own
fade is measured against, in the same run.

Run alone: ``python -m tests.bench.fade_ceiling`` (about 30 s; Xvfb, ffmpeg and PySide6).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from tests.bench.bare_scene import start_view
from tests.bench.memory_tools import XServer, xvfb
from tests.bench.stage_tools import (
    RGB,
    decode_frames,
    fade_steps,
    frame_colour,
    make_still,
    record_screen,
)

SIZE = (1920, 1080)
RED: RGB = (255, 0, 0)
BLUE: RGB = (0, 0, 255)
FADE_AFTER_MS = 1500  # the scene is up and idle by then; the recording starts at 1 s
SCENES = ("pictures", "rectangles")

# {kind} is "pictures" or "rectangles"; {ms} the fade's length.
SCENE_QML = """
import QtQuick
Item {{
    readonly property bool pictures: "{kind}" === "pictures"
    Image {{ anchors.fill: parent; visible: pictures; source: pictures ? "red.png" : "" }}
    Rectangle {{ anchors.fill: parent; visible: !pictures; color: "#ff0000" }}
    Item {{
        id: incoming
        anchors.fill: parent
        opacity: 0
        Image {{ anchors.fill: parent; visible: pictures; source: pictures ? "blue.png" : "" }}
        Rectangle {{ anchors.fill: parent; visible: !pictures; color: "#0000ff" }}
        OpacityAnimator {{ id: fade; target: incoming; from: 0; to: 1; duration: {ms} }}
    }}
    Timer {{ interval: {after}; running: true; onTriggered: fade.start() }}
}}
"""

QUIT = """
QTimer.singleShot(int(sys.argv[4]), app.quit)
sys.exit(app.exec())
"""


def one_fade(server: XServer, workdir: Path, kind: str, ms: int) -> dict[str, Any]:
    qml = SCENE_QML.format(kind=kind, ms=ms, after=FADE_AFTER_MS)
    quit_ms = str(FADE_AFTER_MS + 2000)
    process = start_view(server, workdir, f"ceiling-{kind}", qml, QUIT, SIZE, [quit_ms])
    try:
        time.sleep(1.0)
        recording = record_screen(server, workdir / f"ceiling-{kind}.mkv", 2.0, SIZE)
    finally:
        process.wait(timeout=30)
    frames = decode_frames(recording)
    colours = [frame_colour(f, recording.width, recording.height)[0] for f in frames]
    recording.path.unlink()
    return fade_steps(colours, RED, BLUE)


def ceiling(workdir: Path, fades: int, crossfade_ms: int) -> dict[str, Any]:
    """``fades`` recorded fades of each bare scene; the median of the complete ones."""
    workdir.mkdir(parents=True, exist_ok=True)
    make_still(workdir, "red.png", RED)
    make_still(workdir, "blue.png", BLUE)
    found: dict[str, Any] = {"crossfade_ms": crossfade_ms}
    with xvfb(*SIZE) as server:
        for kind in SCENES:
            runs = [one_fade(server, workdir, kind, crossfade_ms) for _ in range(fades)]
            steps = [run["steps"] for run in runs if run["complete"]]
            found[kind] = {
                "steps": steps,
                "median_steps": statistics.median(steps) if steps else None,
                "colours": [run["colours"] for run in runs],
            }
            print(f"  bare Qt Quick, two {kind}: steps {steps}", flush=True)
    return found


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--fades", type=int, default=3)
    parser.add_argument("--crossfade", type=float, default=0.3, help="seconds")
    parser.add_argument("--workdir", type=Path, default=Path("/tmp/pdn-fade-ceiling"))
    args = parser.parse_args()
    ceiling(args.workdir, args.fades, round(args.crossfade * 1000))
    return 0


if __name__ == "__main__":
    sys.exit(main())

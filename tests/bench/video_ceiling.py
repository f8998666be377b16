"""The most frames QtMultimedia shows on this machine: the same recording as bench_video's, of
a bare Qt Quick scene playing one video with nothing else in it.

A ``QQuickView`` on an Xvfb of its own at 1920x1080 with one ``MediaPlayer`` and its
``VideoOutput`` filling the window (an ``AudioOutput`` too, as the display's video item has),
the wheel's FFmpeg backend, started 1.5 s after the window is up. No kiosk, no web engine, no
display deciding anything: what the native video path of ``pdn display`` can reach at best with
this machine's decoder and its software GL, measured in the same run.

Run alone: ``python -m tests.bench.video_ceiling FILE...`` (each file's length and about 5 s
more; Xvfb, ffmpeg and PySide6). The files must carry bench_video's frame code.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from tests.bench.bare_scene import start_view
from tests.bench.memory_tools import xvfb
from tests.bench.stage_tools import CpuTrace
from tests.bench.video_tools import CODECS, CodeReader, StripRecorder, Video, plays, probe

START_AFTER_MS = 1500

SCENE_QML = """
import QtQuick
import QtMultimedia
Item {
    VideoOutput { id: output; anchors.fill: parent; fillMode: VideoOutput.PreserveAspectFit }
    AudioOutput { id: sound }
    MediaPlayer { objectName: "player"; videoOutput: output; audioOutput: sound }
}
"""

PLAYER = """
from PySide6.QtMultimedia import QMediaPlayer

player = view.rootObject().findChild(QMediaPlayer, "player")
player.setSource(QUrl.fromLocalFile(sys.argv[4]))

def status(value):
    if value == QMediaPlayer.MediaStatus.EndOfMedia:
        print("ended", time.time(), flush=True)
        QTimer.singleShot(500, app.quit)

def started():
    print("playing", time.time(), flush=True)
    player.play()

player.mediaStatusChanged.connect(status)
QTimer.singleShot(int(sys.argv[5]), started)
QTimer.singleShot(int(sys.argv[6]), app.quit)  # a video that never ends
sys.exit(app.exec())
"""


def bare_player(video: Video, workdir: Path) -> dict[str, Any]:
    """``video`` played once by the bare scene, recorded; frames read and CPU of the process
    from 1.5 s after it started playing to 1 s before its end."""
    limit_ms = START_AFTER_MS + round(video.seconds * 1000) + 15_000
    with xvfb(1920, 1080) as server:
        recorder = StripRecorder(server.display, workdir / f"ceiling-{video.codec.name}.nut")
        arguments = [str(video.path.resolve()), str(START_AFTER_MS), str(limit_ms)]
        process = start_view(
            server, workdir, "video_ceiling", SCENE_QML, PLAYER, (1920, 1080), arguments,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        trace = CpuTrace(process.pid, None)
        trace.start()
        try:
            output, errors = process.communicate(timeout=limit_ms / 1000 + 30)
        finally:
            trace.stop()
            recorder.stop()
    times = dict(line.split()[:2] for line in output.splitlines() if line.count(" ") == 1)
    reader = CodeReader({video.codec.number: video.frames}, (0, 0, 0))
    samples = [(at, reader.read(blocks)) for at, blocks in recorder.frames()]
    recorder.path.unlink()
    found = [play for play in plays(samples) if play.number == video.codec.number]
    figures: dict[str, Any] = found[0].figures(video.frames) if found else {"frames_seen": 0}
    if not found:  # what the viewer said, to see why
        figures["viewer_errors"] = errors.strip().splitlines()[-5:]
    if "playing" in times and "ended" in times:
        start, end = float(times["playing"]) + 1.5, float(times["ended"]) - 1.0
        figures["cpu_s_per_s"] = round(trace.between(start, end)[0] / (end - start), 3)
    return figures


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("files", type=Path, nargs="+", help="videos made by bench_video")
    parser.add_argument("--workdir", type=Path, default=Path("/tmp/pdn-video-ceiling"))
    args = parser.parse_args()
    for path in args.files:
        codec = CODECS[path.name.split("-", 1)[0]]
        frames, seconds = probe(path)
        video = Video(codec, path, "", frames, seconds, 0.0)
        print(path.name, json.dumps(bare_player(video, args.workdir)), flush=True)
        time.sleep(1)
    return 0


if __name__ == "__main__":
    sys.exit(main())

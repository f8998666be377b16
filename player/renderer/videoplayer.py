"""One video player on the stage: QtMultimedia's player and its item in the scene, a decoder
the kiosk's :class:`~player.renderer.videolayer.VideoLayer` loads, cues, starts and releases.

A video of a synchronised set (shown with its turn's ``due`` instant) keeps to the wall clock:

- joining its turn late (a display that starts, restarts or comes back), it is first cued,
  paused, to the offset it will have a moment later (:data:`CUE_LEAD`), and starts on that
  instant: it comes in on the frame of now, not from its top;
- while it plays, each frame's timestamp is set against the wall clock (how far into its turn
  the frame should be). A display more than :data:`DEADBAND` behind or ahead (half a frame)
  nudges its playback rate, by at most :data:`MAX_NUDGE` (5 %), in proportion, to be back in
  step within about :data:`CATCH_UP` seconds: no frame jumps, nothing to see. Only a display
  :data:`SEEK_BEYOND` (0.5 s) off, which a 5 % nudge would take over 10 s to bring back, seeks.
  A seek costs a decode from the previous key frame (a stall of tens to hundreds of ms, the
  picture jumping), a nudge costs nothing visible: measured in docs/benchmarks.md.

A live stream (``live``: HLS, RTSP, SRT) is opened playing, not paused: it has no first frame
to wait on, and a paused live source falls behind live. It plays hidden and muted until it is
shown, with QtMultimedia's low-latency intent (little buffering) and a short network timeout,
and its :class:`~player.renderer.livestream.LiveWatch` reopens it when it is lost and fails it
after ``live_give_up`` seconds without a frame. It is never spooled to disk.

What the decoder is: QtMultimedia's backend (``QT_MEDIA_BACKEND``: FFmpeg from the wheel, or
the system's GStreamer), and whether the frames come in GPU memory (a hardware decoder handing
textures over) or in CPU memory (decoded in software).
"""

from __future__ import annotations

import contextlib
import ctypes
import itertools
import logging
import os
import statistics
import time
from collections import deque
from enum import Enum
from pathlib import Path
from urllib.parse import urlsplit

from PySide6.QtCore import QObject, QTimer, QUrl, Signal
from PySide6.QtMultimedia import (
    QMediaDevices,
    QMediaMetaData,
    QMediaPlayer,
    QPlaybackOptions,
    QVideoFrame,
)
from PySide6.QtQuick import QQuickItem

from player.renderer.livestream import LiveWatch
from player.renderer.videospool import VideoSpool

log = logging.getLogger("pdn.renderer")

# A local file that shows no frame by then cannot be played here (corrupt, no video track, a
# codec the platform lacks); a remote one gets the page load timeout. (Both, and STALLED_AFTER,
# are the defaults: [screen] timeout-factor stretches them, RendererOptions.from_config.)
LOCAL_FIRST_FRAME_MS = 3000
STALE_AFTER_MS = 120_000  # a prepared video not shown by then gives its decoder back
_LOADS = itertools.count(1)  # tokens of loads, unique across players
DOWNLOAD_MS = 300_000  # a video fetched whole (videospool.py) must be down by then
STALLED_AFTER = 5.0  # seconds a playing video may go without a new frame (a stalled stream)
LIVE_STALE_AFTER_MS = 20_000  # a live stream prepared (playing hidden) and not shown by then
LIVE_NETWORK_TIMEOUT_MS = 3000  # a live source's socket reads give up after this
AV_LOG_ERROR = 16  # FFmpeg's log level for errors (libavutil/log.h)
# A synchronised video (see the module's docstring).
CUE_LEAD = 0.4  # seconds: cued this far ahead of now, to start on the instant it gets there
CORRECT_MS = 500  # how often a playing video is set against the wall clock
DEADBAND = 0.5  # of a frame: closer than this, the rate is left at 1
CATCH_UP = 2.0  # seconds to make up a lag in, at a nudged rate
MAX_NUDGE = 0.05  # the rate stays within 1 +- this
SEEK_BEYOND = 0.5  # seconds off: seek instead (a nudge would take over 10 s)
SEEK_LEAD = 0.15  # seconds: a seek while playing lands this far ahead (its decode time)


def quiet_ffmpeg() -> None:
    """FFmpeg (the wheel's backend) prints every file's streams to stderr, the journal, at
    its default level: errors only. Its library is found among those this process has loaded
    (the backend loads it with the first player)."""
    try:
        maps = Path("/proc/self/maps").read_text().splitlines()
    except OSError:
        return
    loaded = {line.split()[-1] for line in maps if "/libavutil" in line}
    for path in loaded:
        with contextlib.suppress(OSError, AttributeError):
            ctypes.CDLL(path).av_log_set_level(AV_LOG_ERROR)


def media_backend() -> str:
    """QtMultimedia's backend in this process: the one asked for, else the wheel's FFmpeg."""
    return os.environ.get("QT_MEDIA_BACKEND", "").strip() or "ffmpeg"


class PlayerState(Enum):
    EMPTY = "empty"  # no source: nothing decoded, nothing held
    LOADING = "loading"  # waiting for the first frame
    CUEING = "cueing"  # paused, seeking to where it joins its turn
    READY = "ready"  # paused on the first frame (or the frame it was cued to)
    PLAYING = "playing"
    ENDED = "ended"  # holding its last frame


class VideoPlayer(QObject):
    """One ``Video.qml`` item, its ``MediaPlayer`` and the frames its sink was handed."""

    #: Paused on the first frame: (self).
    ready = Signal(object)
    #: Cannot be played (and released): (self, url, reason).
    failed = Signal(object, str, str)
    #: Reached its end (holding its last frame): (self).
    ended = Signal(object)
    #: Paused on the frame it was cued to (:meth:`cue`): (self).
    cued = Signal(object)

    def __init__(
        self,
        item: QQuickItem,
        name: str,
        audio: bool,
        spool: VideoSpool,
        parent: QObject,
        local_first_frame_ms: int = LOCAL_FIRST_FRAME_MS,
        live_give_up: float = STALLED_AFTER,
    ) -> None:
        super().__init__(parent)
        self.name = name
        self.live = False  # a live stream (the module's docstring)
        self.live_watch = LiveWatch(self, self._reopen, self.fail, live_give_up)
        self._spool = spool
        self._load = 0  # this load's token: a download finishing for an older one is dropped
        self._asked: set[int] = set()  # tokens of the spool's answers still to come
        self._spooled = ""  # the downloaded file playing, when streaming could not work
        self._local_first_frame_ms = local_first_frame_ms
        self._first_frame_ms = local_first_frame_ms
        self._audio = audio
        self.item = item  # Video.qml, one of its region's layers
        player = self.item.property("player")
        if not isinstance(player, QMediaPlayer):
            raise RuntimeError("Video.qml has no 'player'")
        self.player: QMediaPlayer = player
        self.state = PlayerState.EMPTY
        self.url: str | None = None
        self.serial = 0
        self.shown = False  # presented in front since it was loaded
        self.hardware: bool | None = None  # frames in GPU memory (None: no frame yet)
        self.frames = 0  # distinct frames handed to the sink since it was loaded
        self.presented = 0  # distinct frames of those in the scene when it was drawn
        self._last_presented_us = -1
        self.last_new_frame = 0.0  # time.monotonic() of the last one, or of play()
        self._last_frame_us = -1
        # A synchronised video: its turn's instant (time.time()), where it was cued to, the
        # lag of its recent frames behind the wall clock, and the corrections made.
        self.due: float | None = None
        self.cue_target = 0.0
        self._lags: deque[float] = deque(maxlen=32)
        self.lag: float | None = None
        self.rate = 1.0
        self.seeks = 0
        self.nudges = 0
        self._deadline = self._single_shot(self._too_slow)
        self._stale = self._single_shot(self._went_stale)
        self._keep_step = QTimer(self)  # the player's own, as the two above
        self._keep_step.setInterval(CORRECT_MS)
        self._keep_step.timeout.connect(self._correct)
        player.errorOccurred.connect(self._error)
        player.mediaStatusChanged.connect(self._status)
        player.videoSink().videoFrameChanged.connect(self._frame)
        spool.fetched.connect(self._fetched)

    def _single_shot(self, callback: object) -> QTimer:
        timer = QTimer(self)  # the player's own: it dies with it
        timer.setSingleShot(True)
        timer.timeout.connect(callback)
        return timer

    def load(self, url: str, serial: int, first_frame_ms: int, live: bool = False) -> None:
        """Open ``url`` and wait paused on its first frame (``ready``), or ``failed``; a live
        stream plays hidden from its first frame on (``ready`` then)."""
        self.release()
        self.url, self.serial, self.live = url, serial, live
        self.state = PlayerState.LOADING
        self.item.setOpacity(0.0)
        # Sound where a sound server offers an output (it may have come up since the last
        # video); where none does, no audio output at all: the track is dropped silently.
        self.item.setProperty(
            "audio", self._audio and not QMediaDevices.defaultAudioOutput().isNull()
        )
        self._load = next(_LOADS)
        self._first_frame_ms = first_frame_ms
        if live:
            options = QPlaybackOptions()
            options.setPlaybackIntent(QPlaybackOptions.PlaybackIntent.LowLatencyStreaming)
            options.setNetworkTimeout(LIVE_NETWORK_TIMEOUT_MS)
            self.player.setPlaybackOptions(options)
            self._mute(True)
            self.player.setSource(QUrl(url))
            self.player.play()
            self.live_watch.start()
            return
        self.player.resetPlaybackOptions()
        if urlsplit(url).scheme in ("http", "https"):
            # Streamed only from a server that answers range requests (videospool.py).
            self._deadline.start(DOWNLOAD_MS)
            self._asked.add(self._load)
            self._spool.fetch(url, self._load)
        else:
            self._open(url, first_frame_ms)

    def _open(self, source: str, first_frame_ms: int) -> None:
        self._deadline.start(first_frame_ms)
        self.player.setSource(QUrl(source))
        self.player.pause()

    def play(self) -> None:
        self._stale.stop()
        self.shown = True
        self.last_new_frame = time.monotonic()
        self.state = PlayerState.PLAYING
        self._mute(False)
        self.player.play()
        if self.due is not None:
            self._lags.clear()
            self._keep_step.start()

    def cue(self, seconds: float) -> None:
        """Seek, paused, to ``seconds`` into the video; ``cued`` follows when its frame is
        here (or, a seek that shows nothing within the first-frame time, anyway)."""
        self.state = PlayerState.CUEING
        self.cue_target = seconds
        self._stale.stop()
        self._deadline.start(self._first_frame_ms)
        self.player.setPosition(round(seconds * 1000))

    def lateness(self) -> float | None:
        """Seconds since its turn began (None: not a synchronised video)."""
        return None if self.due is None else time.time() - self.due

    def frame_period(self) -> float:
        rate = self.player.metaData().value(QMediaMetaData.Key.VideoFrameRate)
        return 1 / rate if isinstance(rate, int | float) and rate > 0 else 1 / 30

    def _mute(self, muted: bool) -> None:
        output = self.player.audioOutput()
        if output is not None:
            output.setMuted(muted)

    def _reopen(self) -> None:
        """The live stream was lost: open it again (its watch decides when)."""
        if not self.live or self.url is None:
            return
        self.player.stop()
        self.player.setSource(QUrl())
        self._last_frame_us = -1  # its frames' times may start again from 0
        self._last_presented_us = -1
        self.player.setSource(QUrl(self.url))
        self.player.play()

    def release(self) -> None:
        """Stop and give the decoder and its frames back; hide the item."""
        self.live_watch.stop()
        self.live = False
        self._mute(False)
        self._deadline.stop()
        self._stale.stop()
        self._keep_step.stop()
        self.item.setVisible(False)
        if self.state is not PlayerState.EMPTY:
            self.player.stop()
            self.player.setSource(QUrl())
        if self.rate != 1.0:
            self.player.setPlaybackRate(1.0)
        self.due, self.lag, self.rate, self.cue_target = None, None, 1.0, 0.0
        self.seeks = self.nudges = 0
        self._lags.clear()
        self.state = PlayerState.EMPTY
        self.url = None
        self._spool.forget(self._spooled)
        self._spooled = ""
        self.shown = False
        self.hardware = None
        self.frames = 0
        self.presented = 0
        self._last_frame_us = -1
        self._last_presented_us = -1

    def duration(self) -> float | None:
        """The container's length in seconds (None when it does not say)."""
        ms = self.player.duration()
        return ms / 1000 if ms > 0 else None

    def source_frames(self) -> int | None:
        """How many frames the file has, from its length and frame rate."""
        rate = self.player.metaData().value(QMediaMetaData.Key.VideoFrameRate)
        length = self.duration()
        if not isinstance(rate, int | float) or rate <= 0 or length is None:
            return None
        return round(length * rate)

    def frames_due(self) -> int | None:
        """How many frames this showing had to present: the file's, less those before the
        offset it was cued to (a display joining its turn 11 s into a 12 s video had 1 s of
        frames to show, not 12)."""
        frames = self.source_frames()
        if frames is None:
            return None
        return max(0, frames - round(self.cue_target / self.frame_period()))

    def count_presented(self) -> None:
        """Called as the scene is about to be synchronised for drawing: the sink's frame now is
        the one drawn. A decoder outrunning the drawing hands frames over that never reach the
        screen; only those that do are counted here."""
        if not self.shown or not self.item.isVisible():
            return
        frame = self.player.videoSink().videoFrame()
        if frame.isValid() and frame.startTime() > self._last_presented_us:
            self._last_presented_us = frame.startTime()
            self.presented += 1

    def decoding(self) -> str:
        """Where its frames were decoded: "hardware", "software" or "unknown" (no frame)."""
        return {None: "unknown", True: "hardware", False: "software"}[self.hardware]

    def codec(self) -> str:
        return self.player.metaData().stringValue(QMediaMetaData.Key.VideoCodec) or "unknown"

    def close(self) -> None:
        self.release()
        self._keep_step.timeout.disconnect(self._correct)
        self.player.errorOccurred.disconnect(self._error)
        self.player.mediaStatusChanged.disconnect(self._status)
        self.player.videoSink().videoFrameChanged.disconnect(self._frame)
        self._spool.fetched.disconnect(self._fetched)

    # -- the player's signals -------------------------------------------------------------

    def _frame(self, frame: QVideoFrame) -> None:
        if self.state is PlayerState.EMPTY or not frame.isValid():
            return
        start = frame.startTime()
        if start != self._last_frame_us:  # a frame handed over again is not a new one
            if start > self._last_frame_us:
                self.frames += 1
            self._last_frame_us = start
            self.last_new_frame = time.monotonic()
            if self.live:
                self.live_watch.frame()
            if self.state is PlayerState.PLAYING and self.due is not None and start >= 0:
                self._note_lag(start)
        if self.hardware is None:
            self.hardware = frame.handleType() is not QVideoFrame.HandleType.NoHandle
        if self.state is PlayerState.CUEING:
            if abs(start / 1_000_000 - self.cue_target) < SEEK_BEYOND:
                self._deadline.stop()
                self.state = PlayerState.READY
                self.cued.emit(self)
            return
        if self.state is PlayerState.LOADING:
            self._deadline.stop()
            self.state = PlayerState.READY
            self._stale.start(LIVE_STALE_AFTER_MS if self.live else STALE_AFTER_MS)
            self.ready.emit(self)

    def _note_lag(self, start_us: int) -> None:
        """How far this frame, shown now, is behind the wall clock; not for a frame the sink
        has already replaced. The player decodes and presents on threads of its own and this
        signal is queued to the GUI thread: after the GUI thread was held up (a slow commit, a
        page's work), the frames presented meanwhile come here in a burst, each stamped late
        by the wait, though the video kept its time. Taken as lags they made an in-step video
        look as far behind as the wait (a median over the burst: half of it), and a wait of a
        second made it seek ahead for nothing."""
        current = self.player.videoSink().videoFrame()
        if current.isValid() and current.startTime() > start_us:
            return
        self._lags.append(time.time() - (self.due or 0.0) - start_us / 1_000_000)

    def _status(self, status: QMediaPlayer.MediaStatus) -> None:
        statuses = QMediaPlayer.MediaStatus
        if self.state is PlayerState.EMPTY:
            return
        if self.live:
            if status in (statuses.InvalidMedia, statuses.EndOfMedia):
                self.live_watch.lost(status.name)
            return
        if status is statuses.InvalidMedia:
            reason = f"cannot play the video: {self.player.errorString() or 'invalid media'}"
            self.fail(reason)
        elif status is statuses.LoadedMedia and not self.player.hasVideo():
            self.fail("no video track")
        elif status is statuses.EndOfMedia and self.state is PlayerState.PLAYING:
            self.state = PlayerState.ENDED
            self.ended.emit(self)

    def _error(self, error: QMediaPlayer.Error, text: str) -> None:
        if error is QMediaPlayer.Error.NoError or self.state is PlayerState.EMPTY:
            return
        if self.live:
            self.live_watch.lost(text or error.name)
            return
        self.fail(f"cannot play the video: {text or error.name}")

    def _correct(self) -> None:
        """Keep a synchronised video in step with the wall clock (the module's docstring)."""
        if self.state is not PlayerState.PLAYING or self.due is None:
            self._keep_step.stop()
            return
        if len(self._lags) < 5:
            return
        lag = statistics.median(self._lags)
        self.lag = lag
        self._lags.clear()
        if abs(lag) >= SEEK_BEYOND:
            target = time.time() - self.due + SEEK_LEAD
            log.info("video %s is %+.2f s off its turn: seeking to %.2f s", self.url, lag, target)
            self.seeks += 1
            self._set_rate(1.0)
            self.player.setPosition(round(target * 1000))
            return
        if abs(lag) <= DEADBAND * self.frame_period():
            rate = 1.0
        else:
            rate = 1.0 + max(-MAX_NUDGE, min(MAX_NUDGE, lag / CATCH_UP))
        if rate != self.rate:
            if rate != 1.0:
                self.nudges += 1
            log.debug("video %s %+.1f ms off its turn: rate %.4f", self.url, lag * 1000, rate)
            self._set_rate(rate)

    def _set_rate(self, rate: float) -> None:
        self.rate = rate
        self.player.setPlaybackRate(rate)

    def _too_slow(self) -> None:
        if self.state is PlayerState.CUEING:
            log.info("video %s: no frame at its cue within the time; starting anyway", self.url)
            self.state = PlayerState.READY
            self.cued.emit(self)
            return
        if self.state is PlayerState.LOADING:
            seconds = self._deadline.interval() / 1000
            self.fail(f"no frame decoded within {seconds:g} s (corrupt, or a codec not here)")

    def _went_stale(self) -> None:
        if self.state is PlayerState.READY and not self.shown:
            log.debug("releasing the prepared video %s: not shown", self.url)
            self.release()

    def _fetched(self, token: int, path: str, error: str) -> None:
        """The spool's answer for a video over HTTP: stream it (no path), or play the file it
        downloaded because the server answers no range requests."""
        if token not in self._asked:
            return  # the other player's
        self._asked.discard(token)
        if token != self._load or self.state is not PlayerState.LOADING:
            self._spool.forget(path)
            return
        if error:
            self.fail(f"cannot fetch the video: {error}")
            return
        self._spooled = path
        if path:
            self._open(Path(path).as_uri(), self._local_first_frame_ms)
        else:
            self._open(self.url or "", self._first_frame_ms)

    def fail(self, reason: str) -> None:
        """Give up on this video: released, ``failed`` emitted."""
        url = self.url or "?"
        self.release()
        self.failed.emit(self, url, reason)

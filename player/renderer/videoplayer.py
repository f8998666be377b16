"""Videos played natively: QtMultimedia's player in the scene, not the web engine.

Two players take turns (``qml/Video.qml``), as the two pictures do. The next video loads on
the player that is not in front and waits paused on its first decoded frame, so when it is
due it is raised at once and starts on that frame; the outgoing video plays on under the
cross-fade and then keeps its last frame until it is released. A player is released (its
decoder and frame buffers freed) as soon as it is covered, and a prepared one that is not shown
within ``STALE_AFTER_MS``.

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

from PySide6.QtCore import QObject, Qt, QTimer, QUrl, Signal
from PySide6.QtMultimedia import QMediaDevices, QMediaMetaData, QMediaPlayer, QVideoFrame
from PySide6.QtQuick import QQuickItem

from player.renderer.stage import Stage
from player.renderer.videospool import VideoSpool
from player.renderer.webslot import RETIRE_FRAMES

log = logging.getLogger("pdn.renderer")

# A local file that shows no frame by then cannot be played here (corrupt, no video track, a
# codec the platform lacks); a remote one gets the page load timeout. (Both, and STALLED_AFTER,
# are the defaults: [screen] timeout-factor stretches them, RendererOptions.from_config.)
LOCAL_FIRST_FRAME_MS = 3000
STALE_AFTER_MS = 120_000  # a prepared video not shown by then gives its decoder back
_LOADS = itertools.count(1)  # tokens of loads, unique across players
DOWNLOAD_MS = 300_000  # a video fetched whole (videospool.py) must be down by then
STALLED_AFTER = 5.0  # seconds a playing video may go without a new frame (a stalled stream)
DROPPED_WARNING = 0.05  # a video that dropped more of its frames than this is a warning
AV_LOG_ERROR = 16  # FFmpeg's log level for errors (libavutil/log.h)
# A synchronised video (see the module's docstring).
JOIN_AFTER = 0.1  # seconds: a video shown later than this into its turn is cued first
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
        stage: Stage,
        name: str,
        audio: bool,
        spool: VideoSpool,
        parent: QObject,
        local_first_frame_ms: int = LOCAL_FIRST_FRAME_MS,
    ) -> None:
        super().__init__(parent)
        self.name = name
        self._spool = spool
        self._load = 0  # this load's token: a download finishing for an older one is dropped
        self._asked: set[int] = set()  # tokens of the spool's answers still to come
        self._spooled = ""  # the downloaded file playing, when streaming could not work
        self._local_first_frame_ms = local_first_frame_ms
        self._first_frame_ms = local_first_frame_ms
        self._audio = audio
        self.item = stage.create("Video", {"audio": False})
        player = self.item.findChild(QMediaPlayer, "player")
        if player is None:
            raise RuntimeError("Video.qml has no 'player'")
        self.player = player
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

    def load(self, url: str, serial: int, first_frame_ms: int) -> None:
        """Open ``url`` and wait paused on its first frame (``ready``), or ``failed``."""
        self.release()
        self.url, self.serial = url, serial
        self.state = PlayerState.LOADING
        self.item.setOpacity(0.0)
        # Sound where a sound server offers an output (it may have come up since the last
        # video); where none does, no audio output at all: the track is dropped silently.
        self.item.setProperty(
            "audio", self._audio and not QMediaDevices.defaultAudioOutput().isNull()
        )
        self._load = next(_LOADS)
        self._first_frame_ms = first_frame_ms
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

    def release(self) -> None:
        """Stop and give the decoder and its frames back; hide the item."""
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
            self._stale.start(STALE_AFTER_MS)
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


class VideoLayer(QObject):
    """Videos on the stage: two players, one in front and one loading the next."""

    #: The video of this serial (given to :meth:`show`) is paused on its first frame in the
    #: back item and now starts: the kiosk raises it.
    presenting = Signal(int)
    #: The serial given to :meth:`show`, raised with its first frame decoded: that frame is
    #: on screen from the next swap, as a web view's is when it is raised having painted.
    painted = Signal(int)
    #: The video in front reached its end (its last frame stays): (serial).
    ended = Signal(int)
    #: A video could not be played: (url, reason).
    failed = Signal(str, str)

    def __init__(
        self,
        stage: Stage,
        audio: bool,
        remote_first_frame_s: float,
        spool_dir: Path | None,
        decoders: int = 2,
        *,
        local_first_frame_s: float = LOCAL_FIRST_FRAME_MS / 1000,
        stalled_after: float = STALLED_AFTER,
    ) -> None:
        super().__init__()  # no Qt parent: Python owns it, as the kiosk's other layers
        self._stage = stage
        self._decoders = decoders  # videos open at once ([screen] video-decoders)
        self._free_decoder_at: int | None = None  # the stage frame to release the shown one
        self._remote_first_frame_ms = round(remote_first_frame_s * 1000)
        self._local_first_frame_ms = round(local_first_frame_s * 1000)
        self._stalled_after = stalled_after
        self._spool = VideoSpool(spool_dir)
        self._players = [
            VideoPlayer(stage, name, audio, self._spool, self, self._local_first_frame_ms)
            for name in ("a", "b")
        ]
        quiet_ffmpeg()
        # On the GUI thread, just before the render thread takes the scene: what each player's
        # sink holds then is what is drawn (the honest count of frames on screen).
        stage.view.afterAnimating.connect(self._count_presented)
        for player in self._players:
            player.ready.connect(self._ready)
            player.failed.connect(self._failed)
            player.ended.connect(self._ended)
            player.cued.connect(self._cued)
        # A video cued to where it joins its turn starts on the instant it gets there.
        self._starting: VideoPlayer | None = None
        self._start_timer = QTimer(self)
        self._start_timer.setSingleShot(True)
        self._start_timer.setTimerType(Qt.TimerType.PreciseTimer)
        self._start_timer.timeout.connect(self._start_cued)
        self._front = 0  # the player in front when this layer is
        self._wanted: tuple[str, int] | None = None  # (url, serial) to present when ready
        self._due: float | None = None  # the turn's instant of the video wanted (synchronised)
        self._hint: str | None = None  # to prepare once the back player is free
        self.presents = 0  # videos brought in front so far
        self._serials = 0

    # -- what the kiosk asks --------------------------------------------------------------

    def prepare(self, url: str) -> None:
        """Load ``url`` paused on the back player, unless it is there already or the back
        player is still on screen (fading out): then once it is released."""
        if self._holding(url) is not None:
            return
        back = self._back()
        if back.shown or self._decoder_in_use():
            self._hint = url
            return
        self._serials += 1
        back.load(url, -self._serials, self._first_frame_ms(url))

    def must_free_decoder(self, url: str) -> bool:
        """With one decoder, showing ``url`` first takes the decoder from the video shown."""
        return self._holding(url) is None and self._decoder_in_use()

    def show(
        self, url: str, serial: int, held_on_still: bool = False, due: float | None = None
    ) -> None:
        """Bring ``url`` in front: at once if it is prepared, else once its first frame is
        decoded; ``painted(serial)`` follows, or ``failed(url, reason)``. With one decoder
        (:meth:`must_free_decoder`), the video shown lets it go first: once a still of its
        last frame is kept (``held_on_still``: the kiosk holds one over it), or now.
        ``due``: a synchronised video's turn began then (``time.time()``): it keeps to it."""
        self._hint = None
        self._due = due
        self._start_timer.stop()
        self._starting = None
        if self.must_free_decoder(url):
            self._wanted = (url, serial)
            if held_on_still:  # copied at the next frame, kept from the one after
                self._free_decoder_at = self._stage.frames + RETIRE_FRAMES
                self._stage.request_frame()
            else:
                self._free_decoder()
            return
        player = self._holding(url)
        if player is None:
            player = self._back()
            player.load(url, serial, self._first_frame_ms(url))
        player.serial = serial
        player.due = due
        self._wanted = (url, serial)
        if player.state is PlayerState.READY:
            self._start(player)

    def cancel(self) -> None:
        """The video on its way is no longer wanted (it stays prepared)."""
        self._wanted = None
        self._start_timer.stop()
        self._starting = None

    def frame_swapped(self) -> None:
        at = self._free_decoder_at
        if at is None:
            return
        if self._stage.frames >= at:
            self._free_decoder()
        else:  # a scene with nothing moving swaps no frames by itself
            self._stage.request_frame()

    def front_item(self) -> QQuickItem:
        return self._players[self._front].item

    def front_player(self) -> VideoPlayer:
        return self._players[self._front]

    def players(self) -> tuple[VideoPlayer, ...]:
        return tuple(self._players)

    def clear_back(self, presents: int) -> None:
        """Release the player that is not in front once it has been covered (a prepared one
        stays), and prepare a hint that waited for it; not if another video has come in front
        since ``presents`` (the back player is then the outgoing one of that newer fade)."""
        if presents != self.presents:
            return
        back = self._back()
        if back.shown:
            back.release()
        if self._hint is not None:
            hint, self._hint = self._hint, None
            self.prepare(hint)

    def clear(self) -> None:
        """Another layer is in front: release every player that has been shown."""
        for player in self._players:
            if player.shown:
                player.release()
        if self._hint is not None:
            hint, self._hint = self._hint, None
            self.prepare(hint)

    def check_stalled(self) -> None:
        """A video in front that is playing but has shown no new frame for ``STALLED_AFTER``
        seconds (times [screen] timeout-factor; a stream that stopped, a decoder that hung)
        fails: never a frozen screen."""
        player = self.front_player()
        if player.state is not PlayerState.PLAYING:
            return
        silent = time.monotonic() - player.last_new_frame
        if silent > self._stalled_after:
            player.fail(f"stalled: no new frame for {silent:.0f} s")

    def describe(self) -> dict[str, object] | None:
        """The video in front, for health: which backend decodes it, and how."""
        player = self.front_player()
        if not player.shown:
            return None
        described: dict[str, object] = {
            "url": player.url,
            "backend": media_backend(),
            "codec": player.codec(),
            "decoding": player.decoding(),
            "frames": player.presented,
        }
        if player.due is not None:
            described["sync"] = {
                "lag-ms": None if player.lag is None else round(player.lag * 1000, 1),
                "rate": round(player.rate, 4),
                "nudges": player.nudges,
                "seeks": player.seeks,
            }
        return described

    def close(self) -> None:
        self._wanted = None
        self._start_timer.stop()
        self._stage.view.afterAnimating.disconnect(self._count_presented)
        for player in self._players:
            player.ready.disconnect(self._ready)
            player.failed.disconnect(self._failed)
            player.ended.disconnect(self._ended)
            player.cued.disconnect(self._cued)
            player.close()
        self._spool.close()

    # -- internals ------------------------------------------------------------------------

    def _back(self) -> VideoPlayer:
        return self._players[1 - self._front]

    def _decoder_in_use(self) -> bool:
        """One decoder only, and a shown video holds it."""
        return self._decoders == 1 and any(player.shown for player in self._players)

    def _free_decoder(self) -> None:
        """Release the shown video (held on a still, or covered) and load the one wanted."""
        self._free_decoder_at = None
        for player in self._players:
            if player.shown:
                player.release()
        if self._wanted is not None:
            url, serial = self._wanted
            self.show(url, serial, due=self._due)

    def _holding(self, url: str) -> VideoPlayer | None:
        """The player with ``url`` loaded and not yet shown (never the one in front)."""
        for player in self._players:
            if player.url == url and not player.shown and player.state is not PlayerState.EMPTY:
                return player
        return None

    def _first_frame_ms(self, url: str) -> int:
        local = urlsplit(url).scheme in ("file", "")
        local_ms = self._local_first_frame_ms
        return local_ms if local else max(self._remote_first_frame_ms, local_ms)

    def _present(self, player: VideoPlayer) -> None:
        assert self._wanted is not None
        _, serial = self._wanted
        self._wanted = None
        self._front = self._players.index(player)
        self.presents += 1
        player.item.setOpacity(0.0)  # shown by the kiosk's swap (raised, faded in or not)
        player.item.setVisible(True)
        player.play()
        self.presenting.emit(serial)
        self._stage.request_frame()
        self.painted.emit(serial)

    def _ready(self, player: VideoPlayer) -> None:
        if self._wanted is not None and player.url == self._wanted[0] and not player.shown:
            self._start(player)

    def _start(self, player: VideoPlayer) -> None:
        """Present ``player`` now, or, a synchronised video joining its turn late, cue it to
        where it will be :data:`CUE_LEAD` from now and present it then."""
        late = player.lateness()
        if late is None or late < JOIN_AFTER:
            self._present(player)
            return
        length = player.duration()
        target = late + CUE_LEAD
        if length is not None:
            target = min(target, max(0.0, length - player.frame_period()))
        log.info("video %s joins its turn %.2f s in: cued to %.2f s", player.url, late, target)
        player.cue(target)

    def _cued(self, player: VideoPlayer) -> None:
        if self._wanted is None or player.url != self._wanted[0] or player.shown:
            return
        if player.due is None:
            self._present(player)
            return
        wait = player.due + player.cue_target - time.time()
        if wait <= 0.001:
            self._present(player)  # the cue took longer than its lead: keeping step catches up
            return
        self._starting = player
        self._start_timer.start(int(wait * 1000))

    def _start_cued(self) -> None:
        player, self._starting = self._starting, None
        if player is None or self._wanted is None or player.url != self._wanted[0]:
            return
        if player.due is not None:
            wait = player.due + player.cue_target - time.time()
            if wait > 0.0005:
                self._starting = player
                self._start_timer.start(int(wait * 1000))
                return
        self._present(player)

    def _failed(self, player: VideoPlayer, url: str, reason: str) -> None:
        log.warning("video %s (player %s): %s", url, player.name, reason)
        if self._wanted is not None and self._wanted[0] == url:
            self._wanted = None
        self.failed.emit(url, reason)

    def _count_presented(self) -> None:
        for player in self._players:
            player.count_presented()

    def _ended(self, player: VideoPlayer) -> None:
        # Counted on screen, not in the sink: a 1080p video on a slow GPU is decoded in full
        # and drawn in part, and that part is what the audience saw.
        expected = player.frames_due()
        if expected:
            dropped = max(0, expected - player.presented)
            share = dropped / expected
            log.log(
                logging.WARNING if share > DROPPED_WARNING else logging.INFO,
                "video ended: %d of %d frames dropped (%.1f %%, %s, decoded in %s, "
                "%d decoded): %.200s",
                dropped,
                expected,
                share * 100,
                player.codec(),
                player.decoding(),
                player.frames,
                player.url,
            )
        if player is self.front_player():
            self.ended.emit(player.serial)

"""Videos played natively: QtMultimedia's player in the scene, not the web engine.

Two players take turns (``qml/Video.qml``), as the two pictures do. The next video loads on
the player that is not in front and waits paused on its first decoded frame, so when it is
due it is raised at once and starts on that frame; the outgoing video plays on under the
cross-fade and then keeps its last frame until it is released. A player is released (its
decoder and frame buffers freed) as soon as it is covered, and a prepared one that is not shown
within ``videoplayer.STALE_AFTER_MS``.

A live stream (HLS, RTSP, SRT) takes the same two players. Prepared, it plays hidden and muted
on the back player (a paused live source would fall behind live); shown, it is raised on the
frame it is at. Shown again while it plays in front (a set whose only item it is), it plays
on: nothing is reopened. It is never cued to a wall-clock turn.

One player, its decoder and how it keeps a synchronised video to the wall clock, is
``player.renderer.videoplayer``; how a live stream is reopened and given up on,
``player.renderer.livestream``.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path
from urllib.parse import urlsplit

from PySide6.QtCore import QObject, Qt, QTimer, Signal
from PySide6.QtQuick import QQuickItem

from player.renderer.stage import Stage, region_layer
from player.renderer.videoplayer import (
    CUE_LEAD,
    LOCAL_FIRST_FRAME_MS,
    STALLED_AFTER,
    PlayerState,
    VideoPlayer,
    media_backend,
    quiet_ffmpeg,
)
from player.renderer.videospool import VideoSpool
from player.renderer.webslot import RETIRE_FRAMES

log = logging.getLogger("pdn.renderer")

DROPPED_WARNING = 0.05  # a video that dropped more of its frames than this is a warning
JOIN_AFTER = 0.1  # seconds: a video shown later than this into its turn is cued first


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
        region: QQuickItem,
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
            VideoPlayer(
                region_layer(region, "video" + name.upper()),
                name,
                audio,
                self._spool,
                self,
                self._local_first_frame_ms,
                live_give_up=stalled_after,
            )
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
        self._hint: tuple[str, bool] | None = None  # (url, live) to prepare once it can be
        self.presents = 0  # videos brought in front so far
        self._serials = 0
        self._live = False  # the video wanted is a live stream

    # -- what the kiosk asks --------------------------------------------------------------

    def prepare(self, url: str, live: bool = False) -> None:
        """Load ``url`` paused on the back player, unless it is there already or the back
        player is still on screen (fading out): then once it is released. A live stream
        (``live``) plays hidden instead, unless it plays in front already."""
        if self._holding(url) is not None or (live and self.plays_live(url)):
            return
        back = self._back()
        if back.shown or self._decoder_in_use():
            self._hint = (url, live)
            return
        self._serials += 1
        back.load(url, -self._serials, self._first_frame_ms(url), live)

    def plays_live(self, url: str) -> bool:
        """The live stream at ``url`` plays in front: shown again, it plays on."""
        player = self.front_player()
        return (
            player.live
            and player.shown
            and player.url == url
            and player.state is PlayerState.PLAYING
        )

    def must_free_decoder(self, url: str) -> bool:
        """With one decoder, showing ``url`` first takes the decoder from the video shown."""
        return self._holding(url) is None and self._decoder_in_use()

    def show(
        self,
        url: str,
        serial: int,
        held_on_still: bool = False,
        due: float | None = None,
        live: bool = False,
    ) -> None:
        """Bring ``url`` in front: at once if it is prepared, else once its first frame is
        decoded; ``painted(serial)`` follows, or ``failed(url, reason)``. With one decoder
        (:meth:`must_free_decoder`), the video shown lets it go first: once a still of its
        last frame is kept (``held_on_still``: the kiosk holds one over it), or now.
        ``due``: a synchronised video's turn began then (``time.time()``): it keeps to it (not a
        live stream, which is always at live)."""
        if live:
            due = None
        self._live = live
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
            player.load(url, serial, self._first_frame_ms(url), live)
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
            self.prepare(*hint)

    def clear(self) -> None:
        """Another layer is in front: release every player that has been shown."""
        for player in self._players:
            if player.shown:
                player.release()
        if self._hint is not None:
            hint, self._hint = self._hint, None
            self.prepare(*hint)

    def check_stalled(self) -> None:
        """A video in front that is playing but has shown no new frame for ``STALLED_AFTER``
        seconds (times [screen] timeout-factor; a stream that stopped, a decoder that hung)
        fails: never a frozen screen."""
        player = self.front_player()
        if player.state is not PlayerState.PLAYING or player.live:
            return  # a live stream's own watch reopens it, and gives up on it
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
        if player.live:
            described["live"] = {"reopens": player.live_watch.reopens}
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
            self.show(url, serial, due=self._due, live=self._live)

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

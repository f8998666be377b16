"""What an uploaded file is, checked before anything is stored (docs/media.md, "Checked on
arrival"): its kind from its name's extension, its content from its first bytes, then a full
decode. Pictures with Pillow; videos with PyAV (FFmpeg's libraries in a wheel: no subprocess,
no Debian package, and the same code on a server and a Pi), which also gives the duration,
codec, profile and the poster frame.

Refusals are :class:`RefusedError`, carrying the HTTP status and the JSON error code the API
answers with.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from pathlib import Path

import av
import av.error
from PIL import Image, UnidentifiedImageError

from server.scheduler.media.thumbnails import thumbnail

__all__ = [
    "BUNDLE_TYPES",
    "IMAGE_TYPES",
    "VIDEO_TYPES",
    "Probed",
    "RefusedError",
    "check_name",
    "probe",
]

#: Extension -> (Pillow's format, MIME type).
IMAGE_TYPES = {
    "jpg": ("JPEG", "image/jpeg"),
    "jpeg": ("JPEG", "image/jpeg"),
    "png": ("PNG", "image/png"),
    "webp": ("WEBP", "image/webp"),
    "gif": ("GIF", "image/gif"),
}
#: Extension -> (the container family sniffed from the first bytes, MIME type).
VIDEO_TYPES = {
    "mp4": ("isobmff", "video/mp4"),
    "mov": ("isobmff", "video/quicktime"),
    "mkv": ("matroska", "video/x-matroska"),
    "webm": ("matroska", "video/webm"),
}
#: Extension -> (sniffed kind, MIME type) of a web page bundle (``server.scheduler.media.bundle``).
BUNDLE_TYPES = {"zip": ("zip", "application/zip")}
#: Why PDF is refused: a real ``pdn display`` was shown one (docs/media.md, "PDF").
PDF_REFUSED = (
    "the displays' web engine does not show PDF (it downloads it instead of painting it);"
    " export its pages as pictures (PNG) or as a web page bundle (a zip with index.html)"
)
#: Video codecs a WebM may hold.
WEBM_CODECS = frozenset(("vp8", "vp9", "av1"))
#: Larger pictures are refused (a decompression bomb, or no screen's business).
MAX_PIXELS = 16384 * 16384


class RefusedError(Exception):
    """The file is not taken: ``status`` and ``error`` for the JSON error body."""

    def __init__(self, status: int, error: str, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.error = error
        self.message = message


@dataclass(frozen=True)
class Probed:
    kind: str  # "image" | "video"
    mime: str
    width: int
    height: int
    thumbnail: bytes
    duration: float | None = None
    codec: str | None = None
    profile: str | None = None
    fps: float | None = None


def extension(name: str) -> str:
    return name.rpartition(".")[2].lower() if "." in name else ""


def sniff(head: bytes) -> str | None:
    """The kind of content the first bytes say: a Pillow format, a container family, or None."""
    if head.startswith(b"\xff\xd8\xff"):
        return "JPEG"
    if head.startswith(b"\x89PNG\r\n\x1a\n"):
        return "PNG"
    if head[:6] in (b"GIF87a", b"GIF89a"):
        return "GIF"
    if head[:4] == b"RIFF" and head[8:12] == b"WEBP":
        return "WEBP"
    if head[4:8] in (b"ftyp", b"moov", b"mdat", b"wide", b"free"):
        return "isobmff"
    if head.startswith(b"\x1a\x45\xdf\xa3"):
        return "matroska"
    if head.startswith((b"PK\x03\x04", b"PK\x05\x06")):
        return "zip"
    if head.startswith(b"%PDF-"):
        return "PDF"
    return None


def check_name(path: Path, name: str) -> str:
    """The cheap checks: the name's extension is taken and the first bytes are that kind of
    content. Returns the extension; :class:`RefusedError` when not."""
    ext = extension(name)
    if ext == "pdf":
        raise RefusedError(415, "unsupported-type", f"'{name}': {PDF_REFUSED}.")
    if ext not in IMAGE_TYPES and ext not in VIDEO_TYPES and ext not in BUNDLE_TYPES:
        taken = ", ".join(sorted([*IMAGE_TYPES, *VIDEO_TYPES, *BUNDLE_TYPES]))
        raise RefusedError(
            415,
            "unsupported-type",
            f"'{name}' is not a type the library takes; name the file with one of: {taken}.",
        )
    with path.open("rb") as file:
        head = file.read(32)
    found = sniff(head)
    expected = {**IMAGE_TYPES, **VIDEO_TYPES, **BUNDLE_TYPES}[ext][0]
    if found is None:
        raise RefusedError(
            422,
            "corrupt",
            f"'{name}' is empty, damaged or not a picture, video or zip; upload the file again.",
        )
    if found != expected:
        raise RefusedError(
            422,
            "type-mismatch",
            f"'{name}' is named .{ext} but holds {found} content; rename it or export it"
            f" again as .{ext}.",
        )
    return ext


def probe(path: Path, name: str) -> Probed:
    """Check the file at ``path``, uploaded as ``name``, whole; :class:`RefusedError` when it is
    not taken."""
    ext = check_name(path, name)
    if ext in IMAGE_TYPES:
        return _image(path, name, ext)
    return _video(path, name, ext)


def _image(path: Path, name: str, ext: str) -> Probed:
    corrupt = RefusedError(
        422, "corrupt", f"'{name}' does not decode as a picture (truncated or damaged)."
    )
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", Image.DecompressionBombWarning)
            with Image.open(path) as image:
                if image.width * image.height > MAX_PIXELS:
                    raise RefusedError(
                        422,
                        "corrupt",
                        f"'{name}' is {image.width}x{image.height} pixels; the largest taken"
                        " is 16384x16384.",
                    )
                image.verify()
            with Image.open(path) as image:
                image.load()
                return Probed(
                    kind="image",
                    mime=IMAGE_TYPES[ext][1],
                    width=image.width,
                    height=image.height,
                    thumbnail=thumbnail(image),
                )
    except RefusedError:
        raise
    except (UnidentifiedImageError, OSError, SyntaxError, ValueError, EOFError) as error:
        raise corrupt from error
    except (Image.DecompressionBombWarning, Image.DecompressionBombError) as error:
        raise corrupt from error


def _video(path: Path, name: str, ext: str) -> Probed:
    corrupt = f"'{name}' does not read as a video (truncated or damaged); upload it again."
    try:
        container = av.open(str(path), mode="r")
    except (av.error.FFmpegError, OSError, ValueError) as error:
        raise RefusedError(422, "corrupt", corrupt) from error
    with container:
        if not container.streams.video:
            raise RefusedError(
                422, "no-video-stream", f"'{name}' has no video stream (sound only?)."
            )
        stream = container.streams.video[0]
        codec = stream.codec_context.name
        if ext == "webm" and codec not in WEBM_CODECS:
            raise RefusedError(
                422,
                "type-mismatch",
                f"'{name}' is named .webm but its video is {codec}; a WebM holds VP8, VP9 or"
                " AV1: name it .mkv.",
            )
        try:
            poster = None
            for frame in container.decode(stream):
                poster = frame.to_image()  # type: ignore[no-untyped-call]
                break
        except (av.error.FFmpegError, ValueError) as error:
            raise RefusedError(
                422, "no-video-stream", f"'{name}': its video stream does not decode ({codec})."
            ) from error
        if poster is None:
            raise RefusedError(
                422, "no-video-stream", f"'{name}': its video stream has no frame that decodes."
            )
        _whole(container, stream, name, corrupt)
        duration = None
        if container.duration is not None:
            duration = container.duration / av.time_base
        elif stream.duration is not None and stream.time_base is not None:
            duration = float(stream.duration * stream.time_base)
        profile = stream.codec_context.profile
        rate = stream.average_rate or stream.guessed_rate
        return Probed(
            kind="video",
            mime=VIDEO_TYPES[ext][1],
            width=stream.codec_context.width,
            height=stream.codec_context.height,
            thumbnail=thumbnail(poster),
            duration=duration,
            codec=codec,
            profile=str(profile) if profile else None,
            fps=float(rate) if rate else None,
        )


def _whole(
    container: av.container.InputContainer, stream: av.VideoStream, name: str, message: str
) -> None:
    """Read every packet of the video stream (no decoding): a file cut short has fewer than
    its index says, or fails to read."""
    container.seek(0)
    count = 0
    try:
        for packet in container.demux(stream):
            if packet.size:
                count += 1
    except (av.error.FFmpegError, ValueError) as error:
        raise RefusedError(422, "corrupt", message) from error
    if stream.frames and count < stream.frames:
        raise RefusedError(422, "corrupt", message)
    if count == 0:
        raise RefusedError(422, "no-video-stream", f"'{name}': its video stream is empty.")

"""The small JPEG shown for each item of the media library (a picture shrunk, a video's first
frame), made with Pillow when the item is stored, so lists and playlists need no decoding."""

from __future__ import annotations

import io

from PIL import Image

__all__ = ["THUMBNAIL_SIZE", "thumbnail"]

#: The largest thumbnail, in pixels (16:9, aspect kept).
THUMBNAIL_SIZE = (320, 180)


def thumbnail(image: Image.Image) -> bytes:
    """``image`` shrunk to fit ``THUMBNAIL_SIZE``, as JPEG bytes (transparency on white)."""
    picture = image.copy()
    picture.thumbnail(THUMBNAIL_SIZE)
    if picture.mode in ("RGBA", "LA", "P"):
        picture = picture.convert("RGBA")
        background = Image.new("RGB", picture.size, (255, 255, 255))
        background.paste(picture, mask=picture.getchannel("A"))
        picture = background
    elif picture.mode != "RGB":
        picture = picture.convert("RGB")
    out = io.BytesIO()
    picture.save(out, "JPEG", quality=80)
    return out.getvalue()

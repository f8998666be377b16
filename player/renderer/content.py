"""What kind of thing an item is, and the small page the renderer wraps a remote image in."""

from __future__ import annotations

import json
import mimetypes
from enum import Enum
from pathlib import PurePosixPath
from urllib.parse import unquote, urlsplit

from cds.layouts import native_kind
from cds.streams import is_stream
from player.playitem import PlayItem
from player.renderer.imagelayer import NATIVE_FORMATS

IDLE_TOKEN = -1  # the idle page's own "item": never reported to the engine


class Kind(Enum):
    PAGE = "page"  # loaded as it is
    NATIVE_IMAGE = "native-image"  # a local still image: decoded and drawn by Qt
    IMAGE = "image"  # a remote (or animated / vector) image: wrapped in a page
    VIDEO = "video"  # played natively (videolayer.py), not by the web engine; a live stream too
    TICKER = "ticker"  # a zone's ticker: text or a feed scrolled by Qt Quick (zonelayer.py)
    CLOCK = "clock"  # a zone's clock, drawn by Qt Quick (zonelayer.py)


def _suffix(url: str) -> str:
    return PurePosixPath(unquote(urlsplit(url).path)).suffix.lower().lstrip(".")


def media_type(item: PlayItem) -> str:
    """The item's media type: as given, else guessed from its URL (``""`` when unknown)."""
    if item.content_type:
        return item.content_type.split(";")[0].strip().lower()
    for url in (item.url, item.source_url):
        guessed, _ = mimetypes.guess_type(urlsplit(url).path)
        if guessed:
            return guessed
    return ""


# Containers the native player opens, for a server that says application/octet-stream.
VIDEO_SUFFIXES = frozenset({"mp4", "m4v", "mov", "mkv", "webm"})


def is_live(item: PlayItem) -> bool:
    """The item is a live stream (``cds.streams``): a video with no end, never spooled."""
    return is_stream(item.source_url or item.url, item.content_type) or is_stream(
        item.url, item.content_type
    )


def classify(item: PlayItem) -> Kind:
    native = native_kind(item.content_type)  # as the CDS names it, never guessed from the URL
    if native is not None:
        return Kind.TICKER if native == "ticker" else Kind.CLOCK
    if is_live(item):
        return Kind.VIDEO
    kind = media_type(item)
    if kind.startswith("video/") or kind.startswith("audio/"):
        return Kind.VIDEO
    if kind in ("application/octet-stream", "binary/octet-stream") and any(
        _suffix(url) in VIDEO_SUFFIXES for url in (item.url, item.source_url)
    ):
        return Kind.VIDEO
    if kind.startswith("image/"):
        if item.url.startswith("file:") and _suffix(item.url) in NATIVE_FORMATS:
            return Kind.NATIVE_IMAGE
        return Kind.IMAGE
    return Kind.PAGE


def local_path(url: str) -> str:
    return unquote(urlsplit(url).path)


# The wrapper page's background: the views' own "nothing painted yet" colour (webslot's
# UNPAINTED), so the check that a frame has reached the screen waits for the image instead of
# taking a black page for it. Nobody can tell it from black.
BACKDROP = "rgb(1,2,3)"


def _js(value: object) -> str:
    # JSON is valid JavaScript; "</" is escaped so a URL cannot close the script element.
    return json.dumps(value).replace("</", "<\\/")


def image_page(url: str) -> str:
    """An image centred on black and scaled to fit, as a page."""
    return f"""<!doctype html><html><head><meta charset="utf-8"><style>
html,body{{margin:0;height:100%;background:{BACKDROP};overflow:hidden}}
img{{width:100vw;height:100vh;object-fit:contain;display:block}}
</style></head><body><img id="pdn-image" alt=""><script>
document.getElementById('pdn-image').src = {_js(url)};
</script></body></html>"""


def context_script(readings: dict[str, object]) -> str:
    """The ``window.pdn`` API (see the package docstring), seeded with ``readings``."""
    return f"""(function () {{
  if (window.pdn && window.pdn.__update) {{ window.pdn.__update({_js(readings)}); return; }}
  const listeners = [];
  const api = {{
    sensors: {_js(readings)},
    onSensor: function (callback) {{
      listeners.push(callback);
      try {{ callback(api.sensors); }} catch (error) {{ console.error(error); }}
      return function () {{
        const at = listeners.indexOf(callback);
        if (at >= 0) listeners.splice(at, 1);
      }};
    }},
    __update: function (readings) {{
      api.sensors = readings;
      for (const callback of listeners.slice()) {{
        try {{ callback(readings); }} catch (error) {{ console.error(error); }}
      }}
      window.dispatchEvent(new CustomEvent('pdn-sensors', {{detail: readings}}));
    }},
  }};
  Object.defineProperty(window, 'pdn', {{value: api, writable: false, configurable: false}});
}})();"""


def update_script(readings: dict[str, object]) -> str:
    return f"window.pdn && window.pdn.__update && window.pdn.__update({_js(readings)});"

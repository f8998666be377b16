"""What kind of thing an item is, and the small pages the renderer wraps media in."""

from __future__ import annotations

import json
import mimetypes
from enum import Enum
from pathlib import PurePosixPath
from urllib.parse import unquote, urlsplit

from player.playitem import PlayItem
from player.renderer.imagelayer import NATIVE_FORMATS

IDLE_TOKEN = -1  # the idle page's own "item": never reported to the engine


class Kind(Enum):
    PAGE = "page"  # loaded as it is
    NATIVE_IMAGE = "native-image"  # a local still image: decoded and drawn by Qt
    IMAGE = "image"  # a remote (or animated / vector) image: wrapped in a page
    VIDEO = "video"  # wrapped in a page with a <video>


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


def classify(item: PlayItem) -> Kind:
    kind = media_type(item)
    if kind.startswith("video/") or kind.startswith("audio/"):
        return Kind.VIDEO
    if kind.startswith("image/"):
        if item.url.startswith("file:") and _suffix(item.url) in NATIVE_FORMATS:
            return Kind.NATIVE_IMAGE
        return Kind.IMAGE
    return Kind.PAGE


def local_path(url: str) -> str:
    return unquote(urlsplit(url).path)


# The wrapper pages' background: the views' own "nothing painted yet" colour (webslot's
# UNPAINTED), so the check that a frame has reached the screen waits for the image or the
# video's first frame instead of taking a black page for it. Nobody can tell it from black.
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


def video_page(url: str, media: str, channel: str, generation: int) -> str:
    """A page that plays one video, fitted on black, and reports through the console channel.

    It says ``painted`` once the first frame is decoded and drawn (with the natural length),
    ``failed`` with a reason when the platform cannot decode it (checked with ``canPlayType``
    first, so an undecodable item never reaches the screen), and ``ended`` with the frames
    presented and dropped (``getVideoPlaybackQuality``: whether this board keeps up). It
    waits paused on its first frame until the renderer calls ``window.pdnPlay()`` (the item
    is due); an ended video keeps its last frame on screen until the next item replaces it.
    """
    return f"""<!doctype html><html><head><meta charset="utf-8"><style>
html,body{{margin:0;height:100%;background:{BACKDROP};overflow:hidden}}
video{{width:100vw;height:100vh;object-fit:contain;display:block;background:{BACKDROP}}}
</style></head><body><video id="pdn-video" preload="auto" playsinline></video><script>
(function () {{
  const channel = {_js(channel)}, generation = {generation};
  const send = (event, data) => console.log(channel + JSON.stringify(
      Object.assign({{generation: generation, event: event}}, data || {{}})));
  const video = document.getElementById('pdn-video');
  const media = {_js(media)};
  let done = false;
  const fail = (reason) => {{ if (!done) {{ done = true; send('failed', {{reason: reason}}); }} }};
  window.pdnPlay = () => video.play().catch((error) => fail('playback refused: ' + error));
  if (media && video.canPlayType(media) === '') {{
    fail('this platform cannot decode ' + media);
    return;
  }}
  video.addEventListener('error', () => {{
    const error = video.error;
    fail('cannot play the video (' + (error ? error.code + ' ' + error.message : 'error') + ')');
  }});
  video.addEventListener('loadeddata', () => {{
    if (!video.videoWidth) {{ fail('no decodable video track'); return; }}
    const painted = () => requestAnimationFrame(() => requestAnimationFrame(() => {{
      if (done) return;
      done = true;
      send('painted', {{duration: isFinite(video.duration) ? video.duration : null}});
    }}));
    // Wait for the first frame to be handed to the compositor where the browser can say so.
    // (A paused video may never present one: after half a second, go on without.)
    if (video.requestVideoFrameCallback) {{
      video.requestVideoFrameCallback(painted);
      setTimeout(painted, 500);
    }} else painted();
  }}, {{once: true}});
  video.addEventListener('ended', () => {{
    const quality = video.getVideoPlaybackQuality ? video.getVideoPlaybackQuality() : null;
    send('ended', quality ? {{frames: quality.totalVideoFrames,
                             dropped: quality.droppedVideoFrames}} : {{}});
  }});
  video.src = {_js(url)};
}})();
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

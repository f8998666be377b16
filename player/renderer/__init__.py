"""The kiosk renderer: a fullscreen Qt Quick scene that plays PlayItems without a glitch.

Use::

    from player.renderer import KioskRenderer, RendererOptions, prepare_process

    prepare_process()                      # before the application exists
    app = QGuiApplication([...])
    renderer = KioskRenderer(RendererOptions(display_name="Lobby", api_url="http://..."))
    renderer.set_listener(engine_listener)  # item_shown / item_failed / item_ended

It implements :class:`player.playitem.Renderer` (``prepare``, ``show``, ``show_idle``) and
adds ``grab_png()`` (a PNG of the screen, GUI thread only), ``set_context(readings)``,
``last_frame_time()`` (``time.monotonic()`` of the last frame known painted), ``alive`` and
``close()``.

Content kinds: web pages load as they are (a Qt WebEngine view item per navigation); a still
image in the content cache (``file://`` PNG/JPEG/WebP/BMP/TIFF) is decoded off the GUI thread
and drawn natively (a Qt Quick image item); other images and videos are wrapped in a small page
(fitted on black). A video the platform cannot decode (``canPlayType``) fails
with the reason; its natural length is reported when the item has no duration, and
``item_ended`` when it finishes.

Context API for web content (injected into every page and frame at document creation)::

    window.pdn.sensors            // {"<sensor-id>": <latest reading>, ...}
    window.pdn.onSensor(cb)       // cb(sensors) now and on every update; returns an unsubscribe
    window.addEventListener("pdn-sensors", (event) => event.detail /* the sensors */)

``set_context`` replaces ``window.pdn.sensors`` in pages already shown and in those to come.
"""

from player.renderer.kiosk import KioskRenderer
from player.renderer.options import RendererOptions, prepare_process

__all__ = ["KioskRenderer", "RendererOptions", "prepare_process"]

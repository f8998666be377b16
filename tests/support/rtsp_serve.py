"""An RTSP camera on loopback for the live-stream tests: GStreamer's RTSP server sending one flat
colour, H.264 over RTP, live at 25 frames a second (as an IP camera does).

Run by Debian's ``python3`` (``python3-gi``, ``gir1.2-gst-rtsp-server-1.0``, GStreamer's base,
good and ugly plugins: ``bash packaging/dev.sh setup`` installs them), not the project's
interpreter, which has no GObject bindings: ``python3 rtsp_serve.py PORT RRGGBB``. It prints
``ready`` once it listens on 127.0.0.1:PORT (the stream at ``/live``) and serves until it is
ended; :class:`tests.support.livestream.RtspStream` runs it.
"""

from __future__ import annotations

import sys

import gi  # type: ignore[import-not-found]

gi.require_version("Gst", "1.0")
gi.require_version("GstRtspServer", "1.0")
from gi.repository import GLib, Gst, GstRtspServer  # type: ignore[import-not-found]  # noqa: E402


def main() -> int:
    port, colour = sys.argv[1], sys.argv[2]
    Gst.init(None)
    server = GstRtspServer.RTSPServer()
    server.set_address("127.0.0.1")
    server.set_service(port)
    factory = GstRtspServer.RTSPMediaFactory()
    factory.set_launch(
        "( videotestsrc is-live=true pattern=solid-color"
        f" foreground-color=0xff{colour}"
        " ! video/x-raw,width=320,height=240,framerate=25/1"
        " ! x264enc tune=zerolatency speed-preset=ultrafast key-int-max=25"
        " ! rtph264pay name=pay0 pt=96 config-interval=1 )"
    )
    factory.set_shared(True)  # one encoder for every client, as a camera has
    server.get_mount_points().add_factory("/live", factory)
    if server.attach(None) == 0:
        print(f"cannot listen on 127.0.0.1:{port}", file=sys.stderr)
        return 1
    print("ready", flush=True)
    GLib.MainLoop().run()
    return 0


if __name__ == "__main__":
    sys.exit(main())

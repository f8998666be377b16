"""Settings every test process shares.

Qt WebEngine runs for real in the tests: offscreen by default (no screen here), on a real
Xvfb where a test needs a whole X screen. Chromium's sandbox cannot run as root.
"""

from __future__ import annotations

import os

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
os.environ.setdefault("QTWEBENGINE_DISABLE_SANDBOX", "1")
# Chromium must not try the network beyond loopback, nor use a GPU that is not there.
os.environ.setdefault(
    "QTWEBENGINE_CHROMIUM_FLAGS",
    "--disable-gpu --disable-background-networking --disable-component-update",
)

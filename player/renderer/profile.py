"""The kiosk's Chromium profile: where pages keep their storage, a bounded HTTP cache, the
settings every page gets, and the script that hands web content its context (sensor readings).
"""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import QObject
from PySide6.QtWebEngineCore import QWebEngineProfile, QWebEngineScript, QWebEngineSettings

from player.renderer.content import context_script
from player.renderer.options import RendererOptions

CONTEXT_SCRIPT = "pdn-context"


def make_profile(
    options: RendererOptions, parent: QObject, readings: dict[str, object]
) -> QWebEngineProfile:
    cache_bytes = options.http_cache_mb * 1024 * 1024
    if options.data_dir is not None:
        root = Path(options.data_dir)
        profile = QWebEngineProfile("pdn-kiosk", parent)
        profile.setPersistentStoragePath(str(root / "web" / "storage"))
        profile.setCachePath(str(root / "web" / "cache"))
        profile.setHttpCacheType(QWebEngineProfile.HttpCacheType.DiskHttpCache)
    else:
        profile = QWebEngineProfile(parent)  # off the record: nothing on disk
        profile.setHttpCacheType(QWebEngineProfile.HttpCacheType.MemoryHttpCache)
    # Bounded, whichever kind: an unbounded cache is one of the slow leaks of other players.
    profile.setHttpCacheMaximumSize(cache_bytes)
    settings = profile.settings()
    attribute = QWebEngineSettings.WebAttribute
    for key, value in (
        (attribute.ShowScrollBars, False),
        (attribute.PlaybackRequiresUserGesture, False),
        (attribute.ErrorPageEnabled, False),
        (attribute.JavascriptCanOpenWindows, False),
        (attribute.FocusOnNavigationEnabled, False),
        (attribute.LocalContentCanAccessFileUrls, True),
        (attribute.FullScreenSupportEnabled, False),
    ):
        settings.setAttribute(key, value)
    install_context_script(profile, readings)
    return profile


def install_context_script(profile: QWebEngineProfile, readings: dict[str, object]) -> None:
    scripts = profile.scripts()
    for old in scripts.find(CONTEXT_SCRIPT):
        scripts.remove(old)
    script = QWebEngineScript()
    script.setName(CONTEXT_SCRIPT)
    script.setSourceCode(context_script(readings))
    script.setInjectionPoint(QWebEngineScript.InjectionPoint.DocumentCreation)
    script.setWorldId(QWebEngineScript.ScriptWorldId.MainWorld)
    script.setRunsOnSubFrames(True)
    scripts.insert(script)

"""The kiosk's Chromium profile: where pages keep their storage and a bounded HTTP cache, and
the guard every request of its pages passes (``guard.py``: the display's own schemes, and what
no page may reach).

The settings every page gets and the script that hands web content its context (sensor
readings) are set on each view (``qml/WebView.qml``), which is fresh for every navigation.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from PySide6.QtCore import Q_RETURN_ARG, QMetaObject, QObject, QUrl, qVersion
from PySide6.QtQml import QQmlEngine
from PySide6.QtWebEngineQuick import QQuickWebEngineProfile

from player.renderer.guard import (
    DISPLAY_SCHEME,
    GUARD_PROPERTY,
    ITEM_FILES,
    ITEM_SCHEME,
    ItemSchemeHandler,
    RequestGuard,
)
from player.renderer.idle import assets_dir
from player.renderer.options import RendererOptions

STORAGE_NAME = "pdn-kiosk"
# Qt 6.9 asks for profiles made through this QML type; 6.8 (the floor of the display extra's
# range) does not have it.
_PROTOTYPE = b"import QtWebEngine\nWebEngineProfilePrototype {}"


def _has_prototype() -> bool:
    major, minor = (int(part) for part in qVersion().split(".")[:2])
    return (major, minor) >= (6, 9)


def make_profile(
    options: RendererOptions, engine: QQmlEngine, parent: QObject
) -> tuple[QQuickWebEngineProfile, QObject, tuple[QObject, ...]]:
    """The profile, the object to delete to free it (the profile, or on Qt 6.9 and later
    the QML prototype that made and owns it) after every view that uses it is gone, and its
    scheme handler and request guard, which the caller keeps (Qt does not own them)."""
    cache_bytes = options.http_cache_mb * 1024 * 1024
    cache = QQuickWebEngineProfile.HttpCacheType
    settings: dict[str, Any] = {"httpCacheMaximumSize": cache_bytes}
    if options.data_dir is not None:
        root = Path(options.data_dir)
        settings |= {
            "storageName": STORAGE_NAME,
            "persistentStoragePath": str(root / "web" / "storage"),
            "cachePath": str(root / "web" / "cache"),
            "httpCacheType": cache.DiskHttpCache,
        }
    else:  # off the record: nothing on disk
        settings["httpCacheType"] = cache.MemoryHttpCache
    made = _from_prototype(engine, settings, parent) if _has_prototype() else None
    if made is not None:
        profile, owner = made
    else:
        profile = QQuickWebEngineProfile(parent)
        owner = profile
        if "storageName" in settings:
            profile.setStorageName(settings["storageName"])
            profile.setOffTheRecord(False)
            profile.setPersistentStoragePath(settings["persistentStoragePath"])
            profile.setCachePath(settings["cachePath"])
        profile.setHttpCacheType(settings["httpCacheType"])
    # Bounded, whichever kind: an unbounded cache is one of the slow leaks of other players.
    profile.setHttpCacheMaximumSize(cache_bytes)
    # With the kiosk as their Qt parent, and kept by it: they outlive the profile's views.
    handler = ItemSchemeHandler(ITEM_FILES, assets_dir(), parent)
    for scheme in (ITEM_SCHEME, DISPLAY_SCHEME):
        profile.installUrlSchemeHandler(scheme.encode(), handler)
    guard = RequestGuard(ITEM_FILES, options.api_host, options.api_port, parent)
    profile.setUrlRequestInterceptor(guard)
    profile.setProperty(GUARD_PROPERTY, guard)  # each view asks it about its navigations
    return profile, owner, (handler, guard)


def _from_prototype(
    engine: QQmlEngine, settings: dict[str, Any], parent: QObject
) -> tuple[QQuickWebEngineProfile, QObject] | None:
    from PySide6.QtQml import QQmlComponent

    component = QQmlComponent(engine)
    component.setData(_PROTOTYPE, QUrl())
    initial = {
        key: (value.value if hasattr(value, "value") else value) for key, value in settings.items()
    }
    prototype = component.createWithInitialProperties(initial)
    if prototype is None:
        return None
    # No Qt parent: Python owns it and the kiosk deletes it (a wrapper with a Qt parent that
    # is deleted first is freed twice by the garbage collector).
    # invokeMethod, the one in player/: instance() is an invokable of a QML type PySide does
    # not bind (WebEngineProfilePrototype); naming its return type brings the profile back typed.
    made = QMetaObject.invokeMethod(prototype, "instance", Q_RETURN_ARG("QQuickWebEngineProfile*"))
    return (made, prototype) if isinstance(made, QQuickWebEngineProfile) else None

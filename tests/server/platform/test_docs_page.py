"""The ``/x/docs`` page in a real browser engine (Qt WebEngine, the display's own Chromium),
offscreen, against every segment served on 127.0.0.1: it renders each operation of the
segment's OpenAPI document and asks for nothing beyond the page and ``/x/openapi.json``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import requests

from tests.support.segments import SEGMENTS, serve_segment


def run_js(qtbot: Any, page: Any, script: str) -> Any:
    box: list[Any] = []
    page.runJavaScript(script, 0, box.append)
    qtbot.waitUntil(lambda: bool(box), timeout=10_000)
    return box[0]


@pytest.mark.parametrize("name", SEGMENTS)
def test_docs_page_renders_in_a_browser(
    name: str, qapp: object, qtbot: Any, tmp_path: Path
) -> None:
    from PySide6.QtCore import QUrl
    from PySide6.QtWebEngineCore import (
        QWebEnginePage,
        QWebEngineProfile,
        QWebEngineUrlRequestInterceptor,
    )

    class Recorder(QWebEngineUrlRequestInterceptor):
        def __init__(self) -> None:
            super().__init__()
            self.urls: list[str] = []

        def interceptRequest(self, info: Any) -> None:
            self.urls.append(info.requestUrl().toString())

    with serve_segment(name, tmp_path) as base:
        recorder = Recorder()
        profile = QWebEngineProfile()  # off the record: nothing kept between tests
        profile.setUrlRequestInterceptor(recorder)
        page = QWebEnginePage(profile)
        try:
            page.load(QUrl(f"{base}/x/docs#getApiDocs"))
            qtbot.waitUntil(
                lambda: (
                    run_js(qtbot, page, "document.body.getAttribute('data-operations')")
                    not in (None, "")
                ),
                timeout=20_000,
            )
            document = requests.get(f"{base}/x/openapi.json", timeout=5).json()
            expected = sum(
                1
                for item in document["paths"].values()
                for method in item
                if method in ("get", "post", "put", "patch", "delete")
            )
            shown = run_js(qtbot, page, "document.body.getAttribute('data-operations')")
            assert shown == str(expected)
            assert run_js(qtbot, page, "document.title").startswith(document["info"]["title"])
            paths = json.loads(
                run_js(
                    qtbot,
                    page,
                    "JSON.stringify(Array.from(document.querySelectorAll('.path'),"
                    " (e) => e.textContent))",
                )
            )
            assert set(paths) == set(document["paths"])
            # The page's own anchor opened the docs operation.
            assert run_js(qtbot, page, "document.getElementById('getApiDocs').open") is True
            assert recorder.urls, "the interceptor saw nothing"
            assert all(url.startswith(base + "/") for url in recorder.urls), recorder.urls
            assert {url.split("#")[0] for url in recorder.urls} >= {
                f"{base}/x/docs",
                f"{base}/x/openapi.json",
            }
        finally:
            page.deleteLater()
            qtbot.wait(100)  # the page goes before its profile (Qt warns otherwise)
            profile.deleteLater()

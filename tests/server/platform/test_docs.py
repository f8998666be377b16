"""``GET /x/docs`` on every segment: the API docs page shipped with the package, self-contained."""

from __future__ import annotations

import re
from html.parser import HTMLParser
from importlib import resources
from pathlib import Path

import pytest
import requests

from server.platform.http import DOCS_POLICY
from tests.support.segments import SEGMENTS, serve_segment


class References(HTMLParser):
    """Every address an HTML page refers to (attributes a browser would fetch or follow)."""

    def __init__(self) -> None:
        super().__init__()
        self.found: list[str] = []
        self.tags: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)
        for name, value in attrs:
            if name in ("src", "href", "action", "srcset", "poster", "data", "manifest"):
                self.found.append(value or "")


def external_references(page: str) -> list[str]:
    """Anything in the page that would make a browser reach beyond the page's own server."""
    parser = References()
    parser.feed(page)
    problems = [ref for ref in parser.found if re.match(r"^([a-z][a-z0-9+.-]*:|//)", ref, re.I)]
    problems += [tag for tag in parser.tags if tag in ("link", "iframe", "object", "embed")]
    problems += re.findall(r"""(?:https?:)?//[A-Za-z0-9.-]+\.[A-Za-z]{2,}""", page)
    problems += re.findall(r"@import|url\(|importScripts|\bimport\(", page)
    return problems


def test_the_page_is_package_data_with_nothing_external() -> None:
    page = resources.files("server").joinpath("openapi/docs.html").read_text()
    assert external_references(page) == []
    assert 'fetch("openapi.json"' in page  # relative: /x/docs reads /x/openapi.json
    assert "innerHTML" not in page  # document text never becomes markup
    # The detector does catch what it looks for.
    assert external_references('<script src="https://cdn.example.com/x.js"></script>')
    assert external_references('<link rel="stylesheet" href="s.css">')


@pytest.mark.parametrize("name", SEGMENTS)
def test_every_segment_serves_its_docs(name: str, tmp_path: Path) -> None:
    with serve_segment(name, tmp_path) as base:
        page = requests.get(f"{base}/x/docs", timeout=5)
        assert page.status_code == 200
        assert page.headers["Content-Type"].startswith("text/html")
        assert page.headers["Content-Security-Policy"] == DOCS_POLICY
        assert "default-src 'none'" in DOCS_POLICY and "connect-src 'self'" in DOCS_POLICY
        assert external_references(page.text) == []
        document = requests.get(f"{base}/x/openapi.json", timeout=5)
        assert document.status_code == 200
        assert "/x/docs" in document.json()["paths"]
        assert requests.get(f"{base}/x/docs/", timeout=5).status_code == 200

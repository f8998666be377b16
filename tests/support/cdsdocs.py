"""Small CDS documents for tests and benchmarks: one set of web pages, as bytes a display or a
scheduler takes."""

from __future__ import annotations


def cds(name: str, *urls: str, extra: str = "", priority: str | None = None) -> bytes:
    """A small CDS with one item per URL."""
    constraints = ""
    if priority or extra:
        level = f'<priority level="{priority}"/>' if priority else ""
        constraints = (
            f"<constraints><scheduling-constraints>{level}{extra}"
            "</scheduling-constraints></constraints>"
        )
    items = "".join(
        f'<content-item content-type="text/html"><requires-file><sources><uri>{url}</uri>'
        "</sources></requires-file></content-item>"
        for url in urls
    )
    return f'<content-set name="{name}" type="inline">{constraints}{items}</content-set>'.encode()

"""The Content Descriptor Set (CDS) library: no Qt, no Flask.

- :mod:`cds.parser`: ``parse(data) -> Document``, hardened, errors as :class:`cds.errors.CdsError`
  carrying :class:`cds.errors.Problem` (line, element, message), validated against the RELAX NG
  grammar in ``cds/schema/cds.rng``; built on :mod:`cds.guard` (hostile input),
  :mod:`cds.walk` and :mod:`cds.read_constraints` (XML to model), :mod:`cds.relaxng` (the schema
  check) and :mod:`cds.elements` (naming elements, keeping unknown ones).
- :mod:`cds.model`: the typed model (ContentSet, ContentItem, Constraints, RequiredFile, ...).
- :mod:`cds.serialise`: ``to_xml(document_or_set) -> bytes``, round-trips with ``parse``.
- :mod:`cds.playlist`: :class:`~cds.playlist.Playlist`, what plays when, and why.
- :mod:`cds.layouts`: zones (``<layout>``, read by :mod:`cds.read_layout`): the templates, each
  zone's box, which zones could play a video, what each zone plays.
- :mod:`cds.windows`: time, day-of-week and date windows: open now, and when they next change.
- :mod:`cds.timezone`: the system's time zone name, one answer for the whole player.
- :mod:`cds.durations`: durations as people write them.
- :mod:`cds.cli`: ``pdn cds check`` and ``pdn cds explain``.
"""

from __future__ import annotations

import importlib
from typing import Any

# The names people reach for, importable from ``cds`` itself; loaded on first use so that
# ``import cds.durations`` stays cheap.
_EXPORTS: dict[str, str] = {
    "CdsError": "cds.errors",
    "Problem": "cds.errors",
    "parse": "cds.parser",
    "to_xml": "cds.serialise",
    "Playlist": "cds.playlist",
    "Selection": "cds.playlist",
    "Verdict": "cds.playlist",
    "Document": "cds.model",
    "ContentSet": "cds.model",
    "ContentItem": "cds.model",
    "Constraints": "cds.model",
    "RequiredFile": "cds.model",
    "parse_duration": "cds.durations",
    "format_duration": "cds.durations",
}

__all__ = [
    "CdsError",
    "Constraints",
    "ContentItem",
    "ContentSet",
    "Document",
    "Playlist",
    "Problem",
    "RequiredFile",
    "Selection",
    "Verdict",
    "format_duration",
    "parse",
    "parse_duration",
    "to_xml",
]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'cds' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)

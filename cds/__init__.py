"""The Content Descriptor Set (CDS) library: no Qt, no Flask.

- :mod:`cds.parser`: ``parse(data) -> Document``, hardened, errors as :class:`cds.errors.CdsError`
  carrying :class:`cds.errors.Problem` (line, element, message), validated against the RELAX NG
  grammar in ``cds/schema/cds.rng``.
- :mod:`cds.model`: the typed model (ContentSet, ContentItem, Constraints, RequiredFile, ...).
- :mod:`cds.serialise`: ``to_xml(document_or_set) -> bytes``, round-trips with ``parse``.
- :mod:`cds.evaluate`: :class:`~cds.evaluate.Playlist`, what plays when, and why.
- :mod:`cds.durations`: durations as people write them.
- :mod:`cds.cli`: ``pdn cds check`` and ``pdn cds explain``.
"""

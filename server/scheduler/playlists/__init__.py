"""Playlists on the scheduler (docs/fleet.md, "Playlists"): ordered media items and web links,
each stored with the CDS made of it as a schedule of the same id.

``model`` (what a playlist is, read from JSON), ``document`` (its CDS), ``library`` (stored,
changed and pushed in one transaction), ``api`` (``/x/playlists``), ``welcome`` (the one-box
install's first playlist).
"""

"""The scheduler's media library: pictures and videos uploaded by the operator, kept by the
SHA-256 of their bytes in the scheduler's database and served to its displays (docs/media.md).

- ``store``: the items and their bytes, over SQLite or PostgreSQL;
- ``probe``: what a file is, checked before anything is stored (Pillow, PyAV);
- ``thumbnails``: the small JPEG made for each item;
- ``api``: ``/x/media`` for the operator and ``/media/<sha256>/<name>`` for the displays.
"""

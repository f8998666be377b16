"""The platform every part of pdn stands on: HTTP and WSGI serving, storage (SQLite and
PostgreSQL), the webhook outbox and its delivery, TLS, pairing, signing, limits, lock-out,
logs and the release a process runs from.

The segments (``server.display``, ``server.scheduler``, ``server.content``, ``server.sensor``),
the controller (``server.ctl``) and the player (``player``) import from here; nothing here
imports any of them, so the platform can be read, tested and changed on its own.
docs/code.md draws the whole house.
"""

"""The exit codes every long-running ``pdn`` command shares (display, scheduler, content, sensor).

Light on purpose (no imports), so the player and each CLI can use it without pulling in a server.
``pdn ctl`` and ``pdn cds`` are one-shot tools with codes of their own on top of 0 and 2.
"""

from __future__ import annotations

#: Stopped cleanly (SIGTERM, or Ctrl-C once running).
EXIT_OK = 0
#: Could not start: the port is taken, the data directory or database is unusable.
EXIT_START_FAILED = 1
#: Bad configuration or usage: an invalid setting, wrong arguments, a missing directory.
EXIT_USAGE = 2
#: The display only: its screen was lost (the web engine's processes are gone and cannot be
#: brought back in this process); exiting lets systemd start it afresh (crash-only).
EXIT_SCREEN_LOST = 3
#: Interrupted (Ctrl-C) before it was up: 128 + SIGINT, as shells report it.
EXIT_INTERRUPTED = 130

#: The exit codes in one sentence, for each subcommand's ``--help`` epilog.
EPILOG = (
    f"Exit codes: {EXIT_OK} stopped cleanly, {EXIT_START_FAILED} could not start (port taken, "
    f"database unusable), {EXIT_USAGE} bad configuration or usage, {EXIT_INTERRUPTED} "
    "interrupted before it was up."
)

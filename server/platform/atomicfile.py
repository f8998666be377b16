"""Files that survive a power cut: written whole under a temporary name (mode 0600, as
mkstemp makes it whatever the umask: some hold secrets), then renamed.

:func:`tighten` takes a secret file that an older release, or an operator by hand, left
readable by others back to 0600.
"""

from __future__ import annotations

import logging
import os
import stat
import tempfile
from pathlib import Path

__all__ = ["SECRET_MODE", "tighten", "write_atomically"]

log = logging.getLogger("pdn.files")

#: Files holding secrets: read and written by their owner alone.
SECRET_MODE = 0o600


def tighten(path: Path) -> bool:
    """Make ``path`` 0600 when its group or others may read or write it (never a symlink's
    target); True when its mode was changed. A missing file is left alone."""
    try:
        handle = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        return False
    try:
        status = os.fstat(handle)
        if not stat.S_ISREG(status.st_mode) or not stat.S_IMODE(status.st_mode) & 0o077:
            return False
        if status.st_uid != os.geteuid() and os.geteuid() != 0:
            return False  # another user's file: theirs to mend
        os.fchmod(handle, SECRET_MODE)
    finally:
        os.close(handle)
    log.warning("%s was readable by others (mode %o): now 0600", path, stat.S_IMODE(status.st_mode))
    return True


def write_atomically(path: Path, data: bytes) -> None:
    """Replace ``path`` with ``data`` so a power cut leaves the old or the new file, whole."""
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(handle, "wb") as out:
            out.write(data)
            out.flush()
            os.fsync(out.fileno())
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
    directory = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(directory)
    finally:
        os.close(directory)

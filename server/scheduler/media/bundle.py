"""Web page bundles: a zip holding an ``index.html``, checked whole before it is stored and
served member by member at ``/media/<sha256>/<member path>`` (docs/media.md, "Web page
bundles"), so that a page's relative links work.

Refused (:class:`~server.scheduler.media.probe.RefusedError`, nothing stored): a zip that
does not read or whose members fail their CRC; no ``index.html`` at its root (or, when every
member is in one top folder, in that folder); a member path that is absolute, has a drive, a
backslash or a ``..`` part; a symbolic link; an encrypted member; two members of one name;
more than :data:`MAX_MEMBERS` members or more than :data:`MAX_UNPACKED` bytes unpacked (a zip
bomb: the sizes the zip declares are checked first, then the bytes really inflated).
"""

from __future__ import annotations

import io
import lzma
import mimetypes
import stat
import zipfile
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import IO

from server.scheduler.media.probe import RefusedError

__all__ = ["MAX_MEMBERS", "MAX_UNPACKED", "Bundle", "check_bundle", "member", "member_type"]

#: The most members a bundle may have.
MAX_MEMBERS = 2000
#: The most bytes its members may unpack to.
MAX_UNPACKED = 512 << 20
#: Compression ratio past which one member is taken for a bomb.
MAX_RATIO = 200

_CHECK_PIECE = 1 << 16


@dataclass(frozen=True)
class Bundle:
    #: The folder holding ``index.html`` ("" for the zip's root, else "<folder>/").
    root: str
    members: int
    unpacked: int


def _refuse(name: str, why: str) -> RefusedError:
    return RefusedError(
        422, "bad-bundle", f"'{name}' is not a page bundle this library takes: {why}."
    )


def _safe(path: str) -> bool:
    if not path or path.startswith(("/", "\\")) or "\\" in path or "\x00" in path:
        return False
    parts = PurePosixPath(path).parts
    return not (parts and ":" in parts[0]) and ".." not in parts


def check_bundle(path: Path, name: str) -> Bundle:
    """Read the zip at ``path`` (uploaded as ``name``) whole; its :class:`Bundle` when taken."""
    try:
        archive = zipfile.ZipFile(path)
    except (zipfile.BadZipFile, OSError, ValueError) as error:
        raise RefusedError(
            422, "corrupt", f"'{name}' does not read as a zip; upload it again."
        ) from error
    with archive:
        infos = archive.infolist()
        if len(infos) > MAX_MEMBERS:
            raise _refuse(name, f"it has {len(infos)} members, the most taken is {MAX_MEMBERS}")
        seen: set[str] = set()
        declared = 0
        for info in infos:
            if not _safe(info.filename):
                raise _refuse(name, f"the member '{info.filename}' climbs out of the bundle")
            if stat.S_ISLNK(info.external_attr >> 16):
                raise _refuse(name, f"the member '{info.filename}' is a symbolic link")
            if info.flag_bits & 0x1:
                raise _refuse(name, f"the member '{info.filename}' is encrypted")
            if info.filename in seen:
                raise _refuse(name, f"the member '{info.filename}' is there twice")
            seen.add(info.filename)
            declared += info.file_size
            if info.compress_size and info.file_size > MAX_RATIO * info.compress_size + (1 << 20):
                raise _refuse(
                    name,
                    f"the member '{info.filename}' unpacks {info.file_size} bytes from"
                    f" {info.compress_size}: a zip bomb",
                )
        if declared > MAX_UNPACKED:
            raise _refuse(name, f"it unpacks to {declared} bytes, the most taken is {MAX_UNPACKED}")
        root = _root(seen)
        if root is None:
            raise _refuse(
                name,
                "it has no index.html at its root (or in its one top folder); zip the folder"
                " whose index.html is the page",
            )
        unpacked = 0
        for info in infos:
            if info.is_dir():
                continue
            try:
                with archive.open(info) as source:
                    while piece := source.read(_CHECK_PIECE):
                        unpacked += len(piece)
                        if unpacked > MAX_UNPACKED:
                            raise _refuse(name, f"it unpacks to more than {MAX_UNPACKED} bytes")
            except (
                zipfile.BadZipFile,
                OSError,
                ValueError,
                EOFError,
                NotImplementedError,
                zlib.error,
                lzma.LZMAError,
            ) as error:
                raise RefusedError(
                    422,
                    "corrupt",
                    f"'{name}': the member '{info.filename}' does not unpack ({error}).",
                ) from error
        return Bundle(root=root, members=len(infos), unpacked=unpacked)


def _root(names: set[str]) -> str | None:
    if "index.html" in names:
        return ""
    tops = {name.split("/", 1)[0] for name in names}
    if len(tops) == 1:
        top = f"{next(iter(tops))}/"
        if f"{top}index.html" in names:
            return top
    return None


def member_type(path: str) -> str:
    """The ``Content-Type`` a member is served with."""
    guessed, _ = mimetypes.guess_type(path, strict=False)
    if guessed is None:
        return "application/octet-stream"
    if guessed.startswith("text/") or guessed in ("application/javascript", "image/svg+xml"):
        return f"{guessed}; charset=utf-8" if "charset" not in guessed else guessed
    return guessed


def member(
    file: IO[bytes] | io.RawIOBase, root: str, path: str
) -> tuple[int, Iterator[bytes]] | None:
    """The member at ``path`` (relative to the bundle's folder) of the zip in ``file``: its
    size and its bytes, inflated piece by piece; None when there is none."""
    if not _safe(path):
        return None
    archive = zipfile.ZipFile(file)
    try:
        info = archive.getinfo(root + path)
    except KeyError:
        archive.close()
        return None
    if info.is_dir():
        archive.close()
        return None

    def pieces() -> Iterator[bytes]:
        with archive, archive.open(info) as source:
            while piece := source.read(_CHECK_PIECE):
                yield piece

    return info.file_size, pieces()

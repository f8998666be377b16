"""What the content cache is asked for, and how big it may grow. No Qt, no network.

:class:`FileSpec` names one required file (sources in order, hashes, size) and gives it its
identity in the cache; :class:`CacheConfig` is the ``[cache]`` section of the display's config.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import Any
from urllib.parse import unquote, urlsplit

from cds.durations import parse_duration
from cds.model import HASH_TYPES, RequiredFile  # HASH_TYPES: strongest first, names the file

DEFAULT_MAX_BYTES = 2 * 1024**3
DEFAULT_REVALIDATE_EVERY = 15 * 60.0  # seconds between checks of files without hashes


@dataclass(frozen=True)
class FileSpec:
    """One required file: where to fetch it (in order) and the hashes it must match.

    ``hashes`` are ``(type, hex digest)`` pairs; types are md5, sha1 or sha256, digests are
    compared case-insensitively. ``size`` (bytes), when known, is checked too.
    """

    sources: tuple[str, ...]
    hashes: tuple[tuple[str, str], ...] = ()
    size: int | None = None

    def __post_init__(self) -> None:
        if not self.sources:
            raise ValueError("a required file needs at least one source")
        normalised: list[tuple[str, str]] = []
        for given_kind, given_digest in self.hashes:
            kind = given_kind.strip().lower()
            digest = given_digest.strip().lower()
            if kind not in HASH_TYPES:
                raise ValueError(f"unknown hash type {kind!r} (md5, sha1 or sha256)")
            if not digest or any(c not in "0123456789abcdef" for c in digest):
                raise ValueError(f"{kind} digest {digest!r} is not hexadecimal")
            normalised.append((kind, digest))
        object.__setattr__(self, "sources", tuple(self.sources))
        object.__setattr__(self, "hashes", tuple(normalised))

    @property
    def key(self) -> str:
        """The file's identity: its strongest hash, or (no hashes) its first source."""
        for kind in HASH_TYPES:
            for listed, digest in self.hashes:
                if listed == kind:
                    return f"{kind}-{digest}"
        return "url-" + hashlib.sha256(self.sources[0].encode()).hexdigest()[:40]

    @property
    def suffix(self) -> str:
        """The first source's file extension (Chromium tells file:// types by it)."""
        suffix = PurePosixPath(unquote(urlsplit(self.sources[0]).path)).suffix.lower()
        return suffix if 1 < len(suffix) <= 10 and suffix[1:].isalnum() else ""

    @classmethod
    def from_required_file(cls, required: RequiredFile, size: int | None = None) -> FileSpec:
        """From a CDS content item's required file."""
        return cls(
            sources=tuple(source.uri for source in required.sources),
            hashes=tuple((h.type, h.digest) for h in required.hashes),
            size=size,
        )


@dataclass(frozen=True)
class CacheConfig:
    """The ``[cache]`` section: ``max-size = "2 GiB"``, ``revalidate = "15 minutes"``."""

    max_bytes: int = DEFAULT_MAX_BYTES
    revalidate_every: float = DEFAULT_REVALIDATE_EVERY


_SIZE_UNITS = {
    "b": 1, "kb": 1000, "mb": 1000**2, "gb": 1000**3, "tb": 1000**4,
    "kib": 1024, "mib": 1024**2, "gib": 1024**3, "tib": 1024**4,
    "k": 1024, "m": 1024**2, "g": 1024**3, "t": 1024**4,
}  # fmt: skip


def parse_size(value: object) -> int:
    """Bytes from ``"2 GiB"``, ``"500 MB"``, ``"750M"`` or a number of bytes."""
    if isinstance(value, bool):
        raise ValueError("a size is a number of bytes or text such as '2 GiB'")
    if isinstance(value, int):
        number, unit = float(value), "b"
    elif isinstance(value, str):
        text = value.strip().lower().replace(" ", "")
        digits = text.rstrip("abcdefghijklmnopqrstuvwxyz")
        unit = text[len(digits) :] or "b"
        try:
            number = float(digits)
        except ValueError:
            raise ValueError(f"{value!r} is not a size such as '2 GiB' or '500 MB'") from None
    else:
        raise ValueError("a size is a number of bytes or text such as '2 GiB'")
    if unit not in _SIZE_UNITS:
        raise ValueError(f"{value!r}: unknown unit (B, kB, MB, GB, KiB, MiB, GiB)")
    size = int(number * _SIZE_UNITS[unit])
    if size < 1024**2:
        raise ValueError(f"{value!r} is too small for a content cache (at least 1 MiB)")
    return size


def parse_cache_config(table: dict[str, Any] | None) -> CacheConfig:
    """Validate a ``[cache]`` table; raises ValueError("key: message")."""
    table = {str(k).replace("_", "-"): v for k, v in (table or {}).items()}
    for key in table:
        if key not in ("max-size", "revalidate"):
            raise ValueError(f"{key}: unknown key (max-size, revalidate)")
    config = CacheConfig()
    if "max-size" in table:
        try:
            config = CacheConfig(parse_size(table["max-size"]), config.revalidate_every)
        except ValueError as error:
            raise ValueError(f"max-size: {error}") from None
    if "revalidate" in table:
        given = table["revalidate"]
        try:
            seconds = (
                float(given)
                if isinstance(given, int | float) and not isinstance(given, bool)
                else parse_duration(given)
            )
        except ValueError as error:
            raise ValueError(f"revalidate: {error}") from None
        if seconds < 10:
            raise ValueError("revalidate: at least 10 seconds (e.g. '15 minutes')")
        config = CacheConfig(config.max_bytes, seconds)
    return config

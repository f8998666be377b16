"""Frame-sized blocks get pages of their own, given back when freed (player.memory, issue 11).

glibc raises its mmap threshold each time a mapped block is freed, so by default the second
1920x1080 frame comes out of the main heap and stays there once freed; the renderer's
``prepare_process`` (called by this directory's conftest) fixes the threshold at 1 MiB.
"""

from __future__ import annotations

import ctypes
import ctypes.util

import pytest

from player.memory import MMAP_THRESHOLD, fix_mmap_threshold

FRAME = 1920 * 1080 * 4
IS_MMAPPED = 0x2  # glibc's flag in a chunk's size field, the word before the block


def _libc() -> ctypes.CDLL:
    name = ctypes.util.find_library("c")
    assert name is not None
    libc = ctypes.CDLL(name)
    libc.malloc.restype = ctypes.c_void_p
    libc.malloc.argtypes = [ctypes.c_size_t]
    libc.free.argtypes = [ctypes.c_void_p]
    return libc


def _mapped_after_a_free(size: int) -> bool:
    """Whether a block of ``size`` is still given its own mapping after one was freed."""
    libc = _libc()
    first = libc.malloc(size)
    assert first
    libc.free(first)
    second = libc.malloc(size)
    assert second
    header = ctypes.c_size_t.from_address(second - ctypes.sizeof(ctypes.c_size_t)).value
    libc.free(second)
    return bool(header & IS_MMAPPED)


def test_frames_keep_their_own_pages_after_one_is_freed() -> None:
    assert fix_mmap_threshold()
    for _ in range(5):
        assert _mapped_after_a_free(FRAME)
    assert _mapped_after_a_free(MMAP_THRESHOLD * 2)


def test_an_operator_threshold_is_left_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MALLOC_MMAP_THRESHOLD_", "4194304")
    assert not fix_mmap_threshold()

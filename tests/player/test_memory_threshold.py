"""Frame-sized blocks get pages of their own, given back when freed (player.memory).

glibc raises its mmap threshold each time a mapped block is freed, so by default the second
1920x1080 frame comes out of the main heap and stays there once freed; the renderer's
``prepare_process`` fixes the threshold at 1 MiB before Qt starts. Checked in a fresh process,
as the display does it at its start: in the test run's own process, blocks freed into the heap
by earlier tests (before any fix) can serve a request of that size from the heap.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

from player.memory import fix_mmap_threshold

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


def _run_fresh(script: str) -> None:
    """Run ``script`` in a new Python process (no MALLOC_ settings) and expect it to pass."""
    environment = {k: v for k, v in os.environ.items() if not k.startswith("MALLOC_")}
    done = subprocess.run(
        [sys.executable, "-c", script],
        env=environment,
        cwd=Path(__file__).resolve().parents[2],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr


def test_frames_keep_their_own_pages_after_one_is_freed() -> None:
    script = (
        "import sys\n"
        "from player.memory import MMAP_THRESHOLD, fix_mmap_threshold\n"
        "from tests.player.test_memory_threshold import FRAME, _mapped_after_a_free\n"
        "assert fix_mmap_threshold()\n"
        "checks = [_mapped_after_a_free(FRAME) for _ in range(5)]\n"
        "checks.append(_mapped_after_a_free(MMAP_THRESHOLD * 2))\n"
        "sys.exit(0 if all(checks) else f'not mapped: {checks}')\n"
    )
    _run_fresh(script)


def test_without_the_fix_a_freed_frame_comes_back_from_the_heap() -> None:
    # What the fix is for (glibc's default, in a fresh process): if this ever fails, glibc no
    # longer moves its threshold and the fix may go.
    script = (
        "import sys\n"
        "from tests.player.test_memory_threshold import FRAME, _mapped_after_a_free\n"
        "sys.exit(0 if not _mapped_after_a_free(FRAME) else 'mapped without the fix')\n"
    )
    _run_fresh(script)


def test_an_operator_threshold_is_left_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MALLOC_MMAP_THRESHOLD_", "4194304")
    assert not fix_mmap_threshold()

"""The crash-only helpers: restart back-off, the quiet log, and finding the web engine's zygote."""

from __future__ import annotations

import logging
import subprocess
import sys
import time
from pathlib import Path

import pytest

from player.crashonly import (
    EXITS_FILE,
    clear_exits,
    note_exit,
    restart_delay,
)
from player.renderer.engineprocs import FULL_SCAN_EVERY, ZygoteWatch, engine_children
from server.platform.logrepeat import RepeatFilter
from tests.support.waiting import wait_until


def test_restart_delay_grows_with_exits_in_a_row_and_is_bounded(tmp_path: Path) -> None:
    now = 1_000_000.0
    assert restart_delay(tmp_path, now) == 0
    note_exit(tmp_path, now)
    assert restart_delay(tmp_path, now + 1) == 0  # one exit: start again at once
    delays = []
    for i in range(1, 8):
        note_exit(tmp_path, now + i)
        delays.append(restart_delay(tmp_path, now + i + 1))
    assert delays == [5, 10, 20, 40, 60, 60, 60]
    # Exits older than ten minutes are forgotten, and a right screen forgets them all.
    assert restart_delay(tmp_path, now + 700) == 0
    note_exit(tmp_path, now + 10)
    clear_exits(tmp_path)
    assert not (tmp_path / EXITS_FILE).exists()
    assert restart_delay(tmp_path, now + 11) == 0


def test_a_damaged_exits_file_means_no_delay(tmp_path: Path) -> None:
    (tmp_path / EXITS_FILE).write_text("{not json")
    assert restart_delay(tmp_path) == 0
    note_exit(tmp_path)
    assert restart_delay(tmp_path) == 0


def test_repeat_filter_lets_a_burst_through_then_counts_what_it_dropped(
    caplog: pytest.LogCaptureFixture,
) -> None:
    logger = logging.getLogger("pdn.test-repeats")
    repeats = RepeatFilter(burst=3, window=0.2)
    logger.addFilter(repeats)
    try:
        with caplog.at_level(logging.WARNING, logger="pdn.test-repeats"):
            for i in range(50):
                logger.warning("render process %s crashed", i)
            logger.warning("another message")
            time.sleep(0.25)
            logger.warning("render process %s crashed", "last")
    finally:
        logger.removeFilter(repeats)
    messages = [record.getMessage() for record in caplog.records]
    assert messages == [
        "render process 0 crashed",
        "render process 1 crashed",
        "render process 2 crashed",
        "another message",
        "render process last crashed (and 47 more like it in 0.2 s)",
    ]


def fake_zygote() -> subprocess.Popen[bytes]:
    """A child that looks like Chromium's zygote to /proc: argv[0] and --type=zygote."""
    fake = subprocess.Popen(
        [
            "bash",
            "-c",
            f'exec -a QtWebEngineProcess {sys.executable} -c "import time; time.sleep(60)" '
            "--type=zygote",
        ]
    )
    wait_until(
        # This fake by its pid: a web engine that ran earlier in this process (another
        # test's) leaves real zygotes, which would satisfy "any zygote" before the fake is.
        lambda: any(p.kind == "zygote" and p.pid == fake.pid for p in engine_children()),
        10,
        lambda: f"the fake zygote among {engine_children()}",
        step=0.05,
    )
    return fake


def test_zygote_watch_says_when_a_zygote_is_gone() -> None:
    fake = fake_zygote()
    try:
        watch = ZygoteWatch()
        assert watch.supported
        assert watch.lost() is None and watch.seen
        fake.kill()
        # A zombie until waited for: already lost (polled: a loaded machine may take a moment
        # to end a killed process).
        wait_until(watch.lost, 5, "the zygote lost")
        assert watch.lost() == f"the web engine's zygote process {fake.pid} is gone"
        fake.wait(5)
        assert watch.lost() == f"the web engine's zygote process {fake.pid} is gone"
    finally:
        if fake.poll() is None:
            fake.kill()
            fake.wait(5)


def test_zygote_watch_finds_a_later_zygote_within_its_full_scans() -> None:
    first = fake_zygote()
    later: subprocess.Popen[bytes] | None = None
    try:
        watch = ZygoteWatch()
        assert watch.lost() is None and watch.seen
        later = fake_zygote()
        # Between full scans each zygote seen is checked alone: the later one is found by
        # the next full scan, and its loss said from then on.
        for _ in range(FULL_SCAN_EVERY):
            assert watch.lost() is None
        later.kill()
        later.wait(5)
        assert watch.lost() == f"the web engine's zygote process {later.pid} is gone"
        assert first.poll() is None
    finally:
        for fake in (first, later):
            if fake is not None and fake.poll() is None:
                fake.kill()
                fake.wait(5)

"""The memory budget and low-memory profile: config keys, auto defaults from the board's RAM,
the tree measurement, and the watch's policy (when to renew, when health is degraded, the
last-resort restart)."""

from __future__ import annotations

import os
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from functools import partial
from pathlib import Path

import pytest

from player.config import ConfigError, load_config
from player.memory import (
    RESTART_AFTER_SAMPLES,
    SAMPLE_EVERY,
    SAMPLE_EVERY_LOW_MEMORY,
    MemoryPlan,
    MemoryWatch,
    ProcessMemory,
    TreeMemory,
    auto_budget_mb,
    measure_tree,
    mem_total_mb,
    memory_plan,
    parse_budget,
    release_free_heap,
)
from tests.support.waiting import wait_until


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "display.toml"
    path.write_text(text)
    return path


def meminfo(tmp_path: Path, total_kb: int) -> Path:
    path = tmp_path / f"meminfo-{total_kb}"
    path.write_text(f"MemTotal:       {total_kb} kB\nMemFree:         1000 kB\n")
    return path


@pytest.mark.parametrize(
    ("text", "megabytes"),
    [
        ('"600M"', 600),
        ('"600 MiB"', 600),
        ('"700MB"', 700),
        ('"1G"', 1024),
        ('"1.5 GiB"', 1536),
        ("512", 512),
        ('"auto"', None),
    ],
)
def test_memory_budget_grammar(tmp_path: Path, text: str, megabytes: int | None) -> None:
    config = load_config(write(tmp_path, f"[screen]\nmemory-budget = {text}\n"), environ={})
    assert config.screen.memory_budget_mb == megabytes


def test_defaults_are_auto(tmp_path: Path) -> None:
    config = load_config(write(tmp_path, "[screen]\nrotation = 90\n"), environ={})
    assert (config.screen.memory_budget_mb, config.screen.low_memory) == (None, "auto")


@pytest.mark.parametrize(
    ("text", "expected"),
    [('"on"', "on"), ('"OFF"', "off"), ('"auto"', "auto"), ("true", "on"), ("false", "off")],
)
def test_low_memory_values(tmp_path: Path, text: str, expected: str) -> None:
    config = load_config(write(tmp_path, f"[screen]\nlow_memory = {text}\n"), environ={})
    assert config.screen.low_memory == expected


def test_bad_values_name_the_key_and_change_nothing(tmp_path: Path) -> None:
    path = write(
        tmp_path, '[screen]\nmemory-budget = "lots"\nlow-memory = "sometimes"\nrotation = 90\n'
    )
    with pytest.raises(ConfigError) as caught:
        load_config(path, environ={})
    problems = caught.value.problems
    assert len(problems) == 2
    assert "screen.memory-budget" in problems[0] and "'600M'" in problems[0]
    assert "screen.low-memory" in problems[1] and "auto, on, off" in problems[1]
    assert all(str(path) in problem for problem in problems)


@pytest.mark.parametrize(
    ("value", "words"),
    [
        ('"64M"', "at least 128M"),
        ('"2 TB"', "unknown unit"),
        ("true", "a size such as"),
        ('"-5G"', "out of range"),
        ('"1.2.3G"', "is not a size"),
    ],
)
def test_budget_errors(tmp_path: Path, value: str, words: str) -> None:
    with pytest.raises(ConfigError, match=words):
        load_config(write(tmp_path, f"[screen]\nmemory-budget = {value}\n"), environ={})


def test_misspelt_key_is_pointed_at(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"did you mean 'screen\.memory_budget'"):
        load_config(write(tmp_path, '[screen]\nmemory-budgt = "1G"\n'), environ={})


@pytest.mark.parametrize(
    ("total_kb", "budget", "low"),
    [
        (944_000, 460, True),  # a 1 GB Raspberry Pi (the firmware keeps some)
        (1_900_000, 928, False),  # 2 GB
        (3_900_000, 1536, False),  # 4 GB: capped, a healthy tree is far under it
        (24_683_656, 1536, False),
        (300_000, 256, True),  # the floor of the auto budget
    ],
)
def test_auto_plan_from_the_board(tmp_path: Path, total_kb: int, budget: int, low: bool) -> None:
    plan = memory_plan(None, "auto", meminfo_path=meminfo(tmp_path, total_kb))
    assert (plan.budget_mb, plan.low_memory, plan.budget_auto) == (budget, low, True)
    assert plan.board_mb == total_kb // 1024
    assert plan.profile == ("low-memory" if low else "default")


def test_configured_values_win_over_the_board(tmp_path: Path) -> None:
    small = meminfo(tmp_path, 944_000)
    plan = memory_plan(700, "off", meminfo_path=small)
    assert (plan.budget_mb, plan.low_memory, plan.budget_auto) == (700, False, False)
    big = meminfo(tmp_path, 24_000_000)
    assert memory_plan(None, "on", meminfo_path=big).low_memory is True


def test_unreadable_meminfo_is_a_2_gib_board(tmp_path: Path) -> None:
    plan = memory_plan(None, "auto", meminfo_path=tmp_path / "missing")
    assert (plan.budget_mb, plan.low_memory, plan.board_mb) == (1024, False, None)
    with pytest.raises(ValueError, match="MemTotal"):
        mem_total_mb("MemFree: 5 kB\n")
    assert auto_budget_mb(1000) == 500
    assert parse_budget(" 1G ") == 1024


def has_type(cmdline: Path) -> bool:
    return b"--type=" in cmdline.read_bytes()


def test_measure_tree_finds_children_with_roles() -> None:
    # Children named like Chromium's helpers (the --type of their command line).
    script = "import time; time.sleep(30)"
    children = [
        subprocess.Popen([sys.executable, "-c", script, f"--type={kind}"])
        for kind in ("gpu-process", "utility", "renderer")
    ]
    try:
        # Popen returns once the child's exec has begun; its command line is readable a moment
        # later (the kernel sets up the new arguments after it lets the parent go on).
        for child in children:
            cmdline = Path(f"/proc/{child.pid}/cmdline")
            wait_until(partial(has_type, cmdline), 10, f"child {child.pid}'s command line")
        tree = measure_tree()
    finally:
        for child in children:
            child.kill()
            child.wait()
    roles = {p.pid: p.role for p in tree.processes}
    assert [roles[c.pid] for c in children] == ["gpu", "utility", "render"]
    browser = [p for p in tree.processes if p.role == "browser"]
    assert len(browser) == 1 and browser[0].pss_kb > 1024 and browser[0].rss_kb >= browser[0].pss_kb
    by_role = tree.by_role()
    assert by_role["gpu"]["count"] == 1 and by_role["render"]["count"] == 1
    assert tree.pss_mb == pytest.approx(sum(p.pss_kb for p in tree.processes) / 1024)


class FakeTree:
    """Measurements the test decides: PSS in MiB, a clock that moves forward."""

    def __init__(self) -> None:
        self.pss_mb = 100.0
        self.at = datetime.now(UTC) - timedelta(days=1)

    def __call__(self, root: int) -> TreeMemory:
        self.at += timedelta(seconds=20)
        kb = round(self.pss_mb * 1024)
        processes = (
            ProcessMemory(root, "browser", kb // 2, kb),
            ProcessMemory(2, "render", kb - kb // 2, kb),
        )
        return TreeMemory(processes, self.at, 0.001)


def make_watch(tree: FakeTree, restarts: list[str], uptime: float = 3600.0) -> MemoryWatch:
    return MemoryWatch(
        MemoryPlan(budget_mb=400, low_memory=True, board_mb=900),
        root=1,
        measure=tree,
        on_restart=restarts.append,
        uptime=lambda: uptime,
    )


def renew(watch: MemoryWatch, tree: FakeTree, name: str) -> None:
    """What the renderer does: renew a view, after the last measurement."""
    assert watch.recycle_due()
    watch.note_recycle(name)
    assert not watch.recycle_due()  # not again before a measurement taken after it


def test_watch_under_budget_asks_nothing() -> None:
    tree, restarts = FakeTree(), list[str]()
    watch = make_watch(tree, restarts)
    assert watch.status()["pss_mb"] is None  # nothing measured yet
    watch.sample()
    status = watch.status()
    assert status["pss_mb"] == 100.0 and status["rss_mb"] == 200.0
    assert status["by_role"]["render"] == {"pss_mb": 50.0, "rss_mb": 100.0, "count": 1}
    assert (status["budget_mb"], status["profile"], status["over_budget"]) == (
        400,
        "low-memory",
        False,
    )
    assert status["recycles"] == 0 and "problem" not in status
    assert not watch.recycle_due()


def test_watch_renews_then_reports_a_leak_it_cannot_fix() -> None:
    tree, restarts = FakeTree(), list[str]()
    watch = make_watch(tree, restarts)
    tree.pss_mb = 450.0
    watch.sample()
    assert watch.status()["over_budget"] and "problem" not in watch.status()
    renew(watch, tree, "view a")
    watch.sample()
    assert "problem" not in watch.status()  # one view renewed: the other may hold it
    renew(watch, tree, "view b")
    watch.sample()
    status = watch.status()
    assert status["recycles"] == 2
    assert "stays over its budget" in status["problem"]
    assert restarts == []  # over, but not far over: no restart
    tree.pss_mb = 380.0
    watch.sample()
    assert "problem" not in watch.status() and not watch.recycle_due()


def test_last_resort_restart_far_over_budget_once() -> None:
    tree, restarts = FakeTree(), list[str]()
    watch = make_watch(tree, restarts)
    tree.pss_mb = 700.0  # 1.75x the budget
    watch.sample()
    renew(watch, tree, "view a")
    watch.sample()
    renew(watch, tree, "view b")
    for _ in range(RESTART_AFTER_SAMPLES - 1):
        watch.sample()
    assert restarts == []
    watch.sample()
    assert len(restarts) == 1 and "700 MiB" in restarts[0] and "budget (400 MiB)" in restarts[0]
    for _ in range(5):
        watch.sample()
    assert len(restarts) == 1  # asked once per process


def test_no_restart_early_after_start() -> None:
    tree, restarts = FakeTree(), list[str]()
    watch = make_watch(tree, restarts, uptime=60.0)
    tree.pss_mb = 900.0
    watch.sample()
    renew(watch, tree, "view a")
    watch.sample()
    renew(watch, tree, "view b")
    for _ in range(10):
        watch.sample()
    assert restarts == [] and "problem" in watch.status()


def test_watch_thread_samples_and_stops() -> None:
    tree = FakeTree()
    watch = MemoryWatch(MemoryPlan(400, False), root=1, measure=tree, interval=0.01)
    watch.start()
    try:
        deadline = datetime.now(UTC) + timedelta(seconds=10)
        while watch.status()["measured_at"] is None and datetime.now(UTC) < deadline:
            pass
    finally:
        watch.stop()
    assert watch.status()["measured_at"] is not None


def _anonymous_mb() -> float:
    with open("/proc/self/smaps_rollup") as stream:
        for line in stream:
            if line.startswith("Anonymous:"):
                return int(line.split()[1]) / 1024
    raise AssertionError("no Anonymous line in smaps_rollup")


def test_release_free_heap_gives_freed_memory_back() -> None:
    # 60 MB through malloc (objects over pymalloc's 512 bytes), freed, with a block after them
    # so the heap's top is not free: glibc keeps those pages until trimmed.
    blocks = [bytes(2000) for _ in range(30_000)]
    pin = bytes(2000)
    before = _anonymous_mb()
    del blocks
    kept = _anonymous_mb()
    release_free_heap()
    after = _anonymous_mb()
    assert kept > before - 20  # freed, but still held by the process
    assert after < kept - 40
    assert len(pin) == 2000


def test_low_memory_flags_are_added_before_qt(monkeypatch: pytest.MonkeyPatch) -> None:
    from player.renderer import options

    monkeypatch.setattr(options, "LOW_MEMORY_FLAGS", ("--num-raster-threads=1",))
    monkeypatch.setenv("QTWEBENGINE_CHROMIUM_FLAGS", "--disable-gpu")
    options.add_chromium_flags(low_memory=True)
    flags = os.environ["QTWEBENGINE_CHROMIUM_FLAGS"].split()
    assert flags[0] == "--disable-gpu" and "--num-raster-threads=1" in flags
    assert "--js-flags=--expose-gc" in flags
    options.add_chromium_flags()  # prepare_process calls it again: nothing removed or doubled
    assert os.environ["QTWEBENGINE_CHROMIUM_FLAGS"].split() == flags
    monkeypatch.setenv("QTWEBENGINE_CHROMIUM_FLAGS", "")
    options.add_chromium_flags(low_memory=False)
    assert "--num-raster-threads=1" not in os.environ["QTWEBENGINE_CHROMIUM_FLAGS"].split()


def test_low_memory_profile_samples_and_trims_more_often() -> None:
    tree = FakeTree()
    low = MemoryWatch(MemoryPlan(400, True), root=1, measure=tree)
    default = MemoryWatch(MemoryPlan(400, False), root=1, measure=tree)
    assert low.interval == SAMPLE_EVERY_LOW_MEMORY < default.interval == SAMPLE_EVERY

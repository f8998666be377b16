"""The real ``pdn display`` in the low-memory profile with a small budget: the profile's flags
reach Chromium's processes, and /x/health shows the tree's memory, the budget and the profile."""

from __future__ import annotations

from pathlib import Path

import pytest
import requests

from player.memory import measure_tree
from player.renderer.options import LOW_MEMORY_FLAGS
from tests.support.display import DisplayProcess
from tests.support.pages import one_page

pytestmark = [pytest.mark.qt, pytest.mark.slow]


def test_low_memory_display_flags_and_health(tmp_path: Path) -> None:
    content = one_page()
    config = 'name = "Small"\n[screen]\nlow-memory = "on"\nmemory-budget = "128M"\n'
    display = DisplayProcess(tmp_path, config=config, platform="offscreen")
    url = display.url
    try:
        display.start().wait_ready()
        item = {"content-item": content.url + "/page", "preferred-duration": "1 minute"}
        assert requests.post(url + "/schedule", json=item, timeout=5).status_code == 202
        display.wait_playback(lambda r: r["content-item"] == item["content-item"])

        # Chromium's processes are there, by role. Render processes are forked by a zygote and
        # keep its command line (their own switches come over IPC), and /proc's environ is the
        # one the process started with: the display logs the flags Qt WebEngine starts with.
        tree = measure_tree(display.pid)
        assert {p.role for p in tree.processes} >= {"browser", "render", "zygote"}
        logged = (
            next(line for line in display.text().splitlines() if "Chromium flags: " in line)
            .split("Chromium flags: ", 1)[1]
            .split()
        )
        assert "--js-flags=--expose-gc" in logged
        assert all(flag in logged for flag in LOW_MEMORY_FLAGS)

        health = requests.get(url + "/x/health", timeout=5).json()
        memory = health["memory"]
        assert (memory["budget_mb"], memory["profile"]) == (128, "low-memory")
        assert memory["pss_mb"] > 50 and memory["rss_mb"] >= memory["pss_mb"]
        assert memory["over_budget"] is True  # no display fits in 128 MiB
        assert memory["by_role"]["browser"]["count"] == 1
        assert isinstance(memory["recycles"], int) and memory["measured_at"]
        assert "memory budget 128 MiB, low-memory profile" in display.text()
    finally:
        display.kill()
        content.close()

"""The real ``pdn display`` in the low-memory profile with a small budget: the profile's flags
reach Chromium's processes, and /x/health shows the tree's memory, the budget and the profile."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
import requests

from player.memory import measure_tree
from player.renderer.options import LOW_MEMORY_FLAGS
from tests.player.test_process import ContentServer, DisplayProcess
from tests.support.ports import free_port

pytestmark = [pytest.mark.qt, pytest.mark.slow]


def test_low_memory_display_flags_and_health(tmp_path: Path) -> None:
    content = ContentServer()
    config = tmp_path / "display.toml"
    config.write_text('name = "Small"\n[screen]\nlow-memory = "on"\nmemory-budget = "128M"\n')
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    args = ["--port", str(port), "--data-dir", str(tmp_path / "data"), "--config", str(config)]
    display = DisplayProcess(args, tmp_path / "display.log")
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                if requests.get(url + "/", timeout=2).status_code == 200:
                    break
            except requests.ConnectionError:
                pass
            assert display.process.poll() is None and time.monotonic() < deadline, display.text()
            time.sleep(0.1)
        item = {"content-item": content.url + "/page", "preferred-duration": "1 minute"}
        assert requests.post(url + "/schedule", json=item, timeout=5).status_code == 202
        deadline = time.monotonic() + 30
        while (
            requests.get(url + "/playback/", timeout=5).json()["content-item"]
            != item["content-item"]
        ):
            assert time.monotonic() < deadline, display.text()
            time.sleep(0.1)

        # Chromium's processes are there, by role. Render processes are forked by a zygote and
        # keep its command line (their own switches come over IPC), and /proc's environ is the
        # one the process started with: the display logs the flags Qt WebEngine starts with.
        tree = measure_tree(display.process.pid)
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
        display.process.kill()
        display.process.wait(10)
        content.close()

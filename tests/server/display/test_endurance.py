"""The display under stress: hostile JSON, protected reads, capped subscriptions, a full disk
(a real tmpfs that fills up)."""

from __future__ import annotations

import contextlib
import errno
import json
import os
import subprocess
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from player.engine import Playback
from tests.support.inprocess_display import Display
from tests.support.pages import HookReceiver
from tests.support.waiting import wait_until

DEEP = b"[" * 100_000 + b"]" * 100_000


@pytest.mark.parametrize("path", ["/schedule", "/sensing", "/playback/subscribe/"])
def test_deep_nesting_is_400(display: Display, path: str) -> None:
    for headers in ({"Content-Type": "application/json"}, {}):
        answer = display.post(path, data=DEEP, headers=headers)
        assert answer.status_code == 400, answer.text
        assert answer.json()["error"] == "too-deep"


def test_reads_need_the_token_when_protected(make_display: Callable[..., Display]) -> None:
    display = make_display(api_token="s3cret", protect_reads=True)
    for path in ("/x/health", "/x/screenshot", "/playback/", "/", "/sensing"):
        answer = display.get(path)
        assert answer.status_code == 401, path
        assert answer.headers["WWW-Authenticate"].startswith("Bearer")
        assert answer.json()["message"].startswith("This display needs")
    good = {"Authorization": "Bearer s3cret"}
    assert display.get("/playback/", headers=good).status_code == 200
    assert display.get("/x/health", headers=good).status_code in (200, 503)


def test_reads_stay_open_by_default(make_display: Callable[..., Display]) -> None:
    display = make_display(api_token="s3cret")
    assert display.get("/playback/").status_code == 200
    refused = display.post("/schedule", json={"content-item": "http://example.org/"})
    assert refused.status_code == 401
    assert refused.headers["WWW-Authenticate"].startswith("Bearer")


def test_subscriptions_are_capped_with_429(
    make_display: Callable[..., Display], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PDN_MAX_SUBSCRIPTIONS", "2")
    display = make_display()
    for n in range(2):
        uri = {"subscriber-uri": f"http://127.0.0.1:9/{n}"}
        assert display.post("/playback/subscribe/", json=uri).status_code == 201
    again = display.post("/playback/subscribe/", json={"subscriber-uri": "http://127.0.0.1:9/0"})
    assert again.status_code == 201
    over = display.post("/playback/subscribe/", json={"subscriber-uri": "http://127.0.0.1:9/2"})
    assert over.status_code == 429
    assert over.json()["error"] == "too-many-subscriptions"


# -- a full disk ---------------------------------------------------------------------------------


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 6 MiB tmpfs, unmounted afterwards (the tests run as root)."""
    mount = tmp_path / "disk"
    mount.mkdir()
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=6m", "tmpfs", str(mount)],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        pytest.fail(f"cannot mount a tmpfs (root needed): {done.stderr.strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def fill(disk: Path) -> Path:
    """Fill the disk to the last byte; the filler file, to remove when space should return."""
    filler = disk / "filler"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
    try:
        for size in (65536, 512, 1):
            with contextlib.suppress(OSError):
                while True:
                    os.write(fd, b"\0" * size)
    finally:
        os.close(fd)
    with pytest.raises(OSError) as error, (disk / "probe").open("wb") as probe:
        probe.write(b"x" * 4096)
        probe.flush()
        os.fsync(probe.fileno())
    assert error.value.errno == errno.ENOSPC
    return filler


def test_a_full_disk_refuses_writes_with_507_and_playback_stays_true(
    make_display: Callable[..., Display], small_disk: Path
) -> None:
    receiver = HookReceiver()
    display = make_display(data_dir=small_disk / "data")
    display.service._playback.retry_interval = 0.2
    try:
        assert display.post("/playback/subscribe/", json={"subscriber-uri": receiver.url()}).ok
        answer = display.post(
            "/schedule", json={"content-item": "http://example.org/a", "preferred-duration": "1 h"}
        )
        assert answer.status_code == 202
        display.wait_playback(lambda r: r["content-item"] == "http://example.org/a")
        filler = fill(small_disk)

        # Writes are refused with a JSON 507 that names the cause.
        refused = [
            display.post("/schedule", json={"content-item": f"http://example.org/x{n}"})
            for n in range(20)
        ]
        full = [r for r in refused if r.status_code == 507]
        assert full, [r.status_code for r in refused]
        body = full[0].json()
        assert body["error"] == "insufficient-storage"
        assert "full" in body["message"]
        assert "SQLITE_FULL" in body["message"] or "ENOSPC" in body["message"]

        # The screen changes (what the engine reports when the renderer painted an item; the
        # engine's own request queue cannot advance on a full disk, so the change is reported
        # here directly): /playback/ follows it from memory.
        before = display.playback()["sequence"]
        for name in "bcd":
            display.service._playback.changed(
                Playback(f"http://example.org/{name}", "text/html", "schedule", "lobby",
                         datetime.now(UTC), 5.0)
            )  # fmt: skip
        assert display.service._playback.flush(10)  # committed by its writer thread
        record = display.playback()
        assert (record["content-item"], record["sequence"]) == ("http://example.org/d", before + 3)
        health = display.get("/x/health").json()
        assert health["status"] == "degraded"
        assert health["storage"]["record-stored"] is False
        assert "full" in (health["storage"]["error"] or "")
        assert health["storage"]["last-disk-full"] is not None
        delivered = [json.loads(b)["sequence"] for b in receiver.bodies()]
        assert record["sequence"] not in delivered

        # Space returns: the record kept in memory is stored and sent, its sequence after a
        # gap the subscriber can see.
        filler.unlink()
        wait_until(
            lambda: record["sequence"] in [json.loads(b)["sequence"] for b in receiver.bodies()]
        )
        got = [json.loads(b)["sequence"] for b in receiver.bodies()]
        assert got == sorted(got)
        assert display.store.playback()[0] >= record["sequence"]
        assert display.get("/x/health").json()["storage"]["record-stored"] is True
        assert display.post("/schedule", json={"content-item": "http://example.org/z"}).ok
    finally:
        receiver.close()

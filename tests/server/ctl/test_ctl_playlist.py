"""``pdn ctl playlist ...`` against a real scheduler on loopback: put from arguments (items by
hash and by name, links with a port, durations after the last ':') and from a JSON file,
list, show, the CDS, assign to a group, delete; refusals with their exit codes and the
scheduler's message."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests

from server.cli import main
from server.ctl.cli import EXIT_OK, EXIT_REFUSED, EXIT_USAGE
from server.scheduler.service import SchedulerService
from tests.support.ctl import pdn_ctl
from tests.support.png import png
from tests.support.scheduler import start

RED = png(32, 18, (220, 30, 30))


@pytest.fixture
def scheduler(tmp_path: Path) -> Iterator[SchedulerService]:
    service = start(tmp_path, None)
    yield service
    service.stop()


def test_put_list_show_assign_and_delete(
    scheduler: SchedulerService, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    base = scheduler.url
    uploaded = requests.post(
        f"{base}/x/media", data=RED, headers={"X-Filename": "red.png"}, timeout=10
    )
    sha = hashlib.sha256(RED).hexdigest()
    assert uploaded.status_code == 201
    code = main(
        ["ctl", "playlist", "put", base, "lobby",
         "--item", f"{sha}:10s", "--link", "http://127.0.0.1:8081:20 seconds",
         "--item", "red.png", "--link", "https://example.org:8443",
         "--order", "shuffle", "--name", "Lobby"]
    )  # fmt: skip
    out = capsys.readouterr().out
    assert code == EXIT_OK, out
    assert "playlist lobby created: 4 item(s), 50 s" in out
    stored = requests.get(f"{base}/x/playlists/lobby", timeout=5).json()
    assert stored["items"] == [
        {"media": sha, "duration": 10.0, "transition": "crossfade"},
        {"link": "http://127.0.0.1:8081", "duration": 20.0, "transition": "crossfade"},
        {"media": sha, "transition": "crossfade"},
        {"link": "https://example.org:8443", "transition": "crossfade"},
    ]
    assert (stored["order"], stored["name"]) == ("shuffle", "Lobby")

    assert main(["ctl", "playlist", "list", base]) == EXIT_OK
    assert capsys.readouterr().out == "lobby  (Lobby)  4 item(s), 50 s, shuffle, medium\n"
    assert main(["ctl", "playlist", "show", base, "lobby"]) == EXIT_OK
    shown = capsys.readouterr().out.splitlines()
    assert shown[0] == "lobby (Lobby): 4 item(s), 50 s, shuffle, priority medium"
    assert shown[2] == "  2. link http://127.0.0.1:8081  20 s  crossfade"
    assert main(["ctl", "playlist", "show", base, "lobby", "--cds"]) == EXIT_OK
    assert f"/media/{sha}/red.png</uri>" in capsys.readouterr().out

    body = {"items": [{"media": sha, "duration": "5 s", "days": ["sat", "sun"]}]}
    (tmp_path / "weekend.json").write_text(json.dumps(body))
    code = main(["ctl", "playlist", "put", base, "lobby", "--file", str(tmp_path / "weekend.json")])
    assert code == EXIT_OK
    assert "playlist lobby replaced: 1 item(s), 5 s" in capsys.readouterr().out

    assert main(["ctl", "playlist", "assign", base, "lobby", "--group", "hall"]) == EXIT_OK
    assert "schedule lobby assigned to group hall" in capsys.readouterr().out
    assigned = requests.get(f"{base}/x/assignments", timeout=5).json()
    assert assigned == [{"schedule": "lobby", "group": "hall"}]
    assert main(["ctl", "playlist", "unassign", base, "lobby", "--group", "hall"]) == EXIT_OK
    assert requests.get(f"{base}/x/assignments", timeout=5).json() == []
    capsys.readouterr()

    assert main(["ctl", "playlist", "delete", base, "lobby"]) == EXIT_OK
    assert capsys.readouterr().out == "playlist lobby deleted\n"
    assert main(["ctl", "playlist", "list", base]) == EXIT_OK
    assert capsys.readouterr().out == "no playlists\n"


def test_refusals_say_why(scheduler: SchedulerService, tmp_path: Path) -> None:
    base = scheduler.url
    unknown = pdn_ctl("playlist", "put", base, "x", "--item", f"{'f' * 64}:5s")
    assert unknown.returncode == EXIT_REFUSED
    assert "400" in unknown.stderr and "upload it first" in unknown.stderr
    by_name = pdn_ctl("playlist", "put", base, "x", "--item", "missing.png")
    assert by_name.returncode == EXIT_USAGE and "no media item of that name" in by_name.stderr
    bad = pdn_ctl("playlist", "put", base, "x", "--link", "https://example.org/:5 fortnights")
    assert bad.returncode == EXIT_REFUSED and "items[0].duration" in bad.stderr
    neither = pdn_ctl("playlist", "put", base, "x")
    assert neither.returncode == EXIT_USAGE
    (tmp_path / "broken.json").write_text("{")
    broken = pdn_ctl("playlist", "put", base, "x", "--file", str(tmp_path / "broken.json"))
    assert broken.returncode == EXIT_USAGE and "not JSON" in broken.stderr
    missing = pdn_ctl("playlist", "show", base, "nothing")
    assert missing.returncode == EXIT_REFUSED and "no playlist 'nothing'" in missing.stderr
    assert requests.get(f"{base}/x/playlists", timeout=5).json() == []

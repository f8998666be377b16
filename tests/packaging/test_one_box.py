"""One screen, one box: ``install.sh --services display,scheduler`` in a throwaway root, then
the configuration it wrote run for real (a ``pdn scheduler`` and a ``pdn display`` process,
as their units start them): the display registers with the scheduler on this machine, is
approved by the enrolment token the installer gave it, and shows the first playlist, a picture
of where the console is."""

from __future__ import annotations

import contextlib
import hashlib
import io
import re
import ssl
import tomllib
from pathlib import Path

import requests
from PIL import Image

from player.follower import console_address
from server.platform.net import local_address, url_host
from server.platform.pins import PinningAdapter, fingerprint_of
from tests.packaging.test_install import INSTALL, install_into, run
from tests.support.display import DisplayProcess
from tests.support.ports import free_port
from tests.support.scheduler import SchedulerProcess
from tests.support.waiting import wait_until


def env_file(path: Path) -> dict[str, str]:
    return dict(
        line.split("=", 1) for line in path.read_text().splitlines() if line.startswith("PDN_")
    )


def test_the_installer_writes_a_box_whose_display_joins_its_scheduler(tmp_path: Path) -> None:
    result = install_into(
        tmp_path, "--services", "display,scheduler", "--location", "N54.0104,W2.7883"
    )
    assert result.returncode == 0, result.stderr
    etc = tmp_path / "etc/pdn"
    config = tomllib.loads((etc / "pdn.toml").read_text())
    secrets = env_file(etc / "scheduler.env")
    assert config["register"] == "http://127.0.0.1:8090"
    assert config["scheduler_token"] == secrets["PDN_ENROLMENT_TOKEN"]
    assert config["groups"] == ["this-screen"]
    assert config["location"] == {"latitude": "N54.0104", "longitude": "W2.7883"}
    assert env_file(etc / "services.env")["PDN_SCHEDULER_OPTIONS"] == '"--welcome this-screen"'
    assert re.search(r"this screen's console: http://\S+:8090/console/", result.stdout)
    assert "the display registers with the scheduler on this machine" in result.stdout
    # Installed again: the owner's config is kept as it is.
    before = (etc / "pdn.toml").read_text()
    again = install_into(tmp_path, "--services", "display,scheduler")
    assert again.returncode == 0, again.stderr
    assert (etc / "pdn.toml").read_text() == before

    # Without --location, a place-holder the owner is told to edit; a display alone gets none
    # of it; a bad --location is refused before anything changes.
    bare = install_into(tmp_path / "bare", "--services", "display,scheduler")
    assert bare.returncode == 0, bare.stderr
    placed = tomllib.loads((tmp_path / "bare/etc/pdn/pdn.toml").read_text())
    assert placed["location"] == {"latitude": "N0", "longitude": "E0"}
    alone = install_into(tmp_path / "alone")
    assert alone.returncode == 0, alone.stderr
    assert "register" not in tomllib.loads((tmp_path / "alone/etc/pdn/pdn.toml").read_text())
    assert "console" not in alone.stdout
    refused = run("bash", INSTALL, "--root", tmp_path / "no", "--location", "north")
    assert refused.returncode != 0 and "--location must be LAT,LON" in refused.stderr
    assert not (tmp_path / "no/etc").exists()


def test_the_installed_box_shows_where_its_console_is(tmp_path: Path) -> None:
    """The configuration install.sh wrote, run as the units run it (only the ports are free
    ones, and the display's data directory the test's)."""
    assert install_into(tmp_path / "root", "--services", "display,scheduler").returncode == 0
    etc = tmp_path / "root/etc/pdn"
    services = env_file(etc / "services.env")
    secrets = env_file(etc / "scheduler.env")
    scheduler_port, display_port = free_port(), free_port()
    welcome = services["PDN_SCHEDULER_OPTIONS"].strip('"').split()
    scheduler = SchedulerProcess(
        tmp_path / "scheduler",
        ["--host", services["PDN_SCHEDULER_HOST"], *welcome],
        port=scheduler_port,
        env=secrets,
    )
    config = (etc / "pdn.toml").read_text().replace(":8090", f":{scheduler_port}")
    display = DisplayProcess(tmp_path / "display", config=config, port=display_port, scheme="https")
    with contextlib.ExitStack() as stopping:
        stopping.callback(scheduler.stop)
        scheduler.start().wait_ready()
        stopping.callback(display.stop)
        display.start().wait_ready(lambda: "Display Segment API" in display.text(), timeout=90)
        base = f"http://127.0.0.1:{scheduler_port}"
        operator = {"Authorization": f"Bearer {secrets['PDN_API_TOKEN']}"}
        playlist = requests.get(f"{base}/x/playlists/welcome", headers=operator, timeout=5)
        assert playlist.status_code == 200, playlist.text
        sha = playlist.json()["items"][0]["media"]
        picture = requests.get(f"{base}/media/{sha}/welcome.png", timeout=5)
        assert hashlib.sha256(picture.content).hexdigest() == sha
        with Image.open(io.BytesIO(picture.content)) as image:
            assert image.size == (1920, 1080)
        # Approved at once (the enrolment token), in the group, shown the picture.
        wait_until(
            lambda: requests.get(f"{base}/displays", timeout=5).json(),
            timeout=60,
            what="the display in the scheduler's registry",
        )
        # On its screen: its playback record, read over HTTPS pinned to its self-signed
        # certificate, as the scheduler reads it.
        pem = (display.data_dir / "tls-cert.pem").read_text()
        pin = fingerprint_of(ssl.PEM_cert_to_DER_cert(pem))
        with requests.Session() as session:
            session.mount("https://", PinningAdapter(lambda url: pin))
            wait_until(
                lambda: str(
                    session.get(f"{display.url}/playback/", timeout=5).json()["content-item"]
                ).endswith(f"/media/{sha}/welcome.png"),
                timeout=60,
                what="the welcome picture on the screen",
            )
        groups = requests.get(f"{base}/x/groups", headers=operator, timeout=5).json()
        assert [g["name"] for g in groups] == ["this-screen"]
    # What the display's idle page names beside its pairing code: this machine's console.
    assert console_address(f"http://127.0.0.1:{scheduler_port}") == (
        f"http://{url_host(local_address())}:{scheduler_port}/console/"
    )
    assert console_address("http://scheduler.example:8090") is None
    assert console_address(None) is None

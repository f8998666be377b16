"""pdn-release as root against a data directory its service user booby-trapped.

The real script runs as root (``PDN_ROOT``: a copy of the layout in a directory of its own). The
display's user is ``nobody`` here (``PDN_DISPLAY_USER``): it owns ``var/lib/pdn`` as an older
install left it, and plants links where an older pdn-release wrote and read as root: the old release
state directory, its ``lock``, ``.health`` and ``state``, the files the data move takes and the
directory it moves them to, each pointing at a root-owned secret (``/etc/shadow``'s kind: 0600) or a
root-owned directory. Nothing root owns changes, no secret is read into anything the display's user
can see, and pdn-release does its job or says why it did not.
"""

from __future__ import annotations

import hashlib
import os
import pwd
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.paths import REPO
from tests.support.tools import require_tools

RELEASE = REPO / "packaging/pdn-release"
SECRET = "root:$y$j9T$not-for-pdn$:20000:0:99999:7:::\n"


@pytest.fixture
def nobody() -> pwd.struct_passwd:
    require_tools("setpriv")
    if os.getuid() != 0:
        pytest.skip("pdn-release runs as root")
    return pwd.getpwnam("nobody")


@pytest.fixture
def root() -> Iterator[Path]:
    """A throwaway root the display's user can reach (pytest's tmp_path is root's, 0700)."""
    directory = Path(tempfile.mkdtemp(prefix="pdn-release-root-"))
    directory.chmod(0o755)
    yield directory
    shutil.rmtree(directory, ignore_errors=True)


def run(root: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    # Where install.sh puts it: the display's user runs it again (move-data), and may not be
    # able to reach the checkout (one under /root, as on a fresh machine).
    installed = root / "opt/pdn/libexec/pdn-release"
    if not installed.exists():
        installed.parent.mkdir(parents=True, exist_ok=True)
        for directory in (root / "opt", root / "opt/pdn", installed.parent):
            directory.chmod(0o755)
        shutil.copy(RELEASE, installed)
        installed.chmod(0o755)
    return subprocess.run(
        ["bash", str(installed), *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env={**os.environ, "PDN_ROOT": str(root), "PDN_DISPLAY_USER": "nobody", **env},
    )


def fake_release(root: Path, name: str, age: int) -> None:
    directory = root / "opt/pdn/releases" / name
    (directory / "venv/bin").mkdir(parents=True)
    (directory / "RELEASE").write_text(f"version={name.split('-', maxsplit=1)[0]}\n")
    marker = directory / ".complete"
    marker.touch()
    os.utime(marker, (time.time() - age, time.time() - age))


def snapshot(paths: list[Path]) -> dict[str, tuple[str, int, int, int, str]]:
    """What root's targets are: kind, mode, owner, modification time and content (a digest)."""
    seen: dict[str, tuple[str, int, int, int, str]] = {}
    for top in paths:
        for path in [top, *sorted(top.rglob("*"))] if top.is_dir() else [top]:
            info = path.lstat()
            data = path.read_bytes() if path.is_file() and not path.is_symlink() else b""
            kind = "dir" if path.is_dir() else "file"
            seen[str(path)] = (kind, info.st_mode, info.st_uid, info.st_mtime_ns,
                               hashlib.sha256(data).hexdigest())  # fmt: skip
    return seen


def owned_by(path: Path, user: pwd.struct_passwd) -> None:
    os.chown(path, user.pw_uid, user.pw_gid, follow_symlinks=False)


def plant(link: Path, target: Path, user: pwd.struct_passwd) -> None:
    """A link the display's user made (its own, in its own directory)."""
    link.parent.mkdir(parents=True, exist_ok=True)
    link.symlink_to(target)
    owned_by(link, user)


@pytest.fixture
def secrets(root: Path) -> dict[str, Path]:
    """Root's: a shadow-like file (0600), a directory with a file, outside var/lib/pdn."""
    etc = root / "etc"
    etc.mkdir()
    shadow = etc / "shadow"
    shadow.write_text(SECRET)
    shadow.chmod(0o600)
    vault = root / "root-vault"
    vault.mkdir(mode=0o700)
    (vault / "state").write_text("current=../../../root-vault\n")
    (vault / "lock").write_text(SECRET)
    return {"shadow": shadow, "vault": vault}


def test_planted_links_in_the_old_release_state_are_not_followed(
    root: Path, nobody: pwd.struct_passwd, secrets: dict[str, Path]
) -> None:
    """The release state lived in var/lib/pdn/release, root's directory in the display user's
    home: the user renames it and leaves links in its place. Root now keeps its state in
    var/lib/pdn-release, reads the old one only through O_NOFOLLOW and only if root owns it."""
    data = root / "var/lib/pdn"
    data.mkdir(parents=True)
    owned_by(data, nobody)
    # release/ itself a link to root's directory, and, in a directory of the user's, the files.
    plant(data / "release", secrets["vault"], nobody)
    fake_release(root, "0.2.0-b", 200)
    fake_release(root, "0.3.0-c", 100)
    before = snapshot(list(secrets.values()))
    for args in (["switch", "0.2.0-b"], ["switch", "0.3.0-c", "--trial"], ["started"],
                 ["check"], ["rollback", "a test"], ["status"]):  # fmt: skip
        result = run(root, *args, PDN_CONFIG=str(root / "nothing.toml"))
        assert result.returncode == 0, (args, result.stderr)
        assert SECRET.strip() not in result.stdout + result.stderr
    # It did its job: switched, counted, rolled back; its state in its own directory.
    assert Path(os.readlink(root / "opt/pdn/current")).name == "0.2.0-b"
    state = (root / "var/lib/pdn-release/state").read_text()
    assert "rolled-back-from=0.3.0-c" in state and "root-vault" not in state
    assert snapshot(list(secrets.values())) == before
    first = run(root, "check").stderr
    assert "left the old release state where it is" not in first  # said once, at the migration

    # The same with release/ a directory of the user's, holding links named as root's files.
    shutil.rmtree(root / "var/lib/pdn-release")
    (data / "release").unlink()
    (data / "release").mkdir()
    owned_by(data / "release", nobody)
    for name in ("lock", ".health", "state"):
        plant(data / "release" / name, secrets["shadow"], nobody)
    result = run(root, "check", PDN_CONFIG=str(root / "nothing.toml"))
    assert result.returncode == 0, result.stderr
    assert "left the old release state where it is" in result.stderr
    assert "not root's own directory" in result.stderr
    assert not (root / "var/lib/pdn-release/state").exists()  # nothing taken from there
    assert snapshot(list(secrets.values())) == before
    # Root's own state directory made for it: root's, 0755; its lock 0600.
    info = (root / "var/lib/pdn-release").stat()
    assert (info.st_uid, info.st_mode & 0o777) == (0, 0o755)
    assert (root / "var/lib/pdn-release/lock").stat().st_mode & 0o777 == 0o600


def test_an_older_installs_state_moves_once(root: Path, nobody: pwd.struct_passwd) -> None:
    """What a release before kept in var/lib/pdn/release (root's) moves to var/lib/pdn-release
    at the first command that takes the lock; the old directory goes; a path in a release name
    is dropped."""
    data = root / "var/lib/pdn"
    (data / "release").mkdir(parents=True)
    owned_by(data, nobody)
    fake_release(root, "0.2.0-b", 200)
    fake_release(root, "0.3.0-c", 100)
    assert run(root, "switch", "0.2.0-b").returncode == 0
    (root / "var/lib/pdn-release/state").rename(data / "release/state")
    shutil.rmtree(root / "var/lib/pdn-release")
    with (data / "release/state").open("a") as old:
        old.write("rolled-back-from=../../../etc\nreason=by hand\n")
    (data / "release/lock").touch()
    (data / "release/.health").write_text("old\n")
    result = run(root, "switch", "0.3.0-c", "--trial")
    assert result.returncode == 0, result.stderr
    assert "moved the release state from" in result.stderr
    assert not (data / "release").exists()
    state = (root / "var/lib/pdn-release/state").read_text()
    assert "previous=0.2.0-b" in state and "trial=0.3.0-c" in state
    assert "../" not in state


def test_a_state_directory_someone_else_controls_is_refused(root: Path) -> None:
    (root / "var/lib").mkdir(parents=True)
    elsewhere = root / "elsewhere"
    elsewhere.mkdir()
    (root / "var/lib/pdn-release").symlink_to(elsewhere)
    fake_release(root, "0.2.0-b", 200)
    result = run(root, "switch", "0.2.0-b")
    assert result.returncode != 0
    assert "is not a directory of root's that only it can write" in result.stderr
    assert list(elsewhere.iterdir()) == []


def test_the_data_move_runs_as_the_display_user_and_follows_no_link(
    root: Path, nobody: pwd.struct_passwd, secrets: dict[str, Path]
) -> None:
    """pdn 0.1.0's display kept its data in var/lib/pdn; the move into var/lib/pdn/display runs
    as the display's user: links among the files move as links (their targets untouched), and
    a display/ that is a link to root's directory stops the move, with a line saying why."""
    data = root / "var/lib/pdn"
    data.mkdir(parents=True)
    owned_by(data, nobody)
    for name in ("display.db", "pairing-code"):
        (data / name).write_text(name)
        owned_by(data / name, nobody)
    plant(data / "tls-key.pem", secrets["shadow"], nobody)
    plant(data / "webhook-secret", secrets["vault"] / "lock", nobody)
    plant(data / "display", secrets["vault"], nobody)
    before = snapshot(list(secrets.values()))
    stopped = run(root, "started")
    assert stopped.returncode == 0, stopped.stderr
    assert "is not a directory of nobody's" in stopped.stderr
    assert "stays nobody's until its data there has moved" in stopped.stderr
    assert snapshot(list(secrets.values())) == before
    assert (data / "display.db").read_text() == "display.db"
    assert data.stat().st_uid == nobody.pw_uid

    # The user's own directory there: the files and the links move (as links).
    (data / "display").unlink()
    (data / "display").mkdir(mode=0o750)
    owned_by(data / "display", nobody)
    moved = run(root, "started")
    assert moved.returncode == 0, moved.stderr
    assert "moved the display's data" in moved.stderr
    assert (data / "display/display.db").read_text() == "display.db"
    assert os.readlink(data / "display/tls-key.pem") == str(secrets["shadow"])
    assert (data / "display/display.db").stat().st_uid == nobody.pw_uid
    assert snapshot(list(secrets.values())) == before
    # Then var/lib/pdn is root's: no service user can rename what lies in it.
    info = data.stat()
    assert (info.st_uid, info.st_mode & 0o777) == (0, 0o755)
    assert f"{data} is root's now" in moved.stderr
    again = run(root, "started")
    assert again.returncode == 0 and "moved" not in again.stderr


def test_the_move_never_runs_as_root(root: Path, nobody: pwd.struct_passwd) -> None:
    data = root / "var/lib/pdn"
    data.mkdir(parents=True)
    (data / "display.db").write_text("x")
    owned_by(data, nobody)
    owned_by(data / "display.db", nobody)
    as_root = run(root, "started", PDN_DISPLAY_USER="root")
    assert as_root.returncode == 0  # never stops the display from starting
    assert "the data move runs as the display's user only" in as_root.stderr
    assert (data / "display.db").exists() and not (data / "display").exists()
    direct = run(root, "move-data")
    assert direct.returncode != 0
    assert "move-data runs as the display's user, not as root" in direct.stderr


def test_the_data_a_display_left_in_var_lib_pdn_moves_into_its_directory(
    root: Path, nobody: pwd.struct_passwd
) -> None:
    """Under systemd 250 and later, pdn 0.1.0's unit (StateDirectory=pdn/display pdn, a list
    systemd sorts) gave the display /var/lib/pdn as its data directory. Its first start under
    the unit that names /var/lib/pdn/display alone moves the display's files there, once, as the
    display's user; the other roles' directories, the release state and pdn's home stay."""
    data = root / "var/lib/pdn"
    display_files = ["display.db", "display.db-wal", "pairings.db", "tls-cert.pem",
                     "tls-key.pem", "webhook-secret", "pairing-code"]  # fmt: skip
    for name in display_files:
        (data / name).parent.mkdir(parents=True, exist_ok=True)
        (data / name).write_text(name)
    (data / "cache/ab").mkdir(parents=True)
    (data / "cache/ab/item").write_text("content")
    others = ["scheduler/scheduler.db", "schedules/s.xml", "apps/a", "sensor-door/s",
              "release/state", ".cache/qt/x"]  # fmt: skip
    for name in others:
        (data / name).parent.mkdir(parents=True, exist_ok=True)
        (data / name).write_text(name)
    (data / "display").mkdir()  # systemd made it, empty
    for path in [data, *data.rglob("*")]:  # all the display user's, as pdn 0.1.0 left it
        owned_by(path, nobody)
    first = run(root, "started")
    assert first.returncode == 0, first.stderr
    assert "moved the display's data" in first.stderr
    for name in display_files:
        assert (data / "display" / name).read_text() == name
        assert not (data / name).exists()
    assert (data / "display/cache/ab/item").read_text() == "content"
    for name in others:
        assert (data / name).read_text() == name
    # Once: the display's database is in its directory now.
    (data / "display.db").write_text("a new file")
    again = run(root, "started")
    assert again.returncode == 0 and "moved" not in again.stderr
    assert (data / "display/display.db").read_text() == "display.db"

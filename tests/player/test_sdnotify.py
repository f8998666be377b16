"""sd_notify over real unix datagram sockets (path and abstract)."""

from __future__ import annotations

import os
import socket
import tempfile
import threading
from collections.abc import Iterator

import pytest

from player.sdnotify import SdNotifier, socket_address, watchdog_usec_from
from tests.support.notify import NotifyListener


def test_ready_status_watchdog_stopping_over_path_socket(notify_listener: NotifyListener) -> None:
    env = {"NOTIFY_SOCKET": notify_listener.address, "WATCHDOG_USEC": "4000000"}
    notifier = SdNotifier.from_environment(env)
    assert notifier.enabled
    assert notifier.watchdog_interval() == 2.0

    assert notifier.ready("first frame\non screen")
    assert notifier.watchdog()
    assert notifier.status("playing http://example.org/")
    assert notifier.extend_timeout(1.5)
    assert notifier.stopping()
    received = [notify_listener.receive(1.0) for _ in range(5)]
    notifier.close()

    assert received == [
        "READY=1\nSTATUS=first frame on screen",
        "WATCHDOG=1",
        "STATUS=playing http://example.org/",
        "EXTEND_TIMEOUT_USEC=1500000",
        "STOPPING=1",
    ]


def test_abstract_socket(abstract_notify_listener: NotifyListener) -> None:
    notifier = SdNotifier.from_environment({"NOTIFY_SOCKET": abstract_notify_listener.address})
    request_close(notifier)
    assert notifier.ready()
    assert abstract_notify_listener.receive(1.0) == "READY=1"
    # No WatchdogSec: no pings are sent, and the interval says so.
    assert notifier.watchdog_interval() is None
    assert not notifier.watchdog()
    assert abstract_notify_listener.receive(0.05) is None


def test_without_manager_everything_is_a_quiet_no_op() -> None:
    notifier = SdNotifier.from_environment({})
    assert not notifier.enabled
    assert notifier.watchdog_interval() is None
    assert not notifier.ready()
    assert not notifier.watchdog()
    assert not notifier.status("x")
    assert not notifier.stopping()


def test_watchdog_pid_must_be_ours() -> None:
    env = {"WATCHDOG_USEC": "1000000", "WATCHDOG_PID": "1"}
    assert watchdog_usec_from(env, pid=1) == 1_000_000
    assert watchdog_usec_from(env, pid=2) is None
    assert watchdog_usec_from({"WATCHDOG_USEC": "1000000"}, pid=2) == 1_000_000
    assert watchdog_usec_from({"WATCHDOG_USEC": "0"}, pid=2) is None
    assert watchdog_usec_from({"WATCHDOG_USEC": "soon"}, pid=2) is None
    assert watchdog_usec_from({"WATCHDOG_USEC": "5", "WATCHDOG_PID": "x"}, pid=2) is None
    notifier = SdNotifier.from_environment({"NOTIFY_SOCKET": "/run/x", **env}, pid=os.getpid() + 1)
    assert notifier.enabled
    assert notifier.watchdog_interval() is None


def test_unsupported_addresses_are_refused() -> None:
    assert socket_address("@") is None
    assert socket_address("relative/path") is None
    assert socket_address("vsock:2:1234") is None
    assert socket_address("@abc") == b"\0abc"
    assert socket_address("/run/systemd/notify") == "/run/systemd/notify"
    assert not SdNotifier.from_environment({"NOTIFY_SOCKET": "vsock:2:1"}).enabled


def test_unset_removes_the_variables_for_children(notify_listener: NotifyListener) -> None:
    env = {"NOTIFY_SOCKET": notify_listener.address, "WATCHDOG_USEC": "2000000", "PATH": "/bin"}
    notifier = SdNotifier.from_environment(env, unset=True)
    request_close(notifier)
    assert env == {"PATH": "/bin"}
    assert notifier.watchdog()
    assert notifier_message(notify_listener) == "WATCHDOG=1"


def test_vanished_socket_returns_false_and_recovers() -> None:
    with tempfile.TemporaryDirectory(prefix="pdn-n-") as directory:
        path = os.path.join(directory, "s")
        notifier = SdNotifier(path, 1_000_000)
        request_close(notifier)
        assert not notifier.watchdog()  # nobody listening yet
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        sock.bind(path)
        try:
            assert notifier.watchdog()
            assert sock.recv(100) == b"WATCHDOG=1"
        finally:
            sock.close()


def test_pings_from_many_threads_arrive_whole(notify_listener: NotifyListener) -> None:
    notifier = SdNotifier(notify_listener.address, 1_000_000)
    request_close(notifier)
    threads = [threading.Thread(target=notifier.status, args=(f"t{i}",)) for i in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    got = sorted(notifier_message(notify_listener) for _ in threads)
    assert got == sorted(f"STATUS=t{i}" for i in range(8))


_to_close: list[SdNotifier] = []


def request_close(notifier: SdNotifier) -> None:
    _to_close.append(notifier)


@pytest.fixture(autouse=True)
def _close_notifiers() -> Iterator[None]:
    yield
    while _to_close:
        _to_close.pop().close()


def notifier_message(listener: NotifyListener) -> str:
    message = listener.receive(1.0)
    assert message is not None
    return message

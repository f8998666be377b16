"""The console's sessions: random, kept server-side (only a hash), revocable, ended after
``PDN_CONSOLE_IDLE`` seconds unused, and all ended by a change of the operator token.

Real schedulers on 0.0.0.0 with an operator token, on SQLite and on PostgreSQL (there, two
scheduler processes share the sessions); browsers are httpx clients from several loopback
source addresses, each sending the cookie it was given.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable

import httpx
import pytest

from tests.support.lan import OPERATOR, Scheduler

pytestmark = pytest.mark.usefixtures("scheduler_backend")
COOKIE = "pdn_console"


@pytest.fixture
def start(
    make_scheduler: Callable[..., Scheduler], monkeypatch: pytest.MonkeyPatch
) -> Callable[..., Scheduler]:
    """A scheduler on one data folder (the same one again after a restart) with ``token``,
    its console sessions ending after ``idle`` seconds unused (the default if None)."""

    def make(token: str = OPERATOR, idle: float | None = None) -> Scheduler:
        if idle is None:
            monkeypatch.delenv("PDN_CONSOLE_IDLE", raising=False)
        else:
            monkeypatch.setenv("PDN_CONSOLE_IDLE", str(idle))
        return make_scheduler(token, enrolment=None, name="scheduler", refresh_interval=300.0)

    return make


def sign_in(scheduler: Scheduler, source: str, token: str = OPERATOR) -> str:
    """Sign in from ``source``; the session id the browser was given."""
    answer = scheduler.client(source).post(
        "/console/signin", data={"token": token, "next": "/console/"}
    )
    assert answer.status_code == 302, answer.text
    header = answer.headers["Set-Cookie"]
    flags = {part.strip().split("=")[0].lower() for part in header.split(";")}
    assert {"httponly", "samesite", "path"} <= flags and "secure" not in flags  # plain HTTP
    assert "SameSite=Strict" in header and "Max-Age" not in header and "Path=/console" in header
    return answer.cookies[COOKIE]


def page(scheduler: Scheduler, session: str, source: str = "127.0.0.60") -> httpx.Response:
    """The displays page as a browser holding ``session`` sees it."""
    with httpx.Client(
        base_url=scheduler.url,
        transport=httpx.HTTPTransport(local_address=source),
        cookies={COOKIE: session},
        timeout=10,
    ) as browser:
        return browser.get("/console/")


def signed_in(answer: httpx.Response) -> bool:
    if answer.status_code == 302:
        assert "/console/signin" in answer.headers["Location"]
        return False
    assert answer.status_code == 200, answer.text
    assert "Sign out everywhere" in answer.text
    return True


def test_sessions_are_random_hashed_and_signed_out(start: Callable[..., Scheduler]) -> None:
    scheduler = start()
    first, second = sign_in(scheduler, "127.0.0.61"), sign_in(scheduler, "127.0.0.62")
    assert first != second and len(first) >= 43
    assert signed_in(page(scheduler, first)) and signed_in(page(scheduler, second))
    assert not signed_in(page(scheduler, "forged-" + first))
    # Only a hash of each id is kept.
    rows = scheduler.service.storage.database.rows("SELECT id_hash FROM console_sessions")
    stored = {row[0] for row in rows}
    assert stored == {hashlib.sha256(s.encode()).hexdigest() for s in (first, second)}
    # Signing out ends that session: its cookie, kept and sent again, gets the sign-in page.
    out = scheduler.client("127.0.0.61").post("/console/signout")
    assert out.status_code == 302 and COOKIE not in scheduler.client("127.0.0.61").cookies
    assert not signed_in(page(scheduler, first))
    assert signed_in(page(scheduler, second))
    # "Sign out everywhere" ends every session.
    third = sign_in(scheduler, "127.0.0.63")
    everywhere = scheduler.client("127.0.0.63").post("/console/signout-everywhere")
    assert everywhere.status_code == 302
    assert not signed_in(page(scheduler, second)) and not signed_in(page(scheduler, third))
    # A form from another page cannot sign anyone out without the cookie (SameSite): a
    # request without it is refused, not taken.
    fourth = sign_in(scheduler, "127.0.0.64")
    refused = httpx.post(f"{scheduler.url}/console/signout-everywhere", timeout=10)
    assert refused.status_code == 401 and signed_in(page(scheduler, fourth))


def test_a_session_unused_for_the_idle_time_ends(start: Callable[..., Scheduler]) -> None:
    scheduler = start(idle=3)
    session = sign_in(scheduler, "127.0.0.61")
    for _ in range(3):  # used every 1.5 s, it stays open past its idle time
        time.sleep(1.5)
        assert signed_in(page(scheduler, session))
    time.sleep(3.5)
    assert not signed_in(page(scheduler, session))
    assert scheduler.service.storage.database.rows("SELECT id_hash FROM console_sessions") == []


def test_a_new_operator_token_ends_every_session(
    start: Callable[..., Scheduler], scheduler_backend: str
) -> None:
    scheduler = start()
    session = sign_in(scheduler, "127.0.0.61")
    if scheduler_backend == "postgresql":  # another process on the database takes it too
        other = start()
        assert signed_in(page(other, session))
        other.close()
    scheduler.close()
    restarted = start(token="another-operator-token-0123456789")
    assert not signed_in(page(restarted, session))
    assert restarted.service.storage.database.rows("SELECT id_hash FROM console_sessions") == []
    assert signed_in(
        page(restarted, sign_in(restarted, "127.0.0.62", "another-operator-token-0123456789"))
    )

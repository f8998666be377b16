"""Waiting for something a test cannot be told about: a process that comes up, a request that
arrives, a record that changes. One loop, so every wait fails the same way: with what it
waited for, how long, and the last thing it saw.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, TypeVar

import requests

T = TypeVar("T")


def poll_until(
    predicate: Callable[[], T | None],
    timeout: float,
    step: float = 0.02,
    pause: Callable[[float], object] = time.sleep,
) -> T | None:
    """``predicate()``'s first true value within ``timeout`` seconds, or None. ``pause`` waits
    between tries (``time.sleep``; the Qt tests pass one that runs the event loop)."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() >= deadline:
            return None
        pause(step)


def wait_until(
    predicate: Callable[[], Any],
    timeout: float = 15.0,
    what: str | Callable[[], str] = "the condition",
    step: float = 0.02,
    ignore: tuple[type[BaseException], ...] = (),
) -> Any:
    """``predicate()``'s first true value (typed ``Any``: tests wait on ``a and b``); fails the
    test after ``timeout`` seconds.

    ``what`` names what was waited for (a callable is asked at the end, to say the last state
    seen); ``ignore`` lists exceptions that count as "not yet" (a server not listening yet),
    the last of which the failure shows."""
    last: list[object] = [None]

    def attempt() -> Any:
        try:
            value = predicate()
        except ignore as error:
            last[0] = error
            return None
        last[0] = value
        return value

    value = poll_until(attempt, timeout, step)
    if value:
        return value
    said = what() if callable(what) else what
    raise AssertionError(f"{said}: not within {timeout} s (last: {last[0]!r})")


def wait_for_value(
    read: Callable[[], T],
    check: Callable[[T], bool],
    timeout: float = 15.0,
    what: str = "a value as wanted",
    step: float = 0.02,
) -> T:
    """The first value of ``read()`` that ``check`` accepts; the failure shows the last one."""
    seen: list[T] = []

    def matched() -> bool:
        seen[:] = [read()]
        return check(seen[0])

    wait_until(matched, timeout, lambda: f"{what}: last {seen[0] if seen else None!r}", step)
    return seen[0]


def wait_for_answer(
    predicate: Callable[[], Any],
    timeout: float = 15.0,
    what: str | Callable[[], str] = "an answer",
    step: float = 0.1,
) -> Any:
    """``wait_until`` for a predicate that asks a server over HTTP: a request that fails (the
    server not listening yet, or too busy to answer) counts as "not yet"."""
    return wait_until(predicate, timeout, what, step, ignore=(requests.RequestException,))

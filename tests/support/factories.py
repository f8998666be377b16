"""Fixtures that start things on demand: ``started_by`` turns a function that starts one thing
into the factory a fixture yields, and stops every thing made by the end of the test.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import ParamSpec, TypeVar

T = TypeVar("T")
P = ParamSpec("P")


def started_by(start: Callable[P, T], stop: Callable[[T], object]) -> Iterator[Callable[P, T]]:
    """For a fixture to ``yield from``: ``start`` as a factory; at the end ``stop`` for each
    thing it made, in the order made."""
    made: list[T] = []

    def make(*args: P.args, **kwargs: P.kwargs) -> T:
        thing = start(*args, **kwargs)
        made.append(thing)
        return thing

    try:
        yield make
    finally:
        for thing in made:
            stop(thing)

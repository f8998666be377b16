"""A web server on 127.0.0.1 for the benchmarks: one function of the path answers every GET.

The benchmarks serve pages and pictures of their own (solid colours, signage pages, media); each
says only what a path answers, and tests/support's page server does the HTTP: a thread per
connection, keep-alive, a length on every answer, 404 for what the function does not know (the
browser's favicon probe), no log lines.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from tests.support.pages import PageServer, Reply, Request


@dataclass(frozen=True)
class Answer:
    body: bytes
    content_type: str
    cache: str = "no-store"  # Cache-Control


#: The answer to a path (the query string is removed), or None for 404.
Route = Callable[[str], Answer | None]


class LoopbackSite:
    """Serves ``route`` on a free port of 127.0.0.1 until :meth:`stop`; ``base`` is its URL.
    The HTTP is tests/support's page server, with keep-alive connections."""

    def __init__(self, route: Route) -> None:
        def answer(request: Request) -> Reply | None:
            if request.method not in ("GET", "HEAD"):
                return None
            found = route(request.route)
            if found is None:
                return None
            return Reply(200, found.body, found.content_type, {"Cache-Control": found.cache})

        self.pages = PageServer(keep_alive=True)
        self.pages.handle(answer)
        self.base = self.pages.url

    def stop(self) -> None:
        self.pages.close()

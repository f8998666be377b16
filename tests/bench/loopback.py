"""A web server on 127.0.0.1 for the benchmarks: one function of the path answers every GET.

The benchmarks serve pages and pictures of their own (solid colours, signage pages, media); each
says only what a path answers, and this module does the HTTP: a thread per connection,
keep-alive, a length on every answer, 404 for what the function does not know (the browser's
favicon probe), no log lines.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass(frozen=True)
class Answer:
    body: bytes
    content_type: str
    cache: str = "no-store"  # Cache-Control


#: The answer to a path (the query string is removed), or None for 404.
Route = Callable[[str], Answer | None]


class LoopbackSite:
    """Serves ``route`` on a free port of 127.0.0.1 until :meth:`stop`; ``base`` is its URL."""

    def __init__(self, route: Route) -> None:
        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_GET(self) -> None:
                answer = route(self.path.split("?", 1)[0])
                if answer is None:
                    self.send_error(404)
                    return
                self.send_response(200)
                self.send_header("Content-Type", answer.content_type)
                self.send_header("Content-Length", str(len(answer.body)))
                self.send_header("Cache-Control", answer.cache)
                self.end_headers()
                self.wfile.write(answer.body)

            def log_message(self, format: str, *args: Any) -> None:
                return None

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.base = f"http://127.0.0.1:{self.server.server_address[1]}"

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()

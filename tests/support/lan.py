"""A scheduler as ``install.sh`` runs it, beyond loopback: on 0.0.0.0 with an operator token
(and an enrolment token for displays), and clients of it from chosen loopback source
addresses (127.0.0.2, 127.0.0.3, ...), which it sees as different machines.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx

from server.scheduler.service import SchedulerService
from tests.support.tools import SourceClients

OPERATOR = "operator-token-0123456789abcdef"
ENROLMENT = "enrolment-token-0123456789abcdef"


class Scheduler(SourceClients):
    """A scheduler on 0.0.0.0 and clients of it from chosen loopback source addresses."""

    def __init__(self, service: SchedulerService) -> None:
        super().__init__(f"http://127.0.0.1:{service.server.port}")
        self.service = service

    def operator(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        """A request with the operator token, from 127.0.0.4."""
        headers = {"Authorization": f"Bearer {OPERATOR}", **kwargs.pop("headers", {})}
        return self.client("127.0.0.4").request(method, path, headers=headers, **kwargs)

    def close(self) -> None:
        super().close()
        self.service.stop()


def start_lan_scheduler(data_dir: Path, token: str | None, **options: Any) -> Scheduler:
    """A scheduler in this process on 0.0.0.0 and a free port, its data in ``data_dir``, with
    the operator ``token`` (none if None); the enrolment token is PDN_ENROLMENT_TOKEN's."""
    service = SchedulerService(data_dir=data_dir, host="0.0.0.0", port=0, token=token, **options)
    service.start()
    service.server.start()
    return Scheduler(service)


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def assert_error(response: httpx.Response, status: int, error: str) -> str:
    """Asserts the JSON error ``error`` with ``status``; its message."""
    assert response.status_code == status, response.text
    body = response.json()
    assert body["error"] == error
    message: str = body["message"]
    return message

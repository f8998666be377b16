"""Signed test webhooks: updates signed by the ``standardwebhooks`` package (the reference
library of Standard Webhooks), so receivers are tested against it, not against our own signer."""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime
from typing import Any

import requests
from standardwebhooks import Webhook


def signed_post(
    url: str,
    body: Any,
    secret: str,
    *,
    event_id: str | None = None,
    at: datetime | None = None,
    content_type: str = "application/json",
    headers: dict[str, str] | None = None,
) -> requests.Response:
    """POST ``body`` (JSON, or bytes as they are) to ``url`` as a signed update."""
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    event_id = event_id or str(uuid.uuid4())
    when = at or datetime.now(UTC)
    signature = Webhook(secret).sign(event_id, when, data.decode())
    sent = {
        "Content-Type": content_type,
        "webhook-id": event_id,
        "webhook-timestamp": str(int(when.timestamp())),
        "webhook-signature": signature,
        **(headers or {}),
    }
    return requests.post(url, data=data, headers=sent, timeout=5)

"""A display's registration (``POST /displays``): open to join, proof needed to change.

- **A URL not registered yet**: anyone may register it. Without a token the record is
  *pending* until an operator approves it; with the enrolment or the operator token as bearer
  (or on an open scheduler: loopback only, no token) it is approved at once.
- **A registered URL**: a change to its record (the URL as written, location, name, groups,
  signing secret, certificate) needs proof, one of:
  - the operator token or the enrolment token as bearer;
  - the display's signature: Standard Webhooks headers (``webhook-id``, ``webhook-timestamp``,
    ``webhook-signature``) over the request body, made with the signing secret the record
    holds (``server.platform.signing``; a display signs its registration so, and may give a new
    secret
    in a signed body);
  - the signing secret the record holds, given again in the body (displays of the release
    before sign nothing, but give their secret at every registration).

  Without proof nothing is stored. The same registration again (a display starting) is
  answered 201 again; one that differs is answered 409 (``secret-changed``,
  ``certificate-changed`` or ``proof-required``, naming the field), the record unchanged.
- **A pending record replaced**: a registration with a token replaces a pending record whole
  (its signing secret, certificate and declared groups are dropped first): a stranger who
  registered the URL first holds nothing once the real display enrols.
- **Pending records are capped** (``PDN_MAX_PENDING``, default 1000): one more drops the oldest,
  logged. On PostgreSQL the trimming runs under an advisory lock, so the cap holds for every
  scheduler process on the database.
- **Registrations without a token are rate-limited per client address** on a closed scheduler
  (``PDN_REGISTRATION_RATE``, ``COUNT/SECONDS``, default 30 per 600 s, counted by each
  process): beyond, 429 ``too-many-registrations`` with ``Retry-After``.
"""

from __future__ import annotations

import hmac
import logging
import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from flask import Response, request

from server.platform.http import (
    ApiError,
    json_response,
    read_json_object,
    read_raw_body,
    webhook_headers,
)
from server.platform.lockout import RateLimit
from server.platform.signing import SignatureError, Verifier, parse_secret
from server.platform.validation import (
    HTTP,
    Field,
    Fingerprint,
    Location,
    Schema,
    SigningSecret,
    String,
    Uri,
)
from server.scheduler.enrol import SchedulerAccess
from server.scheduler.fleetapi import group_list
from server.scheduler.storage import DisplayRecord, SchedulerStorage, display_key

__all__ = ["REGISTER", "Registrar", "RegistrationPolicy"]

log = logging.getLogger("pdn.scheduler.registration")

#: The advisory lock the processes on one PostgreSQL database take to trim pending records.
PENDING_LOCK = 0x70646E70656E64  # "pdnpend"
MAX_PENDING = 1000
RATE = (30, 600.0)


REGISTER = Schema(
    Field("url", Uri(schemes=HTTP), required=True),
    Field("location", Location(), required=True),
    Field("name", String(max_length=200)),
    Field("groups", group_list),  # extension: the groups the display declares itself in
    # Extension: what the scheduler signs its pushes to this display with (Standard Webhooks).
    Field("signing-secret", SigningSecret()),
    # Extension: the display's TLS certificate, pinned on first registration.
    Field("tls-fingerprint", Fingerprint()),
)


@dataclass(frozen=True)
class RegistrationPolicy:
    """How many pending records are kept, and how many registrations without a token one
    client address may make per window."""

    max_pending: int = MAX_PENDING
    rate: tuple[int, float] = RATE

    @classmethod
    def from_env(cls) -> RegistrationPolicy:
        """From ``PDN_MAX_PENDING`` and ``PDN_REGISTRATION_RATE``; ValueError saying which is
        wrong and how."""
        text = os.environ.get("PDN_MAX_PENDING", "").strip()
        max_pending = MAX_PENDING
        if text:
            if not text.isdigit() or not 1 <= int(text) <= 1_000_000:
                raise ValueError(
                    f"PDN_MAX_PENDING is {text!r}: it is how many displays may wait for"
                    " approval, a whole number from 1 to 1000000"
                )
            max_pending = int(text)
        rate = RATE
        text = os.environ.get("PDN_REGISTRATION_RATE", "").strip()
        if text:
            count, _, seconds = text.partition("/")
            try:
                rate = (int(count), float(seconds))
            except ValueError:
                rate = (0, 0.0)
            if rate[0] < 1 or not 0 < rate[1] <= 86400:
                raise ValueError(
                    f"PDN_REGISTRATION_RATE is {text!r}: it is COUNT/SECONDS, how many"
                    " registrations without a token one address may make in that many seconds"
                    " (for example 30/600)"
                )
        return cls(max_pending=max_pending, rate=rate)


class Registrar:
    """Answers ``POST /displays`` (module docstring)."""

    def __init__(
        self,
        storage: SchedulerStorage,
        access: SchedulerAccess,
        *,
        on_register: Callable[[str, list[str] | None], None],
        on_pin: Callable[[str, str], None],
        policy: RegistrationPolicy | None = None,
    ) -> None:
        self._storage = storage
        self._access = access
        self._on_register = on_register
        self._on_pin = on_pin
        self.policy = policy or RegistrationPolicy()
        self._rate = RateLimit(limit=self.policy.rate[0], window=self.policy.rate[1])
        self._verifier = Verifier()

    def register(self) -> Response:
        who = self._access.bearer()  # 401 for a wrong token, 429 when locked out
        trusted = who is not None or not self._access.closed
        if not trusted:  # an open scheduler (loopback only) takes every registration
            wait = self._rate.take(request.remote_addr or "")
            if wait is not None:
                raise ApiError(
                    429,
                    "too-many-registrations",
                    f"Too many registrations from this address; try again in {wait} s (a"
                    " display registering with the enrolment token is not limited so).",
                    headers={"Retry-After": str(wait)},
                )
        fields = REGISTER.validate(read_json_object())
        body = read_raw_body()
        url = fields["url"]
        known = self._storage.display(url)
        if known is None:
            return self._store(fields, pending=not trusted, new=True)
        if trusted:
            if known.pending:
                self._forget_given(url)  # whoever registered it first keeps nothing
            else:
                self._check_repin(url, fields)
            return self._store(fields, pending=not trusted)
        if self._proven(url, fields, body):
            return self._store(fields, pending=True)  # one approved stays approved
        return self._unproven(fields, known)

    # -- proof -------------------------------------------------------------------------------

    def _proven(self, url: str, fields: dict[str, Any], body: bytes) -> bool:
        """The request is the display's own: signed with the secret its record holds, or
        giving that secret again."""
        secret = self._storage.push_secret(url)
        if secret is None:
            return False
        given = fields.get("signing-secret")
        if given is not None and hmac.compare_digest(given.encode(), secret.encode()):
            return True
        if "webhook-signature" not in request.headers:
            return False
        try:
            return self._verifier.verify([parse_secret(secret)], webhook_headers(), body)
        except (SignatureError, ValueError) as error:
            log.info("registration of %s from %s: %s", url, request.remote_addr, error)
            return False

    def _check_repin(self, url: str, fields: dict[str, Any]) -> None:
        """With a token, an approved display may give another certificate only with the
        signing secret it registered with (a token is shared by many displays); else 409,
        the first certificate stays pinned (trust on first use)."""
        pin = fields.get("tls-fingerprint")
        known = self._storage.tls_pin(url)
        if pin is None or known is None or known == pin:
            return
        secret = self._storage.push_secret(url)
        given = fields.get("signing-secret")
        if secret and given and hmac.compare_digest(secret.encode(), given.encode()):
            return
        raise ApiError(
            409,
            "certificate-changed",
            f"{url} registered before with another TLS certificate ({known}); this one is not"
            " taken without the display's signing secret. If the display was reinstalled, add"
            " it again by the code on its screen (the console's 'Add a display').",
            field="tls-fingerprint",
        )

    def _unproven(self, fields: dict[str, Any], known: DisplayRecord) -> Response:
        """No proof: nothing is stored. The same registration again is answered as the first time;
        another one is refused, naming what it would change."""
        url = fields["url"]
        changed = self._difference(fields, known)
        if changed is None:
            return self._answer(known.pending)
        log.info(
            "registration of %s from %s refused: it changes %s without proof",
            known.url,
            request.remote_addr,
            changed,
        )
        errors = {"signing-secret": "secret-changed", "tls-fingerprint": "certificate-changed"}
        raise ApiError(
            409,
            errors.get(changed, "proof-required"),
            f"{url} is registered here, and this registration changes its {changed}: nothing"
            " was changed. A change needs proof: the display's signature with the signing"
            " secret it registered with (a display signs its registration), the scheduler's"
            " enrolment token ('Authorization: Bearer <token>', scheduler_token in the"
            " display's config), or the operator. If the display was reinstalled, add it again"
            " by the code on its screen.",
            field=changed,
        )

    def _difference(self, fields: dict[str, Any], known: DisplayRecord) -> str | None:
        """The first field whose stored value the registration would change, or None."""
        url = fields["url"]
        if url != known.url:
            return "url"
        if fields["location"] != known.location:
            return "location"
        groups = fields.get("groups")
        if groups is not None and sorted(set(groups)) != self._declared_groups(url):
            return "groups"
        secret = fields.get("signing-secret")
        stored = self._storage.push_secret(url)
        paired = self._storage.database.row(  # pushed with its token, unsigned
            "SELECT 1 FROM displays WHERE key = ? AND push_token IS NOT NULL", (display_key(url),)
        )
        if secret is not None and secret != stored and not (stored is None and paired is not None):
            return "signing-secret"
        pin = fields.get("tls-fingerprint")
        if pin is not None and pin != self._storage.tls_pin(url):
            return "tls-fingerprint"
        return None

    # -- storing -----------------------------------------------------------------------------

    def _store(self, fields: dict[str, Any], *, pending: bool, new: bool = False) -> Response:
        storage = self._storage
        url, pin = fields["url"], fields.get("tls-fingerprint")
        storage.upsert_display(url, fields["location"], fields.get("name"), pending=pending)
        if pin is not None:
            storage.set_tls_pin(url, pin)
            self._on_pin(url, pin)
        if "signing-secret" in fields:  # kept until the display gives another
            storage.set_push_secret(url, fields["signing-secret"])
        display = storage.display(url)
        if display is not None and display.pending:
            if fields.get("groups") is not None:
                storage.set_declared_groups(url, fields["groups"])
            if new:
                self._trim_pending()
            return self._answer(True)
        self._on_register(url, fields.get("groups"))
        return self._answer(False)

    @staticmethod
    def _answer(pending: bool) -> Response:
        if not pending:
            return json_response({}, 201)
        return json_response(
            {
                "state": "pending",
                "message": "Registered; an operator approves this display before anything"
                " is pushed to it (or register with the scheduler's enrolment token).",
            },
            201,
        )

    def _declared_groups(self, url: str) -> list[str]:
        rows = self._storage.database.rows(
            "SELECT name FROM display_groups WHERE display_key = ? AND source = 'display'"
            " ORDER BY name",
            (display_key(url),),
        )
        return [str(row[0]) for row in rows]

    def _forget_given(self, url: str) -> None:
        """Drop what a pending record's registration gave: its secret, certificate, groups."""
        key = display_key(url)
        with self._storage.database.transaction() as transaction:
            transaction.execute(
                "UPDATE displays SET push_secret = NULL, tls_pin = NULL WHERE key = ?", (key,)
            )
            transaction.execute(
                "DELETE FROM display_groups WHERE display_key = ? AND source = 'display'", (key,)
            )

    def _trim_pending(self) -> None:
        """Drop the oldest pending records beyond the cap."""
        database = self._storage.database
        dropped: list[str] = []
        with database.transaction() as transaction:
            if database.dialect == "postgresql":
                transaction.row("SELECT pg_advisory_xact_lock(?)", (PENDING_LOCK,))
            row = transaction.row("SELECT COUNT(*) FROM displays WHERE state = 'pending'")
            excess = (int(row[0]) if row else 0) - self.policy.max_pending
            if excess <= 0:
                return
            rows = transaction.rows(
                "SELECT key, url FROM displays WHERE state = 'pending' ORDER BY seq LIMIT ?",
                (excess,),
            )
            tables = ["display_groups", "pushed_sets", "play_backfill"]
            for key, url in rows:
                transaction.execute(
                    "DELETE FROM displays WHERE key = ? AND state = 'pending'", (key,)
                )
                for table in tables:
                    transaction.execute(f"DELETE FROM {table} WHERE display_key = ?", (key,))
                if database.dialect == "postgresql":
                    transaction.execute("DELETE FROM display_status WHERE key = ?", (key,))
                dropped.append(str(url))
        for url in dropped:
            log.warning(
                "more than %d displays wait for approval: the oldest, %s, was dropped",
                self.policy.max_pending,
                url,
            )

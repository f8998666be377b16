"""What plays where: schedules assigned to displays and groups, pushed to every screen.

A display's *assigned* schedules are those assigned to it directly and those assigned to any of
its groups (the union; on screen, CDS priorities decide among them). Each one is pushed to the
display's own ``POST /schedule`` as a CDS (``text/xml``) whose root content-set is named after
the schedule id, so it replaces its previous version there and never collides with another
schedule; a schedule no longer assigned is pushed as an empty set of that name (the display
removes it). The display keeps what it was pushed across restarts (its own store).

Pushes go through the durable outbox (topic ``display:<key>``, one subscriber: the display's
``/schedule``), in order, retried until delivered. The fleet remembers what it pushed to each
display (``storage.pushed``), so a change pushes only what differs. When a display registers
(at its start), is approved, or answers again after being unreachable, its pending pushes are
dropped and everything assigned is pushed again at once: a display that was off while its
assignment changed catches up within a second of coming back, without waiting for retry
back-off.
Nothing is pushed to a display that registered without the enrolment token until an operator
approves it (``server.scheduler.enrol``).
"""

from __future__ import annotations

import hashlib
import logging
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from server.platform.outbox import Outbox
from server.scheduler.schedules import ScheduleLibrary, removal_document, with_root_name
from server.scheduler.storage import Assignment, SchedulerStorage, display_key

log = logging.getLogger("pdn.scheduler.fleet")


#: The digest remembered for a set pushed as removed.
REMOVED = ""
#: Locks over displays (by key): pushes to one display are decided one at a time.
LOCK_STRIPES = 64


def display_topic(url: str) -> str:
    return f"display:{display_key(url)}"


def schedule_endpoint(url: str) -> str:
    """The display's ``POST /schedule`` URL."""
    return url.rstrip("/") + "/schedule"


@dataclass(frozen=True)
class Document:
    name: str  # the root content-set's name on the display
    body: bytes

    @property
    def digest(self) -> str:
        return hashlib.sha256(self.body).hexdigest()


#: Extra documents for a display beyond its schedules (the broadcasts): url -> documents.
ExtraDocuments = Callable[[str], Iterable[Document]]


class Fleet:
    """Assignment and groups, and keeping every display's screen in step with them."""

    def __init__(
        self,
        storage: SchedulerStorage,
        library: ScheduleLibrary,
        outbox: Outbox,
        *,
        extra: ExtraDocuments = lambda url: (),
    ) -> None:
        self._storage = storage
        self._library = library
        self._outbox = outbox
        self._extra = extra
        # Pushes to one display go out in the order decided; displays do not wait for each
        # other (one lock for all made registrations queue behind each other).
        self._locks = [threading.RLock() for _ in range(LOCK_STRIPES)]

    def _lock_for(self, url: str) -> threading.RLock:
        return self._locks[hash(display_key(url)) % LOCK_STRIPES]

    # -- what a display should have ------------------------------------------------------------

    def documents_for(self, url: str) -> list[Document]:
        """Every document the display should hold now, schedules first."""
        documents = []
        for schedule_id in self._storage.schedules_for(url):
            schedule = self._library.get(schedule_id)
            if schedule is None:  # assigned, but not (or no longer) a schedule
                continue
            documents.append(Document(schedule_id, with_root_name(schedule.xml, schedule_id)))
        documents.extend(self._extra(url))
        return documents

    def sync(self, url: str, *, full: bool = False) -> int:
        """Push what differs from what the display was last pushed; ``full``: drop what is
        pending for it and push everything again. Returns how many documents were queued.

        A display that was never pushed anything and should hold nothing (a new registration
        with nothing assigned) costs two reads and no write."""
        with self._lock_for(url):
            display = self._storage.display(url)
            if display is not None and display.pending:
                return 0  # nothing is pushed to a display an operator has not approved
            topic, endpoint = display_topic(url), schedule_endpoint(url)
            known = self._storage.pushed(url)
            pushed = {} if full else known
            wanted = self.documents_for(url)
            sending = [d for d in wanted if pushed.get(d.name) != d.digest]
            names = {document.name for document in wanted}
            # A removal is remembered as an empty digest: a full push (after pending pushes
            # were dropped) sends every removal again.
            removals = [
                name for name in sorted(set(known) - names) if full or known[name] != REMOVED
            ]
            if full and (known or sending):
                # Pending pushes are superseded by the full push below; dropping them also
                # drops their retry back-off, so delivery starts at once.
                self._outbox.unsubscribe(topic, endpoint)
            if sending or removals:
                # Signed with the secret the display gave when it registered (if it did): a
                # display closed beyond loopback takes a rightly signed push without a token.
                self._outbox.subscribe(topic, endpoint, self._storage.push_secret(url))
            for document in sending:
                self._outbox.publish(topic, document.body, "text/xml")
                self._storage.set_pushed(url, document.name, document.digest)
            for name in removals:
                self._outbox.publish(topic, removal_document(name), "text/xml")
                self._storage.set_pushed(url, name, REMOVED)
            queued = len(sending) + len(removals)
        if queued:
            log.info("display %s: %d schedule document(s) pushed", url, queued)
        return queued

    def sync_displays(self, urls: Iterable[str]) -> None:
        for url in urls:
            self.sync(url)

    def sync_all(self) -> None:
        self.sync_displays(display.url for display in self._storage.displays())

    # -- changes ---------------------------------------------------------------------------

    def registered(self, url: str, groups: list[str] | None) -> None:
        """A display (re)registered: take its declared groups, push everything to it."""
        if groups is not None:
            self._storage.set_declared_groups(url, groups)
        self.sync(url, full=True)

    def reachable_again(self, url: str) -> None:
        """A display answers again after failing: push everything at once (no back-off)."""
        self.sync(url, full=True)

    def schedule_changed(self, schedule_id: str) -> None:
        """A schedule was added, changed or removed: push it where it is assigned, and its
        removal where it was pushed (one query finds those displays)."""
        self.sync_displays(self._storage.displays_holding(schedule_id))

    def assign(self, assignment: Assignment) -> bool:
        created = self._storage.assign(assignment)
        self._sync_target(assignment)
        return created

    def unassign(self, assignment: Assignment) -> bool:
        existed = self._storage.unassign(assignment)
        self._sync_target(assignment)
        return existed

    def add_to_group(self, url: str, group: str) -> bool:
        created = self._storage.add_to_group(url, group)
        self.sync(url)
        return created

    def remove_from_group(self, url: str, group: str) -> bool:
        existed = self._storage.remove_from_group(url, group)
        self.sync(url)
        return existed

    def group_members(self, group: str) -> list[str]:
        return self._storage.groups().get(group, [])

    def approved_members(self, group: str) -> list[str]:
        """The group's displays but those waiting for an operator's approval."""
        pending = {display_key(d.url) for d in self._storage.displays() if d.pending}
        return [url for url in self.group_members(group) if display_key(url) not in pending]

    def _sync_target(self, assignment: Assignment) -> None:
        if assignment.display is not None:
            self.sync(assignment.display)
        elif assignment.group is not None:
            self.sync_displays(self.group_members(assignment.group))

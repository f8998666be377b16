"""What plays, in which order, for how long (docs/cds.md, "What it means"): the :class:`Playlist`.

:class:`Playlist` is the player engine's view of its CDS documents. It has no clock of its
own: every question takes ``now`` (an aware datetime), and the windows are read on the wall
clock of the display's time zone by :mod:`cds.windows`, which also says when the answer next
changes.

Rules, in short:

- an item is eligible when its own constraints and those of every set above it hold, and the
  caller's ``available(item)`` (file cached and verified) says yes;
- only the highest priority level among eligible items plays (default medium);
- a set's children play in its order (nearest ``playback`` wins): inorder, reverseorder, or
  random (a fresh shuffle each round, never the same child twice in a row);
- each child set of a set is one "slot" that yields one item per turn, so sibling sets share
  the screen round-robin, and several documents do too;
- ``avoid-context-switch="true"``: once the set starts, all its eligible items play before
  anything outside it (a higher priority still interrupts; the set resumes afterwards);
- ``sync="wall-clock"``: the set's items play on a grid fixed to wall-clock time
  (:mod:`cds.syncgrid`). While one of its items is eligible at the top level, the set holds
  the screen and plays the item whose turn it is now, from the offset the grid says: the
  rotation does not move (other sets at that level wait; when the set's window closes they go
  on where they were). The grid is made of every item of the set, eligible here or not, so it
  is the same on every display; during the turn of an item that cannot play here (not
  downloaded yet, its own window closed) the display shows the level's other items, or idle.
  A video's own length is part of the grid: until it is known (the file is in the cache), the
  set waits.

Remote sets (``type="remote"``) are fetched by the player: :meth:`Playlist.remote_sets` lists
them and :meth:`Playlist.set_remote` plugs in the fetched set, which then sits under the remote
set, so the remote set's constraints apply on top of the fetched document's.

Why one module: every rule above acts on the tree of sets (``cds.playtree``, built apart)
and on the state each set carries (its rotation, its avoid-context-switch lock, its
synchronised grid), and each answer (what plays now, in which order, when that changes, why
not) walks the tree once with all of them together; split by rule, each part would need the
whole tree and the other parts' state.
"""

from __future__ import annotations

import copy
import datetime
import logging
import random
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Literal

from cds.durations import format_duration
from cds.model import (
    DEFAULT_PRIORITY,
    PRIORITY_NAMES,
    Constraints,
    ContentItem,
    ContentSet,
    Document,
    PlaybackTransition,
)
from cds.playtree import TOP, ItemNode, SetNode, SyncSet, build_tree
from cds.syncgrid import DEFAULT_SECONDS, Slot, epoch_at, looks_like_video, slot_at
from cds.windows import constraints_hold, has_windows, next_window_change, wall_clock, why_closed

__all__ = [
    "Playlist",
    "RemoteSet",
    "Selection",
    "Verdict",
    "describe_duration",
]

log = logging.getLogger("pdn.cds")

Available = Callable[[ContentItem], bool]
#: A video's own length in seconds, once its file is here (None: not known, or not a video).
NaturalLength = Callable[[ContentItem], float | None]


@dataclass(frozen=True)
class Selection:
    """One item chosen to play, with what the player needs to show it."""

    item: ContentItem = field(hash=False)
    #: stable id of this item in its document: f"{root_name}/{index path}", e.g. "lobby/0.2"
    key: str
    #: name of the document's root content-set
    root_name: str | None
    #: names of the sets from the root down to the item's parent
    set_path: tuple[str | None, ...]
    #: 0 lowest .. 4 highest, inherited (nearest wins), default 2 (medium)
    priority: int
    #: preferred-duration in seconds (nearest wins), or None: the player then uses the
    #: natural length of a video, else 15 seconds
    duration: float | None
    #: an item of a synchronised set: its turn on the grid (it plays from ``slot.start`` to
    #: ``slot.end``, joined at the offset of now when that is past the start); else None
    slot: Slot | None = None
    #: how the screen changes to it (nearest ``<playback transition>`` wins): a cross-fade or
    #: a cut
    transition: PlaybackTransition = "crossfade"

    @property
    def url(self) -> str:
        return self.item.url


@dataclass
class Verdict:
    """Why an item plays now or not (for ``pdn cds explain`` and the player's logs)."""

    key: str
    url: str
    eligible: bool
    reasons: list[str]
    priority: int = DEFAULT_PRIORITY
    duration: float | None = None
    root_name: str | None = None
    set_path: tuple[str | None, ...] = ()
    #: where it comes in the play order now (0 = next), when eligible
    position: int | None = None
    kind: Literal["item", "remote-set"] = "item"


@dataclass(frozen=True)
class RemoteSet:
    """A ``type="remote"`` set the player should fetch (its CDS is at ``uris``, in order)."""

    key: str
    name: str | None
    uris: tuple[str, ...]
    #: seconds between fetches as the document asks (None: the player's default, 1 hour)
    refresh: float | None
    resolved: bool


@dataclass
class _SetState:
    last: int | None = None  # the child slot played last
    round: list[int] = field(default_factory=list)  # random order: slots left this round


@dataclass
class _Lock:
    """An avoid-context-switch set that started a pass, and what it has played in it."""

    key: str
    played: set[str] = field(default_factory=set)


@dataclass
class _Rotation:
    rng: random.Random
    #: per (set key, priority level): an interruption by a higher level leaves the
    #: rotation of the level below where it was
    sets: dict[tuple[str, int], _SetState] = field(default_factory=dict)
    locks: list[_Lock] = field(default_factory=list)


class Playlist:
    """The rotation over a display's CDS documents. Thread-safe."""

    def __init__(
        self,
        tz: datetime.tzinfo,
        rng: random.Random | None = None,
        clock_trusted: Callable[[], bool] | None = None,
        natural_length: NaturalLength | None = None,
    ) -> None:
        self.tz = tz
        # Videos' own lengths are part of a synchronised set's grid (the content cache reads
        # them from the files: player.medialength).
        self.natural_length: NaturalLength = natural_length or (lambda item: None)
        # A display that booted without a battery-backed clock or NTP thinks it is 1970 or the
        # build date: until ``clock_trusted`` says otherwise, no time/day/date window is open.
        self.clock_trusted = clock_trusted or (lambda: True)
        self._lock = threading.RLock()
        self._documents: list[ContentSet] = []
        self._remote: dict[str, ContentSet] = {}
        self._rotation = _Rotation(rng or random.Random())
        self._top = SetNode(TOP, None, "all documents", None, "inorder", False)
        self._items: list[ItemNode] = []
        self._sets: dict[str, SetNode] = {}
        self._syncs: dict[str, SyncSet] = {}
        self._remote_sets: list[tuple[str, ContentSet, bool]] = []

    # -- documents

    def set_documents(self, docs: Sequence[ContentSet | Document]) -> None:
        """Replace the documents; rotation state of sets whose key still exists is kept."""
        with self._lock:
            self._documents = [doc.root if isinstance(doc, Document) else doc for doc in docs]
            self._rebuild()

    def set_remote(self, key_or_uri: str, content: ContentSet | Document | None) -> None:
        """Plug in (or, with None, take out) the fetched CDS of a remote set, named by the
        remote set's key (from :meth:`remote_sets`) or by one of its source URIs."""
        with self._lock:
            if content is None:
                self._remote.pop(key_or_uri, None)
            else:
                self._remote[key_or_uri] = (
                    content.root if isinstance(content, Document) else content
                )
            self._rebuild()

    def remote_sets(self) -> list[RemoteSet]:
        """Every remote set in the current documents (also inside fetched ones)."""
        with self._lock:
            found: list[RemoteSet] = []
            for key, content_set, resolved in self._remote_sets:
                required = content_set.requires_file
                sources = required.sources if required is not None else []
                refresh = next((s.refresh for s in sources if s.refresh is not None), None)
                found.append(
                    RemoteSet(
                        key=key,
                        name=content_set.name,
                        uris=tuple(s.uri for s in sources),
                        refresh=refresh,
                        resolved=resolved,
                    )
                )
            return found

    def documents(self) -> list[ContentSet]:
        with self._lock:
            return list(self._documents)

    def _rebuild(self) -> None:
        tree = build_tree(self._documents, self._remote)
        self._top, self._items, self._sets = tree.top, tree.items, tree.sets
        self._syncs, self._remote_sets = tree.syncs, tree.remote_sets
        rotation = self._rotation
        rotation.sets = {k: v for k, v in rotation.sets.items() if k[0] in self._sets}
        rotation.locks = [lock for lock in rotation.locks if lock.key in self._sets]

    # -- eligibility

    def _assess(
        self, now: datetime.datetime, available: Available
    ) -> tuple[list[ItemNode], int | None]:
        """Items that may play now (constraints and availability), and the top level."""
        local = wall_clock(now, self.tz)
        cache: dict[int, bool] = {}
        trusted = self._clock_is_trusted()

        def holds(constraints: Constraints) -> bool:
            known = cache.get(id(constraints))
            if known is None:
                known = cache[id(constraints)] = (
                    trusted or not has_windows(constraints)
                ) and constraints_hold(constraints, local)
            return known

        eligible: list[ItemNode] = []
        for node in self._items:
            if not all(holds(constraints) for constraints, _ in node.chain):
                continue
            if _safely(available, node.item):
                eligible.append(node)
        top = max((node.priority for node in eligible), default=None)
        return eligible, top

    def _clock_is_trusted(self) -> bool:
        try:
            return bool(self.clock_trusted())
        except Exception:
            log.exception("clock check failed; time windows stay closed")
            return False

    def _candidates(
        self, now: datetime.datetime, available: Available
    ) -> tuple[list[ItemNode], Slot | None]:
        """The items that may play now at the top level, and when a synchronised set holds
        the screen, its item whose turn it is alone, with that turn."""
        eligible, top = self._assess(now, available)
        return self._synchronised(now, [node for node in eligible if node.priority == top])

    def _synchronised(
        self, now: datetime.datetime, candidates: list[ItemNode]
    ) -> tuple[list[ItemNode], Slot | None]:
        """The first synchronised set (document order) among ``candidates`` whose item of
        now is one of them holds the screen; with none, the others play (never an item of a
        synchronised set out of its turn)."""
        tried: set[str] = set()
        for node in candidates:
            key = node.sync_key
            if key is None or key in tried:
                continue
            tried.add(key)
            turn = self._turn(self._syncs[key], now)
            if turn is not None and any(c is turn[1] for c in candidates):
                return [turn[1]], turn[0]
        return [node for node in candidates if node.sync_key is None], None

    def _durations(self, sync: SyncSet) -> list[float] | str:
        """The seconds of each item's turn, or why the grid is not known yet."""
        seconds: list[float] = []
        for node in sync.items:
            if node.duration is not None:
                seconds.append(node.duration)
            elif looks_like_video(node.item):
                try:
                    length = self.natural_length(node.item)
                except Exception:
                    log.exception("cannot read the length of %s", node.item.url)
                    length = None
                if length is None or not 0 < length < float("inf"):
                    return (
                        f"the length of the video {node.item.url} is not known here yet "
                        "(it is read from the downloaded file; a preferred-duration makes "
                        "it known at once)"
                    )
                seconds.append(length)
            else:
                seconds.append(DEFAULT_SECONDS)
        return seconds

    def _turn(self, sync: SyncSet, now: datetime.datetime) -> tuple[Slot, ItemNode] | None:
        """Whose turn it is on the grid of ``sync`` at ``now`` (None: no grid yet)."""
        durations = self._durations(sync)
        if isinstance(durations, str):
            return None
        windows = next((c.times for c in reversed(sync.chain) if c.times), [])
        epoch, next_epoch = epoch_at(now, self.tz, windows)
        slot = slot_at(now, durations, sync.order, sync.seed, epoch, next_epoch, self.tz)
        if slot is None:
            return None
        return slot, sync.items[slot.position]

    def top_priority(self, now: datetime.datetime, available: Available) -> int | None:
        """The highest priority level among the items eligible now (None: nothing is)."""
        with self._lock:
            return self._assess(now, available)[1]

    def next(self, now: datetime.datetime, available: Available) -> Selection | None:
        """Advance the rotation and return what plays next (None if nothing is eligible)."""
        with self._lock:
            candidates, slot = self._candidates(now, available)
            if slot is not None:
                return _selection(candidates[0], slot)  # the grid's turn: no rotation moves
            node = self._advance(self._rotation, candidates)
            return _selection(node) if node is not None else None

    def eligible(self, now: datetime.datetime, available: Available) -> list[Selection]:
        """Every item that may play now, at the highest priority level present, in the
        order the rotation would play them from here (the rotation itself is not moved)."""
        with self._lock:
            candidates, slot = self._candidates(now, available)
            if slot is not None:
                return [_selection(candidates[0], slot)]
            return [_selection(node) for node in self._upcoming(now, available)]

    def _upcoming(self, now: datetime.datetime, available: Available) -> list[ItemNode]:
        candidates, _ = self._candidates(now, available)
        if not candidates:
            return []
        rotation = copy.deepcopy(self._rotation)
        ordered: dict[str, ItemNode] = {}
        # Every set yields each of its items within a few rounds; the bound only guards
        # against a bug turning this into an endless loop.
        for _ in range(4 * len(candidates) + 16):
            node = self._advance(rotation, candidates)
            if node is None:
                break
            ordered.setdefault(node.key, node)
            if len(ordered) == len(candidates):
                break
        for node in candidates:
            ordered.setdefault(node.key, node)
        return list(ordered.values())

    def _advance(self, rotation: _Rotation, candidates: list[ItemNode]) -> ItemNode | None:
        if not candidates:
            return None
        live: set[str] = {node.key for node in candidates}
        for node in candidates:
            live.update(node.ancestors)

        # Resume the innermost avoid-context-switch pass that still has something to play.
        start = self._top
        active: _Lock | None = None
        for lock in reversed(list(rotation.locks)):
            set_node = self._sets.get(lock.key)
            if set_node is None:
                rotation.locks.remove(lock)
                continue
            inside = [node for node in candidates if lock.key in node.ancestors]
            if not inside:
                continue  # outranked for now: the pass resumes when its level is back on top
            if all(node.key in lock.played for node in inside):
                rotation.locks.remove(lock)  # pass complete
                continue
            start, active = set_node, lock
            break

        set_node = start
        while True:
            if (
                set_node.avoid_context_switch
                and set_node is not self._top
                and not any(lock.key == set_node.key for lock in rotation.locks)
            ):
                active = _Lock(set_node.key)
                rotation.locks.append(active)
            slots = [index for index, child in enumerate(set_node.children) if child.key in live]
            if active is not None:
                unplayed: set[str] = set()
                for node in candidates:
                    if active.key in node.ancestors and node.key not in active.played:
                        unplayed.add(node.key)
                        unplayed.update(node.ancestors)
                preferred = [i for i in slots if set_node.children[i].key in unplayed]
                slots = preferred or slots
            if not slots:  # cannot happen: live sets have live children
                return None
            level = candidates[0].priority
            chosen = set_node.children[self._choose(rotation, set_node, level, slots)]
            if isinstance(chosen, ItemNode):
                break
            set_node = chosen
        for lock in rotation.locks:
            if lock.key in chosen.ancestors:
                lock.played.add(chosen.key)
        return chosen

    @staticmethod
    def _choose(rotation: _Rotation, set_node: SetNode, level: int, slots: list[int]) -> int:
        state = rotation.sets.setdefault((set_node.key, level), _SetState())
        if set_node.order == "random":
            pending = [i for i in state.round if i in slots]
            if not pending:
                fresh = list(slots)
                rotation.rng.shuffle(fresh)
                if len(fresh) > 1 and fresh[0] == state.last:
                    # A new round never starts with what the last one ended with.
                    swap = rotation.rng.randrange(1, len(fresh))
                    fresh[0], fresh[swap] = fresh[swap], fresh[0]
                state.round = fresh
                pending = fresh
            chosen = pending[0]
            state.round.remove(chosen)
        elif set_node.order == "reverseorder":
            before = [i for i in slots if state.last is not None and i < state.last]
            chosen = before[-1] if before else slots[-1]
        else:
            after = [i for i in slots if state.last is not None and i > state.last]
            chosen = after[0] if after else slots[0]
        state.last = chosen
        return chosen

    # -- time

    def next_change(self, now: datetime.datetime) -> datetime.datetime | None:
        """The next instant after ``now`` (in UTC) when any time, day-of-week or date window
        of any set or item opens or closes, or a synchronised set open now moves on to its
        next turn (the player sleeps until then); None if never."""
        with self._lock:
            every = [
                set_node.content_set.constraints
                for set_node in self._sets.values()
                if set_node.content_set is not None
            ]
            every.extend(node.item.constraints for node in self._items)
            changes = [next_window_change(every, now, self.tz)]
            local = wall_clock(now, self.tz)
            for sync in self._syncs.values():
                if all(constraints_hold(c, local) for c in sync.chain):
                    turn = self._turn(sync, now)
                    changes.append(turn[0].end if turn is not None else None)
            future = [change for change in changes if change is not None and change > now]
            return min(future) if future else None

    def sync_status(self, now: datetime.datetime) -> list[dict[str, object]]:
        """Every synchronised set: its grid now (item, offset, cycle), or why it waits."""
        with self._lock:
            found: list[dict[str, object]] = []
            for sync in self._syncs.values():
                entry: dict[str, object] = {"set": sync.seed, "items": len(sync.items)}
                durations = self._durations(sync)
                turn = self._turn(sync, now)
                if isinstance(durations, str):
                    entry["waiting"] = durations
                elif turn is not None:
                    slot, node = turn
                    entry.update(
                        {
                            "cycle-seconds": round(sum(durations), 3),
                            "epoch": slot.epoch.isoformat(),
                            "cycle": slot.cycle,
                            "item": node.item.url,
                            "turn-start": slot.start.isoformat(),
                            "turn-end": slot.end.isoformat(),
                            "offset": round(slot.offset(now), 3),
                        }
                    )
                found.append(entry)
            return found

    # -- explanations

    def explain(self, now: datetime.datetime, available: Available) -> list[Verdict]:
        """For every item (and unfetched remote set): does it play now, and if not, why."""
        with self._lock:
            local = wall_clock(now, self.tz)
            zone = getattr(self.tz, "key", None) or str(self.tz)
            eligible, top = self._assess(now, available)
            eligible_keys = {node.key for node in eligible}
            order = {node.key: index for index, node in enumerate(self._upcoming(now, available))}
            _, holding = self._candidates(now, available)
            verdicts: list[Verdict] = []
            trusted = self._clock_is_trusted()
            for node in self._items:
                reasons: list[str] = []
                for constraints, label in node.chain:
                    reasons.extend(why_closed(constraints, label, local, zone))
                    if not trusted and has_windows(constraints):
                        reasons.append(
                            f"the clock is not set yet, so the time windows of {label} "
                            "wait until it is (NTP or a plausible date)"
                        )
                if node.key not in eligible_keys and not _safely(available, node.item):
                    reasons.append(
                        "its file is not available (not in the cache yet, or failed its hash check)"
                    )
                if node.key in eligible_keys and top is not None and node.priority < top:
                    reasons.append(
                        f"priority {PRIORITY_NAMES[node.priority]} is below "
                        f"{PRIORITY_NAMES[top]}, the highest level that can play now"
                    )
                reasons.extend(self._sync_reasons(node, now, order, holding))
                verdicts.append(
                    Verdict(
                        key=node.key,
                        url=node.item.url,
                        eligible=node.key in order,
                        reasons=reasons,
                        priority=node.priority,
                        duration=node.duration,
                        root_name=node.root_name,
                        set_path=node.set_path,
                        position=order.get(node.key),
                    )
                )
            for key, content_set, resolved in self._remote_sets:
                if resolved:
                    continue
                required = content_set.requires_file
                url = required.sources[0].uri if required is not None and required.sources else ""
                name = f"'{content_set.name}'" if content_set.name is not None else key
                verdicts.append(
                    Verdict(
                        key=key,
                        url=url,
                        eligible=False,
                        reasons=[f"remote set {name} has not been fetched yet"],
                        kind="remote-set",
                    )
                )
            return verdicts

    def _sync_reasons(
        self,
        node: ItemNode,
        now: datetime.datetime,
        order: dict[str, int],
        holding: Slot | None,
    ) -> list[str]:
        """Why an item that could play does not, when a synchronised set is the reason."""
        if node.key in order or not node.chain:
            return []
        if node.sync_key is not None:
            sync = self._syncs[node.sync_key]
            durations = self._durations(sync)
            if isinstance(durations, str):
                return [f"synchronised {sync.label} waits: {durations}"]
            turn = self._turn(sync, now)
            if turn is not None and turn[1] is not node:
                return [
                    f"synchronised {sync.label}: it is {turn[1].item.url}'s turn on the grid "
                    f"until {turn[0].end.astimezone(self.tz):%H:%M:%S}"
                ]
            return []
        if holding is not None:
            return ["a synchronised set holds the screen while it plays"]
        return []


def _safely(available: Available, item: ContentItem) -> bool:
    """The caller's availability answer; a failing check counts as "not available"."""
    try:
        return bool(available(item))
    except Exception:
        log.exception("availability check failed for %s", item.url)
        return False


def _selection(node: ItemNode, slot: Slot | None = None) -> Selection:
    return Selection(
        item=node.item,
        key=node.key,
        root_name=node.root_name,
        set_path=node.set_path,
        priority=node.priority,
        duration=node.duration,
        slot=slot,
        transition=next(
            (c.transition for c, _ in reversed(node.chain) if c.transition is not None),
            "crossfade",
        ),
    )


def describe_duration(seconds: float | None) -> str:
    """For messages: '45 seconds', or what the player does without a preferred-duration."""
    if seconds is None:
        return "natural length (15 seconds for a page)"
    return format_duration(seconds)

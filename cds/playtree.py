"""The tree a playlist walks: a display's CDS documents as one tree of set and item nodes.

Each item node carries what it inherits from the sets above it (the chain of constraints with
labels for messages, the nearest priority and preferred-duration, the synchronised set whose
grid it is on); each remote set is replaced by its fetched CDS when there is one (a set that
refers back to itself, or nests too deep, is left unresolved). ``cds.playlist`` builds the tree
again at each change of documents and keeps its rotation state by the nodes' keys.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from cds.model import DEFAULT_PRIORITY, Constraints, ContentItem, ContentSet, PlaybackOrder

log = logging.getLogger("pdn.cds")

# Remote documents may name further remote sets; this many levels is plenty, and stops a loop.
MAX_REMOTE_DEPTH = 8
#: The key of the top node, which holds the documents.
TOP = ""


@dataclass(eq=False)
class SetNode:
    key: str
    name: str | None
    label: str  # for messages: "set 'lobby'"
    content_set: ContentSet | None  # None for the top, which holds the documents
    order: PlaybackOrder
    avoid_context_switch: bool
    children: list[SetNode | ItemNode] = field(default_factory=list)


@dataclass(eq=False)
class SyncSet:
    """A set with ``sync="wall-clock"`` and its grid's items."""

    key: str
    label: str  # for messages: "set 'wall'"
    #: what seeds its shuffle: its name (the same on every display), else its key
    seed: str
    order: PlaybackOrder
    #: the constraints from the root down to the set itself (its epoch: the nearest window)
    chain: tuple[Constraints, ...]
    items: list[ItemNode] = field(default_factory=list)


@dataclass(eq=False)
class ItemNode:
    key: str
    item: ContentItem
    root_name: str | None
    set_path: tuple[str | None, ...]
    #: the set keys above the item, nearest last
    ancestors: tuple[str, ...]
    #: every constraints element from the root down to the item, with a label for messages
    chain: tuple[tuple[Constraints, str], ...]
    priority: int
    duration: float | None
    #: the key of the synchronised set the item is on the grid of, if any
    sync_key: str | None = None


@dataclass
class PlayTree:
    """The nodes of the documents: the top, every item in document order, every set and
    synchronised set by key, and every remote set (key, set, whether it is resolved)."""

    top: SetNode
    items: list[ItemNode] = field(default_factory=list)
    sets: dict[str, SetNode] = field(default_factory=dict)
    syncs: dict[str, SyncSet] = field(default_factory=dict)
    remote_sets: list[tuple[str, ContentSet, bool]] = field(default_factory=list)


def build_tree(documents: Sequence[ContentSet], remote: Mapping[str, ContentSet]) -> PlayTree:
    """The tree of ``documents``, remote sets resolved from ``remote`` (fetched CDS by remote
    set key or by source URI)."""
    top = SetNode(TOP, None, "all documents", None, "inorder", False)
    tree = PlayTree(top, sets={TOP: top})
    used: set[str] = set()
    for index, document in enumerate(documents):
        prefix = document.name if document.name is not None else f"#{index}"
        if prefix in used:
            prefix = f"{prefix}#{index}"
        used.add(prefix)
        top.children.append(
            _build_set(
                tree,
                remote,
                document,
                key=prefix,
                path_prefix=f"{prefix}/",
                indices=(),
                root_name=document.name,
                names=(),
                ancestors=(),
                chain=(),
                order="inorder",
                priority=DEFAULT_PRIORITY,
                duration=None,
                remote_uris=(),
                sync_key=None,
            )
        )
    return tree


def _build_set(
    tree: PlayTree,
    remote: Mapping[str, ContentSet],
    content_set: ContentSet,
    *,
    key: str,
    path_prefix: str,
    indices: tuple[int, ...],
    root_name: str | None,
    names: tuple[str | None, ...],
    ancestors: tuple[str, ...],
    chain: tuple[tuple[Constraints, str], ...],
    order: PlaybackOrder,
    priority: int,
    duration: float | None,
    remote_uris: tuple[str, ...],
    sync_key: str | None,
) -> SetNode:
    constraints = content_set.constraints
    label = f"set '{content_set.name}'" if content_set.name is not None else f"set {key}"
    order = constraints.order or order
    if constraints.priority is not None:
        priority = constraints.priority
    if constraints.preferred_duration is not None:
        duration = constraints.preferred_duration
    node = SetNode(
        key=key,
        name=content_set.name,
        label=label,
        content_set=content_set,
        order=order,
        avoid_context_switch=bool(constraints.avoid_context_switch),
    )
    tree.sets[key] = node
    names = (*names, content_set.name)
    ancestors = (*ancestors, key)
    chain = (*chain, (constraints, label))
    if constraints.sync is not None and sync_key is None:
        sync_key = key
        tree.syncs[key] = SyncSet(
            key=key,
            label=label,
            seed=content_set.name if content_set.name is not None else key,
            order=order,
            chain=tuple(c for c, _ in chain),
        )
    children: list[ContentSet | ContentItem] = list(content_set.children)
    if content_set.type == "remote":
        fetched, uris = _resolve(remote, key, content_set, remote_uris)
        tree.remote_sets.append((key, content_set, fetched is not None))
        children = [fetched] if fetched is not None else []
        remote_uris = (*remote_uris, *uris)
    for index, child in enumerate(children):
        child_indices = (*indices, index)
        child_key = path_prefix + ".".join(str(i) for i in child_indices)
        if isinstance(child, ContentSet):
            node.children.append(
                _build_set(
                    tree,
                    remote,
                    child,
                    key=child_key,
                    path_prefix=path_prefix,
                    indices=child_indices,
                    root_name=root_name,
                    names=names,
                    ancestors=ancestors,
                    chain=chain,
                    order=order,
                    priority=priority,
                    duration=duration,
                    remote_uris=remote_uris,
                    sync_key=sync_key,
                )
            )
        elif child.files and child.files[0].sources:
            own = child.constraints
            item = ItemNode(
                key=child_key,
                item=child,
                root_name=root_name,
                set_path=names,
                ancestors=ancestors,
                chain=(*chain, (own, "the item itself")),
                priority=own.priority if own.priority is not None else priority,
                duration=(
                    own.preferred_duration if own.preferred_duration is not None else duration
                ),
                sync_key=sync_key,
            )
            node.children.append(item)
            tree.items.append(item)
            if sync_key is not None:
                tree.syncs[sync_key].items.append(item)
    return node


def _resolve(
    remote: Mapping[str, ContentSet], key: str, content_set: ContentSet, seen_uris: tuple[str, ...]
) -> tuple[ContentSet | None, tuple[str, ...]]:
    required = content_set.requires_file
    uris = tuple(s.uri for s in required.sources) if required is not None else ()
    if len(seen_uris) > MAX_REMOTE_DEPTH * 4 or any(uri in seen_uris for uri in uris):
        log.warning("remote set %s refers back to itself; not resolved", key)
        return None, uris
    fetched = remote.get(key)
    if fetched is None:
        fetched = next((remote[uri] for uri in uris if uri in remote), None)
    if fetched is not None and key.count(".") > MAX_REMOTE_DEPTH * 8:
        return None, uris
    return fetched, uris

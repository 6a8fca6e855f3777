"""``retract``: take documents (or chunks) back out of a relation store (DESIGN §8).

    the members of the documents and chunks (by index) ─► their stored relations, their
    pairs' versions ─► every member of those relations ─► each relation rebuilt from the
    members that remain (or removed: none left) ─► one batch of kind ``retract``
    (``store undo`` reverts it) ─► on conflict: read and plan again (bounded)

Why members: a merged relation's wording is its members' wording, so taking a document
back means rebuilding the relation from the other members' own records, the way the
merge built it (``decide/merged.py``: distinct descriptions joined in order, the first
value of each attribute), with no model call. Where the model wrote the merged text (it
is not the join of the members' texts), the relation is rebuilt the same way and its
pair is left to ``reconcile --pending`` to fuse again. A relation whose members are not
known one by one (``opaque``: a store made before members were kept) only loses the
retracted chunk ids and keeps its wording; the result says so.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import orjson

from relmerge.decide.merged import joined_description, merged_attributes
from relmerge.errors import InputError, StoreError
from relmerge.graphstore.base import (
    RETRACTED,
    Batch,
    Member,
    Pair,
    Progress,
    RelationStore,
    relation_pair,
)
from relmerge.ids import dedup_chunk_id, merged_relation_id
from relmerge.model import ExtractedRelation

Action = Literal["removed", "rebuilt", "trimmed"]
RETRACT = "retract"  # the first decision line of a retract batch: what it took back


@dataclass(frozen=True)
class RelationChange:
    """What a retract does to one stored relation.

    ``removed``: no member is left (its id maps to nothing); ``rebuilt``: from the
    members that remain; ``trimmed``: its members are not known one by one, so it only
    loses the retracted chunk ids. ``refuse``: the model wrote its merged text; it is
    rebuilt from the remaining members' own texts, and ``reconcile --pending`` should
    fuse its pair again. ``after``'s id differs from ``relation_id`` where the stored id
    came from a member taken back: the relation gets the id the merge would have given
    its remaining members (the old id maps to it, unless it was a member taken back).
    """

    relation_id: str
    pair: Pair
    action: Action
    retracted: tuple[str, ...]
    refuse: bool
    before: ExtractedRelation
    after: ExtractedRelation | None

    def to_dict(self) -> dict[str, Any]:
        return {
            "relation_id": self.relation_id,
            "pair": list(self.pair),
            "action": self.action,
            "retracted_member_ids": list(self.retracted),
            "refuse": self.refuse,
            "members_unknown": self.action == "trimmed",
            "renamed_to": self.renamed_to,
            "description": None if self.after is None else self.after.description,
        }

    @property
    def renamed_to(self) -> str | None:
        if self.after is None or self.after.relation_id == self.relation_id:
            return None
        return self.after.relation_id


@dataclass(frozen=True)
class RetractResult:
    """``applied``; ``dry_run`` (what would change, nothing written); ``nothing`` (no
    current member has those documents or chunks: taken back already, or never
    stored); ``already_applied`` (another process applied the same retract first)."""

    batch_id: str
    status: Literal["applied", "dry_run", "nothing", "already_applied"]
    store_url: str
    documents: tuple[str, ...]
    chunks: tuple[str, ...]
    retracted: tuple[str, ...] = ()  # member ids taken back, mapped to nothing
    changes: tuple[RelationChange, ...] = ()
    conflict_retries: int = 0
    seconds: float = 0.0

    def of(self, action: Action) -> list[RelationChange]:
        return [change for change in self.changes if change.action == action]

    @property
    def refused_pairs(self) -> list[Pair]:
        """The pairs ``reconcile --pending`` should fuse again."""
        return sorted({change.pair for change in self.changes if change.refuse})

    def to_dict(self) -> dict[str, Any]:
        return {
            "batch_id": self.batch_id,
            "status": self.status,
            "store_url": self.store_url,
            "documents": list(self.documents),
            "chunks": list(self.chunks),
            "retracted_member_ids": list(self.retracted),
            "removed_relation_ids": [c.relation_id for c in self.of("removed")],
            "rebuilt_relation_ids": [c.relation_id for c in self.of("rebuilt")],
            "members_unknown_relation_ids": [c.relation_id for c in self.of("trimmed")],
            "renamed": {c.relation_id: c.renamed_to for c in self.changes if c.renamed_to},
            "refuse_pairs": [list(pair) for pair in self.refused_pairs],
            "conflict_retries": self.conflict_retries,
            "seconds": self.seconds,
            "changes": [change.to_dict() for change in self.changes],
        }


@dataclass
class _Plan:
    batch_id: str
    versions: dict[Pair, int] = field(default_factory=dict)
    members: list[Member] = field(default_factory=list)
    changes: list[RelationChange] = field(default_factory=list)
    retracted: list[str] = field(default_factory=list)
    kept: dict[str, list[Member]] = field(default_factory=dict)  # by stored id


async def retract(
    store: RelationStore,
    documents: Sequence[str] = (),
    chunks: Sequence[str] = (),
    *,
    dry_run: bool = False,
    max_retries: int = 8,
    progress: Progress | None = None,
) -> RetractResult:
    """Take back what ``documents`` and ``chunks`` contributed to ``store``, as one batch
    of kind ``retract`` (see the module). Running it again changes nothing. ``progress``
    hears of the rebuilt relations as the batch writes them."""
    started = time.perf_counter()
    documents = tuple(dict.fromkeys(d for d in documents if d))
    chunks = tuple(dict.fromkeys(c for c in chunks if c))
    if not documents and not chunks:
        raise InputError("retract what? give at least one document id or chunk id")
    retries = 0
    while True:
        plan = await _plan(store, documents, chunks)

        def result(status: Any, plan: _Plan = plan, retries: int = retries) -> RetractResult:
            return RetractResult(
                plan.batch_id,
                status,
                store.url,
                documents,
                chunks,
                tuple(plan.retracted),
                tuple(plan.changes),
                retries,
                round(time.perf_counter() - started, 3),
            )

        if not plan.changes:
            return result("nothing")
        if dry_run:
            return result("dry_run")
        applied = await store.apply_batch(_batch(plan, documents, chunks), progress)
        if applied.status != "conflict":
            return result(applied.status)
        if retries >= max_retries:
            raise StoreError(
                f"retract: pairs kept changing under other batches ({len(applied.conflicts)} "
                f"after {retries} retries); run it again"
            )
        retries += 1


async def _plan(store: RelationStore, documents: Sequence[str], chunks: Sequence[str]) -> _Plan:
    """What retracting takes back now. The pairs' versions are read before the members
    they hold: a batch that changes a relation's members after that conflicts with the
    retract, which then plans again."""
    taken_documents = set(documents)
    found = await store.members(documents=documents, chunks=chunks)
    # A document's chunks leave only the members not known one by one (opaque): another
    # document's own record may cite the same chunk id, and it stays.
    document_chunks = {
        chunk_id
        for member in found
        if _from_documents(member, taken_documents)
        for chunk_id in member.record.chunk_ids()
    } - set(chunks)
    if document_chunks:
        more = await store.members(chunks=sorted(document_chunks))
        found += [member for member in more if member.origin == "opaque"]
    pair_of_relation = {m.relation_id: relation_pair(m.record) for m in found}
    states = await store.relations_for_pairs(sorted(set(pair_of_relation.values())))
    members = await store.members(relation_ids=sorted(pair_of_relation))
    by_relation: dict[str, list[Member]] = {}
    for member in members:
        by_relation.setdefault(member.relation_id, []).append(member)
    plan = _Plan("")
    for pair, state in sorted(states.items()):
        plan.versions[pair] = state.version
        for stored in state.relations:
            if stored.relation_id in by_relation:
                _relation(
                    plan,
                    stored,
                    by_relation[stored.relation_id],
                    taken_documents,
                    set(chunks),
                    set(chunks) | document_chunks,
                )
    plan.retracted = list(dict.fromkeys(plan.retracted))  # a removed relation's own id once
    await _free_ids(store, plan)
    plan.batch_id = _batch_id(documents, chunks, plan)
    return plan


def _from_documents(member: Member, documents: set[str]) -> bool:
    """A member taken back whole: a record as it came from one of ``documents`` (an
    opaque member stands for records of several documents: only chunk ids leave it)."""
    return member.origin == "input" and member.record.document_id in documents


def _relation(
    plan: _Plan,
    stored: ExtractedRelation,
    members: list[Member],
    documents: set[str],
    chunks: set[str],
    opaque_chunks: set[str],
) -> None:
    """Plan one stored relation: its members taken back or trimmed (``chunks``; an
    opaque member loses ``opaque_chunks``, the documents' chunks too), and it rebuilt."""
    kept: list[Member] = []
    retracted: list[str] = []
    members = sorted(members, key=lambda m: (m.joined, m.batch_seq, m.position))
    for member in members:
        lose = opaque_chunks if member.origin == "opaque" else chunks
        record = None if _from_documents(member, documents) else _trim(member.record, lose)
        if record is None:
            retracted.append(member.member_id)
            plan.members.append(
                Member(member.record, RETRACTED, member.origin, joined=member.joined)
            )
        elif record is not member.record:
            kept.append(Member(record, member.relation_id, member.origin, joined=member.joined))
            plan.members.append(kept[-1])
        else:
            kept.append(member)
    if not retracted and all(k is m for k, m in zip(kept, members, strict=True)):
        return
    pair = relation_pair(stored)
    if not kept:
        plan.retracted.extend([*retracted, stored.relation_id])
        change = RelationChange(
            stored.relation_id, pair, "removed", tuple(retracted), False, stored, None
        )
        plan.changes.append(change)
        return
    plan.retracted.extend(retracted)
    if any(member.origin == "opaque" for member in kept):
        after = _trim(stored, opaque_chunks) or stored
        action: Action = "trimmed"
        refuse = False
    else:
        after = _rebuilt(stored, [member.record for member in kept])
        after = after.model_copy(update={"relation_id": _id_of(stored, members, kept, after)})
        plan.kept[stored.relation_id] = kept
        action = "rebuilt"
        fused = stored.description != joined_description(m.record.description for m in members)
        refuse = fused and len(kept) > 1
    plan.changes.append(
        RelationChange(stored.relation_id, pair, action, tuple(retracted), refuse, stored, after)
    )


def _id_of(
    stored: ExtractedRelation, members: list[Member], kept: list[Member], after: ExtractedRelation
) -> str:
    """The stored id, unless a member of the batch that gave it is taken back: then the
    id that batch's remaining members (or, none left, the next batch's) would have got,
    as the merge names relations (one record keeps its id; several, a digest of theirs)."""
    first = min(member.joined for member in members)
    kept_ids = {member.member_id for member in kept}
    if all(m.member_id in kept_ids for m in members if m.joined == first):
        return stored.relation_id
    since = min(member.joined for member in kept)
    leaders = [member.member_id for member in kept if member.joined == since]
    return leaders[0] if len(leaders) == 1 else merged_relation_id(leaders, after.name)


async def _free_ids(store: RelationStore, plan: _Plan) -> None:
    """A relation keeps its stored id where the new one is another stored relation's."""
    wanted = [c.renamed_to for c in plan.changes if c.renamed_to]
    if not wanted:
        return
    taken = await store.relations_by_id(wanted)
    for index, change in enumerate(plan.changes):
        if change.after is not None and change.renamed_to in taken:
            after = change.after.model_copy(update={"relation_id": change.relation_id})
            plan.changes[index] = RelationChange(
                change.relation_id,
                change.pair,
                change.action,
                change.retracted,
                change.refuse,
                change.before,
                after,
            )


def _trim(record: ExtractedRelation, chunks: set[str]) -> ExtractedRelation | None:
    """``record`` without the chunk ids in ``chunks`` (itself when it has none of them;
    None when it has no other)."""
    own = record.chunk_ids()
    if chunks.isdisjoint(own):
        return record
    left = [chunk_id for chunk_id in own if chunk_id not in chunks]
    if not left:
        return None
    source = [chunk_id for chunk_id in record.source_chunk_ids if chunk_id not in chunks]
    chunk_id = record.chunk_id if record.chunk_id in left else _chunk_id(source or left)
    return record.model_copy(update={"chunk_id": chunk_id, "source_chunk_ids": source})


def _chunk_id(chunk_ids: list[str]) -> str:
    return chunk_ids[0] if len(chunk_ids) == 1 else dedup_chunk_id(chunk_ids)


def _rebuilt(stored: ExtractedRelation, records: list[ExtractedRelation]) -> ExtractedRelation:
    """The relation the merge would have built from ``records`` (in the order they were
    folded in), under its stored id: one record is kept as it came; several give their
    distinct descriptions joined, the first value of each attribute, their chunk ids in
    order, the stored name, type and ends where a remaining member has them (else the
    first member's), and the first member's document."""
    first = records[0]
    if len(records) == 1:
        return first.model_copy(update={"relation_id": stored.relation_id})
    chunk_ids = list(dict.fromkeys(c for record in records for c in record.chunk_ids()))
    wording = (stored.type, stored.name)
    lead = next((r for r in records if (r.type, r.name) == wording), first)
    ends = next((r for r in records if _ends(r) == _ends(stored)), first)
    return stored.model_copy(
        update={
            "chunk_id": dedup_chunk_id(chunk_ids),
            "document_id": first.document_id,
            "source_entity_id": ends.source_entity_id,
            "target_entity_id": ends.target_entity_id,
            "source_entity_name": ends.source_entity_name,
            "target_entity_name": ends.target_entity_name,
            "type": lead.type,
            "name": lead.name,
            "description": joined_description(r.description for r in records),
            "attributes": merged_attributes(records),
            "source_chunk_ids": chunk_ids,
        }
    )


def _ends(relation: ExtractedRelation) -> tuple[str, str, str, str]:
    return (
        relation.source_entity_id,
        relation.target_entity_id,
        relation.source_entity_name,
        relation.target_entity_name,
    )


def _batch_id(documents: Iterable[str], chunks: Iterable[str], plan: _Plan) -> str:
    """``retract-`` and a digest of what is taken back from which member rows: the same
    retract of the same store state is one batch, applied at most once."""
    digest = hashlib.sha256()
    rows = sorted((m.member_id, m.relation_id, m.record.to_json().decode()) for m in plan.members)
    digest.update(orjson.dumps([sorted(documents), sorted(chunks), rows]))
    return "retract-" + digest.hexdigest()[:24]


def _batch(plan: _Plan, documents: Sequence[str], chunks: Sequence[str]) -> Batch:
    changed = [c for c in plan.changes if c.after is not None and c.after != c.before]
    renamed = [c for c in changed if c.renamed_to]
    mapping: dict[str, str] = {}
    members = list(plan.members)
    for change in renamed:
        assert change.after is not None
        new_id = change.after.relation_id
        mapping[change.relation_id] = new_id
        for member in plan.kept[change.relation_id]:
            mapping[member.member_id] = new_id
            members.append(Member(member.record, new_id, member.origin, joined=member.joined))
    mapping.update(dict.fromkeys(plan.retracted, RETRACTED))
    return Batch(
        plan.batch_id,
        plan.versions,
        inserts=[c.after for c in renamed if c.after is not None],
        updates=[c.after for c in changed if c.after is not None and not c.renamed_to],
        mapping=mapping,
        decisions=[
            {RETRACT: {"documents": list(documents), "chunks": list(chunks)}},
            *(change.to_dict() for change in plan.changes),
        ],
        fingerprint=plan.batch_id,
        members=members,
        deletes=[c.relation_id for c in plan.changes if c.action == "removed" or c.renamed_to],
        retract=True,
    )

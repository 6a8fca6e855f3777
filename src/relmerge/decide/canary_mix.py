"""Canaries inside a real request: certain pairs of the block mixed into its records.

A ``relation_cluster`` request about a batch of clusters carries canaries of three kinds:

* ``keep``: one certain "keep both" pair (``relmerge.decide.canary``: a known-directed
  relation and its reversed twin), read as it stands when the batch shows both (labelled
  ``free``: it costs nothing), else with its missing record added;
* ``merge``: one pair that must map together: a twin (a unit's member with the same
  sentence between the same two entities one way, shown beside its cluster) or a pair
  of the block, else a word-for-word copy of the batch's shortest record under another id;
* ``near``: one near-miss pair (``relmerge.decide.near_miss``): two different facts about
  the block's own entities, alike in words (must stay apart), as hard as the questions
  the rules leave to the model.

A request of its own carries every kind; a packed request (``relmerge.decide.pack``)
carries, per request, what fits in its share of tokens (``canary_tokens``), each kind
drawn from one of its blocks, and only canaries that add records: two records of a pack
far apart in it are no test of a model (a judge at chance kept them apart nine times in
ten, ``bench/canary_verdict.py``). They cost tokens, not requests. A made-up record (a copy,
a near-miss sentence) gets an id of the same shape that no record of the request holds,
a cluster's members included. Added records go at seeded positions after the record they
are checked against, so a model that lists a group under its first record names a real
one; nothing else marks them.

Reading: the real answer is read among real records only (``validate_answer``'s
``canary``: an added record bridges nothing and lends no fields); a canary is right when
the model grouped its two records as the evidence says, unanswered when it called them
unsure. The rules' decisions stand whatever the model said about a canary.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from relmerge.decide.canary import Expected, certain, seed_of
from relmerge.decide.near_miss import near_miss_pair
from relmerge.decide.tiers import PairDecision
from relmerge.normalize import normalize_description
from relmerge.prompts.cluster_relations import ClusterOutcome
from relmerge.units import Originals, Unit

Show = Callable[[list[int], frozenset[int]], dict[str, Any]]  # units, members left out
ShowMember = Callable[[int], dict[str, Any]]  # one original relation alone


@dataclass(frozen=True)
class CertainPair:
    """Two units of a block (local indices) and the answer hard evidence gives; or, with
    ``member``, a twin: that original relation of unit ``a`` (``b == a``) against the rest
    of the unit, the same sentence between the same two entities one way."""

    a: int
    b: int
    expected: Expected
    member: int | None = None


def _twins(units: Sequence[Unit], originals: Originals) -> list[CertainPair]:
    """Per unit, one member whose description (20+ characters) and direction another
    member shares: shown apart from its unit, the model must map them together."""
    out: list[CertainPair] = []
    for index, unit in enumerate(units):
        seen: dict[tuple[str, str, str], int] = {}
        for member in unit.members:
            relation = originals[member]
            text = normalize_description(relation.description)
            key = (relation.source_entity_id, relation.target_entity_id, text)
            if len(text) >= 20 and key in seen:
                out.append(CertainPair(index, index, "merge", member))
                break
            seen.setdefault(key, member)
    return out


def certain_pairs(
    units: Sequence[Unit],
    pairs: Sequence[PairDecision],
    originals: Originals,
) -> list[CertainPair]:
    """The block's pairs whose answer is certain without a model."""
    found = ((p, certain(units, p)) for p in pairs)
    out = [CertainPair(p.a, p.b, expected) for p, expected in found if expected is not None]
    return out + _twins(units, originals)


COPY = -2  # an added record that copies a batch record under another id
NEAR = -3  # an added record stating one of two near-miss facts (``decide.near_miss``)
FREE, KEEP, MERGE, NEAR_MISS = "free", "keep", "merge", "near"
ADDED_KINDS = (NEAR_MISS, MERGE, KEEP)  # the kinds that add records, by the evidence they give
EVERY_KIND = frozenset(ADDED_KINDS)
Slot = tuple[str, int]  # ("real", batch cluster) or ("added", number)
Added = tuple[int, int | None, int | None]  # unit (or -1: a member alone), member, anchor


@dataclass
class Mixed:
    """A request's records with its canaries: ``cluster_at[position]`` is the batch
    cluster a real record stands for (None: an added canary record); ``checks`` are
    position pairs with their expected answer."""

    records: list[dict[str, Any]]
    cluster_at: list[int | None]
    checks: list[tuple[int, int, Expected]] = field(default_factory=list)
    repeats: dict[int, int] = field(default_factory=dict)  # added position -> real one
    kinds: list[str] = field(default_factory=list)  # per check: free, keep, merge or near

    @property
    def canary(self) -> dict[int, int | None]:
        """Added positions, with the real record each repeats word for word (if any)."""
        return {i: self.repeats.get(i) for i, c in enumerate(self.cluster_at) if c is None}

    def answers(self, outcome: ClusterOutcome) -> list[bool | None]:
        """Per check: whether the model answered it right (None: it was unsure)."""
        out: list[bool | None] = []
        for x, y, expected in self.checks:
            if any(x in group and y in group for group in outcome.doubted):
                out.append(None)
                continue
            merged = any(x in group and y in group for group in outcome.together)
            out.append(merged == (expected == "merge"))
        return out

    def real(self, groups: list[list[int]]) -> list[list[int]]:
        """Groups of positions as groups of batch cluster indices (real records only)."""
        return [[c for c in (self.cluster_at[i] for i in g) if c is not None] for g in groups]


def _choose(certain: Sequence[CertainPair], seed: object) -> dict[str, CertainPair]:
    """One pair of each answer (by its kind), in a seeded order."""
    chosen: dict[str, CertainPair] = {}
    for pair in sorted(certain, key=lambda p: seed_of(seed, p.a, p.b, p.member)):
        chosen.setdefault(KEEP if pair.expected == "keep_both" else MERGE, pair)
    return chosen


class _Plan:
    """Where each chosen canary's records go (see the module)."""

    def __init__(self, batch: Sequence[Sequence[int]]) -> None:
        self.where = {unit: index for index, cluster in enumerate(batch) for unit in cluster}
        self.left_out: dict[int, set[int]] = {}  # batch cluster -> members shown apart
        self.added: list[Added] = []
        self.checks: list[tuple[Slot, Slot, Expected, str]] = []
        self.used: set[int] = set()

    def free(self, pair: CertainPair) -> bool:
        """Whether the batch shows ``pair`` whole: its two units in two of its clusters."""
        at_a, at_b = self.where.get(pair.a), self.where.get(pair.b)
        return pair.member is None and at_a is not None and at_b is not None and at_a != at_b

    def has_answer(self, expected: Expected) -> bool:
        return any(check[2] == expected for check in self.checks)

    def add(self, unit: int, member: int | None, anchor: int | None) -> Slot:
        self.added.append((unit, member, anchor))
        return ("added", len(self.added) - 1)

    def place(self, pair: CertainPair, kind: str) -> None:
        if {pair.a, pair.b} & self.used:
            return
        self.used |= {pair.a, pair.b}
        at_a, at_b = self.where.get(pair.a), self.where.get(pair.b)
        if pair.member is not None:
            if at_a is not None:  # the twin shown beside its own cluster
                self.left_out.setdefault(at_a, set()).add(pair.member)
                first: Slot = ("real", at_a)
            else:
                first = self.add(pair.a, pair.member, None)
            second = self.add(-1, pair.member, at_a)
        elif at_a is not None and at_b is not None:
            first, second = ("real", at_a), ("real", at_b)
        elif at_a is not None or at_b is not None:
            inside, outside = (pair.a, pair.b) if at_a is not None else (pair.b, pair.a)
            first, second = (
                ("real", self.where[inside]),
                self.add(outside, None, self.where[inside]),
            )
        else:
            first, second = self.add(pair.a, None, None), self.add(pair.b, None, None)
        self.checks.append((first, second, pair.expected, kind))


def _other_id(real: str, taken: set[str], seed: object) -> str:
    """An id shaped like ``real`` (its digits redrawn, seeded) that no record holds."""
    digit_count = sum(ch.isdigit() for ch in real)
    for attempt in range(200):
        rank = seed_of(seed, "id", real, attempt)
        # the low digits of the draw: uniform, where a zero-padded draw starts with zeros
        digits = iter(str(rank)[::-1].ljust(20, "0") * (len(real) // 20 + 1))
        made = "".join(next(digits) if ch.isdigit() else ch for ch in real)
        if not digit_count or attempt >= 20:
            # no digits, or every id of that shape taken (ten for one digit): a suffix
            made = f"{made}_{rank % 100_000}" if digit_count else f"{real}_{rank % 1000}"
        if made not in taken:
            taken.add(made)
            return made
    raise ValueError(f"no free id like {real!r}")  # pragma: no cover - 200 seeded draws


def mix(
    batch: Sequence[Sequence[int]],
    certain: Sequence[CertainPair],
    show: Show,
    show_member: ShowMember,
    seed: object,
    kinds: frozenset[str] = EVERY_KIND,
) -> Mixed:
    """The records of ``batch`` (as ``show`` shows clusters) with canaries mixed in: the
    free ones always, and of ``kinds`` (``keep``, ``merge``, ``near``) those it can add."""
    plan = _Plan(batch)
    chosen = _choose(certain, seed)
    if KEEP in kinds and KEEP in chosen:
        plan.place(chosen[KEEP], FREE if plan.free(chosen[KEEP]) else KEEP)
    if MERGE in kinds and MERGE in chosen:
        plan.place(chosen[MERGE], FREE if plan.free(chosen[MERGE]) else MERGE)
    shown = {
        index: show(list(batch[index]), frozenset(plan.left_out.get(index, ())))
        for index in range(len(batch))
    }
    if MERGE in kinds and not plan.has_answer("merge"):
        single = [i for i in range(len(batch)) if "merged_from" not in shown[i]]
        if single:
            # the shortest record (fewest tokens), ties by seed
            copied = min(
                single,
                key=lambda i: (len(str(shown[i].get("description"))), seed_of(seed, "copy", i)),
            )
            plan.checks.append((("real", copied), plan.add(COPY, copied, copied), "merge", MERGE))
    near: tuple[dict[str, Any], dict[str, Any]] = ({}, {})
    if batch and NEAR_MISS in kinds:
        near = near_miss_pair([shown[i] for i in range(len(batch))], seed_of(seed, "near"))
        plan.checks.append((plan.add(NEAR, 0, 0), plan.add(NEAR, 1, 0), "keep_both", NEAR_MISS))
    order: list[Slot] = [("real", index) for index in range(len(batch))]
    for number, (_, _, anchor) in enumerate(plan.added):
        after = 0 if anchor is None else order.index(("real", anchor)) + 1
        span = len(order) - after + 1
        order.insert(after + seed_of(seed, "at", number) % span, ("added", number))
    records: list[dict[str, Any]] = []
    cluster_at: list[int | None] = []
    made: list[tuple[int, int, int]] = []  # position, COPY or NEAR, member
    for kind, index in order:
        cluster_at.append(index if kind == "real" else None)
        if kind == "real":
            records.append(shown[index])
            continue
        unit, member, _ = plan.added[index]
        if unit in (COPY, NEAR) and member is not None:
            made.append((len(records), unit, member))
            records.append({})  # its id is drawn once every real id is known
        elif unit < 0 and member is not None:
            records.append(show_member(member))
        else:
            records.append(show([unit], frozenset(() if member is None else (member,))))
    # Every id the request holds, a cluster's members' included: a made-up record never
    # takes one (the answer would be read as naming it).
    ids = {str(r["relation_id"]) for r in records if r} | {
        str(m) for r in records for m in r.get("merged_from") or ()
    }
    for at, unit, member in made:
        if unit == COPY:
            copy = shown[member]
            records[at] = {**copy, "relation_id": _other_id(str(copy["relation_id"]), ids, seed)}
        else:
            like = str(shown[0]["relation_id"])
            made_id = _other_id(like, ids, (seed, "near", member))
            records[at] = {**near[member], "relation_id": made_id}
    position = {slot: i for i, slot in enumerate(order)}
    checks = [(position[x], position[y], expected) for x, y, expected, _ in plan.checks]
    repeats = {
        position[("added", number)]: position[("real", anchor)]
        for number, (unit, member, anchor) in enumerate(plan.added)
        if unit in (COPY, -1) and anchor is not None
    }
    return Mixed(records, cluster_at, checks, repeats, [check[3] for check in plan.checks])

"""Packed requests: the first questions of a chunk's blocks, several in one request.

The blocks of a chunk are decided concurrently (``decide.job.decide_blocks``). With
``llm_pack_tokens`` > 0, each block's first ``relation_cluster`` / ``relation_judge``
question goes to a :class:`Packer` instead of the model. Once every block of the chunk has
either sent its first question or ended without one, the packer cuts the questions, in
block order (never arrival order: the same chunk packs the same way on every engine and
every run), into packs of at most ``llm_pack_tokens`` tokens of records and profiles and
``llm_pack_records`` records, and sends each pack of two or more questions as one
``relation_cluster_many`` request (``prompts.cluster_many``). A question alone in its pack
is answered ``None``: its block asks it as it always did, so ``llm_pack_tokens = 0``, or a
chunk of one asking block, is the per-question behaviour, request for request.

Each block gets its own part of the answer, read among its own records only (a group can
never span two blocks); a block whose part is invalid gets ``None`` with the reason and
asks again alone; an answer with no valid part is retried with the reason, as any, and
after that every block of the pack asks alone. A pack that timed out (no answer within
the request's ``timeout``, as a slow local model's may where each block alone is
answered in time) fails no block: each asks alone, the pack counting neither as one of its
attempts nor towards the circuit breaker, and a block that then times out alone fails as
it always did. Any other spent budget or unreachable endpoint fails every block of the
pack as its own request would have. Later questions (rounds after the first, re-asks) are
asked alone.

Canaries ride per request, not per block: each block offers its records with the canary
pairs it could carry (``decide.canary_mix``), and a pack takes, from its blocks in a
seeded order, near-miss, merge and keep pairs that add records, while they add at most
``canary_tokens`` of the request's prompt tokens (none in a chunk handed out after the
run's verdict was final).
A pack never holds more than ``semantic_batch_size`` records of the batch at once: the
seed's "what the model sees at once" (canary records beside them).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from relmerge.config import DeduplicateRelationsConfig
from relmerge.decide.canary import seed_of
from relmerge.decide.canary_mix import ADDED_KINDS, Mixed
from relmerge.decide.retry import (
    FAILED,
    UNAVAILABLE,
    Attempts,
    GroupFailed,
    ask_validated,
    report_unreachable,
)
from relmerge.errors import InvalidAnswerError
from relmerge.model import EntityContext
from relmerge.prompts import cluster_many
from relmerge.prompts.cluster_relations import ClusterOutcome
from relmerge.providers.base import LanguageModel, LLMResult

# How many requests one pack may take: its first, and one retry that says what was invalid.
PACK_ATTEMPTS = 2
Mixer = Callable[[frozenset[str]], Mixed]  # a block's records with canaries of those kinds


@dataclass(frozen=True)
class Packed:
    """A block's part of a packed answer: its outcome and the request's result, or (when
    ``outcome`` is None) why the part was invalid; ``timed_out``: the pack got no answer in
    time, so the block asks alone as if it had never been packed. ``mixed``: the block's
    records as the pack showed them, with the canaries it carried (None: none)."""

    outcome: ClusterOutcome | None
    result: LLMResult | None
    problem: str = ""
    timed_out: bool = False
    mixed: Mixed | None = None


@dataclass
class _Question:
    """A block's first question: its own records (no canary added), its entities, and
    how to show it with canaries (``mixer``; None: canaries off)."""

    index: int
    records: Sequence[dict[str, Any]]
    entities: tuple[EntityContext, EntityContext]
    mixer: Mixer | None
    future: asyncio.Future[Packed | None]
    mixed: Mixed | None = None  # as the pack shows it (set when the pack is made)
    _shown: dict[frozenset[str], tuple[Mixed, int]] = field(default_factory=dict)

    @property
    def tokens(self) -> int:
        """The question's own records and profiles, in tokens (~4 characters a token)."""
        return cluster_many.part_tokens(cluster_many.Part(self.records, self.entities, {}))

    def shown(self, kinds: frozenset[str]) -> tuple[Mixed, int]:
        """The block with the canaries of ``kinds``, and its characters as a pack shows it."""
        if kinds not in self._shown:
            assert self.mixer is not None
            mixed = self.mixer(kinds)
            part = cluster_many.Part(mixed.records, self.entities, mixed.canary)
            self._shown[kinds] = (mixed, len(cluster_many.blocks_json([part])))
        return self._shown[kinds]

    @property
    def part(self) -> cluster_many.Part:
        if self.mixed is None:
            return cluster_many.Part(self.records, self.entities, {})
        return cluster_many.Part(self.mixed.records, self.entities, self.mixed.canary)


@dataclass
class Packer:
    """One chunk's first questions (``blocks``: its blocks, by index in block order)."""

    llm: LanguageModel
    config: DeduplicateRelationsConfig
    limit: asyncio.Semaphore
    blocks: int
    wants_canaries: Callable[[], bool] = lambda: True  # the chunk's: see BlockDecider
    _questions: list[_Question] = field(default_factory=list)
    _settled: set[int] = field(default_factory=set)  # blocks that asked, or never will
    _sending: list[asyncio.Task[None]] = field(default_factory=list)

    def ticket(self, index: int) -> Ticket:
        return Ticket(self, index)

    def close(self) -> None:
        """Stop the packs still being sent (the chunk's blocks were cancelled)."""
        for task in self._sending:
            task.cancel()

    async def ask(
        self,
        index: int,
        records: Sequence[dict[str, Any]],
        entities: tuple[EntityContext, EntityContext],
        mixer: Mixer | None = None,
    ) -> Packed | None:
        """Block ``index``'s first question (``records``, and ``mixer`` to show them with
        canaries): its part of a packed answer, or None when it was alone in its pack
        (the block asks it itself)."""
        future: asyncio.Future[Packed | None] = asyncio.get_running_loop().create_future()
        self._questions.append(_Question(index, records, entities, mixer, future))
        self._settle(index)
        return await future

    def release(self, index: int) -> None:
        """Block ``index`` will send no first question (it ended, or it asked already)."""
        self._settle(index)

    def _settle(self, index: int) -> None:
        if index in self._settled:
            return
        self._settled.add(index)
        if len(self._settled) == self.blocks:
            self._flush()

    def _packs(self) -> list[list[_Question]]:
        budget = self.config.llm_pack_tokens
        cap = min(self.config.llm_pack_records, self.config.semantic_batch_size)
        packs: list[list[_Question]] = []
        tokens = records = 0
        for question in sorted(self._questions, key=lambda q: q.index):
            size, count = question.tokens, len(question.records)
            if packs and tokens + size <= budget and records + count <= cap:
                packs[-1].append(question)
                tokens += size
                records += count
            else:
                packs.append([question])
                tokens, records = size, count
        return packs

    def _flush(self) -> None:
        for pack in self._packs():
            if len(pack) == 1:
                pack[0].future.set_result(None)
            else:
                self._sending.append(asyncio.ensure_future(self._send(pack)))
        self._questions = []

    def _add_canaries(self, pack: list[_Question]) -> None:
        """The pack's canaries (see the module): in a seeded order of blocks and kinds,
        those whose added records fit in ``canary_tokens`` of the request's prompt tokens
        without them."""
        offered = [q for q in pack if q.mixer is not None]
        if not offered:
            return
        kinds = {q.index: frozenset[str]() for q in offered}
        for question in offered:
            question.mixed = question.shown(kinds[question.index])[0]
        plain = cluster_many.build_request(
            [q.part for q in pack], temperature=0.0, max_answer_tokens=1
        )
        # In characters, as the request shows them; 2% of it kept back for what a block's
        # own rendering cannot see (the names of later records grow by a digit).
        prompt = sum(len(message.content) for message in plain.messages)
        budget = 0.98 * self.config.canary_tokens * prompt
        seed = ("pack", [q.index for q in pack])
        order = sorted(offered, key=lambda q: seed_of(seed, q.index))
        spent = 0
        for turn in range(len(order)):
            for step, kind in enumerate(ADDED_KINDS):
                question = order[(turn + step) % len(order)]
                have = kinds[question.index]
                before, before_chars = question.shown(have)
                after, after_chars = question.shown(have | {kind})
                cost = after_chars - before_chars
                if len(after.checks) > len(before.checks) and cost > 0 and spent + cost <= budget:
                    kinds[question.index] = have | {kind}
                    question.mixed = after
                    spent += cost

    async def _send(self, pack: list[_Question]) -> None:
        if self.wants_canaries():
            self._add_canaries(pack)
        parts = [question.part for question in pack]
        config = self.config
        try:
            async with self.limit:
                outcomes, result = await ask_validated(
                    self.llm,
                    lambda feedback: cluster_many.build_request(
                        parts,
                        temperature=config.temperature,
                        feedback=feedback,
                        max_answer_tokens=config.max_answer_tokens,
                    ),
                    lambda parsed: cluster_many.validate_answer(parsed, parts),
                    Attempts(min(PACK_ATTEMPTS, config.max_attempts)),
                    split_on_timeout=True,
                )
        except GroupFailed as failure:
            if failure.timed_out:  # too big to be answered in time: each block asks alone
                for question in pack:
                    question.future.set_result(Packed(None, None, failure.reason, True))
                return
            if failure.code == UNAVAILABLE:  # the circuit breaker counts blocks, not packs
                for _ in pack[1:]:
                    report_unreachable(self.llm)
            for question in pack:
                if failure.code == FAILED:  # no valid answer: each block asks alone
                    question.future.set_result(Packed(None, None, failure.reason))
                else:
                    question.future.set_exception(
                        GroupFailed(failure.reason, failure.code, failure.invalid_answers)
                    )
            return
        except asyncio.CancelledError:
            for question in pack:
                question.future.cancel()
            raise
        except Exception as error:  # a provider error no retry mends: as alone
            for question in pack:
                question.future.set_exception(error)
            return
        for question, outcome in zip(pack, outcomes, strict=True):
            if isinstance(outcome, InvalidAnswerError):
                question.future.set_result(Packed(None, result, str(outcome)))
            else:
                question.future.set_result(Packed(outcome, result, mixed=question.mixed))


@dataclass
class Ticket:
    """A block's one chance to send its first question through the packer."""

    packer: Packer
    index: int
    used: bool = False

    def take(self) -> Packer | None:
        """The packer, the first time (later questions are asked alone)."""
        if self.used:
            return None
        self.used = True
        return self.packer

    def release(self) -> None:
        self.used = True
        self.packer.release(self.index)

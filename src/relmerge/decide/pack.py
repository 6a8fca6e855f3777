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
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from relmerge.config import DeduplicateRelationsConfig
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


@dataclass(frozen=True)
class Packed:
    """A block's part of a packed answer: its outcome and the request's result, or (when
    ``outcome`` is None) why the part was invalid; ``timed_out``: the pack got no answer in
    time, so the block asks alone as if it had never been packed."""

    outcome: ClusterOutcome | None
    result: LLMResult | None
    problem: str = ""
    timed_out: bool = False


@dataclass
class _Question:
    index: int
    part: cluster_many.Part
    future: asyncio.Future[Packed | None]

    @property
    def tokens(self) -> int:
        """The question's own records and profiles, in tokens (~4 characters a token).

        Canary records are left out of the count (and of :attr:`records`): they ride in
        the requests the run sends anyway, within their share of its tokens; counted,
        they would push packs over the budget and cost requests of their own."""
        own = cluster_many.Part(self.own_records, self.part.entities, {})
        return cluster_many.part_tokens(own)

    @property
    def own_records(self) -> list[dict[str, Any]]:
        canaries = set(self.part.canary)
        return [r for i, r in enumerate(self.part.records) if i not in canaries]


@dataclass
class Packer:
    """One chunk's first questions (``blocks``: its blocks, by index in block order)."""

    llm: LanguageModel
    config: DeduplicateRelationsConfig
    limit: asyncio.Semaphore
    blocks: int
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
        canary: Mapping[int, int | None],
    ) -> Packed | None:
        """Block ``index``'s first question: its part of a packed answer, or None when it
        was alone in its pack (the block asks it itself)."""
        future: asyncio.Future[Packed | None] = asyncio.get_running_loop().create_future()
        self._questions.append(
            _Question(index, cluster_many.Part(records, entities, canary), future)
        )
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
        budget, cap = self.config.llm_pack_tokens, self.config.llm_pack_records
        packs: list[list[_Question]] = []
        tokens = records = 0
        for question in sorted(self._questions, key=lambda q: q.index):
            size, count = question.tokens, len(question.own_records)
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

    async def _send(self, pack: list[_Question]) -> None:
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
                question.future.set_result(Packed(outcome, result))


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

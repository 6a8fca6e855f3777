"""``--dry-run``'s estimate of the LLM requests and tokens a run would spend.

Nothing is embedded and nothing is asked, so the estimate counts one question per place
a run may ask one: with ``--no-semantic``, every exact group with duplicates is one
``relation_merge`` request per ``llm_batch_size`` records; else (exact groups are decided
inside their blocks' questions) every block of two records is one ``relation_judge``,
every larger block one ``relation_cluster`` per ``semantic_batch_size`` records. With
``llm_pack_tokens``, each block's first question is packed as a run packs it (in block
order, up to the token budget of records and profiles and ``llm_pack_records`` records):
a pack of two or more is one ``relation_cluster_many`` request, a question alone in its
pack and a block's later batches are asked alone. Blocks are packed as one sequence,
chunks aside (a run packs within a chunk: one pack more per chunk at most). The rules
decide some blocks without a model and identical descriptions merge without one, while
later rounds and canary questions ask again (see ``docs/figures/tokens.md`` for the
estimate against a real run of the dev set). Prompt sizes are the prompts' own
instructions plus the records as they render them (the entities' profiles when given);
tokens are characters / ``CHARS_PER_TOKEN``, which undercounts CJK text. The answer's size
is a rough allowance per record.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from math import ceil

from relmerge.config import DeduplicateRelationsConfig
from relmerge.model import EntityContext
from relmerge.prompts import cluster_many, cluster_relations, judge_pair, merge_relations
from relmerge.prompts.context import entity_block
from relmerge.run.cost import CHARS_PER_TOKEN, PER_MILLION
from relmerge.run.plan import Plan

# Characters of the user message around the records (its lead line, the fence).
_FRAME_CHARS = 60
# Tokens of an answer: a verdict and a sentence; per record of a mapping table or a merge.
_JUDGE_ANSWER_TOKENS = 40
_ANSWER_TOKENS_PER_RECORD = 40


@dataclass(frozen=True)
class TaskEstimate:
    requests: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0


@dataclass(frozen=True)
class Estimate:
    """Requests and tokens per task (see the module); USD when priced."""

    tasks: dict[str, TaskEstimate]
    usd: float | None = None

    @property
    def requests(self) -> int:
        return sum(task.requests for task in self.tasks.values())

    @property
    def prompt_tokens(self) -> int:
        return sum(task.prompt_tokens for task in self.tasks.values())

    @property
    def completion_tokens(self) -> int:
        return sum(task.completion_tokens for task in self.tasks.values())


def _task(
    batches: Sequence[int], instructions: int, per_record: float, context: int, answer: int
) -> TaskEstimate:
    """Requests of ``batches`` (records per request) at these sizes, in characters."""
    records = sum(batches)
    prompt = len(batches) * (instructions + _FRAME_CHARS + context) + records * per_record
    completion = answer * len(batches) if answer else _ANSWER_TOKENS_PER_RECORD * records
    return TaskEstimate(len(batches), ceil(prompt / CHARS_PER_TOKEN), completion)


def _split(sizes: Sequence[int], batch: int) -> list[int]:
    """Records per request when each group is asked ``batch`` records at a time."""
    return [min(batch, size - start) for size in sizes for start in range(0, size, batch)]


def context_chars(entities: Sequence[EntityContext]) -> int:
    """The characters of an entity pair's block of profiles, on average (its frame alone
    when no entity is known)."""
    if not entities:
        return len(entity_block((EntityContext("", ""), EntityContext("", ""))))
    return sum(len(entity_block((e, e))) for e in entities) // len(entities)


@dataclass(frozen=True)
class _Question:
    """A block's question: its records, and whether it is a pair's ``relation_judge``."""

    records: int
    pair: bool


def _packs(
    firsts: Sequence[_Question], per_record: float, context: int, config: DeduplicateRelationsConfig
) -> list[list[_Question]]:
    """The blocks' first questions cut into packs as ``decide.pack.Packer`` cuts them."""
    budget, cap = config.llm_pack_tokens, config.llm_pack_records
    packs: list[list[_Question]] = []
    tokens = records = 0
    for question in firsts:
        size = int(question.records * per_record + context) // CHARS_PER_TOKEN
        if packs and tokens + size <= budget and records + question.records <= cap:
            packs[-1].append(question)
            tokens += size
            records += question.records
        else:
            packs.append([question])
            tokens, records = size, question.records
    return packs


def _packed(packs: Sequence[Sequence[_Question]], per_record: float, context: int) -> TaskEstimate:
    """The ``relation_cluster_many`` requests of ``packs`` (each of two questions or more)."""
    records = sum(q.records for pack in packs for q in pack)
    blocks = sum(len(pack) for pack in packs)
    frame = len(cluster_many.SYSTEM_PROMPT) + _FRAME_CHARS
    prompt = len(packs) * frame + blocks * context + records * per_record
    completion = _ANSWER_TOKENS_PER_RECORD * records
    return TaskEstimate(len(packs), ceil(prompt / CHARS_PER_TOKEN), completion)


def _questions(
    block_sizes: Sequence[int], config: DeduplicateRelationsConfig, per_record: float, context: int
) -> tuple[list[_Question], list[list[_Question]]]:
    """The questions asked alone, and the packs (``llm_pack_tokens`` 0: none)."""
    firsts: list[_Question] = []
    later: list[_Question] = []
    for size in block_sizes:
        if size == 2:
            firsts.append(_Question(2, True))
            continue
        batches = _split([size], config.semantic_batch_size)
        firsts.append(_Question(batches[0], False))
        later += [_Question(records, False) for records in batches[1:]]
    if config.llm_pack_tokens <= 0:
        return firsts + later, []
    packs = _packs(firsts, per_record, context, config)
    alone = [pack[0] for pack in packs if len(pack) == 1]
    return alone + later, [pack for pack in packs if len(pack) > 1]


def estimate(
    planned: Plan,
    config: DeduplicateRelationsConfig,
    entities: Sequence[EntityContext] = (),
    prices: tuple[float | None, float | None] = (None, None),
) -> Estimate:
    """What a run of ``planned`` would ask, estimated (see the module)."""
    records = planned.counts["input_relation_count"] or 1
    per_record = planned.record_chars / records
    context = context_chars(entities)
    if not config.semantic_merge:
        tasks = {
            merge_relations.TASK: _task(
                _split(planned.group_sizes, config.llm_batch_size),
                len(merge_relations.SYSTEM_PROMPT),
                per_record,
                0,
                0,
            )
        }
    else:  # exact groups are decided inside their blocks' questions
        alone, packs = _questions(planned.block_sizes, config, per_record, context)
        tasks = {
            judge_pair.TASK: _task(
                [q.records for q in alone if q.pair],
                len(judge_pair.SYSTEM_PROMPT),
                per_record + len('"role": "candidate",'),
                context,
                _JUDGE_ANSWER_TOKENS,
            ),
            cluster_relations.TASK: _task(
                [q.records for q in alone if not q.pair],
                len(cluster_relations.SYSTEM_PROMPT),
                per_record,
                context,
                0,
            ),
            cluster_many.TASK: _packed(packs, per_record, context),
        }
    found = Estimate({name: task for name, task in tasks.items() if task.requests})
    price_in, price_out = prices
    if price_in is None or price_out is None:
        return found
    usd = (found.prompt_tokens * price_in + found.completion_tokens * price_out) / PER_MILLION
    return Estimate(found.tasks, round(usd, 6))

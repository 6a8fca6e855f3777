"""Fault injection for :class:`LLMServer`, and the dev-set run that measures it.

:class:`FaultyHandler` wraps a handler (say, the gold judge) and, per request, answers
with garbage, HTTP 429, HTTP 500 or a dropped connection instead, plus a small random
delay, so a test can check that a run under such an endpoint completes, loses nothing and
reports what happened. ``tests/test_fault_injection.py`` and ``bench/soak_faults.py`` both
use it, with the helpers below (load the dev set, run it through the server, list what was
lost).

Each request's fate is drawn from an RNG seeded by ``seed``, the question (task and the
relation ids of its records) and how often that question was asked before, not from one
shared stream: the server answers on many threads, and a shared stream would hand faults
out in arrival order, which changes from run to run. So a seed gives the same faults on
every run, whatever the thread timing, and rewording a prompt does not move them.
"""

from __future__ import annotations

import dataclasses
import hashlib
import random
import threading
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from relmerge.config import DeduplicateRelationsConfig
from relmerge.eval.gold import load_gold
from relmerge.eval.gold_judge import task_of
from relmerge.io.load import read_entities, read_json_file, read_jsonl
from relmerge.io.records import RawRecord
from relmerge.model import EntityContext, ExtractedRelation
from relmerge.providers.base import NoLanguageModel
from relmerge.providers.embedding import CachedEmbedder, HashEmbedder
from relmerge.providers.openai_compat import OpenAICompatibleModel
from relmerge.run.pipeline import run_pipeline
from relmerge.run.result import RunOutput
from relmerge.stages.remap import validate_entity_mapping
from relmerge.stores import MemoryStore
from tests.support.llm_server import Handler, LLMServer, Reply, request_records

FAULT_KINDS = ("garbage", "rate_limited", "server_error", "dropped")
GARBAGE_KINDS = ("prose", "truncated", "wrong_shape", "empty")

# Parseable JSON that no task accepts: not an object, or an object missing what every
# schema needs (relation/relations, mapping_table, a valid verdict).
_WRONG_SHAPES: tuple[Any, ...] = (
    ["merge", "keep_both"],
    {"result": "done"},
    {"verdict": 42, "mapping_table": [], "relation": "same fact"},
    "merge",
)
_PROSE = (
    "I'm sorry, but I can't help with deduplicating these relations.",
    "These two records describe the same relationship, so they should be merged.",
    "Sure! Here is my analysis of the records you sent.",
)


class FaultyHandler:
    """A handler that answers like ``inner`` except for the faults it injects.

    Rates are probabilities per request (their sum at most 1): ``garbage`` is a 200 whose
    content is prose, truncated JSON, JSON of the wrong shape or empty; ``rate_limited`` a
    429 with ``Retry-After: 0``; ``server_error`` a 500; ``dropped`` a connection closed
    with no answer. Every reply, faulty or not, waits up to ``max_latency`` seconds.
    ``max_faults`` stops injecting after that many faults (a burst, then recovery).
    ``counts`` holds the faults injected by kind (and ``ok``), ``garbage_counts`` the
    garbage by form.
    """

    def __init__(
        self,
        inner: Handler,
        *,
        garbage: float = 0.3,
        rate_limited: float = 0.1,
        server_error: float = 0.05,
        dropped: float = 0.02,
        max_latency: float = 0.05,
        seed: int = 0,
        max_faults: int | None = None,
    ) -> None:
        rates = {
            "garbage": garbage,
            "rate_limited": rate_limited,
            "server_error": server_error,
            "dropped": dropped,
        }
        if any(rate < 0 for rate in rates.values()) or sum(rates.values()) > 1 + 1e-9:
            raise ValueError(f"fault rates must be >= 0 and sum to at most 1: {rates}")
        self.inner = inner
        self.rates = rates
        self.max_latency = max_latency
        self.seed = seed
        self.max_faults = max_faults
        self.counts: Counter[str] = Counter()
        self.garbage_counts: Counter[str] = Counter()
        self.history: dict[str, list[str]] = {}
        self._lock = threading.Lock()

    def __call__(self, body: dict[str, Any]) -> Reply:
        question = question_key(body)
        with self._lock:
            occurrence = len(self.history.setdefault(question, []))
        rng = random.Random(f"{self.seed}|{question}|{occurrence}")
        delay = rng.uniform(0.0, self.max_latency) if self.max_latency > 0 else 0.0
        kind = self._draw(rng)
        with self._lock:
            if (
                kind != "ok"
                and self.max_faults is not None
                and sum(self.counts[k] for k in FAULT_KINDS) >= self.max_faults
            ):
                kind = "ok"
            self.counts[kind] += 1
            self.history[question].append(kind)
        if kind == "rate_limited":
            return Reply(status=429, headers={"Retry-After": "0"}, delay=delay)
        if kind == "server_error":
            return Reply(status=500, delay=delay)
        if kind == "dropped":
            return Reply(drop=True, delay=delay)
        reply = self.inner(body)
        if kind == "garbage":
            form = GARBAGE_KINDS[rng.randrange(len(GARBAGE_KINDS))]
            with self._lock:
                self.garbage_counts[form] += 1
            return Reply(content=self._garbage(form, reply, rng), delay=delay)
        return dataclasses.replace(reply, delay=reply.delay + delay)

    def unanswered_questions(self, max_retries: int, max_attempts: int) -> int:
        """Questions that never got a valid answer, replaying what the client saw.

        Per question, in order: an HTTP fault is retried by the provider up to
        ``max_retries`` times (one more makes the attempt fail); garbage fails an attempt;
        ``max_attempts`` failed attempts fail the question, wherever they were sent (the
        semantic stage keeps a block's last attempt for a re-ask in a later round); a good
        answer ends it. With an inner handler that always answers validly,
        this is how many groups must fail.
        """
        with self._lock:
            histories = [list(kinds) for kinds in self.history.values()]
        failed = 0
        for kinds in histories:
            attempts = http = 0
            last_failed = False
            for kind in kinds:
                if kind == "ok":
                    attempts = http = 0
                    last_failed = False
                    continue
                if kind == "garbage":
                    http = 0
                    attempts += 1
                else:
                    http += 1
                    if http <= max_retries:
                        continue
                    http = 0
                    attempts += 1
                if attempts == max_attempts:
                    last_failed = True
                    attempts = 0
            failed += last_failed
        return failed

    def _draw(self, rng: random.Random) -> str:
        roll = rng.random()
        for kind in FAULT_KINDS:
            if roll < self.rates[kind]:
                return kind
            roll -= self.rates[kind]
        return "ok"

    @staticmethod
    def _garbage(form: str, reply: Reply, rng: random.Random) -> str:
        if form == "prose":
            return _PROSE[rng.randrange(len(_PROSE))]
        if form == "truncated":
            # The real answer cut short: its outer object never closes, so no parse works.
            text = reply.content if reply.status == 200 and reply.content else '{"relation": {}}'
            return text[: max(1, len(text) // 2)]
        if form == "wrong_shape":
            return orjson.dumps(_WRONG_SHAPES[rng.randrange(len(_WRONG_SHAPES))]).decode()
        return ""


def question_key(body: dict[str, Any]) -> str:
    """What a request asks, whatever the wording: task and relation ids of its records.

    A retry (transport or feedback) asks the same question; the body digest stands in
    when a request carries no records.
    """
    records = request_records(body)
    if not records:
        return hashlib.sha256(orjson.dumps(body, option=orjson.OPT_SORT_KEYS)).hexdigest()
    schema = (body.get("response_format") or {}).get("json_schema") or {}
    task = schema.get("name")
    if not isinstance(task, str):
        system = next(
            (m.get("content", "") for m in body.get("messages", []) if m.get("role") == "system"),
            "",
        )
        task = task_of(str(system)) or "?"
    ids = sorted(str(record.get("relation_id")) for record in records)
    return task + ":" + ",".join(ids)


# The dev-set run shared by the tests and the soak benchmark --------------------------------

DEV = Path(__file__).resolve().parents[2].parent / "shared" / "data" / "dev"


@dataclass(frozen=True)
class DevSet:
    """The dev set as the pipeline takes it, plus what the checks need."""

    raws: list[RawRecord]
    records: list[dict[str, Any]]
    entity_mapping: dict[str, str]
    entities: list[EntityContext]
    gold: dict[str, str]

    def subset(self, size: int | None) -> DevSet:
        """The first ``size`` records (input order) and their gold labels; all if None."""
        if size is None or size >= len(self.raws):
            return self
        records = self.records[:size]
        ids = {str(item["relation_id"]) for item in records}
        return dataclasses.replace(
            self,
            raws=self.raws[:size],
            records=records,
            gold={key: value for key, value in self.gold.items() if key in ids},
        )


def load_dev(path: Path = DEV) -> DevSet:
    raws = list(read_jsonl(path / "relations.jsonl"))
    return DevSet(
        raws=raws,
        records=[raw.data for raw in raws],
        entity_mapping=validate_entity_mapping(
            read_json_file(path / "entity_id_mapping.json", "entity mapping")
        ),
        entities=read_entities(path / "entities.jsonl"),
        gold=load_gold(path / "gold.jsonl"),
    )


@dataclass(frozen=True)
class FaultRun:
    """One pipeline run through the loopback server; ``requests`` are the chat bodies."""

    output: RunOutput
    store: MemoryStore
    requests: list[dict[str, Any]]

    @property
    def server_requests(self) -> int:
        return len(self.requests)


async def run_through_server(
    dev: DevSet,
    handler: Handler,
    *,
    semantic: bool = True,
    max_retries: int = 8,
    max_attempts: int = 3,
    backoff_seconds: float = 0.01,
    timeout: float = 60.0,
    queued: Sequence[Reply] = (),
) -> FaultRun:
    """Run the pipeline on ``dev`` with an OpenAI-compatible model on a loopback server.

    ``queued`` replies answer the first requests, before ``handler`` does.
    """
    # Questions are counted per request kind: no canary records (test_canaries covers them),
    # and one question a request (test_pack covers packed answers that fail).
    config = DeduplicateRelationsConfig(
        semantic_merge=semantic, max_attempts=max_attempts, canaries=0, llm_pack_tokens=0
    )
    store = MemoryStore()
    with LLMServer(handler=handler) as server:
        server.enqueue(*queued)
        llm = OpenAICompatibleModel(
            base_url=server.base_url,
            model="gold-judge",
            max_retries=max_retries,
            backoff_seconds=backoff_seconds,
            timeout=timeout,
        )
        try:
            output = await run_pipeline(
                dev.raws,
                dev.entity_mapping,
                config,
                llm,
                store,
                embedder=CachedEmbedder(HashEmbedder()),
                entities=dev.entities,
            )
        finally:
            await llm.aclose()
        if server.errors:
            raise AssertionError(f"the loopback server failed: {server.errors}")
        return FaultRun(output, store, server.requests)


async def run_without_llm(
    dev: DevSet, *, semantic: bool = True, store: MemoryStore | None = None
) -> RunOutput:
    """The rules-only run: what a run keeps when every LLM question fails."""
    return await run_pipeline(
        dev.raws,
        dev.entity_mapping,
        DeduplicateRelationsConfig(semantic_merge=semantic),
        NoLanguageModel(),
        store if store is not None else MemoryStore(),
        embedder=CachedEmbedder(HashEmbedder()),
        entities=dev.entities,
    )


def lost_records(
    output: RunOutput,
    store: MemoryStore,
    records: Sequence[dict[str, Any]],
    mapping: dict[str, str],
) -> list[str]:
    """Every way ``output`` lost or corrupted an input: ids, chunks, endpoints, files.

    Empty when nothing is lost: each input id maps to an output relation that was written,
    holds the input's chunk ids, and keeps the (mapped) endpoints of its members.
    """
    problems: list[str] = []
    by_id = {relation.relation_id: relation for relation in output.relations}
    prefix = DeduplicateRelationsConfig().deduplicated_relations_prefix + "/"
    if set(output.relation_keys) != {key for key in store.objects if key.startswith(prefix)}:
        problems.append("the relation keys differ from the relation files written")
    for key in output.relation_keys:
        written = ExtractedRelation.model_validate_json(store.objects[key])
        if by_id.get(written.relation_id) != written:
            problems.append(f"{key} differs from the output relation")
    members: dict[str, list[dict[str, Any]]] = {}
    for item in records:
        relation_id = str(item["relation_id"])
        target = output.relation_id_mapping.get(relation_id)
        if target is None or target not in by_id:
            problems.append(f"{relation_id}: not in the id mapping (or maps to nothing)")
            continue
        members.setdefault(target, []).append(item)
        chunks = set(by_id[target].source_chunk_ids)
        if item["chunk_id"] not in chunks or not set(item["source_chunk_ids"]) <= chunks:
            problems.append(f"{relation_id}: chunk ids missing from {target}")
    for target, items in members.items():
        relation = by_id[target]
        pairs = {
            (
                mapping.get(item["source_entity_id"], item["source_entity_id"]),
                mapping.get(item["target_entity_id"], item["target_entity_id"]),
            )
            for item in items
        }
        ends = (relation.source_entity_id, relation.target_entity_id)
        if ends not in pairs or any({*pair} != {*ends} for pair in pairs):
            problems.append(f"{target}: endpoints {ends} are not its members' {sorted(pairs)}")
    if set(by_id) != set(output.relation_id_mapping.values()):
        problems.append("some output relations are the image of no input id")
    return problems

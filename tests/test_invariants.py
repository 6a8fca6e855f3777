"""Invariants of a whole run, property-tested over generated batches and model behaviours.

Why property tests: the stages interact (remap, identical merges, accumulating LLM batches,
rounds, tiers, chaining guard, cluster/judge answers, retries) in more ways than examples
can cover. Hypothesis generates small batches in which exact duplicates, near-duplicates,
number variants, reversed symmetric relations, aliases and broken records all occur, runs
the real step over a memory store with a scripted model, and checks what DESIGN §2 and §7
promise: nothing is lost, ids follow the id rules, endpoints never move, a second run on
the output changes nothing, and a cached re-run asks nothing and writes the same bytes.

The scripted models answer as a pure function of the request content, so that a re-run (or
a resume from the cache) sees the same answers. ``bench/soak_invariants.py`` runs the same
properties with many more examples (``RELMERGE_INVARIANT_EXAMPLES``).
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import re
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from relmerge import DeduplicateRelations, DeduplicateRelationsConfig, DictContext, RunCache
from relmerge.decide.clustering import ConstrainedClusters
from relmerge.decide.features import relation_features
from relmerge.decide.lexicon import load_lexicon
from relmerge.decide.merged import keeps_every_description
from relmerge.errors import ProviderError
from relmerge.ids import dedup_chunk_id, merged_relation_id
from relmerge.model import ExtractedRelation
from relmerge.normalize import normalize_key_text
from relmerge.providers.base import LLMRequest
from relmerge.providers.embedding import HashEmbedder
from relmerge.providers.fake import Answer, ScriptedLLM
from relmerge.run.result import RunOutput
from relmerge.stages.remap import validate_entity_mapping
from relmerge.stores import MemoryStore

# CI: a moderate number of examples per property (about ten seconds for the file); the
# soak raises it. No deadline: one example runs a whole pipeline, twice for idempotence and
# the cache, and its time varies with the batch and a shared CI machine's load. ``too_slow``
# is about data generation: a batch draws a hundred-odd values, which a loaded two-core
# runner can make slow without anything being wrong.
EXAMPLES = int(os.environ.get("RELMERGE_INVARIANT_EXAMPLES", "200"))
SETTINGS = settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)


@dataclass
class Tally:
    """What the properties tried, for the soak's report."""

    batches: int = 0
    records: int = 0
    runs: int = 0
    requests: int = 0
    merged_outputs: int = 0
    input_ids_checked: int = 0  # valid input ids found in the mapping
    chunk_ids_checked: int = 0  # input chunk ids found in their output relation
    by_behaviour: dict[str, int] = field(default_factory=dict)


TALLY = Tally()

# ---------------------------------------------------------------------------------------
# Generated batches
# ---------------------------------------------------------------------------------------

ENTITY_NAMES = {
    "e_ald": "Aldmere",
    "e_ald2": "Aldmere Holdings",  # an alias of e_ald when the entity mapping is on
    "e_bra": "Brannock",
    "e_cor": "Corvale",
    "e_bei": "北川",
    "e_bei2": "北川市",  # an alias of e_bei
    "e_x": "Xarn",  # maps to e_ald2, a chain resolved to e_ald
}
ENTITY_MAPPING = {"e_ald2": "e_ald", "e_bei2": "e_bei", "e_x": "e_ald2"}
PAIRS = [
    ("e_ald", "e_bra"),
    ("e_bra", "e_ald"),
    ("e_ald2", "e_bra"),
    ("e_bra", "e_x"),
    ("e_bei", "e_cor"),
    ("e_cor", "e_bei"),
    ("e_bei2", "e_cor"),
    ("e_ald", "e_ald2"),  # a self-loop once the mapping is applied
]
NAMES = [
    ("CEO of", "employment"),
    ("ＣＥＯ of", "Employment"),  # the same exact key once normalised (NFKC, case)
    ("works for", "employment"),
    ("married to", "family"),
    ("Married  To", "family"),
    ("sibling of", "family"),
    ("borders", "spatial"),
    ("接壤", "空间关系"),
    ("包含", "空间关系"),
    ("acquired", "corporate"),
    ("rival of", "social"),
    ("表亲", "family"),  # no list says whether it is symmetric: the LLM decides
    ("related", "related"),  # generic, as GraphRAG writes every relation
]
BASE_TEXTS = [
    "Ada Lind has led the company since 2019.",
    "They married in the chapel at Brannock in 1702.",
    "The two realms share a border along the river.",
    "北川与科瓦尔接壤，边界长120公里。",
    "The firm bought a 20% stake for 5,000 crowns.",
    "Rivals for the throne of the northern march.",
    "A short note.",
]
NUMBER_SWAPS = ["1703", "35%", "5 000", "12", "二零一九"]
CHUNKS = ["c1", "c2", "c3", "c4", "c5"]
ATTRIBUTE_VALUES: list[Any] = ["2019", "2020", "CEO", "20%", 5, True, None, ["a", 1]]


@dataclass(frozen=True)
class Batch:
    """One generated input: store objects in key order, the valid records among them."""

    objects: list[Any]  # JSON values written to the store, one per key, in key order
    valid: list[dict[str, Any]]  # the valid relation records, in input order
    entity_mapping: dict[str, str] | None
    config: dict[str, Any]

    def __repr__(self) -> str:
        """One line per record: what a failing example needs, not twelve fields each."""
        lines = [f"Batch(mapping={bool(self.entity_mapping)}, config={self.config}"]
        for item in self.objects:
            if not isinstance(item, dict) or item not in self.valid:
                lines.append(f"  rejected: {item!r}")
                continue
            lines.append(
                f"  {item['relation_id']}: {item['source_entity_id']}->{item['target_entity_id']}"
                f" {item['name']!r}/{item['type']!r} {item['description']!r}"
                f" attrs={item['attributes']} chunk={item['chunk_id']}"
                f" sources={item['source_chunk_ids']} doc={item['document_id']}"
            )
        return "\n".join([*lines, ")"])


@st.composite
def descriptions(draw: st.DrawFn, earlier: list[str]) -> str:
    """A new text, or a copy / normalised copy / small edit / number variant of an earlier
    one, so that every path of the exact and semantic stages is reached."""
    kinds = ["new", "copy", "spacing", "edit", "number"] if earlier else ["new"]
    kind = draw(st.sampled_from(kinds))
    if kind == "new":
        return draw(st.sampled_from(BASE_TEXTS))
    text = draw(st.sampled_from(earlier))
    if kind == "copy":
        return text
    if kind == "spacing":  # equal after normalisation: case, spaces, final punctuation
        return "  " + text.upper().replace(" ", "  ").rstrip(".。") + " "
    if kind == "edit":
        position = draw(st.integers(0, max(0, len(text) - 1)))
        edit = draw(st.sampled_from(["drop", "append", "insert"]))
        if edit == "drop" and len(text) > 1:
            return text[:position] + text[position + 1 :]
        if edit == "append":
            return text + " It was widely reported."
        return text[:position] + "x" + text[position:]
    swap = draw(st.sampled_from(NUMBER_SWAPS))
    replaced = re.sub(r"[0-9][0-9,%]*", swap, text, count=1)
    return replaced if replaced != text else f"{text} In {swap}."


def _relation_id(index: int, style: int) -> str:
    return [f"r{index:02d}", f"关系{index}", f"rel/{index}", f"r {index}"][style]


@st.composite
def batches(draw: st.DrawFn, semantic: bool | None = None, finish: bool = False) -> Batch:
    """``finish``: caps large enough that a run never stops with work left (every block in
    one semantic request, rounds to spare), as idempotence needs."""
    count = draw(st.integers(1, 14))
    # A few endpoint pairs and names per batch, so that blocks and exact groups fill up.
    pairs = draw(st.lists(st.sampled_from(PAIRS), min_size=1, max_size=3, unique=True))
    names = draw(st.lists(st.sampled_from(NAMES), min_size=1, max_size=4, unique=True))
    valid: list[dict[str, Any]] = []
    for index in range(count):
        source, target = draw(st.sampled_from(pairs))
        name, type_ = draw(st.sampled_from(names))
        chunk = draw(st.sampled_from(CHUNKS))
        item: dict[str, Any] = {
            "relation_id": _relation_id(index, draw(st.sampled_from([0, 0, 0, 1, 2, 3]))),
            "chunk_id": chunk,
            "document_id": draw(st.sampled_from(["doc_1", "doc_2"])),
            "source_entity_id": source,
            "target_entity_id": target,
            "source_entity_name": ENTITY_NAMES[source],
            "target_entity_name": ENTITY_NAMES[target],
            "type": type_,
            "name": name,
            "description": draw(descriptions([r["description"] for r in valid])),
            "attributes": draw(
                st.dictionaries(
                    st.sampled_from(["since", "role", "stake"]),
                    st.sampled_from(ATTRIBUTE_VALUES),
                    max_size=2,
                )
            ),
            "source_chunk_ids": draw(st.lists(st.sampled_from(CHUNKS), max_size=3)),
        }
        valid.append(item)
    objects: list[Any] = list(valid)
    broken = draw(
        st.lists(
            st.sampled_from(["duplicate", "empty", "self_loop", "missing", "array"]), max_size=2
        )
    )
    for kind in broken:
        position = draw(st.integers(0, len(objects)))
        bad: Any
        if kind == "duplicate":  # a later record repeating an id: set aside, first kept
            original = draw(st.sampled_from(valid))
            bad = {**original, "description": "A later record reusing an id."}
            position = max(position, objects.index(original) + 1)
        elif kind == "empty":
            bad = {**valid[0], "relation_id": f"bad_{position}", "description": "  "}
        elif kind == "self_loop":
            bad = {**valid[0], "relation_id": f"bad_{position}", "target_entity_id": "e_ald"}
            bad["source_entity_id"] = "e_ald"
        elif kind == "missing":
            bad = {k: v for k, v in valid[0].items() if k != "name"}
            bad["relation_id"] = f"bad_{position}"
        else:
            bad = [valid[0]]
        objects.insert(position, bad)
    if semantic is None:
        semantic = draw(st.booleans())
    config: dict[str, Any] = {
        "semantic_merge": semantic,
        "llm_batch_size": draw(st.sampled_from([2, 3, 20])),
        "max_rounds": draw(st.sampled_from([10] if finish else [1, 2, 10])),
        "max_attempts": draw(st.sampled_from([1, 3])),
        "concurrency": draw(st.sampled_from([1, 8])),
    }
    if semantic:
        config["semantic_batch_size"] = draw(st.sampled_from([100] if finish else [2, 3, 100]))
        config["semantic_batch_count"] = draw(st.sampled_from([4] if finish else [1, 4]))
        config["unsure_policy"] = draw(st.sampled_from(["keep_both", "merge"]))
        if draw(st.booleans()):  # rules decide less, so that the LLM paths are reached
            config.update(auto_merge_cosine=None)
            config.update(auto_keep_cosine=-1.0)
    mapping = ENTITY_MAPPING if draw(st.booleans()) else None
    return Batch(objects, valid, mapping, config)


# ---------------------------------------------------------------------------------------
# Scripted model behaviours: pure functions of the request content
# ---------------------------------------------------------------------------------------

Script = Callable[[LLMRequest, list[dict[str, Any]]], Answer]
LEXICON = load_lexicon()


def _sense(record: dict[str, Any]) -> str:
    """The "meaning" a valid model sees: the first word of the relation name."""
    words = normalize_key_text(str(record["name"])).split()
    return words[0] if words else ""


def _facts(record: dict[str, Any]) -> tuple[str, ...]:
    """What a splitting model tells facts apart by: the numbers of the text."""
    attributes = record.get("attributes") or {}
    text = " ".join([str(record["description"]), *map(str, attributes.values())])
    return tuple(sorted(set(re.findall(r"[0-9]+", text))))


def _fields(record: dict[str, Any]) -> dict[str, Any]:
    return {key: record[key] for key in ("type", "name", "description", "attributes")}


def _groups(records: list[dict[str, Any]], key: Callable[[dict[str, Any]], Any]) -> list[list[int]]:
    by_key: dict[Any, list[int]] = {}
    for index, record in enumerate(records):
        by_key.setdefault(key(record), []).append(index)
    return list(by_key.values())


def _keyed_answer(
    request: LLMRequest,
    records: list[dict[str, Any]],
    key: Callable[[dict[str, Any]], Any],
    only_first_group: bool = False,
) -> dict[str, Any]:
    """A valid answer that treats records with equal ``key`` as one fact (fields: the
    first record's, so the key of a fused record is its members' key)."""
    groups = _groups(records, key)
    if request.task == "relation_merge":
        if len(groups) == 1:
            return {"relation": _fields(records[0])}
        return {
            "relations": [
                {**_fields(records[g[0]]), "relation_ids": [records[i]["relation_id"] for i in g]}
                for g in groups
            ]
        }
    if request.task == "relation_judge":
        existing = [r for r in records if r.get("role") == "existing"]
        candidate = next(r for r in records if r.get("role") == "candidate")
        same = next((r for r in existing if key(r) == key(candidate)), None)
        if same is None:
            return {"verdict": "keep_both", "reason": "different facts", "duplicate_of": None}
        return {"verdict": "merge", "reason": "same fact", "duplicate_of": same["relation_id"]}
    merging = [g for g in groups if len(g) > 1][: 1 if only_first_group else None]
    table = {records[g[0]]["relation_id"]: [records[i]["relation_id"] for i in g] for g in merging}
    entries = [
        {
            "relation_id": records[g[0]]["relation_id"],
            "Node1": records[g[0]]["source_entity_name"],
            "Node2": records[g[0]]["target_entity_name"],
            "Relation": records[g[0]]["name"],
            "Type": records[g[0]]["type"],
            "Description": records[g[0]]["description"],
            "Attr": records[g[0]]["attributes"],
            "merge_tag": True,
        }
        for g in merging
    ]
    return {"relation_list": entries, "mapping_table": table}


def valid(request: LLMRequest, records: list[dict[str, Any]]) -> Answer:
    """Merges every exact group; clusters and judges by the first word of the name."""
    if request.task == "relation_merge":
        return {"relation": _fields(records[0])}
    return _keyed_answer(request, records, _sense)


def split(request: LLMRequest, records: list[dict[str, Any]]) -> Answer:
    """Tells facts apart by their numbers (a 20% and a 35% stake are two facts)."""
    return _keyed_answer(request, records, lambda r: (_sense(r), _facts(r)))


def doubtful(request: LLMRequest, records: list[dict[str, Any]]) -> Answer:
    """Unsure where names agree and numbers do not: clarifications, the policy decides."""
    if request.task == "relation_merge":
        return split(request, records)
    if request.task == "relation_judge":
        candidate = next(r for r in records if r.get("role") == "candidate")
        for existing in (r for r in records if r.get("role") == "existing"):
            if _sense(existing) == _sense(candidate):
                if _facts(existing) == _facts(candidate):
                    return {
                        "verdict": "merge",
                        "reason": "same",
                        "duplicate_of": existing["relation_id"],
                    }
                return {"verdict": "unsure", "reason": "numbers differ", "duplicate_of": None}
        return {"verdict": "keep_both", "reason": "different facts", "duplicate_of": None}
    answer = _keyed_answer(request, records, lambda r: (_sense(r), _facts(r)))
    answer["unsure"] = [
        [records[i]["relation_id"] for i in group]
        for group in _groups(records, _sense)
        if len({_facts(records[i]) for i in group}) > 1
    ]
    return answer


def _digest(request: LLMRequest) -> int:
    payload = request.task + "\x00" + "\x00".join(m.content for m in request.messages)
    return int.from_bytes(hashlib.sha256(payload.encode()).digest()[:8], "big")


GARBAGE: list[Answer] = [
    "I think these records describe the same relationship.",
    '```json\n{"relation": {"type": "x", "name": \n```',
    "[]",
    '{"relation": "merged"}',
    '{"relations": []}',
    '{"mapping_table": ["r00"]}',
    '{"verdict": "perhaps", "reason": ""}',
    '{"relation": {"type": "t", "name": "n", "description": "d"}, "relations": []}',
    "",
]


def garbage(request: LLMRequest, records: list[dict[str, Any]]) -> Answer:
    """Never a valid answer: chatter, cut JSON, or the wrong shape for the task."""
    answer = GARBAGE[_digest(request) % len(GARBAGE)]
    if request.task == "relation_merge" and answer == '{"mapping_table": ["r00"]}':
        return {"mapping_table": {}}  # a cluster answer to a merge request
    return answer


def _first_attempt(request: LLMRequest) -> bool:
    return not any(message.role == "assistant" for message in request.messages)


def _invalid_reference(request: LLMRequest, records: list[dict[str, Any]]) -> dict[str, Any]:
    """An answer that omits input ids or names ids and endpoints that are not inputs."""
    ids = [r["relation_id"] for r in records]
    choice = _digest(request) % 4
    if request.task == "relation_merge":
        if choice in (0, 3):  # a split that leaves an id out
            return {"relations": [{**_fields(records[0]), "relation_ids": ids[:-1] or ["ghost"]}]}
        if choice == 1:  # an invented id
            return {"relations": [{**_fields(records[0]), "relation_ids": [*ids, "r_ghost"]}]}
        return {"relation": {**_fields(records[0]), "source_entity_name": "Nobody"}}
    if request.task == "relation_judge":
        return {"verdict": "merge", "reason": "same", "duplicate_of": "r_ghost"}
    if choice == 0:
        return {"mapping_table": {ids[0]: [*ids, "r_ghost"]}}
    if choice == 1:
        return {"mapping_table": {"Ghost||Nobody": ids}}
    if choice == 3:
        return {"mapping_table": {}, "unsure": [[ids[0], "r_ghost"]]}
    entry = {"Node1": "Ghost", "Node2": "Nobody", "Relation": "r", "Type": "t", "Description": "d"}
    return {"relation_list": [entry], "mapping_table": {ids[0]: ids}}


def partial(request: LLMRequest, records: list[dict[str, Any]]) -> Answer:
    """First attempt references unknown or leaves out ids (must be rejected); the retry,
    told what was wrong, answers as ``valid``."""
    if _first_attempt(request):
        return _invalid_reference(request, records)
    return valid(request, records)


def lazy(request: LLMRequest, records: list[dict[str, Any]]) -> Answer:
    """A valid but incomplete cluster answer: only the first group is listed."""
    if request.task == "relation_cluster":
        return _keyed_answer(request, records, _sense, only_first_group=True)
    return valid(request, records)


def _mix(errors: bool) -> Script:
    choices: list[Script] = [valid, split, garbage, partial, lazy, doubtful]

    def script(request: LLMRequest, records: list[dict[str, Any]]) -> Answer:
        digest = _digest(request)
        if errors and digest % 7 == 0:
            return ProviderError("503 from the scripted endpoint", retryable=True)
        return choices[digest % len(choices)](request, records)

    return script


BEHAVIOURS: dict[str, Script | None] = {
    "none": None,  # rules only: NoLanguageModel
    "valid": valid,
    "split": split,
    "garbage": garbage,
    "partial": partial,
    "lazy": lazy,
    "doubtful": doubtful,
    "mix": _mix(errors=False),
    "flaky": _mix(errors=True),
}
# Models whose answer depends only on the semantic content of the records they are shown
# (and on the attempt), so that a second look at already-merged records keeps them as
# they are: see test_running_on_its_own_output_changes_nothing.
CONTENT_ONLY = ["none", "valid", "split", "garbage", "partial", "doubtful"]
# Answers that are replayed from the cache (a provider error is no answer: it is retried).
CACHEABLE = [name for name in BEHAVIOURS if name != "flaky"]


def fieldless(request: LLMRequest, records: list[dict[str, Any]]) -> Answer:
    """Groups as ``valid`` does, but writes no merged relation: pairwise verdicts and a
    bare mapping table, so every merge's text is relmerge's own."""
    answer = valid(request, records)
    if isinstance(answer, dict):
        answer.pop("relation_list", None)
    return answer


def merge_all(request: LLMRequest, records: list[dict[str, Any]]) -> Answer:
    """Says every record shown states one fact (for the regression tests only)."""
    return _keyed_answer(request, records, lambda record: "")


def model_for(behaviour: str | Script) -> ScriptedLLM | None:
    if callable(behaviour):
        return ScriptedLLM(behaviour, name="scripted-test")
    script = {**BEHAVIOURS, "merge_all": merge_all, "fieldless": fieldless}[behaviour]
    return None if script is None else ScriptedLLM(script, name=f"scripted-{behaviour}")


# ---------------------------------------------------------------------------------------
# Running the step
# ---------------------------------------------------------------------------------------


@dataclass
class Run:
    output: RunOutput
    context: DictContext
    store: MemoryStore
    llm: ScriptedLLM | None


def run(
    objects: list[Any],
    entity_mapping: dict[str, str] | None,
    config: dict[str, Any],
    behaviour: str | Script,
    cache: RunCache | None = None,
) -> Run:
    """The real step over a fresh memory store holding ``objects`` (one key each)."""
    store = MemoryStore()
    keys = []
    for index, item in enumerate(objects):
        key = f"relations/{index:03d}.json"
        store.objects[key] = orjson.dumps(item)
        keys.append(key)
    llm = model_for(behaviour)
    context = DictContext(
        components={
            "stores.objects": store,
            "models.language": llm,
            "models.embedding": HashEmbedder(),
        },
        artifacts={"relation_keys": keys, "entity_id_mapping": entity_mapping},
    )
    step = DeduplicateRelations(DeduplicateRelationsConfig(**config), cache=cache)
    output = asyncio.run(step.run(context))
    TALLY.runs += 1
    TALLY.requests += len(llm.requests) if llm is not None else 0
    return Run(output, context, store, llm)


def tally(batch: Batch, behaviour: str, output: RunOutput) -> None:
    TALLY.batches += 1
    TALLY.records += len(batch.objects)
    TALLY.merged_outputs += sum(1 for r in output.relations if r.chunk_id.startswith("dedup_"))
    TALLY.by_behaviour[behaviour] = TALLY.by_behaviour.get(behaviour, 0) + 1


# ---------------------------------------------------------------------------------------
# The invariants
# ---------------------------------------------------------------------------------------


def _symmetric(name: str) -> bool:
    return _symmetry(name) == "symmetric"


def _directed(name: str) -> bool:
    """Known to be directed (a reversed pair of such names is a hard keep)."""
    return _symmetry(name) == "directed"


def _symmetry(name: str) -> str:
    relation = ExtractedRelation.model_validate(
        {
            "relation_id": "r",
            "chunk_id": "c",
            "document_id": "d",
            "source_entity_id": "a",
            "target_entity_id": "b",
            "source_entity_name": "A",
            "target_entity_name": "B",
            "type": "t",
            "name": name,
            "description": "x",
            "attributes": {},
            "source_chunk_ids": [],
        }
    )
    return relation_features(relation, LEXICON).symmetry


def check_invariants(batch: Batch, done: Run) -> None:
    """Properties 1–4 of one run (see the tests below for what each one means)."""
    output = done.output
    originals = [ExtractedRelation.model_validate(item) for item in batch.valid]
    entity_map = validate_entity_mapping(batch.entity_mapping)
    by_id = {relation.relation_id: relation for relation in output.relations}

    # (1) the mapping is total over the valid input ids, and its values are the outputs.
    mapping = output.relation_id_mapping
    assert list(mapping) == [relation.relation_id for relation in originals]
    assert set(mapping.values()) == set(by_id)
    assert len(by_id) == len(output.relations), "two outputs share an id"
    assert len(output.rejected) == len(batch.objects) - len(batch.valid)
    assert done.context.get_artifact("relation_id_mapping") == mapping
    TALLY.input_ids_checked += len(mapping)

    # (2) every output is the file deduplicated_relations/{id}.json; the keys list matches.
    keys = [f"deduplicated_relations/{relation.relation_id}.json" for relation in output.relations]
    assert output.relation_keys == keys
    assert done.context.get_artifact("deduplicated_relation_keys") == keys
    written = sorted(k for k in done.store.objects if k.startswith("deduplicated_relations/"))
    assert written == sorted(keys)
    for relation, key in zip(output.relations, keys, strict=True):
        assert orjson.loads(done.store.objects[key]) == relation.to_dict()

    members: dict[str, list[ExtractedRelation]] = {}
    for relation in originals:
        members.setdefault(mapping[relation.relation_id], []).append(relation)

    def mapped(relation: ExtractedRelation) -> tuple[str, str]:
        source = entity_map.get(relation.source_entity_id, relation.source_entity_id)
        target = entity_map.get(relation.target_entity_id, relation.target_entity_id)
        if source == target:  # a self-loop after mapping is passed through unmapped
            return relation.source_entity_id, relation.target_entity_id
        return source, target

    for output_id, group in members.items():
        out = by_id[output_id]
        first = group[0]  # the representative: first in input order
        if len(group) == 1:
            # A relation that merges with nothing keeps its id and content (endpoints mapped).
            source, target = mapped(first)
            expected = first.model_copy(
                update={"source_entity_id": source, "target_entity_id": target}
            )
            assert out == expected
            TALLY.chunk_ids_checked += len(first.chunk_ids())
            continue
        # (3) every input chunk id survives, aggregated in input order without repeats;
        # the merged ids follow the id rules of DESIGN §2.
        chunks = list(dict.fromkeys(c for r in group for c in r.chunk_ids()))
        assert out.source_chunk_ids == chunks
        TALLY.chunk_ids_checked += sum(len(r.chunk_ids()) for r in group)
        assert out.chunk_id == dedup_chunk_id(chunks)
        assert out.relation_id == merged_relation_id([r.relation_id for r in group], out.name)
        assert out.document_id == first.document_id
        # (4) endpoints: every member has the same canonical unordered pair (a relation
        # merge never merges entities); members known to be directed all point the same
        # way, since a reversed directed pair is a hard keep (an LLM may merge reversed
        # records of unknown symmetry); the output takes the direction and endpoint names
        # of its first member whose name is not symmetric, or of the representative when
        # every name is symmetric.
        pair = frozenset(mapped(first))
        assert all(frozenset(mapped(r)) == pair for r in group)
        assert all(mapped(r)[0] != mapped(r)[1] for r in group)
        known = [r for r in group if _directed(r.name)]
        assert len({mapped(r) for r in known}) <= 1, [r.relation_id for r in group]
        directed = [r for r in group if not _symmetric(r.name)]
        lead = directed[0] if directed else first
        assert (out.source_entity_id, out.target_entity_id) == mapped(lead)
        assert (out.source_entity_name, out.target_entity_name) == (
            lead.source_entity_name,
            lead.target_entity_name,
        )


def _report(batch: Batch, behaviour: str) -> str:
    return f"behaviour={behaviour}\n{batch!r}"


def _inverse(mapping: dict[str, str]) -> dict[str, list[str]]:
    groups: dict[str, list[str]] = {}
    for old, new in mapping.items():
        groups.setdefault(new, []).append(old)
    return groups


def check_second_run(batch: Batch, first: Run, again: Run, behaviour: str) -> None:
    """(5) what running relmerge on its own output may change (see the idempotence test)."""
    before = {r.relation_id: r.to_dict() for r in first.output.relations}
    mapping = again.output.relation_id_mapping
    assert list(mapping) == list(before)
    assert not again.output.rejected
    if not batch.config["semantic_merge"]:
        after = [r.to_dict() for r in again.output.relations]
        assert after == list(before.values()), _report(batch, behaviour)
        assert mapping == {relation_id: relation_id for relation_id in before}
        assert again.output.relation_keys == first.output.relation_keys
        return
    # Semantic stage: a relation the second run does not merge comes out byte-identical.
    for output in again.output.relations:
        members = _inverse(mapping)[output.relation_id]
        if len(members) == 1:
            assert output.to_dict() == before[members[0]]
    # A first run that merged nothing is a fixpoint (DESIGN §2).
    if all(len(group) == 1 for group in _inverse(first.output.relation_id_mapping).values()):
        assert [r.to_dict() for r in again.output.relations] == list(before.values())
    # Across both runs, no relation joins two canonical pairs or reversed directed facts:
    # the hard direction keep binds a later run too.
    entity_map = validate_entity_mapping(batch.entity_mapping)
    validated = [ExtractedRelation.model_validate(item) for item in batch.valid]
    originals = {relation.relation_id: relation for relation in validated}
    final: dict[str, list[ExtractedRelation]] = {}
    for relation_id, output_id in first.output.relation_id_mapping.items():
        final.setdefault(mapping[output_id], []).append(originals[relation_id])
    for group in final.values():
        ends = [
            (
                entity_map.get(r.source_entity_id, r.source_entity_id),
                entity_map.get(r.target_entity_id, r.target_entity_id),
            )
            for r in group
        ]
        if len(group) > 1:
            assert len({frozenset(e) for e in ends}) == 1, _report(batch, behaviour)
            directed = {e for e, r in zip(ends, group, strict=True) if _directed(r.name)}
            assert len(directed) <= 1, _report(batch, behaviour)


@SETTINGS
@given(batch=batches(), behaviour=st.sampled_from(list(BEHAVIOURS)))
def test_nothing_is_lost_and_endpoints_never_move(batch: Batch, behaviour: str) -> None:
    """(1) the mapping covers every valid input id and its values are exactly the outputs;
    (2) every output id is the file ``deduplicated_relations/{id}.json`` and the keys list
    matches; (3) every input chunk id survives in its output relation, and merged ids follow
    the id rules; (4) a relation joins records of one canonical pair only, its directed
    members point one way, and it carries the direction of its directed members (else of
    its representative)."""
    done = run(batch.objects, batch.entity_mapping, batch.config, behaviour)
    tally(batch, behaviour, done.output)
    check_invariants(batch, done)


def _outputs_as_input(done: Run) -> list[Any]:
    return [orjson.loads(done.store.objects[key]) for key in done.output.relation_keys]


@SETTINGS
@given(batch=batches(finish=True), behaviour=st.sampled_from(CONTENT_ONLY))
def test_running_on_its_own_output_changes_nothing(batch: Batch, behaviour: str) -> None:
    """(5) idempotence: the output files as the next input, with the same model behaviour,
    configuration and entity mapping.

    Fair only for models that answer from the content of the records they are shown, so a
    second look at an already-merged relation repeats the first verdict: rules only,
    ``valid`` (fuses with the first record's fields, which keeps the clustering key),
    ``split`` (idem, keyed by the numbers), ``garbage`` (never valid), ``partial``
    (invalid first attempt, then ``valid``) and ``doubtful`` (unsure where the names agree
    and the numbers do not; the unsure policy decides). A model that picks its behaviour by hashing
    the request (``mix``) or lists only some groups (``lazy``) may answer a second look
    differently, as a real model may. And only for runs that finish their work: a run cut
    short by ``max_rounds`` or ``semantic_batch_count`` leaves undecided pairs that a second
    run goes on to decide (``finish=True``). The entity mapping is passed again: a relation
    that became a self-loop under it is passed through with its original endpoints, and
    without the mapping a second run would deduplicate it as an ordinary one.

    Exact stage only (``semantic_merge=False``): nothing changes — same ids, same content,
    the mapping is the identity. Semantic stage: a merged relation shows its lead member's
    text with the attributes of all members, which the first run never scored; the second
    run scores it afresh and may merge it further (``test_semantic_fixpoint_*`` below shows
    the minimal case). What holds there: a relation the second run does not merge is
    byte-identical; a first run that merged nothing is a fixpoint; and across both runs no
    relation joins two canonical pairs or two reversed directed facts.
    """
    first = run(batch.objects, batch.entity_mapping, batch.config, behaviour)
    tally(batch, behaviour, first.output)
    again = run(_outputs_as_input(first), batch.entity_mapping, batch.config, behaviour)
    check_second_run(batch, first, again, behaviour)


@SETTINGS
@given(batch=batches(), behaviour=st.sampled_from(CACHEABLE))
def test_cached_rerun_asks_nothing_and_writes_the_same_bytes(batch: Batch, behaviour: str) -> None:
    """(6) same inputs + cache → byte-identical outputs, and the second run sends no request
    (every answer, valid or not, is replayed; provider errors are not answers, so the
    ``flaky`` model is left out)."""
    with tempfile.TemporaryDirectory() as directory:
        cache = RunCache(Path(directory) / "cache.sqlite")
        try:
            first = run(batch.objects, batch.entity_mapping, batch.config, behaviour, cache)
            second = run(batch.objects, batch.entity_mapping, batch.config, behaviour, cache)
        finally:
            cache.close()
    tally(batch, behaviour, first.output)
    if second.llm is not None:
        assert second.llm.requests == []
    assert second.output.result["llm_requests"] == 0
    assert second.output.relation_keys == first.output.relation_keys
    assert second.output.relation_id_mapping == first.output.relation_id_mapping
    assert second.store.objects.keys() == first.store.objects.keys()
    for key in first.output.relation_keys:
        assert second.store.objects[key] == first.store.objects[key]


@SETTINGS
@given(batch=batches(), behaviour=st.sampled_from(["none", "fieldless"]))
def test_a_merge_no_llm_wrote_keeps_every_member_description(batch: Batch, behaviour: str) -> None:
    """(6) nothing lost in a merge: where no LLM wrote the merged text (rules, pairwise
    verdicts, a bare mapping table), every member's distinct description survives in its
    output relation."""
    assume(batch.config["semantic_merge"] or behaviour == "none")
    done = run(batch.objects, batch.entity_mapping, batch.config, behaviour)
    originals = {r.relation_id: r for r in map(ExtractedRelation.model_validate, batch.valid)}
    by_id = {relation.relation_id: relation for relation in done.output.relations}
    for output_id, members in _inverse(done.output.relation_id_mapping).items():
        if len(members) > 1:
            descriptions = [originals[m].description for m in members]
            merged = by_id[output_id].description
            assert keeps_every_description(merged, descriptions), _report(batch, behaviour)


@SETTINGS
@given(batch=batches(finish=True))
def test_rules_only_holds_every_invariant(batch: Batch) -> None:
    """Properties (1)–(5) with no language model (``NoLanguageModel``), both stages."""
    done = run(batch.objects, batch.entity_mapping, batch.config, "none")
    tally(batch, "none", done.output)
    check_invariants(batch, done)
    again = run(_outputs_as_input(done), batch.entity_mapping, batch.config, "none")
    check_second_run(batch, done, again, "none")


# ---------------------------------------------------------------------------------------
# Regressions found by the properties above (minimal counterexamples), and known limits
# ---------------------------------------------------------------------------------------

CHAPEL = "They married in the chapel at Brannock in 1702."


def _relation(
    relation_id: str, source: str, target: str, name: str, **extra: Any
) -> dict[str, Any]:
    item: dict[str, Any] = {
        "relation_id": relation_id,
        "chunk_id": f"chunk_{relation_id}",
        "document_id": "doc_1",
        "source_entity_id": source,
        "target_entity_id": target,
        "source_entity_name": ENTITY_NAMES[source],
        "target_entity_name": ENTITY_NAMES[target],
        "type": "t",
        "name": name,
        "description": CHAPEL,
        "attributes": {},
        "source_chunk_ids": [],
    }
    item.update(extra)
    return item


def test_a_symmetric_representative_does_not_hide_its_directed_members() -> None:
    """Found by idempotence: "married to" B→A merged with "CEO of" B→A was written as
    "married to", so a second run merged it with "works for" A→B — two reversed directed
    facts in one relation, which the direction keep had refused. The merged relation now
    shows its first directed member. (The merges come from a model that merges whatever
    it is shown; the rules no longer merge names of other kinds.)"""
    records = [
        _relation("works", "e_ald", "e_bra", "works for"),
        _relation("married", "e_bra", "e_ald", "married to"),
        _relation("ceo", "e_bra", "e_ald", "CEO of"),
    ]
    config = {"semantic_merge": True}

    def married_with_ceo(request: LLMRequest, records: list[dict[str, Any]]) -> Answer:
        """Groups "married to" with "CEO of" and writes no fields: the rules' fields apply."""
        ids = [r["relation_id"] for r in records if r["name"] != "works for"]
        if request.task == "relation_judge":
            same = len(ids) == 2
            return {"verdict": "merge" if same else "keep_both", "reason": "scripted"}
        return {"mapping_table": {ids[0]: ids} if len(ids) > 1 else {}}

    first = run(records, None, config, married_with_ceo)
    mapping = first.output.relation_id_mapping
    assert mapping["married"] == mapping["ceo"] != mapping["works"]
    merged = next(r for r in first.output.relations if r.relation_id == mapping["ceo"])
    assert (merged.name, merged.source_entity_id) == ("CEO of", "e_bra")
    again = run(_outputs_as_input(first), None, config, married_with_ceo)
    assert again.output.relations == first.output.relations


def test_a_merged_directed_fact_keeps_its_own_direction() -> None:
    """The representative (first in input order) gives the direction of a symmetric
    relation only: a reversed symmetric representative merged with a directed relation
    must not turn the directed fact around."""
    records = [
        _relation("married", "e_bra", "e_ald", "married to", document_id="doc_2"),
        _relation("ceo", "e_ald", "e_bra", "CEO of"),
    ]
    done = run(records, None, {"semantic_merge": True}, "merge_all")
    (merged,) = done.output.relations
    assert (merged.source_entity_id, merged.target_entity_id, merged.name) == (
        "e_ald",
        "e_bra",
        "CEO of",
    )
    assert merged.document_id == "doc_2"  # still the representative's


def test_an_llm_group_refused_by_its_first_member_still_merges_the_rest() -> None:
    """Found by idempotence (``valid`` model): the model grouped reversed "CEO of" records
    with forward ones; the first member's direction keep refused the forward two, and they
    were left apart although nothing kept them from each other — a second run merged
    them. Refused members now join each other where no keep forbids it."""
    records = [
        _relation("back1", "e_bra", "e_ald", "CEO of", description="Heads the board."),
        _relation("fwd1", "e_ald", "e_bra", "CEO of", description="Chief executive, 1702."),
        _relation("fwd2", "e_ald", "e_bra", "CEO of", description="Runs the whole company."),
        _relation("back2", "e_bra", "e_ald", "CEO of", description="Chairs all meetings."),
    ]
    config = {
        "semantic_merge": True,
        "auto_merge_cosine": None,
        "auto_keep_cosine": -1.0,
    }
    done = run(records, None, config, "valid")
    mapping = done.output.relation_id_mapping
    assert mapping["fwd1"] == mapping["fwd2"] != mapping["back1"] == mapping["back2"]
    again = run(_outputs_as_input(done), None, config, "valid")
    assert again.output.relations == done.output.relations


def test_join_all_joins_refused_members_with_each_other() -> None:
    clusters = ConstrainedClusters(4)
    clusters.forbid(0, 2)
    clusters.forbid(0, 3)
    assert clusters.join_all([0, 1, 2, 3]) == [2, 3]
    assert clusters.clusters() == [[0, 1], [2, 3]]


def test_exact_stage_compares_every_pair_of_a_group() -> None:
    """With ``llm_batch_size=2``, a/b split and fill a batch; the old accumulating pass
    emitted them and never put a next to c+d, so the same fact (2019) stayed twice.
    Batches built around a leader with the parts it has not met compare every pair."""
    records = [
        _relation("a", "e_ald", "e_bra", "CEO of", description="Led since 2019."),
        _relation("b", "e_ald", "e_bra", "CEO of", description="Led since 1702."),
        _relation("c", "e_ald", "e_bra", "CEO of", description="Has led it since 2019."),
        _relation("d", "e_ald", "e_bra", "CEO of", description="Leader since 2019."),
    ]
    done = run(records, None, {"semantic_merge": False, "llm_batch_size": 2}, "split")
    mapping = done.output.relation_id_mapping
    assert mapping["a"] == mapping["c"] == mapping["d"] != mapping["b"]

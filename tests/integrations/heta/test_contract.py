"""The swap itself: relmerge's step where a recipe had heta-framework's own, and what each
does with the same batch (the same mapping; a self-loop after entity mapping; a listed key
that is missing), and what the step declares and cleans up."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest
from heta_framework.common.stores.object import LocalObjectStore
from heta_framework.kb import steps as heta_steps
from heta_framework.kb.components import KnowledgeModels, KnowledgeStores
from heta_framework.kb.knowledge_base import KnowledgeBase
from heta_framework.kb.recipe import KnowledgeRecipe, RecipeItem

from relmerge import DeduplicateRelations as CoreStep
from relmerge import DeduplicateRelationsConfig as CoreConfig
from relmerge import DictContext
from relmerge.errors import ConfigError, InputError
from relmerge.integrations.heta import DeduplicateRelations, DeduplicateRelationsConfig
from relmerge.stores import MemoryStore
from tests.integrations.heta.data import ENTITY_MAPPING, GOLD, RECORDS
from tests.integrations.heta.support import (
    HetaProtocolEmbedder,
    HetaProtocolModel,
    build,
    files,
    put_relations,
    recipe,
)


def _artifacts(keys: list[str], mapping: dict[str, str] | None = None) -> dict[str, Any]:
    return {"relation_keys": keys, "entity_id_mapping": mapping or ENTITY_MAPPING}


@pytest.mark.parametrize("llm_batch_size", [20, 1])
async def test_the_same_mapping_as_hetas_own_step(tmp_path: Path, llm_batch_size: int) -> None:
    """Exact-key groups fused by the model: both steps map every id alike and write the
    same relations."""
    outputs = {}
    steps: list[tuple[str, RecipeItem]] = [
        (
            "heta",
            heta_steps.DeduplicateRelations(
                heta_steps.DeduplicateRelationsConfig(
                    semantic_merge=False, llm_batch_size=llm_batch_size
                )
            ),
        ),
        (
            "relmerge",
            DeduplicateRelations(
                DeduplicateRelationsConfig(semantic_merge=False, llm_batch_size=llm_batch_size)
            ),
        ),
    ]
    for name, step in steps:
        store = LocalObjectStore(tmp_path / name)
        keys = await put_relations(store, RECORDS)
        result = await build(step, store, _artifacts(keys), HetaProtocolModel(fuse_all=True))
        assert result.record.status == "succeeded", result.record.step_records[0].error
        outputs[name] = (result.artifacts, tmp_path / name)
    (heta, heta_root), (ours, our_root) = outputs["heta"], outputs["relmerge"]
    assert ours["relation_id_mapping"] == heta["relation_id_mapping"]
    assert len(set(ours["relation_id_mapping"].values())) == len(GOLD) - 2  # c1 + c2 + c4
    assert set(ours["deduplicated_relation_keys"]) == set(heta["deduplicated_relation_keys"])
    for key in heta["deduplicated_relation_keys"]:
        assert orjson.loads((our_root / key).read_bytes()) == orjson.loads(
            (heta_root / key).read_bytes()
        )
    heta_result, our_result = (
        heta["deduplicate_relations_result"],
        ours["deduplicate_relations_result"],
    )
    for field in ("input_relation_count", "output_relation_count", "exact_merge_count"):
        assert getattr(our_result, field) == getattr(heta_result, field), field


async def test_a_self_loop_after_entity_mapping_is_an_issue_not_a_crash(tmp_path: Path) -> None:
    """Heta's own step fails the build; relmerge's keeps the relation and reports it."""
    mapping = {**ENTITY_MAPPING, "e_oslo": "e_norrbeck"}  # h1: Norrbeck -> Oslo, one entity
    statuses = {}
    steps: list[tuple[str, RecipeItem]] = [
        (
            "heta",
            heta_steps.DeduplicateRelations(
                heta_steps.DeduplicateRelationsConfig(semantic_merge=False)
            ),
        ),
        ("relmerge", DeduplicateRelations(DeduplicateRelationsConfig(semantic_merge=False))),
    ]
    for name, step in steps:
        store = LocalObjectStore(tmp_path / name)
        keys = await put_relations(store, RECORDS)
        result = await build(
            step, store, _artifacts(keys, mapping), HetaProtocolModel(GOLD, RECORDS)
        )
        statuses[name] = result
    heta, ours = statuses["heta"], statuses["relmerge"]
    assert heta.record.status == "failed"
    assert "source_entity_id and target_entity_id must be different" in str(
        heta.record.step_records[0].error
    )
    assert ours.record.status == "succeeded"
    (issue,) = ours.issues
    assert issue.code == "self_loop_after_entity_mapping"
    assert (issue.subject.type, issue.subject.id) == ("relation", "h1")
    assert ours.artifacts["relation_id_mapping"]["h1"] == "h1"
    kept = orjson.loads((tmp_path / "relmerge" / "deduplicated_relations" / "h1.json").read_bytes())
    assert kept["target_entity_id"] == "e_oslo"  # the original record, not a self-loop


async def test_a_missing_listed_key_becomes_a_rejected_record(tmp_path: Path) -> None:
    store = LocalObjectStore(tmp_path)
    keys = await put_relations(store, RECORDS)
    listed = [*keys[:3], "relations/gone.json", *keys[3:]]
    step = DeduplicateRelations(DeduplicateRelationsConfig(semantic_merge=False))
    result = await build(step, store, _artifacts(listed), HetaProtocolModel(GOLD, RECORDS))
    assert result.record.status == "succeeded"
    assert set(result.artifacts["relation_id_mapping"]) == set(GOLD)  # the rest is all there
    (issue,) = result.issues
    assert issue.code == "relation_rejected"
    assert (issue.subject.type, issue.subject.id) == ("relation_record", "relations/gone.json")
    assert issue.message == "no object 'relations/gone.json' in stores.objects"
    outcome = result.artifacts["deduplicate_relations_result"]
    assert outcome.rejected_count == 1 and outcome.details["rejected_count"] == 1
    (rejected_log,) = [key for key in outcome.log_keys if key.endswith("/rejected.jsonl")]
    assert issue.resolution is not None and rejected_log in issue.resolution.outcome
    (line,) = (tmp_path / rejected_log).read_bytes().splitlines()
    assert orjson.loads(line) == {
        "origin": "relations/gone.json",
        "reason": "no object 'relations/gone.json' in stores.objects",
        "record": None,
    }


@pytest.mark.parametrize("semantic", [True, False], ids=["semantic", "exact-only"])
async def test_the_cleanup_plan_removes_exactly_what_the_step_wrote(
    tmp_path: Path, semantic: bool
) -> None:
    """Through heta-framework's own lifecycle: create a knowledge base, load it back from
    what it persisted, delete it. The store is left as it was before the build."""
    root = tmp_path / "kb"
    store = LocalObjectStore(root)
    keys = await put_relations(store, RECORDS)
    before = files(root)
    step = DeduplicateRelations(DeduplicateRelationsConfig(semantic_merge=semantic))
    the_recipe = recipe(
        step, store, HetaProtocolModel(GOLD, RECORDS), HetaProtocolEmbedder() if semantic else None
    )
    kb = await KnowledgeBase.create(
        recipe=the_recipe, name="relations kb", initial_artifacts=_artifacts(keys)
    )
    assert kb.run_record.status == "succeeded"
    written = {key for key in files(root) - before if not key.startswith("_heta/")}
    planned = {target.value for target in step.cleanup_plan(kb.run_record.artifacts).targets}
    assert planned == written
    assert any(key.endswith("/decisions.jsonl") for key in planned)
    loaded = await KnowledgeBase.load(recipe=the_recipe, name="relations kb")
    deleted = await loaded.delete()
    assert set(deleted.deleted_object_keys) == written and deleted.issues == ()
    assert files(root) == before


def test_requirements_and_artifacts_are_those_of_hetas_own_step() -> None:
    configs: list[dict[str, Any]] = [
        {},
        {"semantic_merge": False, "entity_id_mapping_artifact": None},
        {
            "relation_keys_artifact": "ontology_relation_keys",
            "deduplicated_relation_keys_artifact": "graph_relation_keys",
            "object_store": "kb",
            "language_model": "judge",
            "embedding_model": "small",
        },
    ]
    for fields in configs:
        ours = DeduplicateRelations(DeduplicateRelationsConfig(**fields))
        theirs = heta_steps.DeduplicateRelations(heta_steps.DeduplicateRelationsConfig(**fields))
        assert ours.name == theirs.name
        assert ours.requirements == theirs.requirements
        assert theirs.capabilities.artifacts < ours.capabilities.artifacts
        assert ours.capabilities.artifacts - theirs.capabilities.artifacts == {
            "deduplicate_relations_log_keys"
        }
        assert ours.capabilities.writes[0].endswith("/{relation_id}.json")


async def test_named_components_are_found_and_validated(tmp_path: Path) -> None:
    store = LocalObjectStore(tmp_path)
    keys = await put_relations(store, RECORDS)
    step = DeduplicateRelations(
        DeduplicateRelationsConfig(semantic_merge=False, object_store="kb", language_model="judge")
    )
    missing = KnowledgeRecipe(steps=(step,)).validate(initial_artifacts=_artifacts(keys))
    assert {issue.details["component"] for issue in missing.errors} == {
        "stores.objects.kb",
        "models.language.judge",
    }
    named = KnowledgeRecipe(
        models=KnowledgeModels(named={"language.judge": HetaProtocolModel(GOLD, RECORDS)}),
        stores=KnowledgeStores(named={"objects.kb": store}),
        steps=(step,),
    )
    assert named.validate(initial_artifacts=_artifacts(keys)).valid
    from heta_framework.kb.builder import KnowledgeBaseBuilder

    result = await KnowledgeBaseBuilder().build(named, initial_artifacts=_artifacts(keys))
    assert result.record.status == "succeeded"
    plan = step.cleanup_plan(result.artifacts)
    assert {target.component for target in plan.targets} == {"stores.objects.kb"}


def test_the_config_takes_the_seeds_fields_hetas_and_relmerges() -> None:
    config = DeduplicateRelationsConfig(
        deduplicated_relations_prefix="dedup",
        relation_keys_artifact="relation_keys",
        entity_id_mapping_artifact=None,
        semantic_merge=True,
        similarity_threshold=0.85,
        max_rounds=5,
        llm_batch_size=1,
        semantic_batch_size=50,
        semantic_batch_count=2,
        max_attempts=2,
        temperature=0.0,
        deduplicated_relation_keys_artifact="graph_relation_keys",
        object_store="kb",
        unsure_policy="merge",
        concurrency=4,
    )
    assert config.llm_batch_size == 1 and config.object_store == "kb"
    with pytest.raises(ConfigError, match="object_store"):
        DeduplicateRelationsConfig(object_store="a.b")
    with pytest.raises(ConfigError, match="deduplicated_relation_keys_artifact"):
        DeduplicateRelationsConfig(deduplicated_relation_keys_artifact=" ")


async def test_a_component_of_the_wrong_kind_is_named_in_the_error(tmp_path: Path) -> None:
    store = LocalObjectStore(tmp_path)
    keys = await put_relations(store, RECORDS)
    step = DeduplicateRelations()
    result = await build(step, store, _artifacts(keys), HetaProtocolModel(GOLD, RECORDS), object())
    assert result.record.status == "failed"
    error = result.record.step_records[0].error or ""
    assert error.startswith("ConfigError: component 'models.embedding' is neither")


async def test_relmerges_own_step_points_a_heta_model_to_this_integration() -> None:
    context = DictContext(
        {"stores.objects": MemoryStore(), "models.language": HetaProtocolModel()},
        {"relation_keys": [], "entity_id_mapping": {}},
    )
    step = CoreStep(CoreConfig(semantic_merge=False))
    with pytest.raises(InputError, match=r"relmerge\.integrations\.heta"):
        await step.run(context)


class _PairKeyModel:
    """A model in heta-framework's protocol that answers as the seed's example does: a
    mapping table keyed by ``"Node1||Node2"`` and one merged relation with its own
    description (``borrow``: the description also copies a record the batch does not
    have, as a careless model summarising everything it saw would). It keeps every
    record apart in a packed request, and records what each request showed."""

    def __init__(self, batch: list[dict[str, Any]], borrow: bool = False) -> None:
        self.batch = {str(r["description"]) for r in batch}
        self.borrow = borrow
        self.shown: list[list[dict[str, Any]]] = []

    @property
    def model_name(self) -> str:
        return "heta-pair-keys"

    async def invoke(self, request: Any) -> Any:
        from heta_framework.common.models import ModelResult, TokenUsage

        prompt = request.prompt or ""
        data = orjson.loads(prompt.split("```json\n", 1)[1].split("\n```", 1)[0])
        if data and "records" in data[0]:  # a packed request: its blocks' records
            records = [r for block in data for r in block["records"]]
            answer: dict[str, Any] = {
                "blocks": [{"block": b["block"], "mapping_table": {}} for b in data]
            }
        elif "relation_judge" in (request.system_prompt or ""):
            records = data
            answer = {"verdict": "keep_both", "reason": "two facts"}
        else:
            records = data
            first = records[0]
            pair = f"{first['source_entity_name']}||{first['target_entity_name']}"
            text = "Ada Lind has led Norrbeck Systems as its chief executive since 2015."
            if self.borrow:
                text += " " + next(
                    str(r["description"]) for r in records if r["description"] not in self.batch
                )
            entry = {
                "Node1": first["source_entity_name"],
                "Node2": first["target_entity_name"],
                "Relation": "ceo of",
                "Type": "employment",
                "Description": text,
                "Attr": {},
                "merge_tag": True,
            }
            answer = {"relation_list": [entry], "mapping_table": {pair: [pair]}}
        self.shown.append(records)
        text = orjson.dumps(answer).decode()
        return ModelResult(
            text=text,
            parsed=answer,
            model_name=self.model_name,
            token_usage=TokenUsage(len(prompt) // 4, len(text) // 4, None),
            finish_reason="stop",
        )

    async def invoke_many(self, requests: list[Any]) -> list[Any]:
        return [await self.invoke(request) for request in requests]

    async def stream(self, request: Any) -> Any:
        from heta_framework.common.models import ModelChunk

        result = await self.invoke(request)
        yield ModelChunk(text_delta=result.text, model_name=self.model_name)


def _ceo_records() -> list[dict[str, Any]]:
    """Three wordings of one fact between the same two entities, one way."""
    texts = [
        "Ada Lind became CEO of Norrbeck Systems in 2015.",
        "Since 2015 Ada Lind has been the chief executive of Norrbeck Systems.",
        "Norrbeck Systems is run by Ada Lind, its CEO from 2015.",
    ]
    return [
        {
            "relation_id": f"ceo_{i}",
            "chunk_id": f"chunk_{i}",
            "document_id": "doc_1",
            "source_entity_id": "e_ada",
            "target_entity_id": "e_norrbeck",
            "source_entity_name": "Ada Lind",
            "target_entity_name": "Norrbeck Systems",
            "type": "employment",
            "name": name,
            "description": text,
            "attributes": {},
            "source_chunk_ids": [f"chunk_{i}"],
        }
        for i, (name, text) in enumerate(
            zip(["ceo of", "chief executive of", "runs"], texts, strict=True)
        )
    ]


_LLM_ONLY = {"auto_merge_cosine": None, "auto_keep_cosine": -1.0}


@pytest.mark.parametrize("borrow", [False, True])
async def test_a_pair_keyed_answer_keeps_the_models_description_beside_canaries(
    tmp_path: Path, borrow: bool
) -> None:
    """Seed contract: ``"上海市||徐汇区": ["上海市||徐汇区"]`` names the records between two
    entities. With canary records in the same request (the default), the real records
    merge under the model's own Description; one that copies a canary's text is not
    taken (the members' texts are joined instead): made-up facts never reach the graph."""
    batch = _ceo_records()
    store = LocalObjectStore(tmp_path / "objects")
    keys = await put_relations(store, batch)
    model = _PairKeyModel(batch, borrow)
    step = DeduplicateRelations(DeduplicateRelationsConfig(**_LLM_ONLY))
    result = await build(step, store, _artifacts(keys, {}), model, HetaProtocolEmbedder())
    assert result.record.status == "succeeded", result.record.step_records[0].error
    (shown,) = model.shown
    assert len(shown) > len(batch)  # canary records rode in the request
    mapping = result.artifacts["relation_id_mapping"]
    assert len(set(mapping.values())) == 1
    (key,) = result.artifacts["deduplicated_relation_keys"]
    merged = orjson.loads((tmp_path / "objects" / key).read_bytes())
    if borrow:
        assert all(r["description"] in merged["description"] for r in batch)
        assert "chief executive since 2015" not in merged["description"]
    else:
        assert merged["description"] == (
            "Ada Lind has led Norrbeck Systems as its chief executive since 2015."
        )


async def test_no_request_holds_more_records_than_semantic_batch_size(tmp_path: Path) -> None:
    """Seed contract: ``semantic_batch_size`` is what the model sees of the batch at once.
    Four blocks of two records, the size 3: no request, packed or not, shows more than
    three of the batch's records (canary records beside them)."""
    batch = []
    for block in range(4):
        for item in _ceo_records()[:2]:
            batch.append(
                {
                    **item,
                    "relation_id": f"{item['relation_id']}_{block}",
                    "source_entity_id": f"e_person{block}",
                    "source_entity_name": f"Person {block}",
                    "description": item["description"].replace("Ada Lind", f"Person {block}"),
                }
            )
    store = LocalObjectStore(tmp_path / "objects")
    keys = await put_relations(store, batch)
    model = _PairKeyModel(batch)
    step = DeduplicateRelations(DeduplicateRelationsConfig(**_LLM_ONLY, semantic_batch_size=3))
    result = await build(step, store, _artifacts(keys, {}), model, HetaProtocolEmbedder())
    assert result.record.status == "succeeded", result.record.step_records[0].error
    texts = {r["description"] for r in batch}
    seen = [{r["description"] for r in shown} & texts for shown in model.shown]
    assert seen and max(len(s) for s in seen) <= 3
    assert set().union(*seen) == texts  # every record was asked about

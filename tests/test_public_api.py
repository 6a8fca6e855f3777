from __future__ import annotations

import relmerge


def test_public_names_are_curated() -> None:
    assert sorted(relmerge.__all__) == [
        "Decision",
        "DeduplicateRelations",
        "DeduplicateRelationsConfig",
        "DictContext",
        "ExtractedRelation",
        "JudgeContext",
        "RelationJudge",
        "RelmergeError",
        "RunCache",
        "StepIssue",
        "StoreMerge",
        "Verdict",
    ]
    for name in relmerge.__all__:
        assert getattr(relmerge, name) is not None


def test_step_declares_requirements_and_artifacts() -> None:
    step = relmerge.DeduplicateRelations()
    assert step.requirements.components == ("stores.objects", "models.language", "models.embedding")
    assert step.requirements.artifacts == ("relation_keys", "entity_id_mapping")
    assert step.capabilities.produces == (
        "deduplicate_relations_result",
        "deduplicated_relation_keys",
        "relation_id_mapping",
    )
    no_semantic = relmerge.DeduplicateRelations(
        relmerge.DeduplicateRelationsConfig(semantic_merge=False, entity_id_mapping_artifact=None)
    )
    assert "models.embedding" not in no_semantic.requirements.components
    assert no_semantic.requirements.artifacts == ("relation_keys",)

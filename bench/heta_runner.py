"""Time the reference step, heta-framework 0.1.2 ``DeduplicateRelations``, on a JSONL batch.

Run it with the Python of a venv that has ``heta-framework==0.1.2`` (``bench/exact_stage.py``
creates ``bench/.venv-heta`` for this), never with relmerge's venv; it does not import
relmerge::

    bench/.venv-heta/bin/python bench/heta_runner.py --input relations.jsonl [--store memory]

Input: one relation per line with the ``ExtractedRelation`` fields. The runner

* puts every line, re-serialised compactly like Heta's ``ExtractedRelation.to_json``, into
  an object store under ``relations/<line number>.json`` (setup, not timed) — the step
  itself reads and parses them, as in a real build;
* builds Heta's own ``KnowledgeRecipe`` (models.language + stores.objects) and
  ``StepExecutionContext`` with artifact ``relation_keys``;
* runs ``DeduplicateRelations(DeduplicateRelationsConfig(semantic_merge=False,
  entity_id_mapping_artifact=None))`` with an instant fake language model that answers the
  exact-stage merge prompt by keeping the first input relation's type, name, description
  and attributes (the counterpart of relmerge's ``instant_merge_model``);
* times only ``await step.run(context)`` and prints one JSON line::

      {"relations": N, "seconds": S, "output_relations": M}

  ``--stats`` adds ``llm_calls``, ``exact_merge_count``, ``exact_round_count`` and
  ``failed_group_count``. If the step raises, ``output_relations`` is null, ``error`` holds
  the exception and the exit status is 1.

Stores: ``memory`` (default; a dict-backed ``ObjectStoreProtocol``, since Heta 0.1.2 ships
no in-memory object store) or ``local`` (Heta's ``LocalObjectStore`` on a temp directory).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Sequence
from typing import Any

from heta_framework.common.models import (  # type: ignore[import-not-found]
    ModelChunk,
    ModelResult,
)
from heta_framework.common.models.protocols import (  # type: ignore[import-not-found]
    LanguageModelProtocol,
)
from heta_framework.common.stores.object import (  # type: ignore[import-not-found]
    LocalObjectStore,
    ObjectInfo,
    ObjectStoreProtocol,
    validate_object_key,
    validate_object_prefix,
)
from heta_framework.kb.builder import StepExecutionContext  # type: ignore[import-not-found]
from heta_framework.kb.components import (  # type: ignore[import-not-found]
    KnowledgeModels,
    KnowledgeStores,
)
from heta_framework.kb.recipe import KnowledgeRecipe  # type: ignore[import-not-found]
from heta_framework.kb.steps import (  # type: ignore[import-not-found]
    DeduplicateRelations,
    DeduplicateRelationsConfig,
)

# Heta's exact-stage prompts (first attempt and retry) end with "Relations:\n<json array>\n".
_RELATIONS_MARKER = "\nRelations:\n"


class MemoryObjectStore:
    """A dict of bytes with Heta's ``ObjectStoreProtocol`` surface and key validation."""

    def __init__(self) -> None:
        self.objects: dict[str, bytes] = {}

    async def put(self, key: str, data: bytes) -> None:
        self.objects[validate_object_key(key)] = bytes(data)

    async def get(self, key: str) -> bytes:
        try:
            return self.objects[validate_object_key(key)]
        except KeyError:
            raise FileNotFoundError(key) from None

    async def exists(self, key: str) -> bool:
        return validate_object_key(key) in self.objects

    async def list(self, prefix: str = "") -> list[Any]:
        prefix = validate_object_prefix(prefix)
        return [
            ObjectInfo(key=key, size=len(data))
            for key, data in sorted(self.objects.items())
            if key.startswith(prefix)
        ]

    async def delete(self, key: str) -> None:
        self.objects.pop(validate_object_key(key), None)

    async def aclose(self) -> None:
        return None


class InstantMergeModel:
    """Heta ``LanguageModelProtocol`` that merges every batch into its first relation, at once.

    The answer keeps the first relation's type/name/description/attributes and never names
    endpoints, so a group keeps its key. ``parsed`` is filled only when the request carries
    a ``response_schema`` (as Heta's real client does); the semantic-stage prompt (not used
    here) gets "merge nothing".
    """

    def __init__(self) -> None:
        self.calls = 0

    @property
    def model_name(self) -> str:
        return "instant-merge"

    async def invoke(self, request: Any) -> Any:
        self.calls += 1
        prompt: str = request.prompt or ""
        payload: dict[str, Any]
        if request.response_schema is not None and _RELATIONS_MARKER in prompt:
            first = json.loads(prompt.rsplit(_RELATIONS_MARKER, 1)[1])[0]
            payload = {
                "relation": {
                    "type": first["type"],
                    "name": first["name"],
                    "description": first["description"],
                    "attributes": first.get("attributes") or {},
                }
            }
        else:
            payload = {"relation_list": [], "mapping_table": {}}
        return ModelResult(
            text=json.dumps(payload, ensure_ascii=False),
            parsed=payload if request.response_schema is not None else None,
            model_name=self.model_name,
            finish_reason="stop",
            trace_context=request.trace_context,
        )

    async def invoke_many(self, requests: Sequence[Any]) -> list[Any]:
        return [await self.invoke(request) for request in requests]

    async def stream(self, request: Any) -> AsyncIterator[Any]:
        result = await self.invoke(request)
        yield ModelChunk(
            text_delta=result.text,
            model_name=self.model_name,
            finish_reason="stop",
            trace_context=request.trace_context,
        )

    async def aclose(self) -> None:
        return None


def read_jsonl(path: str) -> list[bytes]:
    """Each non-blank line as compact UTF-8 JSON (what Heta's ``to_json_bytes`` writes)."""
    records: list[bytes] = []
    with open(path, encoding="utf-8") as handle:
        for number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            try:
                value = json.loads(line)
            except json.JSONDecodeError as error:
                raise SystemExit(f"{path}:{number}: invalid JSON: {error}") from None
            text = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
            records.append(text.encode("utf-8"))
    return records


async def bench(records: list[bytes], store: Any, stats: bool) -> dict[str, Any]:
    """Load ``records`` into ``store``, run the step once, report the timing of ``run``."""
    keys: list[str] = []
    for index, data in enumerate(records):
        key = f"relations/{index:07d}.json"
        await store.put(key, data)
        keys.append(key)

    model = InstantMergeModel()
    if not isinstance(model, LanguageModelProtocol) or not isinstance(store, ObjectStoreProtocol):
        raise TypeError("the fake model or the store does not satisfy Heta's protocols")
    config = DeduplicateRelationsConfig(semantic_merge=False, entity_id_mapping_artifact=None)
    step = DeduplicateRelations(config)
    recipe = KnowledgeRecipe(
        models=KnowledgeModels(language=model),
        stores=KnowledgeStores(objects=store),
        steps=(step,),
    )
    recipe.require_valid(initial_artifacts={config.relation_keys_artifact})
    context = StepExecutionContext(
        recipe=recipe, artifacts={config.relation_keys_artifact: tuple(keys)}
    )

    error: str | None = None
    started = time.perf_counter()
    try:
        await step.run(context)
    except Exception as exc:  # report the reference's crash instead of a traceback
        error = f"{type(exc).__name__}: {exc}"
    seconds = time.perf_counter() - started

    report: dict[str, Any] = {"relations": len(records), "seconds": round(seconds, 6)}
    if error is not None:
        report["output_relations"] = None
        report["error"] = error
        return report
    result = context.artifacts["deduplicate_relations_result"]
    report["output_relations"] = int(result.output_relation_count)
    if stats:
        report["llm_calls"] = model.calls
        report["exact_merge_count"] = int(result.exact_merge_count)
        report["exact_round_count"] = int(result.exact_round_count)
        report["failed_group_count"] = int(result.failed_group_count)
    return report


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Time heta-framework's DeduplicateRelations.")
    parser.add_argument("--input", required=True, help="relations, one JSON object per line")
    parser.add_argument("--store", choices=("memory", "local"), default="memory")
    parser.add_argument("--stats", action="store_true", help="add LLM calls and merge counts")
    args = parser.parse_args(argv)

    records = read_jsonl(args.input)
    if args.store == "local":
        with tempfile.TemporaryDirectory(prefix="heta-bench-") as root:
            report = asyncio.run(bench(records, LocalObjectStore(root), args.stats))
    else:
        report = asyncio.run(bench(records, MemoryObjectStore(), args.stats))
    print(json.dumps(report))
    return 1 if "error" in report else 0


if __name__ == "__main__":
    sys.exit(main())

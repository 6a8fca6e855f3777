"""A run's fingerprint: the sha256 of what determines its outputs.

``relmerge run`` records it in OUT (a re-run with the same fingerprint resumes, another
one is refused without ``--overwrite``); the step names its logs' prefix with it. Both
compute it with :func:`run_fingerprint`, over these parts, in this order:

1. the input records, hashed as they stream by (``io.outdir.Fingerprint``);
2. the decision rules and vocabulary (``decide.rules_fingerprint``);
3. the entity mapping;
4. the step's settings, less those that change how a run goes, not what it outputs;
5. the models, as the caller knows them: the CLI by its ``[llm]`` and ``[embedding]``
   settings (:func:`settings_models`), the step by its components' names;
6. the entities (ids, names, profiles, types).

Which settings are left out is the caller's, and kept as it has always been, so that an
upgrade changes no fingerprint and a run made before it still resumes: the CLI leaves out
every operational setting (:data:`OPERATIONAL`); the step leaves out ``concurrency`` and
``logs_prefix``, where its logs go (:data:`STEP_EXCLUDED`).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from relmerge.config import DeduplicateRelationsConfig, EmbeddingSettings, LLMSettings
from relmerge.decide import rules_fingerprint
from relmerge.io.outdir import Fingerprint
from relmerge.io.records import RawRecord
from relmerge.model import EntityContext

# Settings that change how a run goes, not what it outputs: a run killed with one value
# may be resumed with another.
OPERATIONAL = frozenset(
    {
        "concurrency",
        "api_key_env",
        "timeout",
        "max_retries",
        "requests_per_minute",
        "price_in",
        "price_out",
        "startup_wait",
        "llm_breaker_groups",
    }
)
STEP_EXCLUDED = frozenset({"concurrency", "logs_prefix"})


def run_fingerprint(
    hashed: Fingerprint,
    *,
    mapping: Any,
    config: DeduplicateRelationsConfig,
    models: Sequence[Any],
    entities: Sequence[EntityContext],
    excluded: frozenset[str] = OPERATIONAL,
) -> str:
    """The fingerprint once ``hashed`` has seen every input record (see the module)."""
    return hashed.hexdigest(
        rules_fingerprint(),
        mapping,
        config.model_dump(mode="json", exclude=set(excluded)),
        *models,
        [entity.__dict__ for entity in entities],
    )


def settings_models(llm: LLMSettings, embedding: EmbeddingSettings) -> list[Any]:
    """The models as the CLI knows them: their settings, less the operational ones."""
    return [
        llm.model_dump(mode="json", exclude=set(OPERATIONAL)),
        embedding.model_dump(mode="json", exclude=set(OPERATIONAL)),
    ]


def records_fingerprint(raws: Iterable[RawRecord]) -> Fingerprint:
    """``raws`` hashed (read once, to the end)."""
    hashed = Fingerprint()
    for _ in hashed.records(raws):
        pass
    return hashed

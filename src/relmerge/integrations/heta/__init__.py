"""relmerge as a heta-framework build step (``pip install 'relmerge[heta]'``).

A recipe takes it in place of heta-framework's own step, built the same way::

    from relmerge.integrations.heta import DeduplicateRelations, DeduplicateRelationsConfig

    step = DeduplicateRelations(DeduplicateRelationsConfig(semantic_merge=False))

It takes the recipe's components as they are (heta-framework's language and embedding
models, its object stores; relmerge's own too) and returns heta-framework ``StepIssue``\\ s,
so they reach the build report.
"""

import os

# heta-framework's models call litellm, which downloads its model cost map from the
# internet when first imported unless told to use the copy it ships. A build step must not
# reach the network on its own; a user who wants the download sets the variable to False.
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

try:
    import heta_framework  # noqa: F401
except ModuleNotFoundError as error:  # pragma: no cover - exercised in a subprocess
    raise ModuleNotFoundError(
        "relmerge.integrations.heta needs heta-framework: pip install 'relmerge[heta]' "
        "(heta-framework supports Python 3.10 to 3.12)",
        name=error.name,
    ) from None

from relmerge.integrations.heta.config import DeduplicateRelationsConfig
from relmerge.integrations.heta.result import DeduplicateRelationsResult
from relmerge.integrations.heta.step import DeduplicateRelations
from relmerge.integrations.heta.store_step import (
    MergeIntoStore,
    MergeIntoStoreConfig,
    MergeIntoStoreResult,
)

__all__ = [
    "DeduplicateRelations",
    "DeduplicateRelationsConfig",
    "DeduplicateRelationsResult",
    "MergeIntoStore",
    "MergeIntoStoreConfig",
    "MergeIntoStoreResult",
]

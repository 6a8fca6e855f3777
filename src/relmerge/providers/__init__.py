"""Model providers: the protocols (``base``, ``embedding``), relmerge's own providers
(registered by ``builtin`` in ``relmerge.registry``, as a plugin's are), the wrappers, and
the composition root that opens a provider from its settings and builds its stack
(``stack``)."""

from __future__ import annotations

from relmerge.providers.base import LanguageModel, LLMRequest, LLMResult, NoLanguageModel
from relmerge.providers.embedding import CachedEmbedder, EmbeddingModel, HashEmbedder
from relmerge.providers.preflight import preflight
from relmerge.providers.stack import (
    ModelStack,
    build_embedder_stack,
    build_model_stack,
    get_embedder,
    get_llm,
)

__all__ = [
    "CachedEmbedder",
    "EmbeddingModel",
    "HashEmbedder",
    "LLMRequest",
    "LLMResult",
    "LanguageModel",
    "ModelStack",
    "NoLanguageModel",
    "build_embedder_stack",
    "build_model_stack",
    "get_embedder",
    "get_llm",
    "preflight",
]

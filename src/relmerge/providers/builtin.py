"""relmerge's own providers, registered the way a plugin registers its own.

The hook :func:`register` is named by relmerge's entry point in the group
``relmerge.providers`` (see ``relmerge.registry``); each factory takes the settings of
its section and returns the bare provider, which ``relmerge.providers.stack`` wraps.
Heavy imports (the OpenAI SDK client, the default embedder's model) wait for the
factory: listing the providers for ``--help`` loads nothing.
"""

from __future__ import annotations

import os

from relmerge.config import EmbeddingSettings, LLMSettings
from relmerge.errors import ConfigError
from relmerge.providers.base import LanguageModel, NoLanguageModel
from relmerge.providers.embedding import EmbeddingModel, HashEmbedder
from relmerge.registry import ProviderRegistry


def register(registry: ProviderRegistry) -> None:
    """relmerge's hook: two language models and three embedders."""
    registry.add_llm("none", no_llm, "rules only: the tiers decide, the rest is for review")
    registry.add_llm("openai", openai_llm, "any OpenAI-compatible chat endpoint")
    registry.add_embedder("use", use_embedder, "the offline multilingual USE (the default)")
    registry.add_embedder("hash", hash_embedder, "hashed character n-grams, no model")
    registry.add_embedder("openai", openai_embedder, "any OpenAI-compatible embeddings endpoint")


def no_llm(settings: LLMSettings) -> LanguageModel:
    return NoLanguageModel()


def openai_llm(settings: LLMSettings) -> LanguageModel:
    from relmerge.providers.openai_compat import OpenAICompatibleModel

    if not settings.base_url or not settings.model:
        raise ConfigError("an OpenAI-compatible LLM needs both --llm-base-url and --llm-model")
    return OpenAICompatibleModel(
        base_url=settings.base_url,
        model=settings.model,
        api_key=os.environ.get(settings.api_key_env),
        timeout=settings.timeout,
        max_retries=settings.max_retries,
        response_format=settings.response_format,
        startup_wait=settings.startup_wait,
    )


def use_embedder(settings: EmbeddingSettings) -> EmbeddingModel:
    from relmerge.providers.use_embed import UseEmbedder

    return UseEmbedder()


def hash_embedder(settings: EmbeddingSettings) -> EmbeddingModel:
    return HashEmbedder()


def openai_embedder(settings: EmbeddingSettings) -> EmbeddingModel:
    from relmerge.providers.openai_embed import OpenAIEmbedder

    if not settings.base_url or not settings.model:
        raise ConfigError(
            "an OpenAI-compatible embedder needs --embedding-base-url and --embedding-model"
        )
    return OpenAIEmbedder(
        base_url=settings.base_url,
        model=settings.model,
        api_key=os.environ.get(settings.api_key_env),
        startup_wait=settings.startup_wait,
    )

"""Model providers and the registry that builds one from settings."""

from __future__ import annotations

import os

from relmerge.cache import RunCache
from relmerge.config import EmbeddingSettings, LLMSettings
from relmerge.errors import ConfigError
from relmerge.providers.base import LanguageModel, LLMRequest, LLMResult, NoLanguageModel
from relmerge.providers.cached import PersistentEmbedder
from relmerge.providers.embedding import CachedEmbedder, EmbeddingModel, HashEmbedder
from relmerge.providers.limits import RateLimitedModel
from relmerge.providers.preflight import preflight


def get_llm(settings: LLMSettings) -> LanguageModel:
    """Build the language model named by ``settings`` (``none`` or ``openai``), rate-limited
    when ``requests_per_minute`` is set."""
    if settings.provider == "none":
        return NoLanguageModel()
    from relmerge.providers.openai_compat import OpenAICompatibleModel

    if not settings.base_url or not settings.model:
        raise ConfigError("an OpenAI-compatible LLM needs both --llm-base-url and --llm-model")
    model: LanguageModel = OpenAICompatibleModel(
        base_url=settings.base_url,
        model=settings.model,
        api_key=os.environ.get(settings.api_key_env),
        timeout=settings.timeout,
        max_retries=settings.max_retries,
        response_format=settings.response_format,
        startup_wait=settings.startup_wait,
    )
    if settings.requests_per_minute is not None:
        model = RateLimitedModel(model, settings.requests_per_minute)
    return model


def get_embedder(settings: EmbeddingSettings, cache: RunCache | None = None) -> EmbeddingModel:
    """Build the embedder named by ``settings`` (``use``, ``hash`` or ``openai``): each
    distinct text of a chunk embedded once, and a later run served what earlier ones
    stored when a persistent ``cache`` is given."""
    inner: EmbeddingModel
    if settings.provider == "hash":
        inner = HashEmbedder()
    elif settings.provider == "use":
        from relmerge.providers.use_embed import UseEmbedder

        inner = UseEmbedder()
    else:
        from relmerge.providers.openai_embed import OpenAIEmbedder

        if not settings.base_url or not settings.model:
            raise ConfigError(
                "an OpenAI-compatible embedder needs --embedding-base-url and --embedding-model"
            )
        inner = OpenAIEmbedder(
            base_url=settings.base_url,
            model=settings.model,
            api_key=os.environ.get(settings.api_key_env),
            startup_wait=settings.startup_wait,
        )
    if cache is not None:
        inner = PersistentEmbedder(inner, cache)
    return CachedEmbedder(inner)


__all__ = [
    "CachedEmbedder",
    "EmbeddingModel",
    "HashEmbedder",
    "LLMRequest",
    "LLMResult",
    "LanguageModel",
    "NoLanguageModel",
    "get_embedder",
    "get_llm",
    "preflight",
]

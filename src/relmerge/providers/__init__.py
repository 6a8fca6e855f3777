"""Model providers and the registry that builds one from settings."""

from __future__ import annotations

import os

from relmerge.config import LLMSettings
from relmerge.errors import ConfigError
from relmerge.providers.base import LanguageModel, LLMRequest, LLMResult, NoLanguageModel


def get_llm(settings: LLMSettings) -> LanguageModel:
    """Build the language model named by ``settings`` (``none`` or ``openai``)."""
    if settings.provider == "none":
        return NoLanguageModel()
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
    )


__all__ = ["LLMRequest", "LLMResult", "LanguageModel", "NoLanguageModel", "get_llm"]

"""Options shared by the commands that use models (``run``, ``judge``), resolved once.

Flags override a ``--config`` TOML file, which overrides the defaults; the result is one
typed config per concern (step, LLM, embedding).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click
from pydantic import ValidationError

from relmerge.config import (
    DeduplicateRelationsConfig,
    EmbeddingSettings,
    FileConfig,
    LLMSettings,
    format_validation_error,
    load_toml_config,
)
from relmerge.errors import ConfigError

F = TypeVar("F", bound=Callable[..., Any])

_OPTIONS = [
    click.option(
        "--llm",
        "llm_provider",
        type=click.Choice(["none", "openai"]),
        default=None,
        help="Language model provider [default: none, or openai when a base URL is given].",
    ),
    click.option("--llm-base-url", help="Base URL of an OpenAI-compatible endpoint (…/v1)."),
    click.option("--llm-model", help="Model name to ask for."),
    click.option(
        "--llm-api-key-env",
        help="Environment variable holding the API key [default: OPENAI_API_KEY].",
    ),
    click.option(
        "--response-format",
        type=click.Choice(["json_schema", "json_object", "none"]),
        help="How to ask the server for JSON [default: json_schema].",
    ),
    click.option("--llm-timeout", type=float, help="Seconds before a request times out [60]."),
    click.option(
        "--llm-max-answer-tokens",
        type=click.IntRange(min=16),
        help="Most tokens one LLM answer may take; each request is also bounded by a limit "
        "sized from its task and records [no cap beyond that]. An answer cut at its limit is "
        "invalid and asked again.",
    ),
    click.option(
        "--startup-wait",
        type=click.FloatRange(min=0),
        metavar="SECONDS",
        help="Before any work, one minimal request checks each endpoint (LLM, and "
        "embeddings with --embedding openai); a dead or wrong endpoint exits 2 with the "
        "reason. Connection refused, HTTP 5xx and 429 (a server still starting) are "
        "retried for this long first [5].",
    ),
    click.option(
        "--llm-requests-per-minute",
        type=click.FloatRange(min=1),
        help="Start at most this many LLM requests per minute [no limit].",
    ),
    click.option(
        "--entities",
        "entities_path",
        type=click.Path(path_type=Path),
        help="JSONL of entities {entity_id, name, type, profile}: context for the judge.",
    ),
    click.option(
        "--embedding",
        "embedding_provider",
        type=click.Choice(["use", "hash", "openai"]),
        help="Embedder of the semantic stage [default: use, the offline multilingual USE].",
    ),
    click.option("--embedding-base-url", help="Base URL of an OpenAI-compatible embeddings API."),
    click.option("--embedding-model", help="Embedding model name for --embedding openai."),
    click.option(
        "--config",
        "config_path",
        type=click.Path(path_type=Path),
        help="TOML file: step settings at top level, provider settings under [llm].",
    ),
]


# Options that only mean something with a language model, by parameter name: given with
# `--llm none` they would be ignored without a word.
NEEDS_LLM = {
    "llm_base_url": "--llm-base-url",
    "llm_model": "--llm-model",
    "llm_api_key_env": "--llm-api-key-env",
    "response_format": "--response-format",
    "llm_timeout": "--llm-timeout",
    "llm_max_answer_tokens": "--llm-max-answer-tokens",
    "llm_requests_per_minute": "--llm-requests-per-minute",
    "concurrency": "--concurrency",
    "max_llm_requests": "--max-llm-requests",
    "max_tokens": "--max-tokens",
    "llm_breaker_groups": "--llm-breaker-groups",
}


def refuse_llm_options(given: dict[str, Any]) -> None:
    """A usage error naming every LLM option given together with ``--llm none``."""
    names = [option for key, option in NEEDS_LLM.items() if given.get(key) is not None]
    if not names:
        return
    what = (
        f"{names[0]} needs an LLM; drop it"
        if len(names) == 1
        else "these options need an LLM; drop them"
    )
    raise click.UsageError(
        f"--llm none and {', '.join(names)} exclude each other: {what}, or drop --llm none"
    )


def model_options(function: F) -> F:
    """Add the LLM, embedding, entities and config-file options to a command."""
    for option in reversed(_OPTIONS):
        function = option(function)
    return function


def resolve_options(
    options: dict[str, Any], step_overrides: dict[str, Any]
) -> tuple[DeduplicateRelationsConfig, LLMSettings, EmbeddingSettings]:
    if options.get("llm_provider") == "none":
        refuse_llm_options({**options, **step_overrides})
    config_path: Path | None = options.get("config_path")
    file_config = load_toml_config(config_path) if config_path else FileConfig()
    return resolve_settings(
        file_config,
        {**step_overrides, "max_answer_tokens": options.get("llm_max_answer_tokens")},
        {
            "provider": options.get("llm_provider"),
            "base_url": options.get("llm_base_url"),
            "model": options.get("llm_model"),
            "api_key_env": options.get("llm_api_key_env"),
            "response_format": options.get("response_format"),
            "timeout": options.get("llm_timeout"),
            "requests_per_minute": options.get("llm_requests_per_minute"),
            "startup_wait": options.get("startup_wait"),
        },
        {
            "provider": options.get("embedding_provider"),
            "base_url": options.get("embedding_base_url"),
            "model": options.get("embedding_model"),
            "startup_wait": options.get("startup_wait"),
        },
    )


def resolve_settings(
    file_config: FileConfig,
    step_overrides: dict[str, Any],
    llm_overrides: dict[str, Any],
    embedding_overrides: dict[str, Any] | None = None,
) -> tuple[DeduplicateRelationsConfig, LLMSettings, EmbeddingSettings]:
    """Config file first, command-line flags over it; one typed config comes out."""
    step = {**file_config.step, **{k: v for k, v in step_overrides.items() if v is not None}}
    llm = {**file_config.llm, **{k: v for k, v in llm_overrides.items() if v is not None}}
    llm.setdefault("provider", "openai" if llm.get("base_url") else "none")
    try:
        settings = LLMSettings(**llm)
    except ValidationError as error:
        raise ConfigError(format_validation_error(error, "LLM settings")) from None
    embedding = {
        **file_config.embedding,
        **{k: v for k, v in (embedding_overrides or {}).items() if v is not None},
    }
    try:
        embedding_settings = EmbeddingSettings(**embedding)
    except ValidationError as error:
        raise ConfigError(format_validation_error(error, "embedding settings")) from None
    return DeduplicateRelationsConfig(**step), settings, embedding_settings

"""Options shared by the commands that use models (``run``, ``judge``), resolved once.

Flags override a ``--config`` TOML file, which overrides the defaults; the result is one
typed config per concern (step, LLM, embedding).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar, cast

import click

from relmerge.config import (
    REMOVED_SETTINGS,
    SECTIONS,
    DeduplicateRelationsConfig,
    EmbeddingSettings,
    FileConfig,
    LLMSettings,
    Settings,
    load_toml_config,
)
from relmerge.errors import ConfigError
from relmerge.problems import toml_type_problems, unknown_key
from relmerge.registry import Kind, provider_names

F = TypeVar("F", bound=Callable[..., Any])


class ProviderName(click.Choice[str]):
    """A registered provider's name (``relmerge.registry``): the choices are read from
    the registry when the option is shown or parsed, so an installed plugin's provider is
    one of them."""

    def __init__(self, kind: Kind) -> None:
        self.kind: Kind = kind
        super().__init__((), case_sensitive=True)

    @property
    def choices(self) -> tuple[str, ...]:
        return provider_names(self.kind)

    @choices.setter
    def choices(self, value: object) -> None:
        """click sets the choices it was given (none: they are the registry's)."""


_OPTIONS = [
    click.option(
        "--llm",
        "llm_provider",
        type=ProviderName("llm"),
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
    click.option(
        "--llm-timeout",
        type=float,
        help="Seconds before a request times out [60]; a CPU model may need more.",
    ),
    click.option(
        "--llm-max-answer-tokens",
        type=click.IntRange(min=16),
        help="Most tokens one LLM answer may take; each request is also bounded by a limit "
        "sized from its task and records [no cap beyond that]. An answer cut at its limit is "
        "invalid and asked again.",
    ),
    click.option(
        "--llm-pack-tokens",
        type=click.IntRange(min=0),
        metavar="N",
        help="Pack the first questions of a chunk's blocks into one request of at most N "
        "prompt tokens of records and profiles, the instructions sent once; 0 asks each "
        "question alone [8000].",
    ),
    click.option(
        "--canary-tokens",
        type=click.FloatRange(0.0, 1.0),
        metavar="SHARE",
        help="The canary records a packed request carries add at most this share of its "
        "prompt tokens; more judges a small packed run's model sooner, at that cost (docs: "
        "quality, the canary verdict) [0.1].",
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
        "--llm-price-in",
        type=click.FloatRange(min=0),
        help="USD per million prompt tokens: the run reports its cost in money [none].",
    ),
    click.option(
        "--llm-price-out",
        type=click.FloatRange(min=0),
        help="USD per million completion tokens (with --llm-price-in) [none].",
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
        type=ProviderName("embedding"),
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
    "llm_pack_tokens": "--llm-pack-tokens",
    "canary_tokens": "--canary-tokens",
    "llm_requests_per_minute": "--llm-requests-per-minute",
    "llm_price_in": "--llm-price-in",
    "llm_price_out": "--llm-price-out",
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
        {
            **step_overrides,
            "max_answer_tokens": options.get("llm_max_answer_tokens"),
            "llm_pack_tokens": options.get("llm_pack_tokens"),
            "canary_tokens": options.get("canary_tokens"),
        },
        {
            "provider": options.get("llm_provider"),
            "base_url": options.get("llm_base_url"),
            "model": options.get("llm_model"),
            "api_key_env": options.get("llm_api_key_env"),
            "response_format": options.get("response_format"),
            "timeout": options.get("llm_timeout"),
            "requests_per_minute": options.get("llm_requests_per_minute"),
            "price_in": options.get("llm_price_in"),
            "price_out": options.get("llm_price_out"),
            "startup_wait": options.get("startup_wait"),
        },
        {
            "provider": options.get("embedding_provider"),
            "base_url": options.get("embedding_base_url"),
            "model": options.get("embedding_model"),
            "startup_wait": options.get("startup_wait"),
        },
    )


# The options that set a field, by section and field: a problem with a value given on the
# command line names the option, one with a value from the file names the file and key.
OPTION_NAMES: dict[str, dict[str, str]] = {
    "": {
        "semantic_merge": "--semantic/--no-semantic",
        "concurrency": "--concurrency",
        "max_llm_requests": "--max-llm-requests",
        "max_tokens": "--max-tokens",
        "strict": "--strict",
        "llm_breaker_groups": "--llm-breaker-groups",
        "canaries": "--canaries",
        "max_answer_tokens": "--llm-max-answer-tokens",
        "llm_pack_tokens": "--llm-pack-tokens",
        "canary_tokens": "--canary-tokens",
    },
    "llm": {
        "provider": "--llm",
        "base_url": "--llm-base-url",
        "model": "--llm-model",
        "api_key_env": "--llm-api-key-env",
        "response_format": "--response-format",
        "timeout": "--llm-timeout",
        "requests_per_minute": "--llm-requests-per-minute",
        "price_in": "--llm-price-in",
        "price_out": "--llm-price-out",
        "startup_wait": "--startup-wait",
    },
    "embedding": {
        "provider": "--embedding",
        "base_url": "--embedding-base-url",
        "model": "--embedding-model",
        "startup_wait": "--startup-wait",
    },
}
_MODELS: dict[str, type[Settings]] = {
    "": DeduplicateRelationsConfig,
    "llm": LLMSettings,
    "embedding": EmbeddingSettings,
}


def _field(key: str) -> str:
    """The field a key path is about (``symmetric_relations[1]``: symmetric_relations)."""
    return key.split("[")[0]


def _path(section: str, key: str) -> str:
    return f"{section}.{key}" if section else key


def _known_keys(section: str) -> dict[str, str]:
    """Each key a section's key may have been meant as: its own fields, the sections (at
    the top level), and the other sections' fields (written in the wrong place)."""
    elsewhere: dict[str, list[str]] = {}
    for other, model in _MODELS.items():
        if other != section:
            for field in model.model_fields:
                elsewhere.setdefault(field, []).append(_path(other, field))
    known = {field: " or ".join(paths) for field, paths in elsewhere.items()}
    if not section:
        known.update({name: f"[{name}]" for name in SECTIONS})
    known.update({field: _path(section, field) for field in _MODELS[section].model_fields})
    return known


def _unknown(section: str, values: dict[str, Any]) -> dict[str, str]:
    """Key -> problem for each key of a file section that no setting has."""
    fields = _MODELS[section].model_fields
    listed = list(fields) if section else []  # a section's few keys; not the top level's 40
    return {
        key: unknown_key(key, _known_keys(section), listed)
        for key in values
        if key not in fields and not (not section and key in REMOVED_SETTINGS)
    }


def resolve_settings(
    file_config: FileConfig,
    step_overrides: dict[str, Any],
    llm_overrides: dict[str, Any],
    embedding_overrides: dict[str, Any] | None = None,
) -> tuple[DeduplicateRelationsConfig, LLMSettings, EmbeddingSettings]:
    """Config file first, command-line flags over it; one typed config comes out.

    Every problem of every section is collected before one :class:`ConfigError` says them
    all: the file's (strictly typed, named by file and key path, misspelt keys with the
    closest known one) first, then the flags' (named by option).
    """
    overrides = {"": step_overrides, "llm": llm_overrides, "embedding": embedding_overrides or {}}
    in_file = [f"{key}: {text}" for key, text in file_config.problems]
    in_flags: list[str] = []
    built: dict[str, Settings] = {}
    for section, model in _MODELS.items():
        flags = {k: v for k, v in overrides[section].items() if v is not None}
        values = getattr(file_config, section or "step")
        from_file = {k: v for k, v in values.items() if k not in flags}
        order = {key: index for index, key in enumerate(from_file)}  # said in the file's order
        wrong = {**_unknown(section, from_file), **toml_type_problems(model, from_file)}
        found = [(order[_field(k)], f"{_path(section, k)}: {t}") for k, t in wrong.items()]
        unread = {_field(key) for key in wrong}
        data = {**{k: v for k, v in from_file.items() if k not in unread}, **flags}
        if section == "llm":
            data.setdefault("provider", "openai" if data.get("base_url") else "none")
        try:
            built[section] = model(**data)
        except ConfigError as error:
            for key, text in error.problems:
                if _field(key) in flags:
                    in_flags.append(f"{OPTION_NAMES[section].get(_field(key), key)}: {text}")
                else:  # a key of the file, or a problem across fields (key "")
                    shown = f"{_path(section, key)}: {text}" if key else text
                    found.append((order.get(_field(key), len(order)), shown))
        in_file += [text for _, text in sorted(found, key=lambda item: item[0])]
    problems = in_flags
    if in_file:
        problems = [f"{file_config.path or 'settings'}: {'; '.join(in_file)}", *in_flags]
    if problems:
        raise ConfigError("; ".join(problems))
    return (
        cast(DeduplicateRelationsConfig, built[""]),
        cast(LLMSettings, built["llm"]),
        cast(EmbeddingSettings, built["embedding"]),
    )


# The options of a pass over a framework's graph (`relmerge lightrag|graphiti dedupe`), after
# the model options: the run's own, as `relmerge run` names them.
_PASS_OPTIONS: list[Callable[[F], F]] = [
    click.option(
        "--semantic/--no-semantic", default=None, help="Run the semantic merge stage [default: on]."
    ),
    click.option("--concurrency", type=int, help="LLM requests in flight at once [8]."),
    click.option(
        "--max-llm-requests",
        type=click.IntRange(min=0),
        help="Stop asking the LLM after this many requests; the rest is decided by the rules "
        "and the unsure policy, and recorded as issues.",
    ),
    click.option(
        "--canaries",
        type=click.FloatRange(0.0, 1.0),
        metavar="SHARE",
        help="Canary questions, as a share of the LLM's questions (as `relmerge run`); a model "
        "the test on their answers stops stops merging and the command exits 3 [0.05].",
    ),
    click.option(
        "--cache/--no-cache",
        default=True,
        help="Keep the LLM's answers and the vectors in OUT/.relmerge/cache.sqlite, reused by "
        "the next pass into OUT [on].",
    ),
    click.option(
        "--overwrite", is_flag=True, help="Replace a run in OUT made with other inputs or settings."
    ),
]


def pass_options(function: F) -> F:
    """Add the model options and the run options of a framework pass to a command."""
    for option in reversed(_PASS_OPTIONS):
        function = option(function)
    return model_options(function)

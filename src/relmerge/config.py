"""``DeduplicateRelationsConfig``: the seed's fields and defaults plus relmerge's own.

Every value is checked at construction; all problems are reported together in one
:class:`~relmerge.errors.ConfigError`, so a user fixes a config file in one pass.
"""

from __future__ import annotations

import tomllib
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Annotated, Any, ClassVar, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from relmerge.errors import ConfigError
from relmerge.problems import OFF_FIELDS, OFF_WORDS, Problem, describe, shown
from relmerge.registry import ProviderChoice

ResponseFormat = Literal["json_schema", "json_object", "none"]


# Settings of earlier versions, with what replaces them: a config that sets one is refused
# with this line instead of a bare "extra field" error.
REMOVED_SETTINGS = {
    "auto_merge_name_cosine": "removed: a relation name's cosine is no evidence of one fact "
    '("sponsor of" / "sued"); use auto_merge_cosine, whose relation vector combines the '
    "name and the description",
    "auto_merge_min_cosine": "removed with auto_merge_name_cosine; use auto_merge_cosine",
    "auto_merge_detail_cosine": 'removed: a shared number alone never merges ("owns 60%" / '
    '"bought 60% in 2019"); use auto_merge_cosine',
    "canary_min": "removed: the canary verdict is a sequential test with stated error rates, "
    "which needs no minimum; see canary_false_stop and canary_false_trust",
    "canary_agreement": "removed: the canary verdict tells a good model from a bad one; "
    "use canary_good_agreement and canary_bad_agreement",
    "canary_confidence": "removed: the canary verdict is a sequential test; use "
    "canary_false_stop and canary_false_trust",
}


class Settings(BaseModel):
    """A settings model whose construction fails with one :class:`ConfigError` listing
    every problem in plain words (see :mod:`relmerge.problems`), never pydantic's."""

    settings_name: ClassVar[str] = "settings"

    def __init__(self, **data: Any) -> None:
        problems = self.removed_problems(data)
        given = {key: value for key, value in data.items() if key not in dict(problems)}
        try:
            super().__init__(**given)
        except ValidationError as error:
            found = describe(type(self), error)
            if all(key for key, _ in found):  # field errors: the model checks did not run
                bad = {key.split("[")[0] for key, _ in found}
                found += [("", text) for text in self.cross_problems(given, bad)]
            problems += found
        if problems:
            lines = "; ".join(f"{key}: {text}" if key else text for key, text in problems)
            raise ConfigError(f"invalid {self.settings_name}: {lines}", problems)

    @classmethod
    def removed_problems(cls, data: Mapping[str, Any]) -> list[Problem]:
        """Keys of earlier versions, each with what replaces it."""
        return []

    @classmethod
    def cross_problems(cls, data: Mapping[str, Any], bad: set[str]) -> list[str]:
        """The checks across fields, on the values that are valid by themselves (those
        in ``bad`` are not): run even when some field is wrong, so all are said at once."""
        return []


def band_problems(value: Callable[[str], float | None]) -> list[str]:
    """The bands that contradict each other; ``value`` gives a setting, None if unknown."""
    problems = []
    keep, merge = value("auto_keep_fuzzy"), value("auto_merge_fuzzy")
    if keep is not None and merge is not None and keep > merge:
        problems.append(f"auto_keep_fuzzy ({keep:g}) must not exceed auto_merge_fuzzy ({merge:g})")
    threshold = value("similarity_threshold")
    for name in ("auto_keep_cosine", "auto_keep_description_cosine"):
        band = value(name)
        if band is not None and threshold is not None and band > threshold:
            problems.append(
                f"{name} ({band:g}) must not exceed similarity_threshold ({threshold:g}): "
                "a pair that close is never kept apart without the LLM"
            )
    good, bad = value("canary_good_agreement"), value("canary_bad_agreement")
    if good is not None and bad is not None and bad >= good:
        problems.append(
            f"canary_bad_agreement ({bad:g}) must be below canary_good_agreement ({good:g}): "
            "the canary verdict tells a model worth trusting from one to stop"
        )
    return problems


class DeduplicateRelationsConfig(Settings):
    """Configuration of the :class:`~relmerge.run.step.DeduplicateRelations` step.

    The first eleven fields are the seed's, with its names and defaults.

    >>> DeduplicateRelationsConfig(semantic_merge=False, llm_batch_size=10).llm_batch_size
    10
    """

    model_config = ConfigDict(frozen=True, extra="forbid")
    settings_name: ClassVar[str] = "DeduplicateRelationsConfig"

    deduplicated_relations_prefix: str = "deduplicated_relations"
    relation_keys_artifact: str = "relation_keys"
    entity_id_mapping_artifact: str | None = "entity_id_mapping"
    semantic_merge: bool = True
    similarity_threshold: float = Field(0.9, ge=-1.0, le=1.0)
    max_rounds: int = Field(10, ge=1)
    # 1 is accepted as in Heta: each later batch is the accumulated result plus one record.
    llm_batch_size: int = Field(20, ge=1)
    semantic_batch_size: int = Field(100, ge=2)
    semantic_batch_count: int = Field(4, ge=1)
    max_attempts: int = Field(3, ge=1)
    temperature: float = Field(0.0, ge=0.0, le=2.0)

    # relmerge's own settings.
    concurrency: int = Field(8, ge=1, description="LLM requests in flight at once.")
    max_llm_requests: int | None = Field(
        None,
        ge=0,
        description="LLM requests a run may send (retries included); when spent, the rest is "
        "decided without the LLM and recorded as issues. None: no limit.",
    )
    max_tokens: int | None = Field(
        None,
        ge=0,
        description="LLM tokens (prompt + completion) a run may spend; as max_llm_requests.",
    )
    strict: bool = Field(
        False, description="Fail the run when any input record is rejected, before any work."
    )
    max_answer_tokens: int | None = Field(
        None,
        ge=16,
        description="Most tokens an LLM answer may take; each request's own bound is sized "
        "from its task and records and never exceeds this. None: the sized bound.",
    )
    prompt_description_chars: int = Field(
        2000, ge=100, description="Descriptions longer than this are cut inside prompts only."
    )
    auto_merge_fuzzy: float = Field(
        90.0, ge=0, le=100, description="Fuzzy ratio at or above which a pair merges, no LLM."
    )
    auto_keep_fuzzy: float = Field(
        30.0,
        ge=0,
        le=100,
        description="Fuzzy ratio below which (with a low cosine) a pair stays apart.",
    )
    auto_keep_cosine: float = Field(
        -1.0,
        ge=-1,
        le=1,
        description="Relation-vector cosine below which (with a low fuzzy ratio) a pair stays "
        "apart with no LLM; -1: off (bench/calibrate.py finds no safe value: cross-language "
        "duplicates sit at low cosines).",
    )
    auto_merge_cosine: float | None = Field(
        0.5,
        ge=-1,
        le=1,
        description="Relation-vector cosine (name + description) at or above which a pair "
        "whose names state the same known kind of relation merges with no LLM; None or "
        '"off": off. The default is chosen by bench/calibrate.py.',
    )
    auto_merge_description_cosine: float | None = Field(
        None,
        ge=-1,
        le=1,
        description="Description cosine at or above which a pair whose names prove nothing "
        '(generic, batch-wide or shared) merges with no LLM; None or "off": off (the default: '
        "bench/calibrate.py finds no value that holds on the real graphs).",
    )
    auto_keep_description_cosine: float = Field(
        -1.0,
        ge=-1,
        le=1,
        description="Description cosine below which (with a low fuzzy ratio) a pair whose "
        "names prove nothing stays apart with no LLM; -1: off.",
    )
    two_stage_embedding: bool = Field(
        True,
        description="With an embedder that has a cheap first stage (the default one), embed "
        "with the full model only the relations whose verdicts read a cosine (and those the "
        "cross-block report compares); the first stage serves the rest. False: the full "
        "model for every relation.",
    )
    first_stage_merge_cosine: float | None = Field(
        0.7,
        ge=-1,
        le=1,
        description="With the two-stage embedding: the first-stage cosine at or above which "
        "every pair of a block that auto_merge_cosine reads merges on first-stage vectors, "
        'without the full model (never below auto_merge_cosine); None or "off": the full '
        "model for every such pair. The default is chosen by bench/first_stage.py, held out.",
    )
    generic_name_share: float = Field(
        0.2,
        gt=0,
        le=1,
        description="A relation name carried by more than this share of a batch's relations "
        "(and more than one) is no evidence: its pairs are judged on their descriptions.",
    )
    symmetric_relations: tuple[str, ...] = Field(
        (), description="Extra relation names whose direction carries no meaning."
    )
    unsure_policy: Literal["keep_both", "merge"] = Field(
        "keep_both", description="What an unanswered clarification becomes."
    )
    embedding_description_chars: int = Field(
        300, ge=20, description="Descriptions are cut to this before embedding."
    )
    entity_report_limit: int = Field(
        200, ge=0, description="Relations per entity compared for possible entity duplicates."
    )
    records_per_chunk: int = Field(
        50_000,
        ge=1,
        description="Records decided together: a larger batch is cut into chunks of whole "
        "blocks and held in a temporary file meanwhile, so memory stays bounded.",
    )
    decisions_key: str | None = Field(
        "decisions.jsonl", description="Name of the decision log; None to skip it."
    )
    rejected_key: str | None = Field(
        "rejected.jsonl", description="Name of the rejected input records; None to skip it."
    )
    clarifications_key: str | None = Field(
        "clarifications.jsonl", description="Name of the pending unsure cases; None to skip."
    )
    logs_prefix: str = Field(
        "deduplicate_relations_runs",
        description="Where the step (Python API, heta-framework) writes its logs: "
        "{logs_prefix}/{run fingerprint}/{decisions_key, clarifications_key, rejected_key}, "
        "so that builds sharing a store keep their own. The CLI writes them at OUT's root "
        "(an OUT holds one run).",
    )
    llm_breaker_groups: int = Field(
        5,
        ge=1,
        description="Circuit breaker: after this many groups in a row whose every attempt "
        "failed in transport (refused, DNS, TLS, timeout, 5xx, dropped connection; invalid "
        "answers never count), no more LLM requests are sent; the groups left keep their "
        "records with the issue llm_unavailable.",
    )
    # Packed requests (relmerge.decide.pack): several blocks' questions in one request.
    llm_pack_tokens: int = Field(
        8000,
        ge=0,
        description="Pack the first questions of a chunk's blocks into relation_cluster_many "
        "requests of at most this many prompt tokens of records and profiles (~4 characters "
        "a token; the instructions are sent once per request). 0: one request per question. "
        "8000 was measured (docs/figures/tokens.md): 22-49% of the prompt tokens of one "
        "request per question on the labelled graphs, pair F1 unchanged.",
    )
    llm_pack_records: int = Field(
        60, ge=2, description="Records (all blocks together) in one packed request at most."
    )
    # Canary questions (relmerge.decide.canary): the run measures its own LLM.
    canaries: float = Field(
        0.05,
        ge=0.0,
        le=1.0,
        description="Canary questions, as a share of the run's LLM questions: pairs the "
        "rules decided on hard evidence, asked like any other pair; their answers never "
        "change the output, they measure the model. 0 turns them off.",
    )
    # The verdict on the canaries (relmerge.decide.sequential): Wald's sequential test.
    canary_good_agreement: float = Field(
        0.89,
        gt=0.0,
        lt=1.0,
        description="The canary agreement of a model worth trusting: the sequential test "
        "stops a model that agrees this often in at most canary_false_stop of runs "
        "(chosen on held-out runs: docs/figures/quality.md, the canary verdict).",
    )
    canary_bad_agreement: float = Field(
        0.62,
        gt=0.0,
        lt=1.0,
        description="The canary agreement of a model to stop: the sequential test trusts a "
        "model that agrees this often in at most canary_false_trust of runs; a stopped "
        "model's merges are not applied, its pairs go to clarifications.jsonl (exit 3).",
    )
    canary_false_stop: float = Field(
        0.01,
        gt=0.0,
        lt=0.5,
        description="The share of models agreeing canary_good_agreement of the time that "
        "the test may stop (fewer for better models).",
    )
    canary_false_trust: float = Field(
        0.01,
        gt=0.0,
        lt=0.5,
        description="The share of models agreeing canary_bad_agreement of the time that the "
        "test may trust (fewer for worse models).",
    )
    canary_tokens: float = Field(
        0.1,
        ge=0.0,
        le=1.0,
        description="The canary records a packed request carries, at most, as a share of "
        "its prompt tokens without them (one question a request carries one certain pair "
        "and one near-miss pair). More judges a small run's model sooner, at that cost.",
    )

    def __init__(self, **data: Any) -> None:
        # Keywords stay untyped for mypy, as they always were: a recipe's settings arrive
        # as a dict, and are checked here at run time (see Settings).
        super().__init__(**data)

    @classmethod
    def removed_problems(cls, data: Mapping[str, Any]) -> list[Problem]:
        return [(key, REMOVED_SETTINGS[key]) for key in data if key in REMOVED_SETTINGS]

    @classmethod
    def cross_problems(cls, data: Mapping[str, Any], bad: set[str]) -> list[str]:
        def value(name: str) -> float | None:
            if name in bad:
                return None
            given = data.get(name, cls.model_fields[name].default)
            valid = isinstance(given, int | float) and not isinstance(given, bool)
            return float(given) if valid else None

        return band_problems(value)

    @field_validator(*OFF_FIELDS, mode="before")
    @classmethod
    def _band_off(cls, value: Any) -> Any:
        """A TOML file has no null: ``"off"`` turns a band off."""
        if isinstance(value, str) and value.strip().lower() in OFF_WORDS:
            return None
        return value

    @field_validator("deduplicated_relations_prefix", "relation_keys_artifact", "logs_prefix")
    @classmethod
    def _non_empty_name(cls, value: str) -> str:
        value = value.strip().strip("/")
        if not value:
            raise ValueError("must be a non-empty name")
        return value

    @model_validator(mode="after")
    def _check_bands(self) -> DeduplicateRelationsConfig:
        problems = band_problems(lambda name: float(getattr(self, name)))
        if problems:
            raise ValueError("; ".join(problems))
        return self

    @field_validator(
        "entity_id_mapping_artifact", "decisions_key", "rejected_key", "clarifications_key"
    )
    @classmethod
    def _optional_name(cls, value: str | None) -> str | None:
        if value is not None and not value.strip():
            raise ValueError("must be a non-empty name or None")
        return value.strip() if value is not None else None


class EmbeddingSettings(Settings):
    """Which embedder the semantic stage uses (the CLI's ``--embedding*`` options)."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    settings_name: ClassVar[str] = "embedding settings"

    provider: Annotated[
        str,
        ProviderChoice("embedding"),
        AfterValidator(ProviderChoice("embedding")),
    ] = "use"
    base_url: str | None = None
    model: str | None = None
    api_key_env: str = "OPENAI_API_KEY"
    startup_wait: float = Field(
        5.0,
        ge=0,
        description="Seconds the preflight keeps retrying an endpoint that refuses "
        "connections or answers 5xx / 429, as a server still starting does.",
    )


class LLMSettings(Settings):
    """How to reach the language model (the CLI's ``--llm*`` options or ``[llm]`` in TOML)."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    settings_name: ClassVar[str] = "LLM settings"

    provider: Annotated[
        str,
        ProviderChoice("llm"),
        AfterValidator(ProviderChoice("llm")),
    ] = "none"
    base_url: str | None = None
    model: str | None = None
    api_key_env: str = "OPENAI_API_KEY"
    response_format: ResponseFormat = "json_schema"
    timeout: float = Field(
        60.0,
        gt=0,
        description="Seconds one request may take before it times out (--llm-timeout); each "
        "transport retry waits as long again. A model on CPU may need a longer timeout: a "
        "small local model on a few cores can take more than a minute over one question.",
    )
    max_retries: int = Field(4, ge=0)
    requests_per_minute: float | None = Field(
        None, ge=1, description="Most LLM requests started per minute; None: no limit."
    )
    price_in: float | None = Field(
        None,
        ge=0,
        description="USD per million prompt tokens; with price_out, the result and the "
        "summary give the run's cost in money. None: tokens only.",
    )
    price_out: float | None = Field(
        None,
        ge=0,
        description="USD per million completion tokens (see price_in).",
    )
    startup_wait: float = Field(
        5.0,
        ge=0,
        description="Seconds the preflight keeps retrying an endpoint that refuses "
        "connections or answers 5xx / 429, as a server still starting does.",
    )


class FileConfig(BaseModel):
    """A ``relmerge.toml`` file: step fields at the top level, provider settings in ``[llm]``
    and ``[embedding]``. ``path`` names the file in messages; ``problems`` holds what is
    wrong with its layout (a section that is not a table), said with the values' own."""

    model_config = ConfigDict(extra="forbid")

    step: dict[str, Any] = Field(default_factory=dict)
    llm: dict[str, Any] = Field(default_factory=dict)
    embedding: dict[str, Any] = Field(default_factory=dict)
    path: str | None = None
    problems: list[Problem] = Field(default_factory=list)


SECTIONS = ("llm", "embedding")


def load_toml_config(path: Path) -> FileConfig:
    """Read a TOML config file; its values are checked with the command line's
    (``cli.options.resolve_settings``), so that every problem is said at once."""
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigError(f"config file not found: {path}") from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as error:
        raise ConfigError(f"config file {path} is not valid TOML: {error}") from None
    sections: dict[str, dict[str, Any]] = {}
    problems: list[Problem] = []
    for name in SECTIONS:
        section = data.pop(name, {})
        if isinstance(section, dict):
            sections[name] = section
        else:
            problems.append((name, f"expected a table ([{name}]), got {shown(section)}"))
    return FileConfig(step=data, path=str(path), problems=problems, **sections)

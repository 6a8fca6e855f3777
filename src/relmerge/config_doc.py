"""Render the configuration models as Markdown tables for the documentation site.

The site's configuration reference (``docs/reference/configuration.md``) is filled from
this when the site is built (``docs/hooks.py``): every field of the models, its type,
range, default and description, by TOML section, so the page cannot drift from the code.
A field whose ``Field`` carries no description takes its text from :data:`NOTES`; a test
checks that every field has one or the other.
"""

from __future__ import annotations

import types
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Literal, Union, get_args, get_origin

import annotated_types
from pydantic import BaseModel
from pydantic.fields import FieldInfo

from relmerge.config import DeduplicateRelationsConfig, EmbeddingSettings, LLMSettings
from relmerge.registry import ProviderChoice

# (TOML section, model, where its fields sit in a relmerge.toml file). The step's fields
# sit at the top level, as FileConfig reads them.
SECTIONS: tuple[tuple[str, type[BaseModel], str], ...] = (
    ("Step settings", DeduplicateRelationsConfig, "top level"),
    ("LLM settings", LLMSettings, "[llm]"),
    ("Embedding settings", EmbeddingSettings, "[embedding]"),
)

# Descriptions of the fields whose Field() has none (the seed's fields keep the seed's
# bare declarations). Moving a text into its Field(description=...) is welcome: the test
# then asks for the note to be removed here.
NOTES: dict[tuple[type[BaseModel], str], str] = {
    (DeduplicateRelationsConfig, "deduplicated_relations_prefix"): (
        "Store prefix of the output relation files."
    ),
    (DeduplicateRelationsConfig, "relation_keys_artifact"): (
        "Input artifact (Python API, heta-framework): the list of relation object keys."
    ),
    (DeduplicateRelationsConfig, "entity_id_mapping_artifact"): (
        "Input artifact holding the entity id mapping; None: no remapping."
    ),
    (DeduplicateRelationsConfig, "semantic_merge"): (
        "Run the semantic stage (other wording, other language, reversed symmetric "
        "relations); it needs an embedder. False: exact stage only (--no-semantic)."
    ),
    (DeduplicateRelationsConfig, "similarity_threshold"): (
        "Cosine at or above which two relations of different blocks are reported as "
        "possible_entity_duplicate; the keep cosines may not exceed it."
    ),
    (DeduplicateRelationsConfig, "max_rounds"): "Exact-stage rounds at most.",
    (DeduplicateRelationsConfig, "llm_batch_size"): (
        "Records per relation_merge request at most; 1 as in heta-framework: each batch is "
        "the accumulated result and one record."
    ),
    (DeduplicateRelationsConfig, "semantic_batch_size"): (
        "Records per relation_cluster request at most; larger blocks go in batches."
    ),
    (DeduplicateRelationsConfig, "semantic_batch_count"): "Batches of one block sent per round.",
    (DeduplicateRelationsConfig, "max_attempts"): (
        "LLM requests per batch at most, retries after an invalid answer and the re-ask in "
        "another order included (a provider's transport retries are [llm] max_retries); "
        "then the group keeps its original records."
    ),
    (DeduplicateRelationsConfig, "temperature"): "Temperature of every LLM request.",
    (LLMSettings, "provider"): (
        '"none": rules only, nothing leaves the machine; "openai": any OpenAI-compatible '
        "chat completions endpoint (set base_url and model); or a provider an installed "
        "plugin registers (see Writing a provider)."
    ),
    (LLMSettings, "base_url"): "Base URL of the endpoint, usually ending in /v1 (--llm-base-url).",
    (LLMSettings, "model"): "Model name to ask for (--llm-model).",
    (LLMSettings, "api_key_env"): (
        "Environment variable holding the API key; local servers need none. The key is "
        "never logged or shown in errors."
    ),
    (LLMSettings, "response_format"): (
        "What the request asks for: json_schema (OpenAI, vLLM, Ollama), json_object "
        "(llama.cpp's server) or none (prompt only). Answers are validated either way."
    ),
    (LLMSettings, "max_retries"): (
        "Transport retries of one request (429, 5xx, timeouts, dropped connections), with "
        "backoff, jitter and Retry-After."
    ),
    (EmbeddingSettings, "provider"): (
        '"use": the multilingual Universal Sentence Encoder shipped in a PyPI package, '
        'offline; "hash": hashed character n-grams, instant, lexical only; "openai": an '
        "OpenAI-compatible /embeddings endpoint (set base_url and model); or an embedder an "
        "installed plugin registers (see Writing a provider)."
    ),
    (EmbeddingSettings, "base_url"): "Base URL of the embeddings endpoint (--embedding-base-url).",
    (EmbeddingSettings, "model"): "Embedding model name (--embedding-model).",
    (EmbeddingSettings, "api_key_env"): "Environment variable holding the embeddings API key.",
}


# A default of None: TOML cannot write it, so the field is left out of the file.
UNSET = "unset"


@dataclass(frozen=True)
class FieldDoc:
    """One row of the reference: what a reader needs to set the field."""

    name: str
    type: str
    default: str
    description: str


def describe(model: type[BaseModel], name: str) -> str:
    """The field's own description, else its note; empty when it has neither."""
    info = model.model_fields[name]
    return (info.description or NOTES.get((model, name), "")).strip()


def type_name(annotation: Any) -> str:
    """A reader's name for a field type: ``int``, ``float or none``, ``"a" | "b"``."""
    origin = get_origin(annotation)
    if origin is Literal:
        return " | ".join(f'"{value}"' for value in get_args(annotation))
    if origin in (Union, types.UnionType):
        names = [type_name(arg) for arg in get_args(annotation) if arg is not type(None)]
        optional = type(None) in get_args(annotation)
        return " or ".join(names) + (" or none" if optional else "")
    if origin is tuple:
        return f"list of {type_name(get_args(annotation)[0])}"
    return getattr(annotation, "__name__", str(annotation))


def _number(value: Any) -> str:
    return f"{value:g}" if isinstance(value, int | float) else str(value)


def bounds(info: FieldInfo) -> str:
    """The field's range as ``≥ 1``, ``> 0``, ``≥ -1, ≤ 1``: from pydantic's constraints."""
    low = high = ""
    for item in info.metadata:
        if isinstance(item, annotated_types.Ge):
            low = f"≥ {_number(item.ge)}"
        elif isinstance(item, annotated_types.Gt):
            low = f"> {_number(item.gt)}"
        elif isinstance(item, annotated_types.Le):
            high = f"≤ {_number(item.le)}"
        elif isinstance(item, annotated_types.Lt):
            high = f"< {_number(item.lt)}"
    return ", ".join(part for part in (low, high) if part)


def toml_value(value: Any) -> str:
    """The default as it is written in a relmerge.toml file (TOML has no null: unset)."""
    if value is None:
        return UNSET
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return f'"{value}"'
    if isinstance(value, tuple | list):
        return "[" + ", ".join(toml_value(item) for item in value) + "]"
    if isinstance(value, float) and value.is_integer():
        return f"{value:.1f}"
    return str(value)


def field_docs(model: type[BaseModel]) -> Iterator[FieldDoc]:
    """Every field of ``model``, in declaration order."""
    for name, info in model.model_fields.items():
        named = next((m.names() for m in info.metadata if isinstance(m, ProviderChoice)), None)
        kind = " | ".join(f'"{v}"' for v in named) if named else type_name(info.annotation)
        limits = bounds(info)
        yield FieldDoc(
            name=name,
            type=f"{kind}, {limits}" if limits else kind,
            default=toml_value(info.get_default(call_default_factory=True)),
            description=describe(model, name),
        )


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def render_config_reference(heading: str = "##") -> str:
    """Markdown: one table per TOML section, one row per field: the name, type, range and
    default stacked in the first cell (narrow enough for the page), the description beside."""
    parts: list[str] = []
    for title, model, where in SECTIONS:
        parts += [
            f"{heading} {title}",
            "",
            f"`{model.__name__}` (`{model.__module__}`); in a `relmerge.toml` file: {where}.",
            "",
            "| setting | description |",
            "| --- | --- |",
        ]
        for row in field_docs(model):
            default = "*unset*" if row.default == UNSET else f"`{_cell(row.default)}`"
            parts.append(
                f"| `{row.name}`<br>{_cell(row.type)}<br>default {default} "
                f"| {_cell(row.description)} |"
            )
        parts.append("")
    return "\n".join(parts)


if __name__ == "__main__":
    print(render_config_reference(), end="")

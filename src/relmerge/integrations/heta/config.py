"""The step's configuration in a heta-framework recipe: relmerge's, plus the fields of
heta-framework's own ``DeduplicateRelationsConfig`` that relmerge's lacks."""

from __future__ import annotations

from pydantic import Field, field_validator

from relmerge.config import DeduplicateRelationsConfig as CoreConfig
from relmerge.config import ResponseFormat


class DeduplicateRelationsConfig(CoreConfig):
    """The seed's fields and relmerge's own (see the README's Configuration), plus
    heta-framework's: the output keys artifact and named components.

    >>> DeduplicateRelationsConfig(semantic_merge=False, language_model="judge").language_model
    'judge'
    """

    deduplicated_relation_keys_artifact: str = Field(
        "deduplicated_relation_keys", description="Artifact that receives the output keys."
    )
    object_store: str | None = Field(
        None,
        description="Named object store of the recipe (stores.objects.NAME); None: the "
        "recipe's stores.objects.",
    )
    language_model: str | None = Field(
        None, description="Named language model (models.language.NAME); None: models.language."
    )
    embedding_model: str | None = Field(
        None, description="Named embedding model (models.embedding.NAME); None: models.embedding."
    )
    response_format: ResponseFormat = Field(
        "json_object",
        description="What a heta-framework language model is asked for: json_object (what "
        "heta-framework's own step sends), json_schema (the task's schema, for servers that "
        "follow one) or none (prompt only). Answers are parsed and validated either way.",
    )

    @field_validator("deduplicated_relation_keys_artifact")
    @classmethod
    def _artifact_name(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("must be a non-empty name")
        return value.strip()

    @field_validator("object_store", "language_model", "embedding_model")
    @classmethod
    def _component_name(cls, value: str | None) -> str | None:
        if value is not None and (not value.strip() or "." in value):
            raise ValueError("must be a component name without dots, or None")
        return value.strip() if value is not None else None

"""heta-framework's models seen as relmerge's: the language model protocol (``invoke`` of
a ``ModelRequest``) and the embedding protocol (``embed`` of an ``EmbeddingRequest``).

relmerge builds its requests, parses and validates the answers and retries invalid ones
itself; the adapter only carries a request across. A request's conversation (a retry
quotes the invalid answer and says what was wrong) becomes heta-framework's system prompt
plus one prompt.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from heta_framework.common.models import (
    EmbeddingModelProtocol,
    EmbeddingRequest,
    LanguageModelProtocol,
    ModelOptions,
    ModelRequest,
)

from relmerge.config import ResponseFormat
from relmerge.errors import ConfigError, ProviderError
from relmerge.model import STEP_NAME
from relmerge.providers.base import LanguageModel, LLMRequest, LLMResult, Usage
from relmerge.providers.embedding import EmbeddingModel, Vectors, l2_normalise
from relmerge.providers.parsing import parse_json_answer

# Statuses that no retry can fix: a wrong key, a model the endpoint does not serve.
_FATAL_STATUS = (401, 403, 404)
EMBED_BATCH = 256  # texts per embedding request


def _status(error: BaseException) -> int | None:
    """The HTTP status of an error or of one of its causes (litellm's errors carry one)."""
    chain: list[BaseException] = []
    seen: BaseException | None = error
    while seen is not None and seen not in chain:
        status = getattr(seen, "status_code", None)
        if isinstance(status, int):
            return status
        chain.append(seen)
        seen = seen.__cause__ or seen.__context__
    return None


def _describe(error: BaseException, secret: str | None) -> str:
    """``Type: message`` of an error and its first cause, without the API key."""
    parts = [f"{type(error).__name__}: {error}"]
    cause = error.__cause__
    if cause is not None and str(cause) not in parts[0]:
        parts.append(f"{type(cause).__name__}: {cause}")
    text = "; ".join(parts)
    if secret and len(secret) >= 4:
        text = text.replace(secret, "***")
    return text[:600]


def _secret(model: object) -> str | None:
    key = getattr(getattr(model, "config", None), "api_key", None)
    return key if isinstance(key, str) else None


def response_format_for(mode: ResponseFormat, task: str, schema: dict[str, Any]) -> Any:
    """The ``response_format`` option for a mode: heta-framework's own step sends a bare
    ``json_object``; ``json_schema`` carries the task's schema; ``none`` sends nothing."""
    if mode == "json_schema":
        return {"type": "json_schema", "json_schema": {"name": task, "schema": schema}}
    if mode == "json_object":
        return {"type": "json_object"}
    return None


def flatten(request: LLMRequest) -> tuple[str | None, str]:
    """The request's system prompt, and its other turns as one prompt: the question, then
    each earlier answer quoted with what was wrong with it (already made inert)."""
    system = "\n\n".join(m.content for m in request.messages if m.role == "system") or None
    parts: list[str] = []
    for message in request.messages:
        if message.role == "user":
            parts.append(message.content)
        elif message.role == "assistant":
            parts.append(f"Your previous answer was:\n{message.content}")
    return system, "\n\n".join(parts)


class HetaLanguageModel:
    """A heta-framework language model (``LanguageModelProtocol``) as relmerge's.

    Until the model has answered once, a failure stops the run (a wrong endpoint, key or
    model name would otherwise fail every group in turn); afterwards a failure fails one
    attempt, except 401/403/404. The model's own retries (litellm's) happen inside one
    request: relmerge counts it once.
    """

    available = True

    def __init__(self, inner: LanguageModelProtocol, response_format: ResponseFormat) -> None:
        self.inner = inner
        self.name = inner.model_name
        self.response_format: ResponseFormat = response_format
        self._healthy = False

    @property
    def cache_identity(self) -> dict[str, Any]:
        """What besides the request determines an answer (never the API key)."""
        config = getattr(self.inner, "config", None)
        return {
            "provider": f"heta:{type(self.inner).__name__}",
            "base_url": getattr(config, "api_base", None),
            "model": self.name,
            "response_format": self.response_format,
        }

    def model_request(self, request: LLMRequest) -> ModelRequest:
        system, prompt = flatten(request)
        mode: ResponseFormat = "none" if request.relaxed else self.response_format
        return ModelRequest(
            prompt=prompt,
            system_prompt=system,
            options=ModelOptions(
                temperature=request.temperature,
                max_output_tokens=request.max_tokens,
                response_format=response_format_for(mode, request.task, request.schema),
            ),
            trace_context={"step": STEP_NAME, "task": request.task, "retry": request.relaxed},
        )

    async def invoke(self, request: LLMRequest) -> LLMResult:
        try:
            result = await self.inner.invoke(self.model_request(request))
        except Exception as error:
            status = _status(error)
            raise ProviderError(
                f"models.language ({self.name}): {_describe(error, _secret(self.inner))}",
                retryable=self._healthy and status not in _FATAL_STATUS,
            ) from None
        text = result.text if isinstance(result.text, str) else ""
        parsed = result.parsed
        if parsed is not None and hasattr(parsed, "model_dump"):  # a pydantic answer
            parsed = parsed.model_dump(mode="json")
        if not isinstance(parsed, dict | list):
            parsed = parse_json_answer(text)
        usage = result.token_usage
        self._healthy = True
        return LLMResult(
            text=text,
            parsed=parsed,
            model=result.model_name or self.name,
            usage=Usage(
                prompt_tokens=(usage.prompt_tokens or 0) if usage is not None else 0,
                completion_tokens=(usage.completion_tokens or 0) if usage is not None else 0,
            ),
            truncated=result.finish_reason == "length",
        )


class HetaEmbeddingModel:
    """A heta-framework embedding model (``EmbeddingModelProtocol``) as relmerge's:
    batches of :data:`EMBED_BATCH` texts, L2-normalised float32 rows. Blank texts (which
    heta-framework's client refuses) get a zero vector without a request."""

    def __init__(self, inner: EmbeddingModelProtocol, batch_size: int = EMBED_BATCH) -> None:
        self.inner = inner
        self.name = inner.model_name
        self.cache_identity = f"heta:{type(inner).__name__}:{self.name}"
        self.batch_size = batch_size

    async def embed(self, texts: Sequence[str]) -> Vectors:
        asked = [i for i, text in enumerate(texts) if text.strip()]
        rows: list[list[float]] = []
        for start in range(0, len(asked), self.batch_size):
            batch = [texts[i] for i in asked[start : start + self.batch_size]]
            try:
                result = await self.inner.embed(
                    EmbeddingRequest(texts=batch, trace_context={"step": STEP_NAME})
                )
            except Exception as error:
                raise ProviderError(
                    f"models.embedding ({self.name}): {_describe(error, _secret(self.inner))}",
                    retryable=False,
                ) from None
            if len(result.vectors) != len(batch):
                raise ProviderError(
                    f"models.embedding ({self.name}) returned {len(result.vectors)} vectors "
                    f"for {len(batch)} texts",
                    retryable=False,
                )
            rows.extend(list(vector) for vector in result.vectors)
        if not texts:
            return np.zeros((0, 0), dtype=np.float32)
        if not rows:
            return np.zeros((len(texts), 1), dtype=np.float32)
        try:
            found = np.asarray(rows, dtype=np.float32)
        except ValueError:
            found = np.zeros((0, 0), dtype=np.float32)
        if found.ndim != 2 or found.shape[1] == 0:
            raise ProviderError(
                f"models.embedding ({self.name}) returned vectors of differing or no length",
                retryable=False,
            )
        matrix = np.zeros((len(texts), found.shape[1]), dtype=np.float32)
        matrix[asked] = found
        return l2_normalise(matrix)


def language_model(component: object, key: str, response_format: ResponseFormat) -> LanguageModel:
    """The recipe's language model as relmerge's: heta-framework's adapted, relmerge's
    (an ``OpenAICompatibleModel``, ``NoLanguageModel`` for rules only) as it is."""
    if isinstance(component, LanguageModelProtocol):
        return HetaLanguageModel(component, response_format)
    if isinstance(component, LanguageModel):
        return component
    raise ConfigError(
        f"component {key!r} is neither a heta-framework language model (model_name, "
        "invoke(ModelRequest), invoke_many, stream) nor a relmerge one; "
        f"got {type(component).__name__}"
    )


def embedding_model(component: object, key: str) -> EmbeddingModel:
    """The recipe's embedding model as relmerge's: heta-framework's adapted, relmerge's
    (``UseEmbedder``, ``HashEmbedder``, ``OpenAIEmbedder``) as it is."""
    if isinstance(component, EmbeddingModelProtocol):
        return HetaEmbeddingModel(component)
    if isinstance(component, EmbeddingModel):
        return component
    raise ConfigError(
        f"component {key!r} is neither a heta-framework embedding model (model_name, "
        "embed(EmbeddingRequest), embed_many) nor a relmerge one; "
        f"got {type(component).__name__}; semantic_merge=True needs it "
        "(or set semantic_merge=False)"
    )

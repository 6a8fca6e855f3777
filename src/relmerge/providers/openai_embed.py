"""Any OpenAI-compatible ``/embeddings`` endpoint (OpenAI, vLLM, Ollama, TEI …)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import openai

from relmerge.errors import ProviderError
from relmerge.providers.embedding import Vectors, l2_normalise, report_embedded
from relmerge.providers.preflight import (
    EMBEDDINGS_ENDPOINT,
    PREFLIGHT_MESSAGE,
    STARTUP_WAIT_SECONDS,
    NotAnAnswer,
    check_base_url,
    preflight_timeout,
    probe,
)

_BATCH = 128


class OpenAIEmbedder:
    def __init__(
        self,
        *,
        base_url: str,
        model: str,
        api_key: str | None = None,
        timeout: float = 60.0,
        max_retries: int = 4,
        client: openai.AsyncOpenAI | None = None,
        startup_wait: float = STARTUP_WAIT_SECONDS,
    ) -> None:
        self.name = model
        self.base_url = base_url
        self.timeout = timeout
        self.startup_wait = startup_wait
        # Embedding calls are idempotent and uncounted, so the SDK's own retries suffice.
        self._client = client or openai.AsyncOpenAI(
            base_url=base_url,
            api_key=api_key or "not-needed",
            timeout=timeout,
            max_retries=max_retries,
        )

    @property
    def cache_identity(self) -> str:
        return f"openai:{self.base_url}:{self.name}"

    def __repr__(self) -> str:
        return f"OpenAIEmbedder(base_url={self.base_url!r}, model={self.name!r})"

    async def preflight(self) -> int:
        """One embeddings request for one short text: the requests it took, or
        :class:`ProviderError` saying why this endpoint cannot work (see
        ``relmerge.providers.preflight``)."""
        check_base_url(self.base_url, EMBEDDINGS_ENDPOINT)
        client = self._client.with_options(max_retries=0, timeout=preflight_timeout(self.timeout))

        async def send() -> None:
            response = await client.embeddings.create(model=self.name, input=[PREFLIGHT_MESSAGE])
            data = getattr(response, "data", None)
            if not isinstance(data, list) or not data or not getattr(data[0], "embedding", None):
                raise NotAnAnswer("the answer is not an embeddings response (no vectors)")

        return await probe(
            send,
            label=EMBEDDINGS_ENDPOINT,
            base_url=self.base_url,
            url=self.base_url.rstrip("/") + "/embeddings",
            timeout=self.timeout,
            startup_wait=self.startup_wait,
        )

    async def embed(self, texts: Sequence[str]) -> Vectors:
        rows: list[list[float]] = []
        for start in range(0, len(texts), _BATCH):
            batch = list(texts[start : start + _BATCH])
            try:
                response = await self._client.embeddings.create(model=self.name, input=batch)
            except openai.OpenAIError as error:
                raise ProviderError(
                    f"{self.base_url}: embeddings failed: {type(error).__name__}",
                    retryable=False,
                ) from None
            data = sorted(response.data, key=lambda item: item.index)
            if len(data) != len(batch):
                raise ProviderError(
                    f"{self.base_url}: {len(data)} embeddings for {len(batch)} texts",
                    retryable=False,
                )
            rows.extend(item.embedding for item in data)
            report_embedded(len(batch))
        if not rows:
            return np.zeros((0, 0), dtype=np.float32)
        return l2_normalise(np.asarray(rows, dtype=np.float32))

"""The composition root of the models: every language model and embedder that ``relmerge
run``, the step, ``RelationJudge`` and ``relmerge judge`` use is opened and wrapped here,
in one order (the engines' workers ask the driver's stack, see ``relmerge.engines``).

The language model, outermost first (the stages ask the top one):

=======================  ======================================================  ==========
layer                    what it does                                            built by
=======================  ======================================================  ==========
``AccountingModel``      requests, tokens, cache hits, invalid answers           stack
``CachingModel``         the run cache: a request asked before is answered       stack
``CanaryGateModel``     closed when the canaries distrust the model (a run's)   stack
``BudgetModel``          ``max_llm_requests`` / ``max_tokens`` (a run's limit)   stack
``CircuitBreakerModel``  ``llm_breaker_groups`` (a run's limit)                  stack
``ProgressModel``        the run's ``llm`` phase (requests in flight, retries)   stack
``RateLimitedModel``     ``[llm] requests_per_minute``                           get_llm
the provider             the registry's factory for ``[llm] provider``           get_llm
=======================  ======================================================  ==========

The embedder: ``CachedEmbedder`` (each distinct recent text once) over
``PersistentEmbedder`` (the run cache's vectors) over the provider (the registry's factory
for ``[embedding] provider``). A batch run's chunks embed without the first
(:func:`without_recent_texts`), so that every engine batches a chunk's texts alike.

:func:`get_llm` and :func:`get_embedder` open a provider from its settings (a command
line, a ``relmerge.toml``); a caller that has a provider object already (the step's
components, an app's judge) passes it to :func:`build_model_stack` /
:func:`build_embedder_stack` directly. Each layer is found again by its capability
(``relmerge.providers.base``), never by its place in the stack.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from relmerge.cache import RunCache
from relmerge.config import DeduplicateRelationsConfig, EmbeddingSettings, LLMSettings
from relmerge.errors import ConfigError
from relmerge.progress import Progress
from relmerge.providers.accounting import AccountingModel, LLMStats
from relmerge.providers.base import LanguageModel
from relmerge.providers.breaker import CircuitBreakerModel
from relmerge.providers.cached import CachingModel, PersistentEmbedder
from relmerge.providers.embedding import CachedEmbedder, EmbeddingModel
from relmerge.providers.gate import CanaryGateModel
from relmerge.providers.limits import BudgetModel, RateLimitedModel
from relmerge.providers.progress import ProgressModel
from relmerge.registry import Provider, registry


def _checked(provider: Provider, built: object, protocol: Any, what: str) -> Any:
    if not isinstance(built, protocol):
        plugin = f" (plugin {provider.plugin!r})" if provider.plugin != "relmerge" else ""
        raise ConfigError(
            f"provider {provider.name!r}{plugin} built a {type(built).__name__}, which is "
            f"not {what}"
        )
    return built


def get_llm(settings: LLMSettings) -> LanguageModel:
    """The language model ``settings`` name (``provider``, looked up in the registry),
    rate-limited when ``requests_per_minute`` is set."""
    provider = registry().provider("llm", settings.provider)
    what = "a language model (name, available, async invoke)"
    model: LanguageModel = _checked(provider, provider.factory(settings), LanguageModel, what)
    if settings.requests_per_minute is not None:
        model = RateLimitedModel(model, settings.requests_per_minute)
    return model


def get_embedder(settings: EmbeddingSettings, cache: RunCache | None = None) -> EmbeddingModel:
    """The embedder ``settings`` name (``provider``, looked up in the registry), in its
    stack (:func:`build_embedder_stack`): each distinct recent text embedded once, and a
    later run served what earlier ones stored when a persistent ``cache`` is given."""
    provider = registry().provider("embedding", settings.provider)
    what = "an embedder (name, async embed)"
    embedder: EmbeddingModel = _checked(provider, provider.factory(settings), EmbeddingModel, what)
    return build_embedder_stack(embedder, cache)


def build_embedder_stack(embedder: EmbeddingModel, cache: RunCache | None = None) -> EmbeddingModel:
    """``embedder`` with the run cache's vectors (``cache``) and the cache of recent
    texts in front (not added twice)."""
    if cache is not None:
        embedder = PersistentEmbedder(embedder, cache)
    return embedder if isinstance(embedder, CachedEmbedder) else CachedEmbedder(embedder)


def without_recent_texts(embedder: EmbeddingModel) -> EmbeddingModel:
    """The embedder a batch run's chunks use: its stack without the cache of recent texts.

    Each chunk's distinct texts then go to the model as one list, whatever earlier chunks
    held, so the model batches them the same way on every engine (a vector can differ in
    its last bits with the batch its text shares)."""
    return embedder.inner if isinstance(embedder, CachedEmbedder) else embedder


@dataclass(frozen=True)
class ModelStack:
    """A built language-model stack: ``model``, the layer the stages ask, and the layers
    whose state a run reports (``budget``, ``breaker``, ``gate``: None when not built)."""

    model: AccountingModel
    budget: BudgetModel | None = None
    breaker: CircuitBreakerModel | None = None
    gate: CanaryGateModel | None = None

    @property
    def stats(self) -> LLMStats:
        return self.model.stats


def build_model_stack(
    llm: LanguageModel | LLMSettings,
    config: DeduplicateRelationsConfig,
    *,
    cache: RunCache | None = None,
    progress: Progress | None = None,
    run_limits: bool = True,
) -> ModelStack:
    """The whole language-model stack (see the module) over ``llm``, a provider or the
    settings that name one (:func:`get_llm`).

    ``cache``: answers kept across runs. ``progress``: the run's ``llm`` phase hears of
    each request, and of each invalid answer (``retried``). ``run_limits``: a run's
    budget and circuit breaker (``config.max_llm_requests``, ``max_tokens``,
    ``llm_breaker_groups``); an app's judge, which lives as long as the app, has none.
    """
    model = get_llm(llm) if isinstance(llm, LLMSettings) else llm
    if progress is not None and model.available:
        model = ProgressModel(model, progress)
    breaker = budget = gate = None
    if run_limits:
        model = breaker = CircuitBreakerModel(model, config.llm_breaker_groups)
        model = budget = BudgetModel(breaker, config.max_llm_requests, config.max_tokens)
        model = gate = CanaryGateModel(budget)
    if cache is not None:
        model = CachingModel(model, cache)
    if progress is None:
        return ModelStack(AccountingModel(model), budget, breaker, gate)
    counted = progress
    accounting = AccountingModel(model, on_invalid=lambda: counted.count("llm", "retried"))
    return ModelStack(accounting, budget, breaker, gate)

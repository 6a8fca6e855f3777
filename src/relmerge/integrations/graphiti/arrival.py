"""Duplicates decided as edges arrive: relmerge answers Graphiti's duplicate question.

Graphiti resolves each new edge with one LLM call, ``dedupe_edges.resolve_edge``
(``EdgeDuplicate``: ``duplicate_facts``, ``contradicted_facts``), against the edges the
pair already has (``existing_edges``) and other edges of the group
(``edge_invalidation_candidates``; indices continue across both lists).
:class:`RelmergeDedupeClient` wraps the user's graphiti ``LLMClient`` and answers the
*duplicate* half of that question with relmerge's decision:

- the facts come from the structured context Graphiti gives its prompt builder, captured
  by a prompt-library hook (:func:`relmerge_prompt_library`), never parsed from the
  prompt's text; a question that arrives without its context fails loudly;
- relmerge's kernel decides first (``RelationJudge.rules``: fuzzy and cosine bands,
  guards for numbers, dates, roles, negation, direction); only where the rules cannot
  decide, ``judge_llm`` (a relmerge ``LanguageModel``) is asked through relmerge's judge,
  with both entities' summaries as profiles. Without ``judge_llm``, what the rules leave
  open is answered by the user's model as Graphiti asks it (its own ``duplicate_facts``);
- contradictions stay the user's model's: when relmerge finds no duplicate, the call is
  delegated to ``inner`` exactly as Graphiti built it, and only ``duplicate_facts`` of the
  answer is replaced; ``contradicted_facts`` is the model's own, so Graphiti's temporal
  invalidation runs as before. When relmerge finds a duplicate, ``inner`` is not asked at
  all (``contradicted_facts`` empty): the new edge then *is* the existing edge, whose
  contradictions Graphiti settled when that edge arrived, and Graphiti keeps a duplicate's
  dates, so asking again would change nothing — that skipped call is the saving.

Every other prompt (extraction, node dedupe, timestamps, summaries, attributes) goes to
``inner`` unchanged. :func:`wrap_graphiti` installs all of it on a ``Graphiti``.

Only graphiti-core 0.31.x is accepted (:data:`TESTED_GRAPHITI`): the prompt name, the
context's keys and the answer's model are its contract; another version raises
:class:`GraphitiVersionError` when the client is built.
"""

from __future__ import annotations

import importlib.metadata
from collections import deque
from collections.abc import Callable
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

from graphiti_core.edges import EntityEdge
from graphiti_core.llm_client.client import LLMClient
from graphiti_core.llm_client.config import DEFAULT_MAX_TOKENS, ModelSize
from graphiti_core.nodes import EntityNode
from graphiti_core.prompts.dedupe_edges import EdgeDuplicate
from graphiti_core.prompts.lib import DefaultChatPromptLibrary, ensure_chat_prompt
from graphiti_core.prompts.models import ChatPrompt, Message
from graphiti_core.utils.maintenance import edge_operations
from pydantic import BaseModel

from relmerge.config import DeduplicateRelationsConfig
from relmerge.judge import JudgeContext, RelationJudge, Verdict
from relmerge.providers.base import LanguageModel
from relmerge.providers.embedding import EmbeddingModel

__all__ = [
    "RESOLVE_EDGE",
    "TESTED_GRAPHITI",
    "ArrivalStats",
    "GraphitiContractError",
    "GraphitiVersionError",
    "RelmergeDedupeClient",
    "check_graphiti_version",
    "relmerge_prompt_library",
    "wrap_graphiti",
]

RESOLVE_EDGE = "dedupe_edges.resolve_edge"
# graphiti-core versions whose resolve_edge contract (prompt name, context keys, continuous
# idx, EdgeDuplicate) tests/integrations/graphiti/test_arrival.py has run against.
TESTED_GRAPHITI: tuple[str, ...] = ("0.31.",)

# The context of the resolve_edge prompt built last in this task, and the user text built.
_CONTEXT: ContextVar[tuple[dict[str, Any], str] | None] = ContextVar(
    "relmerge_resolve_edge", default=None
)


class GraphitiVersionError(RuntimeError):
    """graphiti-core is a version whose prompt contract relmerge has not been tested on."""


class GraphitiContractError(RuntimeError):
    """Graphiti asked its duplicate question in a way this module does not know."""


def check_graphiti_version(version: str | None = None) -> str:
    """The installed graphiti-core version (or ``version``); raises
    :class:`GraphitiVersionError` outside :data:`TESTED_GRAPHITI`."""
    found = version if version is not None else importlib.metadata.version("graphiti-core")
    if not any(found.startswith(prefix) for prefix in TESTED_GRAPHITI):
        tested = ", ".join(f"{prefix}x" for prefix in TESTED_GRAPHITI)
        raise GraphitiVersionError(
            f"graphiti-core {found} is not a tested version ({tested}): its "
            f"{RESOLVE_EDGE} prompt contract may differ; install a tested version "
            "(pip install 'graphiti-core>=0.31,<0.32')"
        )
    return found


# -- The structured context: a prompt-library hook -----------------------------------------


def _capturing(builder: Callable[[dict[str, Any]], Any]) -> Callable[[dict[str, Any]], ChatPrompt]:
    def resolve_edge(context: dict[str, Any]) -> ChatPrompt:
        # Graphiti builds the prompt, then awaits generate_response in the same task: the
        # context set here is the one that call reads (concurrent edges run in own tasks).
        prompt = ensure_chat_prompt(builder(context), RESOLVE_EDGE)
        _CONTEXT.set((context, prompt.user.content))
        return prompt

    return resolve_edge


class _CapturingGroup:
    def __init__(self, group: Any) -> None:
        self._group = group
        self.resolve_edge = _capturing(group.resolve_edge)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._group, name)


class _CapturingLibrary:
    """A prompt library: ``base`` with its ``dedupe_edges.resolve_edge`` builder wrapped
    to record the context it is given (the prompt it builds is unchanged)."""

    def __init__(self, base: Any) -> None:
        self._base = base
        self.dedupe_edges = _CapturingGroup(base.dedupe_edges)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._base, name)


def relmerge_prompt_library(base: Any | None = None) -> Any:
    """Graphiti's prompt library (``base``, default graphiti's own) whose
    ``dedupe_edges.resolve_edge`` builder also hands its structured context to
    :class:`RelmergeDedupeClient`. Pass it as ``Graphiti(prompt_library=...)``."""
    check_graphiti_version()
    return _CapturingLibrary(base if base is not None else DefaultChatPromptLibrary())


# -- The pair the question is about: entity uuids and the candidates' directions -----------


@dataclass(frozen=True)
class _Scope:
    new: EntityEdge
    related: list[EntityEdge]


_SCOPE: ContextVar[_Scope | None] = ContextVar("relmerge_resolve_scope", default=None)


def _install_scope() -> None:
    """Record, for the duplicate question Graphiti is about to ask, which edge it resolves
    and its candidate edges (the context itself holds only fact texts): a pass-through
    around graphiti's ``_dedupe_extracted_edge``, the one function ``add_episode``,
    ``add_episode_bulk`` and ``add_triplet`` resolve an edge with. Used for the entities'
    names and summaries and the direction of each candidate; installed once."""
    original = edge_operations._dedupe_extracted_edge
    if getattr(original, "_relmerge_scope", False):
        return

    async def scoped(
        llm_client: LLMClient,
        extracted_edge: EntityEdge,
        related_edges: list[EntityEdge],
        *args: Any,
        **kwargs: Any,
    ) -> Any:
        token = _SCOPE.set(_Scope(extracted_edge, list(related_edges)))
        try:
            return await original(llm_client, extracted_edge, related_edges, *args, **kwargs)
        finally:
            _SCOPE.reset(token)

    scoped._relmerge_scope = True  # type: ignore[attr-defined]
    edge_operations._dedupe_extracted_edge = scoped


# -- The client ----------------------------------------------------------------------------


@dataclass
class ArrivalStats:
    """What the wrapper did with Graphiti's duplicate questions."""

    questions: int = 0  # resolve_edge calls Graphiti made
    no_existing: int = 0  # nothing of the pair to compare: delegated as asked
    rules_duplicate: int = 0  # the rules found a duplicate: inner not asked
    rules_distinct: int = 0  # the rules kept it apart: inner asked for contradictions only
    judged: int = 0  # judge_llm decided (the rules could not)
    graphiti_decided: int = 0  # left open: the inner model's own duplicate answer kept
    inner_resolve_calls: int = 0  # resolve_edge calls that reached inner
    judge_requests: int = 0  # requests judge_llm answered (canaries included)
    verdicts: deque[Verdict] = field(default_factory=lambda: deque(maxlen=1000))  # latest

    def figures(self) -> dict[str, int]:
        return {k: v for k, v in self.__dict__.items() if isinstance(v, int)}


class RelmergeDedupeClient(LLMClient):
    """A graphiti ``LLMClient`` answering ``dedupe_edges.resolve_edge`` with relmerge's
    same-fact decision and passing every other prompt to ``inner`` unchanged.

    ``judge_llm``: the model relmerge's judge asks where the rules cannot decide (with both
    entities' summaries); ``None``: the inner model's own duplicate answer decides those.
    ``driver``: the graph's driver, to read the entities' names and summaries (set by
    :func:`wrap_graphiti`). ``judge``: a ready ``RelationJudge`` (else one is built from
    ``judge_llm``, ``embedder`` and ``config``). Needs the context hook of
    :func:`relmerge_prompt_library` on the same ``Graphiti``."""

    def __init__(
        self,
        inner: LLMClient,
        judge_llm: LanguageModel | None = None,
        *,
        driver: Any | None = None,
        embedder: EmbeddingModel | None = None,
        config: DeduplicateRelationsConfig | None = None,
        judge: RelationJudge | None = None,
    ) -> None:
        check_graphiti_version()
        super().__init__(inner.config, cache=False)
        self.inner = inner
        self.driver = driver
        self.judge = judge or RelationJudge(llm=judge_llm, embedder=embedder, config=config)
        self.has_judge_llm = judge is not None or judge_llm is not None
        self.stats = ArrivalStats()
        _install_scope()

    def set_tracer(self, tracer: Any) -> None:
        super().set_tracer(tracer)
        self.inner.set_tracer(tracer)

    async def _generate_response(
        self,
        messages: list[Message],
        response_model: type[BaseModel] | None = None,
        max_tokens: int = DEFAULT_MAX_TOKENS,
        model_size: ModelSize = ModelSize.medium,
        *,
        model: str | None = None,
    ) -> dict[str, Any]:
        raise NotImplementedError("RelmergeDedupeClient answers through generate_response")

    async def generate_response(
        self,
        messages: list[Message],
        response_model: type[BaseModel] | None = None,
        max_tokens: int | None = None,
        model_size: ModelSize = ModelSize.medium,
        group_id: str | None = None,
        prompt_name: str | None = None,
        *,
        attribute_extraction: bool = False,
        model: str | None = None,
    ) -> dict[str, Any]:
        async def ask_inner() -> dict[str, Any]:
            return await self.inner.generate_response(
                messages,
                response_model,
                max_tokens,
                model_size,
                group_id,
                prompt_name,
                attribute_extraction=attribute_extraction,
                model=model,
            )

        if prompt_name != RESOLVE_EDGE:
            return await ask_inner()
        context = self._context(messages, response_model)
        self.stats.questions += 1
        existing = [item["fact"] for item in context["existing_edges"]]
        if not existing:
            self.stats.no_existing += 1
            self.stats.inner_resolve_calls += 1
            return await ask_inner()
        duplicates = await self._same_fact(str(context["new_edge"]), existing)
        if duplicates:
            return EdgeDuplicate(duplicate_facts=duplicates, contradicted_facts=[]).model_dump()
        self.stats.inner_resolve_calls += 1
        answer = dict(await ask_inner())
        if duplicates is not None:  # relmerge decided: not the same fact as any of them
            answer["duplicate_facts"] = []
        return answer

    def _context(
        self, messages: list[Message], response_model: type[BaseModel] | None
    ) -> dict[str, Any]:
        captured = _CONTEXT.get()
        _CONTEXT.set(None)  # one question, one context
        if captured is None:
            raise GraphitiContractError(
                f"{RESOLVE_EDGE} arrived without its structured context: build Graphiti "
                "with prompt_library=relmerge_prompt_library() (or call wrap_graphiti)"
            )
        context, built = captured
        keys = {"existing_edges", "new_edge", "edge_invalidation_candidates"}
        if response_model is not EdgeDuplicate or not keys <= set(context):
            raise GraphitiContractError(
                f"{RESOLVE_EDGE}: unexpected contract (response model {response_model}, "
                f"context keys {sorted(context)})"
            )
        if not messages or messages[-1].content != built:  # a stale context
            raise GraphitiContractError(f"{RESOLVE_EDGE}: the captured context is not this call's")
        indices = [item["idx"] for item in context["existing_edges"]]
        if indices != list(range(len(indices))):
            raise GraphitiContractError(f"{RESOLVE_EDGE}: existing_edges idx {indices}")
        return context

    async def _same_fact(self, new: str, existing: list[str]) -> list[int] | None:
        """Indices of ``existing`` stating the same fact as ``new`` (best first), ``[]``
        for none, ``None`` when neither the rules nor ``judge_llm`` decided."""
        judge_context, directions = await self._pair(existing)
        olds: list[dict[str, Any]] = []
        for index, fact in enumerate(existing):
            record: dict[str, Any] = {"relation_id": f"edge_{index}", "name": fact}
            record["description"] = fact
            if directions[index]:  # stored target -> source
                record |= {
                    "source_entity_id": judge_context.target_id,
                    "target_entity_id": judge_context.source_id,
                    "source_entity_name": judge_context.target_name,
                    "target_entity_name": judge_context.source_name,
                }
            olds.append(record)
        candidate = {"relation_id": "new_edge", "name": new, "description": new}
        before = self.judge.llm.stats.requests
        verdict = await self.judge.check(candidate, olds, judge_context)
        self.stats.judge_requests += self.judge.llm.stats.requests - before
        self.stats.verdicts.append(verdict)
        if verdict.tier == "policy":  # open: no model, or it gave no verdict
            self.stats.graphiti_decided += 1
            return None
        if verdict.tier in ("llm", "human"):
            self.stats.judged += 1
        if verdict.decision == "merge" and verdict.matched_relation_id is not None:
            if verdict.tier not in ("llm", "human"):
                self.stats.rules_duplicate += 1
            return [int(verdict.matched_relation_id.removeprefix("edge_"))]
        if verdict.tier not in ("llm", "human"):
            self.stats.rules_distinct += 1
        return []

    async def _pair(self, existing: list[str]) -> tuple[JudgeContext, list[bool]]:
        """The pair's context (names and summaries from the graph where the driver and the
        scope are known) and, per existing fact, whether it is stored reversed."""
        scope = _SCOPE.get()
        reversed_ = [False] * len(existing)
        if scope is None:
            return JudgeContext(), reversed_
        source, target = scope.new.source_node_uuid, scope.new.target_node_uuid
        for index, edge in enumerate(scope.related[: len(existing)]):
            if edge.fact == existing[index]:
                reversed_[index] = (edge.source_node_uuid, edge.target_node_uuid) == (
                    target,
                    source,
                )
        nodes: dict[str, EntityNode] = {}
        if self.driver is not None:
            found = await EntityNode.get_by_uuids(self.driver, [source, target])
            nodes = {node.uuid: node for node in found}

        def named(uuid: str, fallback: str) -> tuple[str, str | None]:
            node = nodes.get(uuid)
            if node is None:
                return fallback, None
            return node.name, (node.summary or None)

        source_name, source_profile = named(source, "A")
        target_name, target_profile = named(target, "B")
        context = JudgeContext(
            source_name=source_name,
            target_name=target_name,
            source_profile=source_profile,
            target_profile=target_profile,
            source_id=source,
            target_id=target,
        )
        return context, reversed_


def wrap_graphiti(
    graphiti: Any,
    judge_llm: LanguageModel | None = None,
    *,
    embedder: EmbeddingModel | None = None,
    config: DeduplicateRelationsConfig | None = None,
    judge: RelationJudge | None = None,
) -> RelmergeDedupeClient:
    """Make ``graphiti`` (a ``Graphiti``) resolve duplicate edges with relmerge: its LLM
    client is wrapped in a :class:`RelmergeDedupeClient` and its prompt library (graphiti's
    own, or the one it was built with) gets the context hook. Returns the client (its
    ``stats`` say what it did). A ``Graphiti`` built with ``llm_runtime`` is refused."""
    check_graphiti_version()
    if getattr(graphiti, "llm_runtime", None) is not None:
        raise GraphitiContractError(
            "wrap_graphiti: a Graphiti with llm_runtime routes prompts past its llm_client; "
            "build it with llm_client (and prompt_library) instead"
        )
    inner = graphiti.llm_client
    if isinstance(inner, RelmergeDedupeClient):
        return inner
    client = RelmergeDedupeClient(
        inner, judge_llm, driver=graphiti.driver, embedder=embedder, config=config, judge=judge
    )
    library = relmerge_prompt_library(graphiti.prompt_library)
    graphiti.llm_client = client
    graphiti.prompt_library = library
    graphiti.clients.llm_client = client
    graphiti.clients.prompt_library = library
    return client

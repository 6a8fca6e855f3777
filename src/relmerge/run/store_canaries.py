"""The store merge's canaries: a model measured across the batches of one store.

A store grows by many small batches, each with too few canaries to judge its model; so
the store keeps each model's latest ``window`` canary answers in its ``relmerge_meta``
table, under a key of the model's identity (provider, endpoint, model, response format:
``providers.cached.model_identity``), and every batch adds its own (read and written in
one transaction: two merges at once lose none). The canaries are the run's: mixed into
the batch's ``relation_cluster`` requests, and asked alone with the credit its bare
requests earn (carried over in the store). While the window holds fewer than
``canary_min`` answers, a batch that asked the model anything also asks its own certain
pairs until it does (at most ``canary_min`` requests in the store's life per model), so
that a model is judged before its merges are applied, not after.

A window too short to judge the model (still fewer than ``canary_min`` answers after the
batch: a batch with few certain pairs, an empty store) holds it to the same threshold on
what it has: below ``canary_agreement`` there and the batch is decided without it (its
pairs in clarifications.jsonl, "too few to judge it"), while later batches go on asking
it until the window can judge — a store's first batches are not merged by a model at
chance before it is measured.
Below ``canary_agreement`` on ``canary_min`` or more of the window's answers (surely
below, at ``canary_confidence``: ``CanaryTally.judges``) the model is distrusted: the
batch that tipped it is decided again without it (its undecided pairs in
clarifications.jsonl with the reason, as a run's), and so is every later batch, which
asks it nothing — a distrusted model gets no more canaries, so it stays distrusted until
its identity changes or canaries are turned off (``canaries = 0``).
"""

from __future__ import annotations

import asyncio
import hashlib
from dataclasses import dataclass, field
from typing import Any

import orjson

from relmerge.config import DeduplicateRelationsConfig
from relmerge.decide.canary import CanaryTally, ask_canary, pick
from relmerge.graphstore.base import RelationStore
from relmerge.providers.base import LanguageModel
from relmerge.providers.cached import model_identity
from relmerge.stages.chunk import ChunkResult

WINDOW = 50  # canary answers the store's verdict on a model looks at
PREFIX = "canaries:"


def window_key(model: LanguageModel) -> str:
    """The meta key of ``model``'s window: a digest of its identity."""
    identity = orjson.dumps(model_identity(model), option=orjson.OPT_SORT_KEYS, default=str)
    return PREFIX + hashlib.sha256(identity).hexdigest()[:24]


@dataclass
class Kept:
    """What the store keeps about one model: its identity (to read, never compared), the
    window's answers ("1" right, "0" wrong, oldest first), the credit of asked canaries
    not yet spent, and every canary answer it ever gave."""

    model: dict[str, Any] = field(default_factory=dict)
    recent: str = ""
    credit: float = 0.0
    answered: int = 0
    right: int = 0

    @classmethod
    def parse(cls, text: str | None) -> Kept:
        if not text:
            return cls()
        data = orjson.loads(text)
        return cls(
            data.get("model", {}),
            str(data.get("recent", "")),
            float(data.get("credit", 0.0)),
            int(data.get("answered", 0)),
            int(data.get("right", 0)),
        )

    def text(self) -> str:
        return orjson.dumps(self.__dict__).decode()

    def added(self, answers: list[bool], credit: float, window: int) -> Kept:
        """This with ``answers`` added (the oldest beyond ``window`` dropped) and the
        credit changed by ``credit``."""
        recent = (self.recent + "".join("1" if a else "0" for a in answers))[-window:]
        return Kept(
            self.model,
            recent,
            max(0.0, round(self.credit + credit, 6)),
            self.answered + len(answers),
            self.right + sum(answers),
        )


class StoreCanaries:
    """One merge's view of its model's window: read at the start, added to once."""

    def __init__(
        self,
        store: RelationStore,
        config: DeduplicateRelationsConfig,
        model: LanguageModel,
        window: int = WINDOW,
    ) -> None:
        self.store = store
        self.config = config
        self.model = model
        self.window = window
        self.key = window_key(model)
        self.kept = Kept()
        self.tally = CanaryTally.of(config, window)
        self.asked = 0  # this batch's canaries, answered or not
        self.mixed = 0  # of them: inside the batch's own requests
        self.extra = 0  # of them: asked as requests of their own
        self.reworked = False  # the batch was decided again without the model
        self.measured = False

    @property
    def on(self) -> bool:
        return self.config.canaries > 0 and self.model.available

    @property
    def distrusted(self) -> bool:
        return self.on and self.tally.distrusted

    @property
    def doubted(self) -> bool:
        """Not judged yet (a short window), and already below the agreement threshold on
        it: one miss in nine passes at 0.8, so a good model's first slip withholds
        nothing, while a model at chance rarely gets that far. On the agreement itself
        whatever ``canary_confidence`` says: it only withholds, for one batch."""
        recent = self.tally.recent
        if not self.on or not recent or len(recent) >= self.tally.minimum:
            return False
        return sum(recent) / len(recent) < self.config.canary_agreement

    @property
    def withheld(self) -> bool:
        """Whether the model's merges are not applied (distrusted or doubted)."""
        return self.distrusted or self.doubted

    @property
    def reason(self) -> str | None:
        if self.distrusted:
            return self.tally.reason()
        if self.doubted:
            recent = self.tally.recent
            return (
                f"the model answered {sum(recent)} of {len(recent)} certain questions right "
                f"(canaries; too few to judge it, fewer than {self.tally.minimum}): its merges "
                "are not applied until it is judged"
            )
        return None

    async def load(self) -> None:
        """The window as the store keeps it now."""
        if self.on:
            self._take(Kept.parse(await self.store.meta_value(self.key)))

    async def measure(self, result: ChunkResult) -> None:
        """The canaries ``result`` answered in its requests, and those it asks alone
        (earned, or to fill a window too short to judge), added to the store's window;
        once per merge (a conflict's re-decision measures nothing again)."""
        if not self.on or self.distrusted or self.measured:
            return
        self.measured = True
        answers = list(result.canary_answers)
        earned = self.kept.credit + self.config.canaries * result.bare_questions
        given_mixed = sum(a is not None for a in answers)
        short = self.config.canary_min - len(self.tally.recent) - given_mixed
        wanted = max(int(earned + 1e-9), short if result.llm_questions > 0 else 0)
        chosen = pick(result.canaries, wanted, ("store", self.key))
        alone = await asyncio.gather(*(ask_canary(self.model, c, self.config) for c in chosen))
        self.mixed, self.extra = len(answers), len(chosen)
        self.asked = len(answers) + len(chosen)
        given = [a for a in [*answers, *alone] if a is not None]
        credit = self.config.canaries * result.bare_questions - len(chosen)
        identity = model_identity(self.model)

        def add(text: str | None) -> str:
            kept = Kept.parse(text)
            kept.model = identity
            return kept.added(given, credit, self.window).text()

        self._take(Kept.parse(await self.store.update_meta(self.key, add)))

    def figures(self) -> dict[str, Any]:
        """The result's ``canaries``: this batch's, then the window's."""
        tally = self.tally
        return {
            "rate": self.config.canaries,
            "asked": self.asked,
            "in_requests": self.mixed,
            "extra_requests": self.extra,
            "window": self.window,
            "window_answered": tally.answered,
            "window_right": tally.right,
            "agreement": tally.agreement,
            "minimum": self.config.canary_min,
            "threshold": self.config.canary_agreement,
            "confidence": self.config.canary_confidence,
            "distrusted": self.distrusted,
            "doubted": self.doubted,
            "reason": self.reason,
            "reworked": self.reworked,
        }

    def _take(self, kept: Kept) -> None:
        self.kept = kept
        self.tally = CanaryTally.of(self.config, self.window)
        for answer in kept.recent:
            self.tally.add(answer == "1")
        # The verdict of the whole window as it is now (not of a prefix of it).
        self.tally.distrusted = self.tally.judges(kept.recent.count("1"), len(kept.recent))

"""The decision kernel: whether relations state the same fact, for every driver alike.

The batch semantic stage, the Ray engine and ``RelationJudge`` decide pairs and blocks
only through this package, so a fix here is a fix for all three. Its modules:
``lexicon`` (per-language vocabulary), ``numbers``, ``features`` (per relation),
``guards``, ``scores`` (pair modes and scores), ``tiers`` (one pair's verdict),
``clustering`` (union-find under keeps), ``block`` (one block: rules, then the LLM),
``job`` (a block as a shippable job; ``score_pairs``), ``memory`` (remembered answers),
``retry`` and ``ask`` (validated LLM questions), ``clarify`` (questions for a person),
``merged`` (the fields of a merged relation) and ``text`` (what is embedded).

The kernel does no I/O of its own: models come in through the ``LanguageModel``
protocol, vectors as arrays, remembered answers through the ``Remembered`` protocol.
"""

from __future__ import annotations

import hashlib

from relmerge.decide.lexicon import lexicon_digest

# Bump when a decision rule changes: a run's fingerprint covers it (with the vocabulary),
# so resuming a run made under other rules never mixes old and new decisions.
RULES_VERSION = 4


def rules_fingerprint() -> str:
    """What decides, as one digest: the rules' version and the shipped vocabulary."""
    return hashlib.sha256(f"{RULES_VERSION}:{lexicon_digest()}".encode()).hexdigest()

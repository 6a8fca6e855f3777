"""Plain words for the codes a run writes: one mapping for the whole page.

The decision log says ``remembered``, ``direction_unknown`` or ``llm_needed``; a reader
wants "a person's earlier answer". Every code the report shows goes through :func:`term`,
which gives a short label (for charts and table cells) and one sentence (for tooltips and
the glossary); the page keeps the code itself in a tooltip or in small print, for the
reader who greps the run's files. Labels are ASCII without ``$``: the plots draw them
with a path font (see :func:`relmerge.report.svg.label`).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Term:
    label: str  # short: a chart's tick or legend, a table cell
    explain: str  # one sentence: tooltips and the glossary
    long: str = ""  # for running text, where there is room; the label when empty

    @property
    def prose(self) -> str:
        return self.long or self.label


def _terms(entries: dict[str, tuple[str, ...]]) -> dict[str, Term]:
    return {code: Term(*entry) for code, entry in entries.items()}


# Who or what decided (decisions.jsonl ``tier``; decide/tiers.py, decide/memory.py,
# decide/block.py, stages/exact.py, judge/).
TIERS = _terms(
    {
        "identical": (
            "identical text",
            "The descriptions are identical once normalised: merged with no LLM.",
        ),
        "fuzzy_high": (
            "near-identical wording",
            "The wording is near-identical (fuzzy ratio at or above auto_merge_fuzzy) and "
            "only adds or leaves out words: merged with no LLM.",
        ),
        "fuzzy_low": (
            "different wording and meaning",
            "Both the wording and the meaning are far apart (below auto_keep_fuzzy and "
            "auto_keep_cosine): kept apart with no LLM.",
        ),
        "embedding_high": (
            "close meaning",
            "The relation vectors are close (cosine at or above auto_merge_cosine) and both "
            "names state the same known kind of relation: merged with no LLM.",
        ),
        "description_high": (
            "close descriptions",
            "The descriptions' vectors are close (cosine at or above "
            "auto_merge_description_cosine) where the names prove nothing: merged with no LLM.",
        ),
        "band": (
            "scores in between",
            "The scores fall between the merge and keep-apart bands: the LLM decides, or a "
            "person when there is no LLM.",
        ),
        "guard": (
            "held back by a guard",
            "Numbers, roles, negation, opposite meaning, voice, or an event against a state "
            "differ: never merged automatically; the LLM decides.",
        ),
        "direction": (
            "opposite directions",
            "The endpoints are reversed and the relation is directed: never merged.",
        ),
        "direction_unknown": (
            "direction unknown",
            "The endpoints are reversed and no rule knows if the relation is symmetric: the "
            "LLM decides.",
            "direction unknown (no rule knows if it is symmetric)",
        ),
        "endpoints": (
            "different entities",
            "The two relations are not between the same two entities: never merged.",
        ),
        "known_distinct": (
            "split apart before",
            "An earlier LLM answer split these two apart: never merged.",
        ),
        "llm": (
            "the LLM",
            "The language model read the records and the entities' profiles and decided.",
        ),
        "human": ("a person", "A person answered when the LLM was unsure."),
        "remembered": (
            "a person's earlier answer",
            "A person answered this question before (answers.jsonl); the answer is reused.",
        ),
        "policy": (
            "nobody: unsure policy",
            "No rule, LLM or person decided: the unsure policy (unsure_policy) applies until "
            "a person answers.",
        ),
    }
)

# Where a decision was made (decisions.jsonl ``stage``); ``all`` is the report's own, for
# counts that come from the result file without a stage.
STAGES = _terms(
    {
        "exact": ("exact stage", "Records with the same endpoints, name and type."),
        "semantic": (
            "semantic stage",
            "Relations between the same two entities that may state one fact in other words.",
        ),
        "judge": ("incremental judge", "The incremental judge (RelationJudge)."),
        "all": ("all stages", "Counts by tier from the result file (no decision log)."),
    }
)

# How a decision ended (decisions.jsonl ``verdict``; tiers' pair verdicts; unsure_policy).
VERDICTS = _terms(
    {
        "merge": ("merged", "The records were merged into one relation."),
        "keep_both": ("kept apart", "The records stay separate relations."),
        "keep": ("kept apart", "The records stay separate relations."),
        "undecided": ("left undecided", "The rules could not decide."),
        "split": (
            "split into separate facts",
            "The LLM found more than one fact in the group and merged each part.",
        ),
        "partial_merge": (
            "partly merged",
            "The LLM merged a group that a direction or an earlier split forbids in part.",
        ),
        "failed": (
            "failed: records kept",
            "No valid LLM answer: the group kept its original records.",
        ),
        "llm_needed": (
            "needs an LLM",
            "The descriptions differ and no LLM was configured: the records were kept.",
        ),
    }
)

# StepIssue ``code`` (stages/, decide/retry.py, integrations/heta/).
ISSUES = _terms(
    {
        "deduplication_failed": (
            "no valid LLM answer",
            "The LLM gave no valid answer within max_attempts: the group kept its records "
            "(or the rules' decisions).",
        ),
        "llm_budget_exhausted": (
            "LLM budget spent",
            "max_llm_requests or max_tokens was reached: the rest was decided without the LLM.",
        ),
        "llm_unavailable": (
            "LLM unreachable",
            "The LLM endpoint did not answer: the records were kept; a re-run asks again.",
        ),
        "self_loop_after_entity_mapping": (
            "both ends are one entity",
            "The entity mapping sends both endpoints to one entity: the relation was kept "
            "unmerged.",
        ),
        "possible_entity_duplicate": (
            "maybe one entity under two ids",
            "Two entity pairs hold the same relation: the entities may be duplicates; fix "
            "the entity mapping upstream.",
        ),
        "relation_rejected": (
            "record rejected",
            "An input record could not be read as a relation.",
        ),
    }
)

# Guard names (decide/guards.py, decide/tiers.py): why a pair was not merged automatically.
GUARDS = _terms(
    {
        "numbers": ("numbers differ", "The relations state different numbers or dates."),
        "role": ("roles differ", "A role only one name states, or roles the names do not share."),
        "predicate": (
            "kinds of relation differ",
            "The names state different known kinds of relation.",
        ),
        "negation": ("one is negated", "One relation says 'not'."),
        "opposite": ("opposite meanings", "The names have opposite meanings."),
        "direction": (
            "active against passive voice",
            "One is passive or a receiving form, the other active.",
        ),
        "event_state": ("an event against a state", "One states an event, the other a state."),
        "wording": (
            "words substituted",
            "Near-identical wording that puts other words in place of some.",
        ),
    }
)

# Pair scores (decide/scores.py).
SCORES = _terms(
    {
        "fuzzy": ("wording similarity", "Fuzzy ratio of name and description, 0 to 100."),
        "cosine": ("meaning similarity", "Cosine of the relation vectors, -1 to 1."),
        "name_cosine": ("name similarity", "Cosine of the relation names' vectors, -1 to 1."),
    }
)

# Band thresholds (config keys). A band's line on a score axis reads "<line> <value>".
BANDS = _terms(
    {
        "auto_keep_fuzzy": (
            "fuzzy keep-apart band",
            "Fuzzy ratio below which (with a low cosine too) a pair stays apart, no LLM.",
        ),
        "auto_merge_fuzzy": (
            "fuzzy merge band",
            "Fuzzy ratio at or above which a pair merges, no LLM.",
        ),
        "auto_keep_cosine": (
            "cosine keep-apart band",
            "Cosine below which (with a low fuzzy ratio too) a pair stays apart, no LLM.",
        ),
        "auto_merge_cosine": (
            "cosine merge band",
            "Cosine at or above which a pair whose names state the same known kind of "
            "relation merges, no LLM.",
        ),
        "similarity_threshold": (
            "entity-duplicate report",
            "Cosine at or above which relations of different entity pairs are reported as "
            "a possible entity duplicate.",
        ),
        "auto_merge_description_cosine": (
            "description merge band",
            "Description cosine at or above which a pair whose names prove nothing merges, no LLM.",
        ),
        "auto_keep_description_cosine": (
            "description keep-apart band",
            "Description cosine below which (with a low fuzzy ratio) a pair whose names "
            "prove nothing stays apart, no LLM.",
        ),
    }
)
BAND_LINES = {
    "auto_keep_fuzzy": "keep apart below",
    "auto_merge_fuzzy": "merge from",
    "auto_keep_cosine": "keep apart below",
    "auto_merge_cosine": "merge from",
    "similarity_threshold": "report entities from",
    "auto_merge_description_cosine": "merge descriptions from",
    "auto_keep_description_cosine": "keep descriptions apart below",
}

# The settings the report lists (config keys).
SETTINGS = _terms(
    {
        "semantic_merge": ("semantic stage", "Whether the semantic stage ran."),
        "unsure_policy": ("when nobody answered", "What an unanswered clarification becomes."),
        "max_rounds": ("rounds at most", "Passes over the groups that still have duplicates."),
        "max_attempts": ("tries per LLM question", "Requests about one group, retries included."),
        "llm_batch_size": (
            "records per exact-stage request",
            "Records the LLM merges in one request.",
        ),
        "semantic_batch_size": (
            "records per semantic request",
            "Records the LLM judges together in one request.",
        ),
        "max_llm_requests": ("LLM requests at most", "The run's request budget (null: none)."),
        "max_tokens": ("LLM tokens at most", "The run's token budget (null: none)."),
    }
)

# Parts of the run's time (result ``seconds``; pipeline.py).
TIMES = _terms(
    {
        "load": ("read the input", "Reading and checking the input records."),
        "exact": ("exact stage", "Grouping and merging exact duplicates."),
        "embed": ("embed texts", "Computing the relation vectors."),
        "semantic": ("semantic stage", "Scoring and deciding pairs, LLM included."),
        "waiting for workers": ("waiting for workers", "Chunks running on other workers."),
        "write": ("write outputs", "Writing the output files."),
    }
)

KINDS = {
    "tier": TIERS,
    "stage": STAGES,
    "verdict": VERDICTS,
    "issue": ISSUES,
    "guard": GUARDS,
    "score": SCORES,
    "band": BANDS,
    "setting": SETTINGS,
    "time": TIMES,
}


def term(kind: str, code: str) -> Term:
    """The plain words for ``code``; a code no table knows (a newer run, a hand edit) reads
    as its words without underscores, never as an empty label."""
    known = KINDS[kind].get(code)
    if known is not None:
        return known
    words = code.replace("_", " ").strip() or "?"
    return Term(words, f"{kind} {code}")


def plain(kind: str, code: str) -> str:
    return term(kind, code).label


def code_hint(kind: str, code: str) -> str:
    """The tooltip of a plain label: what it means, and the code the run's files use."""
    return f"{term(kind, code).explain} ({kind}: {code})"

"""Choose every automatic band on data, and measure it where it was not chosen.

    python bench/calibrate.py [--dev ../shared/data/dev] [--json FILE] [--two-stage]

The procedure that sets the shipped defaults of the automatic bands (``auto_merge_cosine``,
``auto_keep_cosine`` for pairs whose names are evidence; ``auto_merge_description_cosine``,
``auto_keep_description_cosine`` for pairs judged on their descriptions alone):

1. Every within-block pair of every labelled set (``bench/labelled.py``: the three dev
   domains, the five real graphs) is scored by the kernel itself (features, mode,
   guards, scores), with every cosine band off, so each pair shows the tier it reaches.
2. ``choose`` picks a band's threshold on tuning pairs: for a merge band the lowest
   cosine (0.50–0.99, step 0.01) such that the pairs at or above every higher threshold
   are ≥ 99% same-fact with no documented hard negative, and at least
   ``MIN_SUPPORT`` pairs are decided; for a keep band the highest cosine (−0.20–0.80)
   below which ≥ 99% of the pairs with fuzzy < ``auto_keep_fuzzy`` are distinct. No
   threshold meets that: the band is off.
3. Folds: leave one dev domain out (tune on the other two, measure on it) and, for the
   real graphs, tune on one source and measure on the others.
4. A band ships only if its pooled held-out precision is ≥ 0.99 over the dev folds and
   over the real folds, with no hard-negative merge held out; its shipped threshold is
   ``choose`` on all the data. Otherwise it is off (``None``; keep bands: −1).

Then the pipeline (``DeduplicateRelations`` over a memory store, the default embedder) on
each held-out dev domain with that fold's thresholds, rules only and with the
gold-answering judge; the same with the vocabulary held out too (``bench/vocabulary.py``:
every lexicon entry that occurs in the held-out domain's names or descriptions removed,
the shipped bands re-tuned on the other two domains with that lexicon), beside it; the
dev hard pairs through ``RelationJudge``; and the real graphs with the shipped
thresholds. Prints tables and, with ``--json``, writes every figure.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from itertools import combinations
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from hard_pairs import judge_pairs, load_pairs
from labelled import (
    DEV,
    DOMAINS,
    Labelled,
    all_sets,
    domain_of,
    pair_counts,
)
from relmerge import DeduplicateRelations, DeduplicateRelationsConfig, DictContext
from relmerge.decide.features import batch_shared_names, relation_features
from relmerge.decide.job import orientation
from relmerge.decide.lexicon import Lexicon, load_lexicon
from relmerge.decide.scores import BlockScores
from relmerge.decide.text import embedding_text
from relmerge.decide.tiers import decide_pair, same_known_kind
from relmerge.eval.gold import load_gold
from relmerge.eval.gold_judge import GoldJudge
from relmerge.model import ExtractedRelation
from relmerge.normalize import normalize_key_text
from relmerge.providers.base import LanguageModel
from relmerge.providers.embedding import CachedEmbedder, EmbeddingModel
from relmerge.providers.use_embed import UseEmbedder
from relmerge.stores import MemoryStore
from vocabulary import held_out_lexicon, using_lexicon

MIN_SUPPORT = 5
PRECISION = 0.99
MERGE_GRID = [round(0.99 - 0.01 * i, 2) for i in range(50)]  # 0.99 … 0.50
KEEP_GRID = [round(-0.2 + 0.01 * i, 2) for i in range(101)]  # −0.20 … 0.80
BANDS = {  # band -> (mode, kind)
    "auto_merge_cosine": ("full", "merge"),
    "auto_merge_description_cosine": ("description", "merge"),
    "auto_keep_cosine": ("full", "keep"),
    "auto_keep_description_cosine": ("description", "keep"),
}
OFF: dict[str, float | None] = {
    "auto_merge_cosine": None,
    "auto_merge_description_cosine": None,
    "auto_keep_cosine": -1.0,
    "auto_keep_description_cosine": -1.0,
}


@dataclass(frozen=True)
class Pair:
    dataset: str
    ids: tuple[str, str]
    mode: str
    same: bool
    hard_negative: bool
    tier: str  # the tier reached with every cosine band off ("band": open for one)
    guards: tuple[str, ...]
    known_kind: bool  # both names state one known kind of relation or role
    fuzzy: float
    cosine: float


async def pair_table(
    data: Labelled, embedder: EmbeddingModel, lexicon: Lexicon | None = None
) -> list[Pair]:
    """Every within-block pair of ``data``, scored and tiered by the kernel (with the
    shipped vocabulary, or ``lexicon``)."""
    lexicon = lexicon or load_lexicon()
    config = DeduplicateRelationsConfig(**OFF)
    relations = []
    for record in data.records:
        source, target = data.ends(record)
        if source != target:
            fields = {**record, "source_entity_id": source, "target_entity_id": target}
            relations.append(ExtractedRelation.model_validate(fields))
    names = Counter(normalize_key_text(r.name) for r in relations)
    shared = batch_shared_names(names, len(relations), config.generic_name_share)
    features = [relation_features(r, lexicon, shared) for r in relations]
    texts = [embedding_text(r, config.embedding_description_chars) for r in relations]
    descriptions = await embedder.embed(texts)
    name_vectors = await embedder.embed([r.name for r in relations])
    blocks: dict[frozenset[str], list[int]] = defaultdict(list)
    for index, relation in enumerate(relations):
        blocks[frozenset((relation.source_entity_id, relation.target_entity_id))].append(index)
    pairs = []
    for members in blocks.values():
        if len(members) < 2:
            continue
        rows = np.array(members)
        scores = BlockScores([features[i] for i in members], descriptions[rows], name_vectors[rows])
        for a, b in combinations(range(len(members)), 2):
            ra, rb = relations[members[a]], relations[members[b]]
            if frozenset((ra.relation_id, rb.relation_id)) in data.doubtful:
                continue
            scored = scores.pair(a, b)
            decision = decide_pair(
                a,
                b,
                (features[members[a]], features[members[b]]),
                orientation(ra, rb),
                scored,
                config,
            )
            clusters = frozenset((data.gold[ra.relation_id], data.gold[rb.relation_id]))
            pairs.append(
                Pair(
                    data.name,
                    (ra.relation_id, rb.relation_id),
                    scored.mode,
                    len(clusters) == 1,
                    clusters in data.hard_negatives,
                    decision.tier,
                    decision.guards,
                    same_known_kind(features[members[a]], features[members[b]]),
                    scored.fuzzy,
                    scored.cosine,
                )
            )
    return pairs


def decided(pairs: Iterable[Pair], band: str, threshold: float, fuzzy_keep: float) -> list[Pair]:
    """The pairs ``band`` at ``threshold`` decides (those that reach it: no earlier tier)."""
    mode, kind = BANDS[band]
    if kind == "merge":
        return [
            p
            for p in pairs
            if p.mode == mode
            and p.tier == "band"
            and (mode == "description" or p.known_kind)
            and p.cosine >= threshold
        ]
    return [
        p
        for p in pairs
        if p.mode == mode
        and (p.tier == "band" or (p.tier == "direction_unknown" and not p.guards))
        and p.fuzzy < fuzzy_keep
        and p.cosine < threshold
    ]


def right(pair: Pair, band: str) -> bool:
    return pair.same if BANDS[band][1] == "merge" else not pair.same


def choose(pairs: Sequence[Pair], band: str, fuzzy_keep: float) -> float | None:
    """The loosest threshold whose decisions on ``pairs`` hold (see the module docstring)."""
    grid = MERGE_GRID if BANDS[band][1] == "merge" else KEEP_GRID
    best = None
    for threshold in grid:
        chosen = decided(pairs, band, threshold, fuzzy_keep)
        good = sum(right(p, band) for p in chosen)
        if chosen and (good < PRECISION * len(chosen) or any(p.hard_negative for p in chosen)):
            break
        if len(chosen) >= MIN_SUPPORT:
            best = threshold
    return best


@dataclass
class Held:
    fold: str
    threshold: float | None
    decided: int
    right: int
    hard_negatives: int
    wrong: list[tuple[str, str]]

    @property
    def precision(self) -> float | None:
        return self.right / self.decided if self.decided else None


def held_out(
    tuning: Sequence[Pair], test: Sequence[Pair], band: str, fold: str, fuzzy_keep: float
) -> Held:
    threshold = choose(tuning, band, fuzzy_keep)
    chosen = [] if threshold is None else decided(test, band, threshold, fuzzy_keep)
    return Held(
        fold,
        threshold,
        len(chosen),
        sum(right(p, band) for p in chosen),
        sum(p.hard_negative and right(p, band) is False for p in chosen),
        [p.ids for p in chosen if not right(p, band)],
    )


def folds(pairs: Sequence[Pair]) -> dict[str, tuple[list[Pair], list[Pair]]]:
    """fold name -> (tuning pairs, held-out pairs)."""
    dev = [p for p in pairs if p.dataset.startswith("dev:")]
    real = [p for p in pairs if p.dataset.startswith("real:")]
    result = {}
    for domain in DOMAINS:
        name = f"dev:{domain}"
        result[f"dev, held out {domain}"] = (
            [p for p in dev if p.dataset != name],
            [p for p in dev if p.dataset == name],
        )
    for source in sorted({p.dataset for p in real}):
        result[f"real, tuned on {source[5:]}"] = (
            [p for p in real if p.dataset == source],
            [p for p in real if p.dataset != source],
        )
    return result


def eligible(pairs: Iterable[Pair], band: str) -> int:
    """Pairs of the band's mode that reach it: what it could decide at any threshold."""
    loosest = {"merge": -1.0, "keep": 1.01}[BANDS[band][1]]
    return len(decided(pairs, band, loosest, 101.0))


def pooled(results: Sequence[Held]) -> tuple[float | None, int, int]:
    count = sum(r.decided for r in results)
    good = sum(r.right for r in results)
    return (good / count if count else None), count, sum(r.hard_negatives for r in results)


def calibrate(pairs: Sequence[Pair], fuzzy_keep: float) -> dict[str, Any]:
    """Per band: every fold's held-out figures, the gate, and the shipped threshold."""
    report: dict[str, Any] = {}
    for band in BANDS:
        per_fold = [
            held_out(tuning, test, band, fold, fuzzy_keep)
            for fold, (tuning, test) in folds(pairs).items()
        ]
        dev_p, dev_n, dev_hn = pooled([r for r in per_fold if r.fold.startswith("dev")])
        real_p, real_n, real_hn = pooled([r for r in per_fold if r.fold.startswith("real")])
        # Each family where the band has pairs to decide must show held-out evidence:
        # decisions, ≥ 99% right, no hard negative.
        families = [
            (precision, count)
            for precision, count, prefix in ((dev_p, dev_n, "dev:"), (real_p, real_n, "real:"))
            if eligible((p for p in pairs if p.dataset.startswith(prefix)), band)
        ]
        passes = (
            bool(families)
            and all(
                count > 0 and precision >= PRECISION
                for precision, count in families
                if precision is not None
            )
            and all(count > 0 for _, count in families)
            and not (dev_hn or real_hn)
        )
        chosen = choose(pairs, band, fuzzy_keep)
        report[band] = {
            "folds": [asdict(r) | {"precision": r.precision} for r in per_fold],
            "dev_held_out": {"precision": dev_p, "decided": dev_n, "hard_negatives": dev_hn},
            "real_held_out": {"precision": real_p, "decided": real_n, "hard_negatives": real_hn},
            "chosen_on_all": chosen,
            "ships": passes and chosen is not None,
            "shipped": chosen if passes and chosen is not None else OFF[band],
        }
    return report


def fixed_bands(pairs: Sequence[Pair]) -> dict[str, Any]:
    """The bands nothing is tuned for (every set is held out for them): near-identical
    wording (fuzzy ≥ ``auto_merge_fuzzy``, no substituted word) and the hard keeps."""
    report: dict[str, Any] = {}
    for tier, kind in (("fuzzy_high", "merge"), ("direction", "keep"), ("endpoints", "keep")):
        for family in ("dev:", "real:"):
            chosen = [p for p in pairs if p.tier == tier and p.dataset.startswith(family)]
            good = sum(p.same if kind == "merge" else not p.same for p in chosen)
            report[f"{tier} ({family[:-1]})"] = {
                "decided": len(chosen),
                "precision": good / len(chosen) if chosen else None,
                "wrong": [p.ids for p in chosen if (p.same if kind == "keep" else not p.same)],
            }
    return report


def fold_settings(report: dict[str, Any], fold: str) -> dict[str, float | None]:
    """The thresholds a fold tuned, for the bands that ship (the others stay off)."""
    settings: dict[str, float | None] = {}
    for band, entry in report.items():
        threshold = next(f["threshold"] for f in entry["folds"] if f["fold"] == fold)
        settings[band] = threshold if entry["ships"] and threshold is not None else OFF[band]
    return settings


async def run_step(
    data: Labelled, settings: dict[str, Any], llm: LanguageModel | None, embedder: EmbeddingModel
) -> tuple[dict[str, str], dict[str, Any]]:
    store = MemoryStore()
    keys = []
    for record in data.records:
        key = f"relations/{record['relation_id']}.json"
        store.objects[key] = json.dumps(record).encode()
        keys.append(key)
    config = DeduplicateRelationsConfig(
        decisions_key=None, clarifications_key=None, rejected_key=None, **settings
    )
    context = DictContext(
        components={"stores.objects": store, "models.language": llm, "models.embedding": embedder},
        artifacts={
            "relation_keys": keys,
            "entity_id_mapping": data.mapping,
            "entities": data.entities,
        },
    )
    output = await DeduplicateRelations(config).run(context)
    return output.relation_id_mapping, output.result


async def pipeline_row(
    data: Labelled, settings: dict[str, Any], judge: bool, embedder: EmbeddingModel
) -> dict[str, Any]:
    llm = GoldJudge(data.gold, records=data.records) if judge else None
    mapping, result = await run_step(data, settings, llm, embedder)
    counts = pair_counts(data, mapping)
    return {
        "set": data.name,
        "llm": "gold judge" if judge else "none",
        "precision": round(counts.precision, 4),
        "recall": round(counts.recall, 4),
        "f1": round(counts.f1, 4),
        "true_pairs": counts.true_positive,
        "wrong_merges": [list(pair) for pair in counts.wrong],
        "hard_negative_merges": [list(pair) for pair in counts.hard_negative_merges],
        "llm_requests": result["llm_requests"],
        "requests_per_relation": round(result["llm_requests"] / max(1, len(data.records)), 4),
        "decisions_by_tier": result.get("decisions_by_tier", {}),
    }


def show_bands(report: dict[str, Any]) -> None:
    print(f"{'band':<31}{'fold':<44}{'threshold':>10}{'decided':>9}{'held-out P':>12}")
    for band, entry in report.items():
        for f in entry["folds"]:
            p = "—" if f["precision"] is None else f"{f['precision']:.3f}"
            t = "off" if f["threshold"] is None else f"{f['threshold']:.2f}"
            print(f"{band:<31}{f['fold']:<44}{t:>10}{f['decided']:>9}{p:>12}")
        for where in ("dev_held_out", "real_held_out"):
            pooled_p = entry[where]["precision"]
            shown = "—" if pooled_p is None else f"{pooled_p:.3f}"
            print(
                f"{band:<31}{'pooled ' + where.replace('_', ' '):<44}{'':>10}"
                f"{entry[where]['decided']:>9}{shown:>12}"
            )
        print(
            f"{band:<31}{'SHIPPED':<44}{entry['shipped']!s:>10}   (chosen on all: "
            f"{entry['chosen_on_all']}, ships: {entry['ships']})"
        )


async def vocabulary_folds(
    sets: Sequence[Labelled],
    shipped: dict[str, float | None],
    fuzzy_keep: float,
    embedder: EmbeddingModel,
) -> list[dict[str, Any]]:
    """Each dev domain held out with its vocabulary: the lexicon loses every entry that
    occurs in the domain's relation names or descriptions; the bands that ship are tuned
    on the other two domains' pairs, scored with that lexicon; then the domain is run."""
    dev = {data.name: data for data in sets if data.name.startswith("dev:")}
    rows = []
    for domain in DOMAINS:
        held = dev[f"dev:{domain}"]
        lexicon, removed = held_out_lexicon(
            text for record in held.records for text in (record["name"], record["description"])
        )
        pairs = [p for data in dev.values() for p in await pair_table(data, embedder, lexicon)]
        tuning = [p for p in pairs if p.dataset != held.name]
        test = [p for p in pairs if p.dataset == held.name]
        settings: dict[str, float | None] = dict(OFF)
        bands = {}
        for band, threshold in shipped.items():
            if threshold != OFF[band]:
                result = held_out(tuning, test, band, f"dev, held out {domain}", fuzzy_keep)
                settings[band] = OFF[band] if result.threshold is None else result.threshold
                bands[band] = asdict(result) | {"precision": result.precision}
        with using_lexicon(lexicon):
            runs = [await pipeline_row(held, settings, judge, embedder) for judge in (False, True)]
        rows.append(
            {
                "domain": domain,
                "entries_removed": len(removed),
                "removed": [f"{key}: {entry}" for key, entry in removed],
                "bands": bands,
                "settings": settings,
                "rules_only": runs[0],
                "gold_judge": runs[1],
            }
        )
    return rows


def show_vocabulary(rows: Sequence[dict[str, Any]], today: Sequence[dict[str, Any]]) -> None:
    print(
        "\nVocabulary held out too (every lexicon entry occurring in the held-out domain's"
        " names or descriptions removed), beside the shipped vocabulary"
    )
    print(
        f"{'domain':<8}{'vocabulary':<12}{'removed':>8}{'band n':>8}{'band P':>8}"
        f"{'P':>7}{'R':>7}{'wrong':>7}{'HN':>4}{'gold P':>8}{'gold R':>8}{'req/rel':>9}"
    )
    for row in rows:
        name = f"dev:{row['domain']}"
        shipped = [r for r in today if r["set"] == name]
        none, gold = row["rules_only"], row["gold_judge"]
        band = row["bands"].get("auto_merge_cosine", {})
        shown = "—" if band.get("precision") is None else f"{band['precision']:.3f}"
        for label, rules, judged, removed, decided, precision in (
            ("shipped", shipped[0], shipped[1], 0, "", ""),
            ("held out", none, gold, row["entries_removed"], band.get("decided", 0), shown),
        ):
            print(
                f"{row['domain']:<8}{label:<12}{removed:>8}{decided!s:>8}{precision:>8}"
                f"{rules['precision']:>7.3f}{rules['recall']:>7.3f}{len(rules['wrong_merges']):>7}"
                f"{len(rules['hard_negative_merges']):>4}{judged['precision']:>8.3f}"
                f"{judged['recall']:>8.3f}{judged['requests_per_relation']:>9.3f}"
            )


def show_rows(title: str, rows: Sequence[dict[str, Any]]) -> None:
    print(f"\n{title}")
    print(f"{'set':<34}{'LLM':<12}{'P':>7}{'R':>7}{'F1':>7}{'req/rel':>9}{'HN merges':>11}")
    for row in rows:
        print(
            f"{row['set']:<34}{row['llm']:<12}{row['precision']:>7.3f}{row['recall']:>7.3f}"
            f"{row['f1']:>7.3f}{row['requests_per_relation']:>9.3f}"
            f"{len(row['hard_negative_merges']):>11}"
        )


async def main_async(args: argparse.Namespace) -> dict[str, Any]:
    embedder = CachedEmbedder(UseEmbedder())
    sets = all_sets(args.dev)
    fuzzy_keep = DeduplicateRelationsConfig().auto_keep_fuzzy
    pairs = [p for data in sets for p in await pair_table(data, embedder)]
    report = calibrate(pairs, fuzzy_keep)
    show_bands(report)
    fixed = fixed_bands(pairs)
    print(f"\n{'fixed band (not tuned: all held out)':<48}{'decided':>9}{'precision':>11}")
    for name, entry in fixed.items():
        shown = "—" if entry["precision"] is None else f"{entry['precision']:.3f}"
        print(f"{name:<48}{entry['decided']:>9}{shown:>11}")
    shipped = {band: entry["shipped"] for band, entry in report.items()}
    by_name = {data.name: data for data in sets}
    dev_rows, hard_rows = [], []
    gold = load_gold(args.dev / "gold.jsonl")
    hard = load_pairs(args.dev)
    for domain in DOMAINS:
        settings = fold_settings(report, f"dev, held out {domain}")
        data = by_name[f"dev:{domain}"]
        for judge in (False, True):
            row = await pipeline_row(data, settings, judge, embedder)
            dev_rows.append(row | {"settings": settings})
        chosen = [p for p in hard if domain_of(p["existing"]) == domain]
        judged = await judge_pairs(
            args.dev, chosen, gold, DeduplicateRelationsConfig(**settings), embedder
        )
        hard_rows.append({"domain": domain, "settings": settings, **judged})
    show_rows("Pipeline on each held-out dev domain (that fold's thresholds)", dev_rows)
    vocabulary_rows = await vocabulary_folds(sets, shipped, fuzzy_keep, embedder)
    show_vocabulary(vocabulary_rows, dev_rows)
    print("\nDev hard pairs through RelationJudge, gold-answering judge (fold thresholds)")
    for row in hard_rows:
        print(
            f"  {row['domain']:<6} pairs {row['pairs']:>3}  accuracy {row['accuracy']:.3f}  "
            f"LLM requests {row['llm_requests']} ({row['llm_requests_per_pair']:.2f} per pair)"
        )
    real_rows = []
    for data in sets:
        if data.name.startswith("real:"):
            for judge in (False, True):
                real_rows.append(await pipeline_row(data, shipped, judge, embedder))
    show_rows("Real graphs (labelled census, doubtful pairs out), shipped thresholds", real_rows)
    two_stage = await two_stage_rows(by_name, report, shipped, embedder) if args.two_stage else []
    return {
        "two_stage": two_stage,
        "bands": report,
        "fixed_bands": fixed,
        "shipped": shipped,
        "dev_held_out": dev_rows,
        "dev_vocabulary_held_out": vocabulary_rows,
        "hard_pairs": hard_rows,
        "real": real_rows,
        "pairs": {name: sum(1 for p in pairs if p.dataset == name) for name in by_name},
    }


async def two_stage_rows(
    by_name: dict[str, Labelled],
    report: dict[str, Any],
    shipped: dict[str, Any],
    embedder: EmbeddingModel,
) -> list[dict[str, Any]]:
    """The pipeline rows again with the full model for every text (``two_stage_embedding =
    false``: the pipeline before the first stage) beside the default: the same figures?"""
    print("\nThe same rows, the full model for every text / the default (two stages)")
    rows = []
    for name, data in by_name.items():
        held = name.removeprefix("dev:")
        settings = (
            fold_settings(report, f"dev, held out {held}") if name.startswith("dev:") else shipped
        )
        for judge in (False, True):
            old, new = [
                await pipeline_row(data, settings | {"two_stage_embedding": two}, judge, embedder)
                for two in (False, True)
            ]
            keys = ("precision", "recall", "llm_requests", "wrong_merges", "hard_negative_merges")
            same = all(old[k] == new[k] for k in keys)
            rows.append({"set": name, "llm": old["llm"], "full_model": old, "two_stage": new})
            print(
                f"  {name:<36}{old['llm']:<11}P {old['precision']:.3f} / {new['precision']:.3f}"
                f"  R {old['recall']:.3f} / {new['recall']:.3f}  requests "
                f"{old['llm_requests']} / {new['llm_requests']}  same: {same}"
            )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dev", type=Path, default=DEV)
    parser.add_argument(
        "--two-stage",
        action="store_true",
        help="also run every pipeline row with the full model for every text, beside the default",
    )
    parser.add_argument("--json", type=Path, help="write every figure to this file")
    args = parser.parse_args()
    figures = asyncio.run(main_async(args))
    if args.json:
        args.json.write_text(json.dumps(figures, ensure_ascii=False, indent=1), encoding="utf-8")


if __name__ == "__main__":
    main()

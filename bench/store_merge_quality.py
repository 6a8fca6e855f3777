"""Store-merge quality: a labelled set merged in three batches vs one ``relmerge run``.

    python bench/store_merge_quality.py [--dev ../shared/data/dev] [--real] [--llm-only]

Each set is split into three batches by document (each document's relations in one batch,
documents dealt round-robin in order of first appearance, so facts restated in other
documents meet a stored relation), merged one after another with ``relmerge merge-into``
into an empty SQLite store, then dumped. A stored id is kept forever, so the input →
stored id mappings of the batches compose by union; every mapped id must be in the dump.
The same set goes through one ``relmerge run``. A third way defers the LLM: the three
batches merged with rules only (``--llm none``), then one ``relmerge reconcile --pending
--apply`` with the judge, which asks about each block the batches touched once. Each
with the gold-answering judge of ``judge_server.py`` and rules only (``--llm none``).
Prints pair P/R/F1, hard-negative merges and LLM requests (served by the judge) per row,
then the targets: F1 within 0.01 of one run, 0 hard-negative merges, requests ≤ 1.1× one
run's; rules only: precision as in one run (≥ one run's − 0.01). ``--real`` adds the five
labelled real graphs (gold file written from ``bench/data/real_labels``). The last line is
one JSON object.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from judge_server import JudgeServer
from labelled import DEV, Labelled, load_dev, load_real, pair_counts
from real_sources import SOURCES
from relmerge.eval.gold_judge import GoldJudge
from semantic_dev import RELMERGE

BATCHES = 3


def dev_set(dev: Path) -> Labelled:
    """The whole dev set as one labelled set (its three domains together)."""
    parts = [load_dev(domain, dev) for domain in ("geo", "novel", "tech")]
    whole = parts[0]
    for part in parts[1:]:
        whole.records += part.records
        whole.gold.update(part.gold)
    whole.name = "dev"
    return whole


def split(records: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    """Batches by document, round-robin in order of first appearance; by source chunk
    when the set has fewer documents than batches (a graph of one book); by record when
    it has fewer chunks too."""
    field = "relation_id"
    for name in ("document_id", "chunk_id"):
        if len({str(r.get(name) or "") for r in records}) >= BATCHES:
            field = name
            break
    order: dict[str, int] = {}
    for record in records:
        order.setdefault(str(record.get(field) or ""), len(order))
    batches: list[list[dict[str, Any]]] = [[] for _ in range(BATCHES)]
    for record in records:
        batches[order[str(record.get(field) or "")] % BATCHES].append(record)
    return batches


def _write(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), "utf-8")
    return path


def _context(data: Labelled, root: Path) -> list[str]:
    extra: list[str] = ["--no-cache", "--no-preflight", "--quiet"]
    if data.mapping:
        mapping = root / "entity_id_mapping.json"
        mapping.write_text(json.dumps(data.mapping), "utf-8")
        extra += ["--entity-mapping", str(mapping)]
    if data.entities:
        extra += ["--entities", str(_write(root / "entities.jsonl", data.entities))]
    return extra


def _call(command: list[str]) -> None:
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode not in (0, 3):
        raise SystemExit(f"exit {done.returncode}: {' '.join(command)}\n{done.stderr[-2000:]}")


def one_run(
    data: Labelled, root: Path, llm: list[str], judge: GoldJudge | None = None
) -> dict[str, str]:
    out = root / "run"
    source = _write(root / "all.jsonl", data.records)
    _call([*RELMERGE, "run", str(source), "--output", str(out), *_context(data, root), *llm])
    mapping: dict[str, str] = json.loads((out / "relation_id_mapping.json").read_text())
    return mapping


def batches_run(
    data: Labelled, root: Path, llm: list[str], judge: GoldJudge | None = None
) -> dict[str, str]:
    """Three merges into an empty store; the composed mapping, checked against the dump.

    The gold judge answers by relation id; a stored relation that several inputs formed
    has an id of its own, so after each batch the judge learns it (the cluster of the
    inputs it holds), as a real model reads what the relation says."""
    url = f"sqlite:///{root / 'graph.db'}"
    mapping: dict[str, str] = {}
    _call([*RELMERGE, "store", "init", url])
    for number, part in enumerate(split(data.records), 1):
        source = _write(root / f"batch{number}.jsonl", part)
        out = root / f"out{number}"
        context = _context(data, root)
        _call([*RELMERGE, "merge-into", url, str(source), "-o", str(out), *context, *llm])
        mapping.update(json.loads((out / "relation_id_mapping.json").read_text()))
        if judge is not None:
            for input_id, stored_id in mapping.items():
                judge.gold.setdefault(stored_id, judge.gold[input_id])
    dump = root / "dump.jsonl"
    _call([*RELMERGE, "store", "dump", url, str(dump)])
    stored = {json.loads(line)["relation_id"] for line in dump.read_text().splitlines()}
    missing = sorted(set(mapping.values()) - stored)
    if missing:
        raise SystemExit(f"{data.name}: mapped to ids the dump lacks: {missing[:5]}")
    return mapping


def deferred_run(
    data: Labelled, root: Path, llm: list[str], judge: GoldJudge | None = None
) -> dict[str, str]:
    """Three merges with rules only, then one pending reconcile with ``llm``: the batches'
    mapping composed with the reconcile's (absorbed id -> survivor)."""
    mapping = batches_run(data, root, ["--llm", "none"], judge)
    url = f"sqlite:///{root / 'graph.db'}"
    out = root / "reconcile"
    quiet = ["--no-cache", "--no-preflight", "--quiet"]
    _call([*RELMERGE, "reconcile", url, "--pending", "--apply", "-o", str(out), *quiet, *llm])
    absorbed: dict[str, str] = json.loads((out / "reconcile_mapping.json").read_text())
    return {input_id: absorbed.get(stored, stored) for input_id, stored in mapping.items()}


WAYS = {"one run": one_run, "3 batches": batches_run, "3 rules, 1 reconcile": deferred_run}


def measure(data: Labelled, root: Path, gold_llm: bool) -> dict[str, Any]:
    """One run and three batches of ``data``: pair figures and requests of each."""
    row: dict[str, Any] = {}
    for how, work in WAYS.items():
        if not gold_llm and work is deferred_run:
            continue  # the same as three batches with rules only
        folder = root / how.replace(" ", "_")
        folder.mkdir(parents=True)
        if gold_llm:
            with JudgeServer(GoldJudge(data.gold, 0.0, records=data.records)) as server:
                llm = ["--llm-base-url", server.base_url, "--llm-model", "gold-judge"]
                mapping = work(data, folder, llm, server.judge)
                requests = server.requests
        else:
            mapping, requests = work(data, folder, ["--llm", "none"]), 0
        counts = pair_counts(data, mapping)
        row[how] = {
            "pair_precision": round(counts.precision, 4),
            "pair_recall": round(counts.recall, 4),
            "pair_f1": round(counts.f1, 4),
            "hard_negative_merges": len(counts.hard_negative_merges),
            "wrong_merges": len(counts.wrong),
            "llm_requests": requests,
        }
    return row


def targets(rows: dict[str, dict[str, Any]]) -> dict[str, bool]:
    checks: dict[str, bool] = {}
    for label, row in rows.items():
        one, three = row["one run"], row["3 batches"]
        if label.endswith("gold judge"):
            for how in ("3 batches", "3 rules, 1 reconcile"):
                done = row[how]
                checks[f"{label} / {how}: F1 within 0.01"] = (
                    abs(one["pair_f1"] - done["pair_f1"]) <= 0.01
                )
                checks[f"{label} / {how}: 0 hard-negative merges"] = (
                    done["hard_negative_merges"] == 0
                )
                checks[f"{label} / {how}: requests <= 1.1x"] = (
                    done["llm_requests"] <= 1.1 * one["llm_requests"]
                )
        else:
            checks[f"{label}: precision as one run"] = (
                three["pair_precision"] >= one["pair_precision"] - 0.01
            )
    return checks


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dev", type=Path, default=DEV)
    parser.add_argument("--real", action="store_true", help="Also the labelled real graphs.")
    parser.add_argument("--real-only", action="store_true", help="Only the real graphs.")
    args = parser.parse_args()
    real = [load_real(s) for s in SOURCES] if args.real or args.real_only else []
    sets = ([] if args.real_only else [dev_set(args.dev)]) + real
    rows: dict[str, dict[str, Any]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for data in sets:
            for gold_llm, how in ((True, "gold judge"), (False, "rules only")):
                label = f"{data.name}, {how}"
                folder = Path(tmp) / label.replace(" ", "_").replace(",", "")
                rows[label] = measure(data, folder, gold_llm)
                print(label, json.dumps(rows[label]), flush=True)  # kept if a later set fails
    print(
        f"{'set':<44}{'how':<22}{'pair P':>8}{'pair R':>8}{'pair F1':>8}{'hard-neg':>9}"
        f"{'wrong':>7}{'requests':>9}"
    )
    for label, row in rows.items():
        for how, f in row.items():
            print(
                f"{label:<44}{how:<22}{f['pair_precision']:>8.3f}{f['pair_recall']:>8.3f}"
                f"{f['pair_f1']:>8.3f}{f['hard_negative_merges']:>9}{f['wrong_merges']:>7}"
                f"{f['llm_requests']:>9}"
            )
    checks = targets(rows)
    for name, value in checks.items():
        print(f"  {name}: {value}")
    print(json.dumps({"rows": rows, "targets": checks}, ensure_ascii=False))


if __name__ == "__main__":
    main()

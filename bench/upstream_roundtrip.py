"""GraphRAG's own loaders read what relmerge exports, for every GraphRAG generation.

    .venv/bin/python bench/upstream_roundtrip.py [--upstream ../shared/data/upstream]

The ``graphrag`` package pins dependencies relmerge's environment does not accept, so it
lives in environments of its own, made here when missing (git-ignored):
``bench/.venv-graphrag`` (graphrag 3.3.0, for the 3.x folders, Parquet and CSV) and
``bench/.venv-graphrag-1.2.0`` (graphrag 1.2.0, for the ``create_final_*`` folders of
January 2025 and of GraphRAG 0.1; 0.x itself cannot be installed from the index, its
lancedb pin is gone).

Each folder of ``upstream/graphrag`` is imported, deduplicated through the CLI and
exported. So that there is something to export, the run folds four entities into others
(an entity mapping: their rows then share blocks) and its LLM is a judge on 127.0.0.1
that calls every pair it sees one fact. GraphRAG's loaders (``bench/graphrag_read.py``,
run in GraphRAG's environment) then read the original and the export; the table shows
what they read back: rows, report citations of relationships and whether each still
names the row that holds the cited facts, and ``relationship_ids`` that name a row.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import sys
import tempfile
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from judge_server import JudgeServer
from relmerge.eval.gold_judge import GoldJudge

BENCH = Path(__file__).resolve().parent
REPO = BENCH.parent
RELMERGE = [sys.executable, "-m", "relmerge"]
ENVIRONMENTS = {
    "3": ("graphrag==3.3.0", BENCH / ".venv-graphrag"),
    "1": ("graphrag==1.2.0", BENCH / ".venv-graphrag-1.2.0"),
}
# (name, source below upstream/graphrag, generation, table format)
SOURCES = [
    ("v3-tests-verbs", "v3-tests-verbs", "3", "parquet"),
    ("v3-tests-verbs (CSV)", "v3-tests-verbs/relationships.csv", "3", "csv"),
    ("v3-operation-dulce", "v3-operation-dulce", "3", "parquet"),
    ("v1-2025-01-operation-dulce", "v1-2025-01-operation-dulce", "1", "parquet"),
    ("v0.1-2024-07-operation-dulce", "v0.1-2024-07-operation-dulce", "0.1", "parquet"),
]
CITATION = re.compile(r"Relationships?\s*\(([^()\[\]]*)\)", re.I)


def environment(generation: str) -> Path:
    """The Python of the GraphRAG environment for a generation, made when missing."""
    requirement, folder = ENVIRONMENTS["3" if generation == "3" else "1"]
    python = folder / "bin" / "python"
    if not python.is_file():
        print(f"creating {folder} ({requirement}) …", file=sys.stderr)
        subprocess.run([sys.executable, "-m", "venv", str(folder)], check=True)
        subprocess.run([str(python), "-m", "pip", "install", "-q", "--upgrade", "pip"], check=True)
        subprocess.run([str(python), "-m", "pip", "install", "-q", requirement], check=True)
    return python


def graphrag_reads(folder: Path, generation: str, table_format: str) -> dict[str, Any]:
    done = subprocess.run(
        [
            str(environment(generation)),
            str(BENCH / "graphrag_read.py"),
            str(folder),
            generation,
            table_format,
        ],
        check=True,
        capture_output=True,
        text=True,
    )
    result: dict[str, Any] = json.loads(done.stdout)
    return result


def fold_mapping(relations: list[dict[str, Any]], pairs: int) -> dict[str, str]:
    """Up to ``pairs`` disjoint entity pairs sharing the most neighbours, one folded into
    the other."""
    around: dict[str, set[str]] = defaultdict(set)
    for r in relations:
        if r["source_entity_id"] != r["target_entity_id"]:
            around[r["source_entity_id"]].add(r["target_entity_id"])
            around[r["target_entity_id"]].add(r["source_entity_id"])
    shared: Counter[tuple[str, str]] = Counter()
    for ends in around.values():
        ordered = sorted(ends)
        for i, first in enumerate(ordered):
            for second in ordered[i + 1 :]:
                shared[(first, second)] += 1
    mapping: dict[str, str] = {}
    for (first, second), _ in shared.most_common():
        if len(mapping) == pairs:
            break
        if not {first, second} & (set(mapping) | set(mapping.values())):
            mapping[first] = second
    return mapping


def import_run_export(source: Path, work: Path) -> tuple[dict[str, str], dict[str, Any], str]:
    """The run's relation id mapping, the export summary and what the export printed."""
    subprocess.run(
        [*RELMERGE, "import", "graphrag", str(source), "-o", str(work)],
        check=True,
        capture_output=True,
    )
    relations = [json.loads(line) for line in (work / "relations.jsonl").read_text().splitlines()]
    (work / "mapping.json").write_text(json.dumps(fold_mapping(relations, 4)))
    judge = GoldJudge({r["relation_id"]: "one fact" for r in relations}, records=relations)
    with JudgeServer(judge) as server:
        subprocess.run(
            [
                *RELMERGE, "run", str(work / "relations.jsonl"),
                "--entities", str(work / "entities.jsonl"),
                "--entity-mapping", str(work / "mapping.json"),
                "--output", str(work / "run"), "--embedding", "hash", "--quiet",
                "--llm-base-url", server.base_url, "--llm-model", "one-fact-judge",
            ],
            check=True,
        )  # fmt: skip
    target = work / "export"
    done = subprocess.run(
        [
            *RELMERGE,
            "export",
            "graphrag",
            str(work / "run"),
            "--original",
            str(source),
            "--to",
            str(target),
        ],
        check=True,
        capture_output=True,
        text=True,
    )
    mapping = json.loads((work / "run" / "relation_id_mapping.json").read_text())
    summary = json.loads((target / "relmerge_export.json").read_text())
    return mapping, summary, done.stdout.strip()


def cited(text: str) -> list[list[str]]:
    return [
        [i.strip() for i in m.split(",") if i.strip().isdigit()] for m in CITATION.findall(text)
    ]


def check(before: dict[str, Any], after: dict[str, Any], mapping: dict[str, str]) -> dict[str, Any]:
    """What GraphRAG read from the export, against what it read from the original."""
    old = {r["id"]: r for r in before["relationships"]}
    new = {r["id"]: r for r in after["relationships"]}
    old_by_short = {r["short_id"]: r["id"] for r in before["relationships"]}
    new_by_short = {r["short_id"]: r["id"] for r in after["relationships"]}
    outputs: dict[str, list[str]] = defaultdict(list)
    for rid, output in mapping.items():
        outputs[output].append(rid)
    holder = {
        rid: next(m for m in members if m in new) for members in outputs.values() for rid in members
    }
    kept_ids = all(new[rid]["short_id"] == old[rid]["short_id"] for rid in new)
    reports_before = {r["id"]: r["full_content"] for r in before["reports"]}
    total = resolved = faithful = repeated = 0
    for report in after["reports"]:
        pairs = zip(
            cited(reports_before.get(report["id"], "")), cited(report["full_content"]), strict=True
        )
        for old_ids, new_ids in pairs:
            repeated += len(new_ids) != len(set(new_ids))
            for short in old_ids:
                if short not in old_by_short:
                    continue  # a citation GraphRAG's own report got wrong
                total += 1
                wanted = holder.get(old_by_short[short], old_by_short[short])
                targets = [new_by_short.get(s) for s in new_ids]
                resolved += any(t is not None for t in targets)
                faithful += wanted in targets
    listed = [i for u in after["text_units"] for i in u["relationship_ids"]]
    return {
        "rows read": f"{len(before['relationships'])} → {len(after['relationships'])}",
        "entities / reports / claims": (
            f"{after['entities']} / {len(after['reports'])} / {after['covariates']}"
        ),
        "ids kept": "yes" if kept_ids else "NO",
        "citations → facts": f"{faithful} / {total}",
        "citing an id twice": repeated,
        "relationship_ids found": f"{sum(i in new for i in listed)} / {len(listed)}",
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--upstream", type=Path, default=REPO.parent / "shared" / "data" / "upstream"
    )
    args = parser.parse_args()
    graphrag = args.upstream / "graphrag"
    rows = []
    with tempfile.TemporaryDirectory(prefix="relmerge-upstream-") as temporary:
        for name, relative, generation, table_format in SOURCES:
            work = Path(temporary) / name.replace(" ", "_")
            copy = work / "original"
            shutil.copytree(graphrag / relative.split("/")[0], copy)
            source = copy / relative.split("/", 1)[1] if "/" in relative else copy
            mapping, summary, printed = import_run_export(source, work)
            export = work / "export"
            before = graphrag_reads(copy, generation, table_format)
            after = graphrag_reads(export, generation, table_format)
            figures = check(before, after, mapping)
            rows.append((name, after["loader"], summary, figures))
            print(f"{name}: {printed}", file=sys.stderr)
    print(
        "GraphRAG's own loaders on relmerge's exports "
        "(entity folds + a judge that merges every pair it sees)"
    )
    print(
        f"{'folder':30} {'merged':>6} {'cites rewritten':>15}  "
        + "  ".join(f"{k}" for k in rows[0][3])
    )
    for name, _, summary, figures in rows:
        print(
            f"{name:30} {summary['merged_rows']:>6} {summary['citations_rewritten']:>15}  "
            + "  ".join(f"{v!s:>{len(k)}}" for k, v in figures.items())
        )
    print()
    for name, loader, _, _ in rows:
        print(f"{name:30} read by {loader}")


if __name__ == "__main__":
    main()

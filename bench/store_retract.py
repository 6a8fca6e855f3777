"""``store retract``: a document taken back equals a store that never had it, and stays
fast on a big store.

    PYTHONPATH=src python bench/store_retract.py [--dev ../shared/data/dev] [--size 1000000]
    PYTHONPATH=src python bench/store_retract.py --size 100000 --skip-dev   # speed only
    PYTHONPATH=src python bench/store_retract.py --every-document --skip-speed

Equivalence (the dev set, rules only: no model, semantic stage on with the hash
embedder, the entity mapping applied): the set split into three batches by document
(round-robin in order of first appearance), merged one after another into an empty SQLite
store; then one document (by default the one with most records in merged relations)
retracted. Against a second store built from the same three batches without that
document (``--every-document``: each document in turn, each from a copy of the same
store). Compared: the stored relations as (stored id -> member ids) and as (member ids
-> description), and the member records the first store lost that were not retracted.

Speed: a store of SIZE relations loaded as it is (10 relations per document), then 1,000
records of one more document merged into 1,000 stored relations (identical facts: rule
merges). Timed: retracting a loaded document (its 10 relations removed) and retracting the
merged document (1,000 relations rebuilt from their other member). Lookups go by the
members' document and chunk indexes, never a scan. Prints one JSON object last.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from relmerge import DeduplicateRelationsConfig, ExtractedRelation, StoreMerge
from relmerge.graphstore import RelationStore, open_graph_store
from relmerge.providers.embedding import HashEmbedder
from relmerge.run.retract import retract

DEV = Path(__file__).resolve().parents[2] / "shared" / "data" / "dev"
BATCHES = 3


def jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]


def split(records: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    """Each document's records in one batch, documents dealt round-robin in order of
    first appearance (as ``store_merge_quality.py`` splits)."""
    order = list(dict.fromkeys(r["document_id"] for r in records))
    slot = {document: index % BATCHES for index, document in enumerate(order)}
    batches: list[list[dict[str, Any]]] = [[] for _ in range(BATCHES)]
    for record in records:
        batches[slot[record["document_id"]]].append(record)
    return batches


async def merged_store(
    url: str, batches: list[list[dict[str, Any]]], mapping: dict[str, str], entities: list[Any]
) -> None:
    from relmerge.model import EntityContext

    profiles = [EntityContext(**e) for e in entities]
    async with open_graph_store(url) as store:
        await store.init()
        for records in filter(None, batches):
            merge = StoreMerge(
                store, DeduplicateRelationsConfig(), embedder=HashEmbedder(), entities=profiles
            )
            await merge.merge(records, mapping)


async def shape(url: str) -> dict[str, Any]:
    """The stored relations: id -> (member ids, description), every current member id."""
    async with open_graph_store(url) as store:
        relations = [r async for r in store.dump()]
        members = await store.members(relation_ids=[r.relation_id for r in relations])
    of: dict[str, list[str]] = {}
    for member in members:
        of.setdefault(member.relation_id, []).append(member.member_id)
    return {
        "by_id": {
            r.relation_id: (tuple(sorted(of.get(r.relation_id, []))), r.description)
            for r in relations
        },
        "members": {m.member_id for m in members},
    }


def most_merged_document(batches: list[list[dict[str, Any]]], state: dict[str, Any]) -> str:
    document_of = {r["relation_id"]: r["document_id"] for b in batches for r in b}
    counts: dict[str, int] = {}
    for member_ids, _ in state["by_id"].values():
        if len(member_ids) > 1:
            for member_id in member_ids:
                document = document_of[member_id]
                counts[document] = counts.get(document, 0) + 1
    return max(sorted(counts), key=lambda d: counts[d])


def _built(dev: Path, folder: Path) -> tuple[Any, ...]:
    """The dev set, its three batches, and the shape of the store they build (built.db)."""
    records = jsonl(dev / "relations.jsonl")
    mapping = json.loads((dev / "entity_id_mapping.json").read_text(encoding="utf-8"))
    entities = jsonl(dev / "entities.jsonl")
    batches = split(records)
    built = folder / "built.db"
    asyncio.run(merged_store(f"sqlite:///{built}", batches, mapping, entities))
    before = asyncio.run(shape(f"sqlite:///{built}"))
    return records, batches, mapping, entities, before


def equivalence(dev: Path, document: str | None, folder: Path) -> dict[str, Any]:
    records, batches, mapping, entities, before = _built(dev, folder)
    document = document or most_merged_document(batches, before)
    return one_document(records, batches, mapping, entities, before, document, folder)


def every_document(dev: Path, folder: Path) -> dict[str, Any]:
    """Each document of the set retracted in turn, each from a copy of the same store."""
    records, batches, mapping, entities, before = _built(dev, folder)
    rows = [
        one_document(records, batches, mapping, entities, before, document, folder)
        for document in dict.fromkeys(r["document_id"] for r in records)
    ]
    for row in rows:
        print(json.dumps(row), file=sys.stderr)
    return {
        "documents": len(rows),
        "equal_as_stored_id_to_member_ids_and_descriptions": sum(
            row["equal_as_stored_id_to_member_ids_and_descriptions"] for row in rows
        ),
        "equal_as_member_ids_and_descriptions": sum(
            row["equal_as_member_ids_and_descriptions"] for row in rows
        ),
        "member_records_lost_not_retracted": sum(
            row["member_records_lost_not_retracted"] for row in rows
        ),
        "relations_rebuilt": sum(row["rebuilt"] for row in rows),
        "relations_renamed": sum(row["renamed"] for row in rows),
        "relations_removed": sum(row["removed"] for row in rows),
        "not_equal": [
            row["document"]
            for row in rows
            if not row["equal_as_stored_id_to_member_ids_and_descriptions"]
        ],
    }


def one_document(
    records: list[dict[str, Any]],
    batches: list[list[dict[str, Any]]],
    mapping: dict[str, str],
    entities: list[Any],
    before: dict[str, Any],
    document: str,
    folder: Path,
) -> dict[str, Any]:
    full = f"sqlite:///{folder / 'full.db'}"
    for suffix in ("", "-wal", "-shm"):
        (folder / f"full.db{suffix}").unlink(missing_ok=True)
    shutil.copy(folder / "built.db", folder / "full.db")
    taken = {r["relation_id"] for r in records if r["document_id"] == document}

    async def take_back() -> Any:
        async with open_graph_store(full) as store:
            return await retract(store, [document])

    result = asyncio.run(take_back())
    after = asyncio.run(shape(full))
    without = [[r for r in b if r["document_id"] != document] for b in batches]
    (folder / "without.db").unlink(missing_ok=True)
    reference = f"sqlite:///{folder / 'without.db'}"
    asyncio.run(merged_store(reference, without, mapping, entities))
    expected = asyncio.run(shape(reference))
    by_members = {v for v in after["by_id"].values()}
    expected_by_members = {v for v in expected["by_id"].values()}
    same_ids = set(after["by_id"].items()) == set(expected["by_id"].items())
    differing = sorted(set(after["by_id"]) ^ set(expected["by_id"]))
    return {
        "document": document,
        "document_records": len(taken),
        "records": len(records),
        "relations_before": len(before["by_id"]),
        "relations_after": len(after["by_id"]),
        "relations_without_document": len(expected["by_id"]),
        "retracted_ids": len(result.retracted),
        "removed": len(result.of("removed")),
        "rebuilt": len(result.of("rebuilt")),
        "renamed": sum(1 for change in result.changes if change.renamed_to),
        "refuse_pairs": len(result.refused_pairs),
        "equal_as_member_ids_and_descriptions": by_members == expected_by_members,
        "equal_as_stored_id_to_member_ids_and_descriptions": same_ids,
        "stored_ids_differing": differing[:10],
        "member_records_lost_not_retracted": len(before["members"] - taken - after["members"]),
        "retract_seconds": result.seconds,
    }


def synthetic(i: int, prefix: str, document: str) -> ExtractedRelation:
    return ExtractedRelation(
        relation_id=f"{prefix}{i}",
        chunk_id=f"c{prefix}{i}",
        document_id=document,
        source_entity_id=f"e{i}",
        target_entity_id=f"f{i}",
        source_entity_name=f"E {i}",
        target_entity_name=f"F {i}",
        type="t",
        name="related to",
        description=f"E {i} is related to F {i}.",
        attributes={},
        source_chunk_ids=[f"c{prefix}{i}"],
    )


async def speed(url: str, size: int, merged: int) -> dict[str, Any]:
    async with open_graph_store(url) as store:
        await store.init()
        started = time.perf_counter()
        await store.load((synthetic(i, "s", f"d{i // 10}") for i in range(size)), batch_id="base")
        built = time.perf_counter() - started
        stride = max(1, size // merged)
        records = [synthetic(i * stride, "m", "dm").to_dict() for i in range(merged)]
        for item in records:
            item["relation_id"] = "m" + item["relation_id"][1:]
        config = DeduplicateRelationsConfig(semantic_merge=False)
        started = time.perf_counter()
        output = await StoreMerge(store, config).merge(records)
        merge_seconds = time.perf_counter() - started
        assert output.result.joined_count == merged, output.result
        loaded = await timed(store, f"d{size // 20}")
        folded = await timed(store, "dm")
    return {
        "size": size,
        "build_seconds": round(built, 1),
        "merge_seconds": round(merge_seconds, 1),
        "retract_loaded_document": loaded,
        "retract_merged_document": folded,
    }


async def timed(store: RelationStore, document: str) -> dict[str, Any]:
    started = time.perf_counter()
    result = await retract(store, [document])
    return {
        "document": document,
        "seconds": round(time.perf_counter() - started, 3),
        "removed": len(result.of("removed")),
        "rebuilt": len(result.of("rebuilt")),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--dev", type=Path, default=DEV)
    parser.add_argument("--document", help="The dev-set document to retract.")
    parser.add_argument(
        "--every-document", action="store_true", help="Retract each document in turn."
    )
    parser.add_argument("--size", type=int, default=1_000_000)
    parser.add_argument("--merged", type=int, default=1000)
    parser.add_argument("--skip-dev", action="store_true")
    parser.add_argument("--skip-speed", action="store_true")
    args = parser.parse_args()
    figures: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as folder:
        if args.every_document:
            figures["every_document"] = every_document(args.dev, Path(folder))
        elif not args.skip_dev:
            figures["dev"] = equivalence(args.dev, args.document, Path(folder))
            print(json.dumps(figures["dev"], indent=2), file=sys.stderr)
        if not args.skip_speed:
            url = f"sqlite:///{Path(folder) / 'big.db'}"
            figures["speed"] = asyncio.run(speed(url, args.size, args.merged))
            print(json.dumps(figures["speed"], indent=2), file=sys.stderr)
    print(json.dumps(figures))


if __name__ == "__main__":
    main()

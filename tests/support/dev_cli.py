"""The dev-set ``relmerge run`` used by the resume, kill-soak and engine tests, and what
"same outputs" means for them (DESIGN §7: relation files, mapping and key lists)."""

from __future__ import annotations

from pathlib import Path

DEV = Path(__file__).resolve().parents[2].parent / "shared" / "data" / "dev"


def dev_run_args(out: Path, base_url: str, concurrency: int, *extra: str) -> list[str]:
    """``run`` arguments: the dev set, its mapping and entities, an LLM at ``base_url``,
    the model-free embedder (fast, and the same vectors in every process)."""
    return [
        "run",
        str(DEV / "relations.jsonl"),
        "--entity-mapping",
        str(DEV / "entity_id_mapping.json"),
        "--entities",
        str(DEV / "entities.jsonl"),
        "--output",
        str(out),
        "--llm-base-url",
        base_url,
        "--llm-model",
        "gold",
        "--embedding",
        "hash",
        "--concurrency",
        str(concurrency),
        "-q",
        *extra,
    ]


def dev_rules_args(out: Path, *extra: str) -> list[str]:
    """``run`` arguments: the dev set and its mapping, no LLM, the model-free embedder."""
    return [
        "run",
        str(DEV / "relations.jsonl"),
        "--entity-mapping",
        str(DEV / "entity_id_mapping.json"),
        "--output",
        str(out),
        "--llm",
        "none",
        "--embedding",
        "hash",
        "-q",
        *extra,
    ]


def written_files(out: Path) -> dict[str, bytes]:
    """Every file a run wrote under ``out`` but its cache (``.relmerge``), by path."""
    return {
        path.relative_to(out).as_posix(): path.read_bytes()
        for path in out.rglob("*")
        if path.is_file() and ".relmerge" not in path.parts
    }


def run_outputs(out: Path) -> dict[str, bytes]:
    """The files two runs must share byte for byte to have "the same outputs"."""
    files = {
        path.relative_to(out).as_posix(): path.read_bytes()
        for path in (out / "deduplicated_relations").iterdir()
    }
    for name in ("relation_id_mapping.json", "deduplicated_relation_keys.json"):
        files[name] = (out / name).read_bytes()
    return files

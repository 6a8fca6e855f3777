"""What the GraphRAG and LightRAG adapters share.

Import: an :class:`Imported` batch (relation records, entities, and for each record the
index of the original row or edge it came from) written as ``relations.jsonl`` and
``entities.jsonl``. Export: a finished relmerge run read back (:func:`read_run`) and laid
out over the original rows or edges (:func:`layout`), so that what the run did not change
is written back exactly as it was.

Record ids are derived from the original (GraphRAG's row id; LightRAG's edge and
description), so the export re-imports the original to find where each record came from,
and refuses a run whose ids the original does not produce (an original changed since).
"""

from __future__ import annotations

import hashlib
import os
import shutil
from collections.abc import Hashable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import orjson

from relmerge.errors import InputError
from relmerge.io.write import KEYS_FILE, MAPPING_FILE, RESULT_FILE
from relmerge.model import ExtractedRelation

RELATIONS_FILE = "relations.jsonl"
ENTITIES_FILE = "entities.jsonl"
IMPORT_FILE = "import.json"
EXPORT_FILE = "relmerge_export.json"
# GraphRAG and LightRAG relations carry no label; "related" is a generic name for relmerge:
# no evidence by itself, and of unknown direction (the LLM decides A→B against B→A).
NO_LABEL = "related"
UNKNOWN_DOCUMENT = "unknown"
T = TypeVar("T", bound=Hashable)


def md5_hex(text: str) -> str:
    """LightRAG / nano-graphrag derive their ids with md5; used here to match them."""
    return hashlib.md5(text.encode("utf-8")).hexdigest()


@dataclass
class Imported:
    """One converted batch: records in original order, entities, and their origins."""

    format: str
    relations: list[dict[str, Any]]
    entities: list[dict[str, Any]]
    origins: dict[str, int]  # relation id -> index of the original row / edge
    counts: dict[str, Any] = field(default_factory=dict)


def write_atomic(path: Path, data: bytes) -> None:
    """Temporary file + rename: a crash never leaves half a file under the final name."""
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    try:
        temporary.write_bytes(data)
        os.replace(temporary, path)
    finally:
        temporary.unlink(missing_ok=True)


def jsonl_bytes(items: Iterable[Any]) -> bytes:
    return b"".join(orjson.dumps(item) + b"\n" for item in items)


def write_import(imported: Imported, source: Path, output: Path) -> dict[str, Any]:
    """Write relations.jsonl, entities.jsonl and import.json (the counts) into ``output``."""
    write_atomic(output / RELATIONS_FILE, jsonl_bytes(imported.relations))
    write_atomic(output / ENTITIES_FILE, jsonl_bytes(imported.entities))
    summary = {
        "format": imported.format,
        "source": str(source),
        "relations": len(imported.relations),
        "entities": len(imported.entities),
        **imported.counts,
    }
    write_atomic(output / IMPORT_FILE, orjson.dumps(summary, option=orjson.OPT_INDENT_2))
    return summary


@dataclass
class RunResult:
    """A finished run: output relations by id (in key order) and the input→output mapping."""

    relations: dict[str, ExtractedRelation]
    mapping: dict[str, str]


def _json(path: Path, what: str) -> Any:
    try:
        return orjson.loads(path.read_bytes())
    except FileNotFoundError:
        raise InputError(f"{what} not found: {path}") from None
    except (OSError, orjson.JSONDecodeError) as error:
        raise InputError(f"cannot read {what} {path}: {error}") from None


def read_run(out: Path) -> RunResult:
    """Read the relations and mapping of the run in OUT; a run that never finished is an error.

    The result file is written last, so its presence means the other files are complete.
    """
    if not (out / RESULT_FILE).is_file():
        raise InputError(f"{out} holds no finished relmerge run (no {RESULT_FILE})")
    keys = _json(out / KEYS_FILE, "key list")
    mapping = _json(out / MAPPING_FILE, "relation id mapping")
    if not isinstance(keys, list) or not isinstance(mapping, dict):
        raise InputError(f"{out}: {KEYS_FILE} must be an array and {MAPPING_FILE} an object")
    relations = {}
    for key in keys:
        path = out / str(key)
        try:
            relation = ExtractedRelation.model_validate_json(path.read_bytes())
        except (OSError, ValueError) as error:
            raise InputError(f"cannot read output relation {path}: {error}") from None
        relations[relation.relation_id] = relation
    return RunResult(relations, {str(k): str(v) for k, v in mapping.items()})


@dataclass(frozen=True)
class Piece:
    """One imported record at its place in an original row or edge.

    ``output`` is what the run made of it (None: the run rejected it, so the original text
    stays); ``members`` are every input id merged into that output, in input order.
    """

    relation_id: str
    output: ExtractedRelation | None
    members: tuple[str, ...]

    @property
    def unchanged(self) -> bool:
        return self.output is None or (
            self.members == (self.relation_id,) and self.output.relation_id == self.relation_id
        )


def layout(imported: Imported, run: RunResult) -> dict[int, list[Piece]]:
    """For each original unit (row or edge): the pieces it holds after the run.

    An output goes to the unit of its first member, where that member was; its other
    members disappear from their units. A unit with no piece left was merged into another.
    """
    foreign = [rid for rid in run.mapping if rid not in imported.origins]
    if foreign:
        raise InputError(
            f"the run's input relation {foreign[0]!r} (and {len(foreign) - 1} more) does not "
            "come from this original: export with the folder that was imported (unchanged)"
        )
    members: dict[str, list[str]] = {}
    for relation in imported.relations:
        rid = relation["relation_id"]
        if rid in run.mapping:
            members.setdefault(run.mapping[rid], []).append(rid)
    missing = [oid for oid in members if oid not in run.relations]
    if missing:
        raise InputError(f"the run's mapping names output {missing[0]!r}, which it has no file of")
    units: dict[int, list[Piece]] = {}
    for relation in imported.relations:
        rid = relation["relation_id"]
        unit = units.setdefault(imported.origins[rid], [])
        if rid not in run.mapping:
            unit.append(Piece(rid, None, ()))
            continue
        group = members[run.mapping[rid]]
        if group[0] == rid:
            unit.append(Piece(rid, run.relations[run.mapping[rid]], tuple(group)))
    return units


def copy_others(original: Path, target: Path, skip: Sequence[str]) -> list[str]:
    """Copy the original folder's other files (relative paths not in ``skip``) unchanged."""
    copied: list[str] = []
    if not original.is_dir():
        return copied
    for path in sorted(original.rglob("*")):
        relative = path.relative_to(original).as_posix()
        if not path.is_file() or relative in skip:
            continue
        destination = target / relative
        destination.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(path, destination)
        copied.append(relative)
    return copied


def ordered_union(lists: Iterable[Iterable[T]]) -> list[T]:
    """Items of all lists in first-seen order, without repeats."""
    return list(dict.fromkeys(item for items in lists for item in items))

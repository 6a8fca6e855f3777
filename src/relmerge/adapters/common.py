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
from collections.abc import Callable, Hashable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import orjson

from relmerge.errors import InputError
from relmerge.io.write import KEYS_FILE, MAPPING_FILE, RESULT_FILE
from relmerge.model import ExtractedRelation
from relmerge.progress import Progress, as_progress

RELATIONS_FILE = "relations.jsonl"
ENTITIES_FILE = "entities.jsonl"
IMPORT_FILE = "import.json"
EXPORT_FILE = "relmerge_export.json"
# GraphRAG and LightRAG relations carry no label; "related" is a generic name for relmerge:
# no evidence by itself, and of unknown direction (the LLM decides A→B against B→A).
NO_LABEL = "related"
UNKNOWN_DOCUMENT = "unknown"
T = TypeVar("T", bound=Hashable)
U = TypeVar("U")


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


_EVERY = 1_000  # items (records, rows, edges, files) between two steps of a progress bar


def counted(items: Iterable[U], progress: Progress, phase: str) -> Iterator[U]:
    """``items``, advancing ``phase`` by each ``_EVERY`` of them worked and by the rest at
    the end (an item counts once the loop asks for the next)."""
    pending = 0
    for item in items:
        yield item
        pending += 1
        if pending == _EVERY:
            progress.advance(phase, pending)
            pending = 0
    if pending:
        progress.advance(phase, pending)


def _earlier_import(output: Path, files: Mapping[str, bytes], source: Path) -> str | None:
    """What of an earlier import ``output`` holds that these files would replace (None:
    nothing, or the very same files: importing again changes nothing)."""
    present = [name for name in files if (output / name).is_file()]
    if not present or all((output / name).read_bytes() == files[name] for name in files):
        return None
    try:
        earlier = str(orjson.loads((output / IMPORT_FILE).read_bytes())["source"])
    except (OSError, orjson.JSONDecodeError, KeyError, TypeError):
        return f"a {present[0]} this import would replace"
    if earlier == str(source):
        return f"an earlier import of {earlier} that differs from this one (changed since?)"
    return f"an import of another graph ({earlier})"


def write_import(
    imported: Imported,
    source: Path,
    output: Path,
    *,
    overwrite: bool = False,
    progress: Progress | None = None,
) -> dict[str, Any]:
    """Write relations.jsonl, entities.jsonl and import.json (the counts) into ``output``.

    An ``output`` that holds another import (or a file of these names) is refused unless
    ``overwrite``, as ``relmerge run`` and ``relmerge export`` refuse: a run made from
    the earlier import would otherwise be left over relations it no longer describes.
    """
    progress = as_progress(progress)
    progress.start("records", len(imported.relations) + len(imported.entities))
    summary = {
        "format": imported.format,
        "source": str(source),
        "relations": len(imported.relations),
        "entities": len(imported.entities),
        **imported.counts,
    }
    files = {
        RELATIONS_FILE: jsonl_bytes(counted(imported.relations, progress, "records")),
        ENTITIES_FILE: jsonl_bytes(counted(imported.entities, progress, "records")),
        IMPORT_FILE: orjson.dumps(summary, option=orjson.OPT_INDENT_2),
    }
    earlier = _earlier_import(output, files, source)
    if earlier is not None and not overwrite:
        raise InputError(
            f"--output {output} holds {earlier}; choose another --output or pass --overwrite"
        )
    for name, data in files.items():
        write_atomic(output / name, data)
    progress.finish("records")
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


def read_run(out: Path, progress: Progress | None = None) -> RunResult:
    """Read the relations and mapping of the run in OUT; a run that never finished is an error.

    The result file is written last, so its presence means the other files are complete.
    Progress: phase ``run``, one step per ``_EVERY`` relation files read.
    """
    if not (out / RESULT_FILE).is_file():
        raise InputError(f"{out} holds no finished relmerge run (no {RESULT_FILE})")
    keys = _json(out / KEYS_FILE, "key list")
    mapping = _json(out / MAPPING_FILE, "relation id mapping")
    if not isinstance(keys, list) or not isinstance(mapping, dict):
        raise InputError(f"{out}: {KEYS_FILE} must be an array and {MAPPING_FILE} an object")
    progress = as_progress(progress)
    progress.start("run", len(keys))
    relations = {}
    for key in counted(keys, progress, "run"):
        path = out / str(key)
        try:
            relation = ExtractedRelation.model_validate_json(path.read_bytes())
        except (OSError, ValueError) as error:
            raise InputError(f"cannot read output relation {path}: {error}") from None
        relations[relation.relation_id] = relation
    progress.finish("run")
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


def other_files(original: Path | None, skip: Sequence[str]) -> list[str]:
    """The original folder's other files (relative paths not in ``skip``), in order."""
    if original is None or not original.is_dir():
        return []
    return [
        relative
        for path in sorted(original.rglob("*"))
        if path.is_file() and (relative := path.relative_to(original).as_posix()) not in skip
    ]


def copy_others(
    original: Path | None,
    target: Path,
    skip: Sequence[str],
    on_file: Callable[[], None] = lambda: None,
) -> list[str]:
    """Copy the original folder's other files (relative paths not in ``skip``) unchanged;
    ``on_file`` hears of each one copied."""
    copied = other_files(original, skip)
    for relative in copied:
        assert original is not None
        destination = target / relative
        destination.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(original / relative, destination)
        on_file()
    return copied


def ordered_union(lists: Iterable[Iterable[T]]) -> list[T]:
    """Items of all lists in first-seen order, without repeats."""
    return list(dict.fromkeys(item for items in lists for item in items))

"""The relation store's tables, its schema version, and relations as rows.

The SQL is written once for SQLite and PostgreSQL (``?`` placeholders, which the
PostgreSQL dialect turns into ``%s``); only column types differ (:class:`Types`). Every
table is prefixed ``relmerge_`` so that a store can share a PostgreSQL database.

Tables, and why each is there:

- ``relmerge_meta``: the schema version (a store of another version is refused);
- ``relmerge_relations``: the 12 contract fields (attributes and chunk ids as JSON text:
  PostgreSQL's jsonb would reorder keys, and a dump must give back what was loaded), the
  canonical pair with an index (lookups by pair), ``row_seq`` (the stable dump order);
- ``relmerge_pairs``: a version per pair (optimistic concurrency) and its relation count;
- ``relmerge_entities``: entity profiles, the judge's context;
- ``relmerge_batches``: each batch applied (``seq`` orders them), at most one applied per id;
- ``relmerge_mapping``: each batch's input id -> stored id (what the store has folded in);
- ``relmerge_decisions``: each batch's decisions, opaque JSON lines;
- ``relmerge_changes``: the change log, before and after images, from which undo restores;
- ``relmerge_vectors``: embedding cache, (embedder, text digest) -> float32 bytes;
- ``relmerge_members`` (version 2): every input record a batch folded in, whole, with the
  stored id it joined (indexed by member id, document and stored id), so that a document
  can be taken back and its relations rebuilt from their other members; the latest row
  of a member id in an applied batch is its state (an undo needs no delete);
- ``relmerge_member_chunks`` (version 2): a member row's chunk ids (lookups by chunk).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import orjson

from relmerge.graphstore.base import Pair, relation_pair
from relmerge.model import EntityContext, ExtractedRelation

SCHEMA_VERSION = 2
MIGRATES_FROM = 1  # a store of this version is upgraded in place (graphstore/meta.py)
META_TABLE = "relmerge_meta"


@dataclass(frozen=True)
class Types:
    """The column types that differ between dialects."""

    serial: str  # an integer primary key the database numbers
    integer: str
    blob: str


_TABLES = (
    """
CREATE TABLE IF NOT EXISTS relmerge_meta (
    key TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS relmerge_relations (
    row_seq {serial},
    relation_id TEXT NOT NULL UNIQUE,
    pair_lo TEXT NOT NULL,
    pair_hi TEXT NOT NULL,
    chunk_id TEXT NOT NULL,
    document_id TEXT NOT NULL,
    source_entity_id TEXT NOT NULL,
    target_entity_id TEXT NOT NULL,
    source_entity_name TEXT NOT NULL,
    target_entity_name TEXT NOT NULL,
    type TEXT NOT NULL,
    name TEXT NOT NULL,
    description TEXT NOT NULL,
    attributes TEXT NOT NULL,
    source_chunk_ids TEXT NOT NULL,
    inserted_by {integer} NOT NULL
);
CREATE INDEX IF NOT EXISTS relmerge_relations_pair ON relmerge_relations (pair_lo, pair_hi);
CREATE TABLE IF NOT EXISTS relmerge_pairs (
    pair_lo TEXT NOT NULL,
    pair_hi TEXT NOT NULL,
    version {integer} NOT NULL,
    relation_count {integer} NOT NULL,
    PRIMARY KEY (pair_lo, pair_hi)
);
CREATE TABLE IF NOT EXISTS relmerge_entities (
    entity_id TEXT PRIMARY KEY,
    name TEXT NOT NULL,
    type TEXT,
    profile TEXT
);
CREATE TABLE IF NOT EXISTS relmerge_batches (
    seq {serial},
    batch_id TEXT NOT NULL,
    kind TEXT NOT NULL,
    fingerprint TEXT NOT NULL,
    status TEXT NOT NULL,
    applied_at TEXT NOT NULL,
    undone_at TEXT,
    counts TEXT NOT NULL
);
CREATE UNIQUE INDEX IF NOT EXISTS relmerge_batches_applied
    ON relmerge_batches (batch_id) WHERE status = 'applied';
CREATE INDEX IF NOT EXISTS relmerge_batches_id ON relmerge_batches (batch_id, seq);
CREATE TABLE IF NOT EXISTS relmerge_mapping (
    batch_seq {integer} NOT NULL,
    input_id TEXT NOT NULL,
    relation_id TEXT NOT NULL,
    PRIMARY KEY (batch_seq, input_id)
);
CREATE INDEX IF NOT EXISTS relmerge_mapping_input ON relmerge_mapping (input_id, batch_seq);
CREATE INDEX IF NOT EXISTS relmerge_mapping_relation ON relmerge_mapping (relation_id);
CREATE TABLE IF NOT EXISTS relmerge_decisions (
    batch_seq {integer} NOT NULL,
    position {integer} NOT NULL,
    line TEXT NOT NULL,
    PRIMARY KEY (batch_seq, position)
);
CREATE TABLE IF NOT EXISTS relmerge_changes (
    batch_seq {integer} NOT NULL,
    position {integer} NOT NULL,
    kind TEXT NOT NULL,
    item_id TEXT NOT NULL,
    op TEXT NOT NULL,
    before TEXT,
    after TEXT NOT NULL,
    PRIMARY KEY (batch_seq, position)
);
CREATE INDEX IF NOT EXISTS relmerge_changes_item ON relmerge_changes (kind, item_id, batch_seq);
CREATE TABLE IF NOT EXISTS relmerge_vectors (
    embedder TEXT NOT NULL,
    digest {blob} NOT NULL,
    vector {blob} NOT NULL,
    PRIMARY KEY (embedder, digest)
);
"""
    + """
CREATE TABLE IF NOT EXISTS relmerge_members (
    batch_seq {integer} NOT NULL,
    position {integer} NOT NULL,
    member_id TEXT NOT NULL,
    relation_id TEXT NOT NULL,
    document_id TEXT NOT NULL,
    origin TEXT NOT NULL,
    joined_seq {integer} NOT NULL,
    record TEXT NOT NULL,
    PRIMARY KEY (batch_seq, position)
);
CREATE INDEX IF NOT EXISTS relmerge_members_member ON relmerge_members (member_id, batch_seq);
CREATE INDEX IF NOT EXISTS relmerge_members_document ON relmerge_members (document_id);
CREATE INDEX IF NOT EXISTS relmerge_members_relation ON relmerge_members (relation_id);
CREATE TABLE IF NOT EXISTS relmerge_member_chunks (
    chunk_id TEXT NOT NULL,
    batch_seq {integer} NOT NULL,
    position {integer} NOT NULL,
    PRIMARY KEY (chunk_id, batch_seq, position)
);
"""
)


def create_statements(types: Types) -> list[str]:
    """The DDL, one statement each, for a dialect's types (``IF NOT EXISTS`` throughout:
    the migration from version 1 runs it again to add the member tables)."""
    script = _TABLES.format(serial=types.serial, integer=types.integer, blob=types.blob)
    return [statement.strip() for statement in script.split(";") if statement.strip()]


RELATION_COLUMNS = (
    "relation_id, pair_lo, pair_hi, chunk_id, document_id, source_entity_id, "
    "target_entity_id, source_entity_name, target_entity_name, type, name, description, "
    "attributes, source_chunk_ids"
)
"""The columns a relation is read from and written to, in :func:`relation_row` order."""


def relation_row(relation: ExtractedRelation) -> tuple[str, ...]:
    lo, hi = relation_pair(relation)
    return (
        relation.relation_id,
        lo,
        hi,
        relation.chunk_id,
        relation.document_id,
        relation.source_entity_id,
        relation.target_entity_id,
        relation.source_entity_name,
        relation.target_entity_name,
        relation.type,
        relation.name,
        relation.description,
        orjson.dumps(relation.attributes).decode(),
        orjson.dumps(relation.source_chunk_ids).decode(),
    )


def row_relation(row: tuple[Any, ...]) -> ExtractedRelation:
    """A relation from a row of :data:`RELATION_COLUMNS` (the pair columns skipped)."""
    return ExtractedRelation.model_validate(
        {
            "relation_id": row[0],
            "chunk_id": row[3],
            "document_id": row[4],
            "source_entity_id": row[5],
            "target_entity_id": row[6],
            "source_entity_name": row[7],
            "target_entity_name": row[8],
            "type": row[9],
            "name": row[10],
            "description": row[11],
            "attributes": orjson.loads(row[12]),
            "source_chunk_ids": orjson.loads(row[13]),
        }
    )


def row_pair(row: tuple[Any, ...]) -> Pair:
    return (row[1], row[2])


def relation_json(relation: ExtractedRelation) -> str:
    return relation.to_json().decode()


def json_relation(text: str) -> ExtractedRelation:
    return ExtractedRelation.model_validate(orjson.loads(text))


ENTITY_COLUMNS = "entity_id, name, type, profile"


def entity_row(entity: EntityContext) -> tuple[str, str, str | None, str | None]:
    return (entity.entity_id, entity.name, entity.type, entity.profile)


def row_entity(row: tuple[Any, ...]) -> EntityContext:
    return EntityContext(entity_id=row[0], name=row[1], type=row[2], profile=row[3])


def entity_json(entity: EntityContext) -> str:
    return orjson.dumps(
        {
            "entity_id": entity.entity_id,
            "name": entity.name,
            "type": entity.type,
            "profile": entity.profile,
        }
    ).decode()


def json_entity(text: str) -> EntityContext:
    data = orjson.loads(text)
    return EntityContext(
        entity_id=data["entity_id"], name=data["name"], type=data["type"], profile=data["profile"]
    )

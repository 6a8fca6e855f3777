"""Input readers: a JSONL file (or a JSON array), a directory of relation JSON files, or
an object store.

Each reader yields ``RawRecord`` in input order (JSONL line order, array order; key order
for directories and stores); validation happens once, in :mod:`relmerge.io.records`.
Another tool's graph (GraphRAG, LightRAG, GraphML) is refused with the command that
converts it (:mod:`relmerge.io.foreign`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from io import BytesIO
from pathlib import Path
from typing import Any, BinaryIO

import orjson

from relmerge.errors import InputError, RelmergeError, StoreError
from relmerge.io.foreign import check_not_foreign
from relmerge.io.records import RawRecord, unreadable
from relmerge.model import EntityContext, json_type_name
from relmerge.stores import local_path, open_store
from relmerge.stores.base import ObjectStore, validate_key
from relmerge.stores.fsspec_store import redact_url
from relmerge.stores.local import LocalStore

RELATION_KEYS_FILE = "relation_keys.json"
_UTF8_BOM = b"\xef\xbb\xbf"
_UTF16_BOMS = (b"\xff\xfe", b"\xfe\xff")
_PEEK_BYTES = 65536  # enough to tell a JSON array from JSON lines by its first line


def _decode(origin: str, data: bytes) -> RawRecord:
    # A UTF-8 byte order mark (written by some Windows tools) is an encoding signature,
    # not text: without this the first record of such a file would be rejected.
    data = data.removeprefix(_UTF8_BOM)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:
        return unreadable(
            origin,
            f"not UTF-8 text ({error.reason} at byte {error.start})",
            data.decode("utf-8", errors="replace"),
        )
    try:
        return RawRecord(origin=origin, data=orjson.loads(text))
    except orjson.JSONDecodeError as error:
        return unreadable(origin, f"malformed JSON: {error}", text)


def read_jsonl(path: Path, on_bytes: Callable[[int], None] = lambda n: None) -> Iterator[RawRecord]:
    """One record per non-blank line; a bad line is a rejected record, not a failure.

    A file that is one JSON array (``[{…}, {…}]``, pretty-printed or not) gives one
    record per item instead, read item by item: a 200 MB array on one line never sits in
    memory whole. ``on_bytes`` hears how many more bytes were read.
    """
    try:
        handle = path.open("rb")
    except OSError as error:
        raise InputError(f"cannot read {path}: {error.strerror}") from None
    with handle:
        if _is_json_array(handle):
            yield from _array_items(handle, path, on_bytes)
            return
        yield from _jsonl_records(handle, str(path), path.name, on_bytes)


def _is_json_array(handle: BinaryIO) -> bool:
    """Whether the file is one JSON array rather than JSON lines (the handle is left at
    its start). A file opening with ``[`` is an array, unless its first line is a whole
    JSON value with more lines after it: JSONL whose lines are arrays, each then rejected
    with its reason."""
    head = handle.read(_PEEK_BYTES).removeprefix(_UTF8_BOM).lstrip()
    handle.seek(0)
    if not head.startswith(b"["):
        return False
    first, newline, rest = head.partition(b"\n")
    if not newline or not rest.strip():
        return True
    try:
        orjson.loads(first)
    except orjson.JSONDecodeError:
        return True  # an array written over several lines
    return False


class _CountedReads:
    """A binary file that tells ``on_bytes`` how much each read brought (progress)."""

    def __init__(self, handle: BinaryIO, on_bytes: Callable[[int], None]) -> None:
        self._handle = handle
        self._on_bytes = on_bytes

    def read(self, size: int = -1) -> bytes:
        data = self._handle.read(size)
        self._on_bytes(len(data))
        return data


def _array_items(
    handle: BinaryIO, path: Path, on_bytes: Callable[[int], None]
) -> Iterator[RawRecord]:
    """The items of a JSON array file, parsed one at a time (ijson, its C parser where
    installed): memory holds one item, not the file. An array that is not valid JSON
    (cut off, a stray comma) is an error naming the item it broke after: read as JSONL,
    every line of it would be rejected."""
    import ijson

    if handle.read(len(_UTF8_BOM)) != _UTF8_BOM:
        handle.seek(0)
    name = _printable(path.name)
    count = 0
    try:
        items = ijson.items(_CountedReads(handle, on_bytes), "item", use_float=True)
        for count, item in enumerate(items, start=1):
            yield RawRecord(origin=f"{name}:item {count}", data=item)
    except ijson.JSONError as error:
        reason = error.args[0] if error.args else error
        if isinstance(reason, bytes):
            reason = reason.decode("utf-8", errors="replace")
        where = f"after item {count}" if count else "before its first item"
        raise InputError(
            f"{path} opens a JSON array but is not valid JSON {where} "
            f"({str(reason).strip().splitlines()[0]}); "
            "give a JSON array of relation objects or JSONL (one object per line)"
        ) from None


def _jsonl_records(
    handle: BinaryIO, where: str, name: str, on_bytes: Callable[[int], None] = lambda n: None
) -> Iterator[RawRecord]:
    if handle.read(2) in _UTF16_BOMS:
        # Every line would be rejected as garbage: say once what the file is instead.
        raise InputError(f"{where} is UTF-16 text; relmerge reads UTF-8 JSONL")
    handle.seek(0)
    for number, line in enumerate(handle, start=1):
        on_bytes(len(line))
        if line.strip():
            record = _decode(f"{_printable(name)}:{number}", line.strip())
            if record.error and not line.endswith(b"\n"):
                # A writer stopped mid-record (killed, disk full): say so, not only "malformed".
                record = unreadable(
                    record.origin,
                    f"{record.error} (the file's last line, without a line end: "
                    "cut off mid-write?)",
                    record.text,
                )
            yield record


async def read_store_keys(store: ObjectStore, keys: Sequence[Any]) -> list[RawRecord]:
    """Read relation objects by key; an invalid or missing key is a rejected record (also
    from a store that raises ``FileNotFoundError`` or ``KeyError`` for it).

    A store with ``get_many`` (a remote one) fetches them concurrently first: one round
    trip per key in turn would make a remote input slow.
    """
    fetched: dict[str, bytes | StoreError] = {}
    get_many = getattr(store, "get_many", None)
    if get_many is not None:
        safe = list(dict.fromkeys(key for key in keys if _is_safe_key(key)))
        fetched = dict(zip(safe, await get_many(safe), strict=True))
    records = []
    for key in keys:
        origin = _printable(key)
        try:
            validate_key(key)
            data = fetched[key] if key in fetched else await store.get(key)
            if isinstance(data, StoreError):
                raise data
        except RelmergeError as error:
            records.append(unreadable(origin, str(error), None))
            continue
        except (FileNotFoundError, KeyError):  # a store of another library, as it says so
            records.append(unreadable(origin, f"no object {key!r} in the store", None))
            continue
        if data.startswith(_UTF16_BOMS):
            records.append(unreadable(origin, "UTF-16 text; relmerge reads UTF-8 JSON", None))
            continue
        records.append(_decode(origin, data))
    return records


def _is_safe_key(key: Any) -> bool:
    try:
        validate_key(key)
    except RelmergeError:
        return False
    return True


def _printable(key: Any) -> str:
    """A key as text that can be written to JSON and a terminal.

    A file name that is not UTF-8 is listed with lone surrogates (``\\udcff``); those are
    escaped here so that reports and the run fingerprint never fail to encode them.
    """
    text = str(key)
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


def _utf8_json(data: bytes, what: str) -> Any:
    """A whole side file (key list, entity mapping) as JSON, or a one-line error naming it.

    Bytes are decoded first: orjson's own message for bad UTF-8 speaks of surrogates.
    """
    try:
        text = data.removeprefix(_UTF8_BOM).decode("utf-8")
    except UnicodeDecodeError as error:
        raise InputError(
            f"{what} is not UTF-8 text ({error.reason} at byte {error.start})"
        ) from None
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError as error:
        raise InputError(f"{what} is not valid JSON: {error}") from None


def parse_key_list(data: bytes, what: str) -> list[Any]:
    keys = _utf8_json(data, what)
    if not isinstance(keys, list):
        raise InputError(f"{what} must be a JSON array of object keys")
    return keys


class JsonlInput:
    """A local JSONL file as records, read as they are used: a batch of a million lines
    never sits in memory as parsed objects. Iterating yields the records in line order
    (each pass re-reads the file); a file without a JSON line is an :class:`InputError`.
    ``total_bytes`` and ``bytes_read`` say how far a pass has gone (progress)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        try:
            self.total_bytes = path.stat().st_size
        except OSError:
            self.total_bytes = 0
        self.bytes_read = 0

    def _read(self, amount: int) -> None:
        self.bytes_read += amount

    def __iter__(self) -> Iterator[RawRecord]:
        count = 0
        self.bytes_read = 0
        for record in read_jsonl(self.path, self._read):
            count += 1
            yield record
        if count == 0:
            raise InputError(f"no relation records in {self.path}: the file has no JSON lines")


async def stream_input(
    path: Path | str, storage_options: Mapping[str, Any] | None = None
) -> Iterable[RawRecord]:
    """As :func:`read_input`, but a local JSONL file streams (see :class:`JsonlInput`)."""
    local = local_path(path)
    if local is not None:
        check_not_foreign(local)
    if local is not None and local.is_file() and local.suffix.lower() != ".parquet":
        return JsonlInput(local)
    return await read_input(path, storage_options)


async def read_input(
    path: Path | str, storage_options: Mapping[str, Any] | None = None
) -> list[RawRecord]:
    """Read INPUT as the CLI accepts it: JSONL or Parquet file, store or JSON directory;
    as a URL (``s3://…``), the same forms in an object store (see :func:`read_url_input`)."""
    if isinstance(path, str):
        local = local_path(path)
        if local is None:
            return await read_url_input(path, storage_options or {})
        path = local
    check_not_foreign(path)
    if path.is_file() and path.suffix.lower() == ".parquet":
        from relmerge.io.parquet import read_parquet  # pyarrow only loads when needed

        return read_parquet(path)
    if path.is_file():
        records = list(read_jsonl(path))
        if not records:
            raise InputError(f"no relation records in {path}: the file has no JSON lines")
        return records
    if not path.exists():
        raise InputError(f"input not found: {path}")
    if not path.is_dir():
        raise InputError(f"input {path} is not a regular file or a directory")
    store = LocalStore(path)
    keys_file = path / RELATION_KEYS_FILE
    if keys_file.is_file():
        keys = parse_key_list(keys_file.read_bytes(), str(keys_file))
        if not keys:
            raise InputError(f"no relation records in {path}: {RELATION_KEYS_FILE} is empty")
    else:
        keys = [key for key in await store.list() if key.endswith(".json")]
        if not keys:
            raise InputError(f"no relation records in {path}: it holds no .json files")
    return await read_store_keys(store, keys)


async def read_url_input(url: str, storage_options: Mapping[str, Any]) -> list[RawRecord]:
    """INPUT in an object store: a ``.jsonl`` object, a prefix holding relation_keys.json
    (keys relative to the prefix), or a prefix of relation ``.json`` objects (key order)."""
    shown = redact_url(url)
    head, _, name = url.rstrip("/").rpartition("/")
    if name.lower().endswith(".parquet"):
        raise InputError(f"Parquet input by URL is not supported: copy {shown} to a local file")
    if name.lower().endswith(".jsonl") and not url.endswith("/"):
        data = await open_store(head, **storage_options).get(name)
        records = list(_jsonl_records(BytesIO(data), shown, name))
        if not records:
            raise InputError(f"no relation records in {shown}: the object has no JSON lines")
        return records
    store = open_store(url, **storage_options)
    if await store.exists(RELATION_KEYS_FILE):
        what = f"{shown.rstrip('/')}/{RELATION_KEYS_FILE}"
        keys = parse_key_list(await store.get(RELATION_KEYS_FILE), what)
        if not keys:
            raise InputError(f"no relation records in {shown}: {RELATION_KEYS_FILE} is empty")
    else:
        keys = [key for key in await store.list() if key.endswith(".json")]
        if not keys:
            raise InputError(
                f"no relation records in {shown}: no {RELATION_KEYS_FILE} and no .json objects"
            )
    return await read_store_keys(store, keys)


def read_json_file(path: Path, what: str) -> Any:
    """A whole JSON file (entity mapping, gold…) with a one-line error when unreadable."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise InputError(f"{what} not found: {path}") from None
    except OSError as error:
        raise InputError(f"cannot read {what} {path}: {error.strerror}") from None
    return _utf8_json(data, f"{what} {path}")


def read_entity_mapping(path: Path) -> dict[Any, Any]:
    """An entity mapping file: a JSON object (its entries are checked by the remap stage).

    A file given on purpose that holds ``null`` or a list is an error, never "no mapping".
    """
    value = read_json_file(path, "entity mapping")
    if not isinstance(value, dict):
        raise InputError(
            f"entity mapping {path} must be a JSON object of id -> canonical id, "
            f"not {json_type_name(value)}"
        )
    return value


def read_jsonl_items(path: Path, what: str) -> Iterator[tuple[str, Any]]:
    """(``file:line``, parsed value) for each non-blank line of a JSONL side file.

    Unlike relation input, a side file (entities, gold labels, review answers) is small and
    hand-made: a bad line is an error that names it, not a rejected record.
    """
    try:
        lines = path.read_bytes().splitlines()
    except FileNotFoundError:
        raise InputError(f"{what} not found: {path}") from None
    except OSError as error:
        raise InputError(f"cannot read {what} {path}: {error.strerror}") from None
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            yield f"{path}:{number}", orjson.loads(line)
        except orjson.JSONDecodeError:
            raise InputError(f"{path}:{number}: not valid JSON") from None


def read_entities(path: Path) -> list[EntityContext]:
    """An entities JSONL file (``entity_id, name, type, profile``): the judge's context."""
    return [
        entity_from_dict(item, where) for where, item in read_jsonl_items(path, "entities file")
    ]


def entity_from_dict(item: Any, where: str) -> EntityContext:
    if not isinstance(item, dict) or not all(
        isinstance(item.get(key), str) and item[key].strip() for key in ("entity_id", "name")
    ):
        raise InputError(f"{where}: an entity needs non-empty string entity_id and name")
    profile, kind = item.get("profile"), item.get("type")
    return EntityContext(
        item["entity_id"].strip(),
        item["name"].strip(),
        profile if isinstance(profile, str) and profile.strip() else None,
        kind if isinstance(kind, str) and kind.strip() else None,
    )

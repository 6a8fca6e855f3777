"""One test body for every store backend."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from relmerge.errors import InvalidKeyError, StoreError
from relmerge.io.spool import JsonLines
from relmerge.stores import FsspecStore, LocalStore, MemoryStore, ObjectStore, validate_key
from tests.stores.conftest import Bucket


@pytest.fixture(params=["memory", "local", "fsspec-memory", "s3"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[ObjectStore]:
    if request.param == "memory":
        yield MemoryStore()
    elif request.param == "local":
        yield LocalStore(tmp_path / "store")
    elif request.param == "fsspec-memory":
        # fsspec's memory file system is one per process: a fresh root per test.
        top = f"/relmerge-{uuid.uuid4().hex}"
        fsspec_store = FsspecStore(f"memory://{top}/store")
        yield fsspec_store
        if fsspec_store.fs.exists(top):
            fsspec_store.fs.rm(top, recursive=True)
    else:  # a real S3 server (moto) on 127.0.0.1, a bucket of its own
        bucket: Bucket = request.getfixturevalue("s3_bucket")
        yield FsspecStore(bucket.url("store"))


async def test_put_get_exists_list_delete(store: ObjectStore) -> None:
    await store.put("deduplicated_relations/r1.json", "上海".encode())
    await store.put("deduplicated_relations/r0.json", b"{}")
    await store.put("other.json", b"x")
    assert await store.get("deduplicated_relations/r1.json") == "上海".encode()
    assert await store.exists("other.json")
    assert not await store.exists("missing.json")
    assert await store.list("deduplicated_relations/") == [
        "deduplicated_relations/r0.json",
        "deduplicated_relations/r1.json",
    ]
    await store.delete("other.json")
    assert not await store.exists("other.json")
    with pytest.raises(StoreError):
        await store.get("other.json")


async def test_a_log_is_stored_in_parts_with_the_same_bytes(store: ObjectStore) -> None:
    log = JsonLines()
    log.extend({"n": i, "text": "上海" * (i % 7)} for i in range(30_000))
    tail = JsonLines()
    tail.extend([{"last": True}])
    await log.put(store, "decisions.jsonl", tail)
    stored = await store.get("decisions.jsonl")
    lines = stored.splitlines()
    assert len(lines) == 30_001 and lines[-1] == b'{"last":true}'
    assert lines[12] == '{"n":12,"text":"上海上海上海上海上海"}'.encode()
    assert stored == b"".join(log.parts(1000)) + b'{"last":true}\n'
    log.close()
    tail.close()


@pytest.mark.parametrize(
    "key", ["", "/etc/passwd", "../x.json", "a/../../b", "a//b", "a/./b", "C:\\x", "a\\b"]
)
async def test_unsafe_keys_are_refused(store: ObjectStore, key: str) -> None:
    with pytest.raises(InvalidKeyError):
        await store.put(key, b"x")
    with pytest.raises(InvalidKeyError):
        validate_key(key)


async def test_local_writes_are_atomic_and_leave_no_temp_files(tmp_path: Path) -> None:
    store = LocalStore(tmp_path)
    await store.put("a/b.json", b"old")
    await store.put("a/b.json", b"new")
    assert (tmp_path / "a" / "b.json").read_bytes() == b"new"
    assert [p.name for p in (tmp_path / "a").iterdir()] == ["b.json"]
    # A temp file left by a killed writer is never listed as an object.
    (tmp_path / "a" / ".b.json.123.tmp").write_bytes(b"half")
    assert await store.list() == ["a/b.json"]


async def test_temp_files_of_killed_writers_are_swept_and_only_under_the_prefix(
    tmp_path: Path,
) -> None:
    store = LocalStore(tmp_path)
    await store.put("deduplicated_relations/a.json", b"{}")
    dead = tmp_path / "deduplicated_relations" / ".b.json.999999999.3.tmp"
    dead.write_bytes(b"half")
    elsewhere = tmp_path / "other" / ".c.json.999999999.4.tmp"
    elsewhere.parent.mkdir()
    elsewhere.write_bytes(b"half")
    assert await store.list("deduplicated_relations/") == ["deduplicated_relations/a.json"]
    assert await store.remove_interrupted_writes("deduplicated_relations/") == 1
    assert not dead.exists() and elsewhere.exists()
    assert (tmp_path / "deduplicated_relations" / "a.json").read_bytes() == b"{}"


async def test_put_many_writes_new_objects_in_place_and_replaces_old_ones_atomically(
    tmp_path: Path,
) -> None:
    store = LocalStore(tmp_path)
    await store.put_many([("r/a.json", b"first"), ("r/b.json", b"other")])
    a = tmp_path / "r" / "a.json"
    inode = a.stat().st_ino
    assert a.read_bytes() == b"first"
    # An object the store already holds is replaced by a rename (a new inode): a reader of
    # the old object never sees it cut short.
    await store.put_many([("r/a.json", b"second")])
    assert a.read_bytes() == b"second" and a.stat().st_ino != inode
    assert sorted(p.name for p in (tmp_path / "r").iterdir()) == ["a.json", "b.json"]


async def test_put_many_leaves_no_new_object_cut_short_when_a_write_fails(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = LocalStore(tmp_path)

    def full_disk(descriptor: int, data: object) -> int:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr("relmerge.stores.local.os.write", full_disk)
    with pytest.raises(StoreError, match="No space left"):
        await store.put_many([("r/a.json", b"data")])
    assert not (tmp_path / "r" / "a.json").exists()

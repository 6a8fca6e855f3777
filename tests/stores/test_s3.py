"""S3 through fsspec against a real S3 server (moto, HTTP on 127.0.0.1): the store, and
``relmerge run`` with INPUT and OUT in a bucket.

The shared store body (tests/stores/test_stores.py) runs on S3 through its ``s3`` param;
here are the S3-specific behaviours and the CLI end to end. Outputs are downloaded from the
bucket and checked with the same invariants as a local run (tests/cli/test_run_cli.py).
"""

from __future__ import annotations

import asyncio
import hashlib
from pathlib import Path
from typing import Any

import orjson
import pytest
from click.testing import CliRunner

from relmerge.cli import main
from relmerge.errors import InvalidKeyError, StoreError
from relmerge.stores import FsspecStore, LocalStore, local_path, open_store
from tests.cli.test_run_cli import EXAMPLE, check_outputs
from tests.stores.conftest import Bucket
from tests.support.dev_cli import run_outputs
from tests.support.llm_server import LLMServer, merge_first_handler

RELATIONS = EXAMPLE / "relations.jsonl"
MAPPING = EXAMPLE / "entity_id_mapping.json"
LINES = [line for line in RELATIONS.read_bytes().splitlines() if line.strip()]


def _run(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(main, list(args))
    return result.exit_code, result.output


def run_args(input_url: str, out: str, *extra: str) -> list[str]:
    """The bundled example, rules only, model-free embedder: fast and deterministic."""
    return [
        "run",
        input_url,
        "--output",
        out,
        "--entity-mapping",
        str(MAPPING),
        "--embedding",
        "hash",
        "--llm",
        "none",
        "-q",
        *extra,
    ]


def upload(bucket: Bucket, key: str, data: bytes) -> None:
    FsspecStore(bucket.url()).fs.pipe_file(f"{bucket.name}/{key}", data)


def upload_relation_files(bucket: Bucket, prefix: str, *, with_keys_file: bool) -> list[str]:
    """One JSON object per relation (Heta style), named so that name order = input order."""
    keys = [f"relations/{index:03d}.json" for index in range(len(LINES))]
    for key, line in zip(keys, LINES, strict=True):
        upload(bucket, f"{prefix}/{key}", line)
    if with_keys_file:
        upload(bucket, f"{prefix}/relation_keys.json", orjson.dumps(keys))
    return keys


def download(url: str, dest: Path) -> Path:
    """Every object under ``url`` into ``dest``, through the store under test."""

    async def copy() -> None:
        source, target = FsspecStore(url), LocalStore(dest)
        for key in await source.list():
            await target.put(key, await source.get(key))

    asyncio.run(copy())
    return dest


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> dict[str, bytes]:
    """The outputs of the same run on the local disk, for the S3 runs to equal."""
    out = tmp_path_factory.mktemp("reference") / "out"
    code, text = _run(*run_args(str(RELATIONS), str(out)))
    assert code == 0, text
    return run_outputs(out)


# The store on S3 ------------------------------------------------------------------------


async def test_many_objects_in_parallel_and_prefix_listing(s3_bucket: Bucket) -> None:
    store = FsspecStore(s3_bucket.url("runs/a"), concurrency=4)
    items = [(f"d/{index}.json", f"{index} 上海".encode()) for index in range(40)]
    await store.put_many(items)
    assert await store.list("d/1") == sorted(key for key, _ in items if key.startswith("d/1"))
    got = await store.get_many(["d/7.json", "d/missing.json", "d/39.json"])
    assert got[0] == "7 上海".encode() and got[2] == "39 上海".encode()
    assert isinstance(got[1], StoreError) and "no object 'd/missing.json'" in str(got[1])
    # Keys are relative to the URL: the objects sit under the prefix, nothing above it.
    assert await FsspecStore(s3_bucket.url()).list() == sorted(f"runs/a/{k}" for k, _ in items)
    assert not await store.exists("d")  # a "directory" is not an object


async def test_unsafe_keys_never_reach_the_server(s3_bucket: Bucket) -> None:
    store = FsspecStore(s3_bucket.url("inner"))
    upload(s3_bucket, "outside.json", b"secret")
    for key in ("../outside.json", "/outside.json", "a//b.json"):
        with pytest.raises(InvalidKeyError):
            await store.get(key)
        with pytest.raises(InvalidKeyError):
            await store.put_many([("ok.json", b"1"), (key, b"x")])
    assert await store.list() == []  # put_many checks every key before writing any


async def test_missing_bucket_is_named(s3_env: str) -> None:
    store = FsspecStore("s3://relmerge-no-such-bucket/out")
    for action in (store.get("a.json"), store.put("a.json", b"1"), store.list()):
        with pytest.raises(StoreError, match="bucket 'relmerge-no-such-bucket' does not exist"):
            await action
    assert not await store.exists("a.json")


def test_urls_choose_the_store_and_hide_credentials(tmp_path: Path) -> None:
    assert isinstance(open_store(tmp_path), LocalStore)
    assert isinstance(open_store(str(tmp_path)), LocalStore)
    assert isinstance(open_store(f"file://{tmp_path}"), LocalStore)
    assert local_path(f"file://{tmp_path}/a%20b") == tmp_path / "a b"
    assert local_path("s3://bucket/x") is None
    memory = open_store("memory://relmerge-url-test/x")
    assert isinstance(memory, FsspecStore)
    assert repr(FsspecStore("memory://user:p4ss@relmerge-url-test/x")) == (
        "FsspecStore('memory://***@relmerge-url-test/x')"
    )
    with pytest.raises(StoreError, match="Protocol not known"):
        open_store("nosuchscheme://bucket/x")
    with pytest.raises(StoreError, match="not a file-system root"):
        open_store("memory://")


def test_a_missing_implementation_says_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    import fsspec  # type: ignore[import-untyped]

    def not_installed(protocol: str) -> Any:
        raise ImportError(f"Install s3fs to access {protocol}")

    monkeypatch.setattr(fsspec, "get_filesystem_class", not_installed)
    with pytest.raises(StoreError, match=r"pip install relmerge\[s3\]"):
        FsspecStore("s3://bucket/x")


async def test_access_denied_is_one_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    # moto accepts any credentials, so the refusal is the file system's, as s3fs raises it.
    store = FsspecStore("memory://relmerge-denied/x")

    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise PermissionError("Access Denied")

    monkeypatch.setattr(store.fs, "cat_file", refuse)
    with pytest.raises(StoreError, match=r"access denied: cannot read 'a\.json'"):
        await store.get("a.json")


async def test_credentials_in_a_library_message_are_masked(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    secret = "wJalrXUtnFEMI-never-shown"
    monkeypatch.setenv("AWS_SESSION_TOKEN", "session-token-never-shown")
    store = FsspecStore("memory://relmerge-masked/x", client_kwargs={"password": secret})

    def leak(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError(f"signing with {secret} and session-token-never-shown failed")

    monkeypatch.setattr(store.fs, "pipe_file", leak)
    with pytest.raises(StoreError) as caught:
        await store.put("a.json", b"{}")
    assert "never-shown" not in str(caught.value) and "signing with ***" in str(caught.value)


# relmerge run with S3 ------------------------------------------------------------------


def test_run_from_a_jsonl_object_into_s3_and_rerun(
    s3_bucket: Bucket, tmp_path: Path, reference: dict[str, bytes]
) -> None:
    upload(s3_bucket, "in/relations.jsonl", RELATIONS.read_bytes())
    out_url = s3_bucket.url("out")
    args = run_args(s3_bucket.url("in/relations.jsonl"), out_url)
    code, text = _run(*args)
    assert code == 0, text
    first = download(out_url, tmp_path / "first")
    result = check_outputs(first, RELATIONS)  # every id mapped, listed files exist, result
    assert result["llm_requests"] == 0
    assert run_outputs(first) == reference
    # The claim lives in the bucket; the SQLite cache cannot, it is in the user's cache dir.
    assert (first / ".relmerge" / "run.json").is_file()
    assert not (first / ".relmerge" / "cache.sqlite").exists()
    digest = hashlib.sha256(out_url.encode()).hexdigest()[:16]
    assert (tmp_path / "xdg-cache" / "relmerge" / f"{digest}.sqlite").is_file()

    code, text = _run(*args)  # same inputs and settings: accepted, same outputs
    assert code == 0, text
    second = download(out_url, tmp_path / "second")
    assert run_outputs(second) == run_outputs(first)
    rerun = check_outputs(second, RELATIONS)
    assert rerun["llm_requests"] == 0
    assert rerun["fingerprint"] == result["fingerprint"]


@pytest.mark.parametrize("with_keys_file", [True, False], ids=["relation_keys", "json-prefix"])
def test_run_from_a_store_prefix(
    s3_bucket: Bucket, tmp_path: Path, reference: dict[str, bytes], with_keys_file: bool
) -> None:
    upload_relation_files(s3_bucket, "in", with_keys_file=with_keys_file)
    code, text = _run(*run_args(s3_bucket.url("in"), s3_bucket.url("out")))
    assert code == 0, text
    out = download(s3_bucket.url("out"), tmp_path / "out")
    check_outputs(out, RELATIONS)
    assert run_outputs(out) == reference


def test_local_input_to_s3_and_s3_input_to_local(
    s3_bucket: Bucket, tmp_path: Path, reference: dict[str, bytes]
) -> None:
    code, text = _run(*run_args(str(RELATIONS), s3_bucket.url("from-local")))
    assert code == 0, text
    assert run_outputs(download(s3_bucket.url("from-local"), tmp_path / "a")) == reference

    upload_relation_files(s3_bucket, "in", with_keys_file=True)
    local_out = tmp_path / "to-local"
    code, text = _run(*run_args(s3_bucket.url("in"), str(local_out)))
    assert code == 0, text
    assert run_outputs(local_out) == reference
    assert (local_out / ".relmerge" / "cache.sqlite").is_file()  # a local OUT keeps its cache


def test_other_inputs_need_overwrite_and_stale_objects_go(
    s3_bucket: Bucket, tmp_path: Path
) -> None:
    upload(s3_bucket, "in/all.jsonl", RELATIONS.read_bytes())
    upload(s3_bucket, "in/few.jsonl", b"\n".join(LINES[:3]) + b"\n")
    out_url = s3_bucket.url("out")
    assert _run(*run_args(s3_bucket.url("in/all.jsonl"), out_url))[0] == 0

    changed = run_args(s3_bucket.url("in/few.jsonl"), out_url)
    code, text = _run(*changed)
    assert code == 2 and "--overwrite" in text
    code, text = _run(*changed, "--overwrite")
    assert code == 0, text
    few = tmp_path / "few.jsonl"
    few.write_bytes(b"\n".join(LINES[:3]) + b"\n")
    check_outputs(download(out_url, tmp_path / "out"), few)  # no relation of the first run left


def test_rerun_into_s3_sends_no_llm_request(s3_bucket: Bucket) -> None:
    """The cache of a remote OUT is local, and a re-run finds every answer in it."""
    upload(s3_bucket, "in/relations.jsonl", RELATIONS.read_bytes())
    with LLMServer(handler=merge_first_handler) as server:
        args = [
            *run_args(s3_bucket.url("in/relations.jsonl"), s3_bucket.url("out"), "--no-semantic"),
            "--llm",
            "openai",
            "--llm-base-url",
            server.base_url,
            "--llm-model",
            "fake",
        ]
        code, text = _run(*args)
        assert code == 0, text
        asked = len(server.group_requests)
        assert asked > 0  # the sample has exact-key groups that need the LLM
        code, text = _run(*args)
        assert code == 0, text
        assert len(server.group_requests) == asked  # only the endpoint check again
        assert server.preflight_count == 2
    result = orjson.loads(
        asyncio.run(FsspecStore(s3_bucket.url("out")).get("deduplicate_relations_result.json"))
    )
    assert result["llm_requests"] == 0


def test_unsafe_keys_in_relation_keys_are_rejected_records(
    s3_bucket: Bucket, tmp_path: Path
) -> None:
    keys = upload_relation_files(s3_bucket, "in", with_keys_file=False)
    upload(s3_bucket, "outside.json", LINES[0])  # what "../outside.json" would reach
    unsafe = ["../outside.json", "/outside.json", "relations//000.json"]
    upload(s3_bucket, "in/relation_keys.json", orjson.dumps([*keys, *unsafe]))
    code, text = _run(*run_args(s3_bucket.url("in"), s3_bucket.url("out")))
    assert code == 0, text
    out = download(s3_bucket.url("out"), tmp_path / "out")
    check_outputs(out, RELATIONS)
    rejected = [orjson.loads(line) for line in (out / "rejected.jsonl").read_bytes().splitlines()]
    assert [item["origin"] for item in rejected] == unsafe
    assert all("object key" in item["reason"] for item in rejected)


@pytest.mark.parametrize("where", ["input", "output"])
def test_missing_bucket_exits_2_with_one_line(s3_env: str, where: str) -> None:
    missing = "s3://relmerge-no-such-bucket/x"
    input_url = missing if where == "input" else str(RELATIONS)
    code, text = _run(*run_args(input_url, missing if where == "output" else "unused-out"))
    assert code == 2, text
    assert text.count("\n") == 1 and text.startswith("error: ")
    assert "bucket 'relmerge-no-such-bucket' does not exist" in text


def test_storage_options_reach_fsspec_and_secrets_stay_out_of_messages(
    s3_bucket: Bucket, monkeypatch: pytest.MonkeyPatch
) -> None:
    upload(s3_bucket, "in/relations.jsonl", RELATIONS.read_bytes())
    for name in ("AWS_ENDPOINT_URL", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
        monkeypatch.delenv(name)
    secret = "s3cr3t-never-printed"
    options = [
        "--storage-option",
        f"endpoint_url={s3_bucket.endpoint}",
        "--storage-option",
        "key=testing",
        "--storage-option",
        f"secret={secret}",
    ]
    code, text = _run(
        *run_args(s3_bucket.url("in/relations.jsonl"), s3_bucket.url("out"), *options)
    )
    assert code == 0, text
    code, text = _run(*run_args("s3://relmerge-no-such-bucket/in", s3_bucket.url("out2"), *options))
    assert code == 2 and "does not exist" in text and secret not in text
    code, text = _run(*run_args(str(RELATIONS), "o", "--storage-option", secret))
    assert code == 2 and "KEY=VALUE" in text and secret not in text


def test_a_prefix_without_relations_is_a_one_line_error(s3_bucket: Bucket) -> None:
    upload(s3_bucket, "in/notes.txt", b"not a relation")
    code, text = _run(*run_args(s3_bucket.url("in"), s3_bucket.url("out")))
    assert code == 2, text
    assert text.count("\n") == 1 and "no relation records in s3://" in text

"""``relmerge lightrag dedupe`` and ``undo`` run as a user runs them, on a LightRAG working
folder built with LightRAG's own API (default file storages)."""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import numpy as np
import pytest

pytest.importorskip("lightrag")

from relmerge.review.rerun import command_outline, made_by, recorded_command
from tests.integrations.lightrag.support import DIM, Fact, Script, edges, insert, make_rag
from tests.support.cli_process import error_line, relmerge

FRIENDS = [
    ("doc-a", "Alice met Bob at school.", "Alice is a friend of Bob"),
    ("doc-b", "Alice and Bob play together.", "Alice is a friend of Bob."),
    ("doc-c", "Alice lent Bob a book.", "Alice lent Bob a book in 1998"),
]
PAIR = ("Alice", "Bob")
EMBEDDED_LOG = "RELMERGE_TEST_EMBEDDED_LOG"


async def embed(texts: list[str], **_: Any) -> np.ndarray:
    """The test's embedding function, named by ``RELMERGE_EMBEDDING_FUNC``: the same
    vectors as the script's, each text it embeds appended to the file
    ``$RELMERGE_TEST_EMBEDDED_LOG`` names."""
    log = os.environ.get(EMBEDDED_LOG)
    if log:
        with open(log, "a", encoding="utf-8") as file:
            file.writelines(json.dumps(text) + "\n" for text in texts)
    rows = []
    for text in texts:
        digest = hashlib.sha256(text.encode()).digest()
        vector = np.frombuffer(digest, dtype=np.uint8)[:DIM].astype(np.float32) + 1.0
        rows.append(vector / np.linalg.norm(vector))
    return np.array(rows)


def _script() -> Script:
    found = Script()
    for _, text, description in FRIENDS:
        found.facts[text] = [Fact("Alice", "Bob", "friendship", description)]
    return found


def _fresh() -> None:
    """LightRAG keeps storages' data process-wide by namespace, not by folder: the next
    instance in this process reads its folder afresh."""
    from lightrag.kg.shared_storage import finalize_share_data

    finalize_share_data()


def _build(folder: Path) -> dict[str, Any]:
    """A working folder with the friends' documents inserted; the edge as LightRAG has it."""

    async def build() -> dict[str, Any]:
        rag = make_rag(folder, _script())
        await rag.initialize_storages()
        for doc_id, text, _ in FRIENDS:
            await insert(rag, {doc_id: text})
        edge = (await edges(rag))[PAIR]
        await rag.finalize_storages()
        return edge

    try:
        return asyncio.run(build())
    finally:
        _fresh()


def _edge(folder: Path) -> dict[str, Any]:
    """The edge as LightRAG reads it back from the folder now."""

    async def read() -> dict[str, Any]:
        rag = make_rag(folder, _script())
        await rag.initialize_storages()
        edge = (await edges(rag))[PAIR]
        await rag.finalize_storages()
        return edge

    try:
        return asyncio.run(read())
    finally:
        _fresh()


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    folder = tmp_path_factory.mktemp("lightrag") / "rag"
    return folder, _build(folder)


def _copy(built: tuple[Path, dict[str, Any]], tmp_path: Path) -> Path:
    import shutil

    folder = tmp_path / "rag"
    shutil.copytree(built[0], folder)
    return folder


def test_without_an_embedding_the_graph_is_rewritten_and_the_vectors_listed_stale(
    built: tuple[Path, dict[str, Any]], tmp_path: Path
) -> None:
    folder, out = _copy(built, tmp_path), tmp_path / "out"
    before = built[1]
    assert before["description"].count("<SEP>") == 2
    done = relmerge("lightrag", "dedupe", folder, "--output", out, "--no-semantic")
    assert done.returncode == 0, done.stderr
    assert "edges changed: 1" in done.stdout and "3 → 2" in done.stdout
    after = _edge(folder)
    assert after["description"].count("<SEP>") == 1
    assert after["source_id"] == before["source_id"]
    stale = out / "lightrag" / "stale.json"
    assert json.loads(stale.read_text()) in ([list(PAIR)], [list(reversed(PAIR))])
    assert str(stale) in done.stderr and "aedit_relation" in done.stderr
    # `relmerge review OUT` knows the command that made OUT, to run it again
    assert made_by(out) == "lightrag"
    assert command_outline(out).startswith("relmerge lightrag dedupe WORKING_DIR --output ")
    command = recorded_command(out)
    assert command is not None and command.argv[:2] == ["lightrag", "dedupe"]

    taken = relmerge("lightrag", "undo", folder, out)
    assert taken.returncode == 0, taken.stderr
    assert "edges restored as they were: 1" in taken.stdout
    restored = _edge(folder)
    for name in ("description", "keywords", "source_id", "file_path"):
        assert restored[name] == before[name]
    assert float(restored["weight"]) == float(before["weight"])


def test_with_an_embedding_function_the_changed_edge_is_re_embedded(
    built: tuple[Path, dict[str, Any]], tmp_path: Path
) -> None:
    folder, out = _copy(built, tmp_path), tmp_path / "out"
    log = tmp_path / "embedded.jsonl"
    config = tmp_path / "lightrag.env"
    config.write_text(
        f"RELMERGE_EMBEDDING_FUNC={__name__}:embed\nEMBEDDING_DIM={DIM}\n{EMBEDDED_LOG}={log}\n"
    )
    done = relmerge(
        "lightrag", "dedupe", folder, "-o", out, "--storage-config", config, "--no-semantic"
    )
    assert done.returncode == 0, done.stderr
    assert not (out / "lightrag" / "stale.json").exists()
    assert "stale" not in done.stderr
    texts = [json.loads(line) for line in log.read_text().splitlines()]
    assert any("Alice" in text and "Bob" in text for text in texts)
    assert _edge(folder)["description"].count("<SEP>") == 1


def test_an_unknown_storage_class_is_one_line_and_exit_2(
    built: tuple[Path, dict[str, Any]], tmp_path: Path
) -> None:
    config = tmp_path / "lightrag.env"
    config.write_text("LIGHTRAG_GRAPH_STORAGE=NoSuchGraphStorage\n")
    done = relmerge(
        "lightrag", "dedupe", built[0], "-o", tmp_path / "out", "--storage-config", config
    )
    error_line(done, "LIGHTRAG_GRAPH_STORAGE=NoSuchGraphStorage", "NetworkXStorage")
    assert not (tmp_path / "out").exists()


def test_a_missing_storage_config_and_an_empty_out_are_one_line_and_exit_2(
    built: tuple[Path, dict[str, Any]], tmp_path: Path
) -> None:
    missing = tmp_path / "nowhere.env"
    done = relmerge("lightrag", "undo", built[0], tmp_path, "--storage-config", missing)
    error_line(done, str(missing))
    error_line(relmerge("lightrag", "undo", built[0], tmp_path), "no LightRAG pass to undo")


class _Embeddings(BaseHTTPRequestHandler):
    """An OpenAI-compatible ``/v1/embeddings``: the test embedding's vectors; each
    request's key and texts kept on the server."""

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        server: Any = self.server
        server.seen.append((self.headers.get("Authorization"), body["model"], body["input"]))
        vectors = asyncio.run(embed(body["input"]))
        data = [
            {"object": "embedding", "index": i, "embedding": [float(x) for x in row]}
            for i, row in enumerate(vectors)
        ]
        answer = json.dumps(
            {"object": "list", "data": data, "model": body["model"], "usage": {}}
        ).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(answer)))
        self.end_headers()
        self.wfile.write(answer)

    def log_message(self, *args: Any) -> None:
        """Quiet."""


def test_an_openai_compatible_embedding_endpoint_re_embeds_and_its_key_is_never_shown(
    built: tuple[Path, dict[str, Any]], tmp_path: Path
) -> None:
    folder, out = _copy(built, tmp_path), tmp_path / "out"
    server: Any = ThreadingHTTPServer(("127.0.0.1", 0), _Embeddings)
    server.seen = []
    threading.Thread(target=server.serve_forever, daemon=True).start()
    secret = "sk-test-never-shown"
    config = tmp_path / "lightrag.env"
    config.write_text(
        f"EMBEDDING_BINDING_HOST=http://127.0.0.1:{server.server_port}/v1\n"
        f"EMBEDDING_MODEL=test-embed\nEMBEDDING_DIM={DIM}\n"
        f"EMBEDDING_BINDING_API_KEY={secret}\n"
    )
    try:
        done = relmerge(
            "lightrag", "dedupe", folder, "-o", out, "--storage-config", config, "--no-semantic"
        )
    finally:
        server.shutdown()
    assert done.returncode == 0, done.stderr
    assert not (out / "lightrag" / "stale.json").exists()
    assert {(key, model) for key, model, _ in server.seen} == {(f"Bearer {secret}", "test-embed")}
    assert any("Alice" in text for _, _, texts in server.seen for text in texts)
    assert secret not in done.stdout + done.stderr
    assert not [p for p in out.rglob("*") if p.is_file() and secret.encode() in p.read_bytes()]

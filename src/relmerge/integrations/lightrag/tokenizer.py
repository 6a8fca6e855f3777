"""A tokenizer for LightRAG that needs no download.

LightRAG's default tokenizer (tiktoken) fetches its vocabulary at first use, which an
offline machine cannot do. LightRAG counts tokens to truncate what it embeds and what it
puts in a prompt; words and punctuation marks counted one each come close to a BPE count
for that purpose. A token id is the piece's own UTF-8 bytes read as a number, so the
tokenizer keeps no state: safe from several threads (LightRAG calls it so), copied and
pickled freely, and ``decode`` gives the text back.
"""

from __future__ import annotations

import re
from typing import Any

_PIECES = re.compile(r"\w+|\s+|[^\w\s]", re.UNICODE)


class WordTokenizer:
    """``encode`` / ``decode`` over words, runs of spaces and single marks."""

    def encode(self, content: str) -> list[int]:
        return [
            int.from_bytes(b"\x01" + p.encode("utf-8"), "big") for p in _PIECES.findall(content)
        ]

    def decode(self, tokens: list[int]) -> str:
        return "".join(
            token.to_bytes((token.bit_length() + 7) // 8, "big")[1:].decode("utf-8")
            for token in tokens
        )


def offline_tokenizer() -> Any:
    """A LightRAG ``Tokenizer`` over :class:`WordTokenizer` (pass it as
    ``LightRAG(tokenizer=…)``)."""
    from lightrag.utils import Tokenizer

    return Tokenizer("relmerge-words", WordTokenizer())

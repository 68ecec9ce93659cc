"""The MiniLM WordPiece tokenizer, shipped as data (see data/NOTICE.md).

Used by the embedder and by the chunker (token-bounded passages with exact
character offsets), so both count tokens the same way.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tokenizers import Tokenizer

TOKENIZER_PATH = Path(__file__).parent / "data" / "tokenizer.json"


@lru_cache(maxsize=1)
def get_tokenizer() -> Tokenizer:
    """Loaded once per process; untruncated and unpadded (callers decide)."""
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(str(TOKENIZER_PATH))
    tok.no_truncation()
    tok.no_padding()
    return tok


def token_offsets(text: str) -> list[tuple[int, int]]:
    """Character span of every word piece of `text` (special tokens left out)."""
    enc = get_tokenizer().encode(text, add_special_tokens=False)
    return [(s, e) for s, e in enc.offsets]

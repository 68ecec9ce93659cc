"""Stable identifiers and hashes shared by indexing and querying.

`normalize_and_hash` must be the same function at index time and at query time
(seed 000): a follow-up is linked to its criterion only through this hash.
"""

from __future__ import annotations

import hashlib
import re
import unicodedata

_PUNCT_OR_SPACE = re.compile(r"[\W_]+", re.UNICODE)


def normalize_question(text: str) -> str:
    """Case-, whitespace-, punctuation- and unicode-insensitive form of a question.

    NFKC folds compatibility forms (full-width letters, ligatures, non-breaking
    spaces); casefold handles ß and friends; punctuation and underscores become
    single spaces so that "Do you encrypt data-at-rest?" and
    "do you encrypt data at rest" hash alike.
    """
    folded = unicodedata.normalize("NFKC", text).casefold()
    # Strip combining marks so "résumé" and "resume" agree.
    decomposed = unicodedata.normalize("NFKD", folded)
    stripped = "".join(ch for ch in decomposed if not unicodedata.combining(ch))
    return _PUNCT_OR_SPACE.sub(" ", stripped).strip()


def normalize_and_hash(text: str) -> str:
    """sha256 hex of `normalize_question(text)`."""
    return hashlib.sha256(normalize_question(text).encode("utf-8")).hexdigest()


def content_hash(text: str) -> str:
    """sha256 hex of the exact text (no normalisation): identity of content."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def chunk_id(document_id: str, kind: str, position: int) -> str:
    """Chunk ids derive from the document id and position, so re-indexing is an upsert.

    Hashed to keep ids short and free of characters that need escaping in any backend.
    """
    digest = hashlib.sha256(document_id.encode("utf-8")).hexdigest()[:20]
    return f"{digest}:{kind[0]}{position}"

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
    # Format characters (category Cf: soft hyphen, zero-width space/joiners, bidi marks) are
    # invisible and would split a word ("encryp\u00adtion"); ordinary text has none, so the
    # hashes of indexes built before this rule are unchanged.
    visible = "".join(ch for ch in text if unicodedata.category(ch) != "Cf")
    folded = unicodedata.normalize("NFKC", visible).casefold()
    # Strip combining marks so "résumé" and "resume" agree.
    decomposed = unicodedata.normalize("NFKD", folded)
    stripped = "".join(ch for ch in decomposed if not unicodedata.combining(ch))
    return _PUNCT_OR_SPACE.sub(" ", stripped).strip()


def normalize_and_hash(text: str) -> str:
    """sha256 hex of `normalize_question(text)`."""
    return hashlib.sha256(normalize_question(text).encode("utf-8")).hexdigest()


def criterion_hash(text: str | None) -> str | None:
    """The hash that links follow-ups to a criterion, or None when the criterion has no words.

    A criterion of punctuation or invisible characters only normalises to "", whose hash
    every other such criterion shares: linking on it would attach unrelated follow-ups.
    """
    if text is None or not normalize_question(text):
        return None
    return normalize_and_hash(text)


def content_hash(text: str) -> str:
    """sha256 hex of the exact text (no normalisation): identity of content."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def chunk_id(document_id: str, kind: str, position: int) -> str:
    """Chunk ids derive from the document id and position, so re-indexing is an upsert.

    Hashed to keep ids short and free of characters that need escaping in any backend.
    """
    digest = hashlib.sha256(document_id.encode("utf-8")).hexdigest()[:20]
    return f"{digest}:{kind[0]}{position}"

"""The criterion hash (seed 000): the same function at index and query time, stable across releases."""

from __future__ import annotations

import pytest

from evidence.ids import criterion_hash, normalize_and_hash, normalize_question

#: Hashes computed by the release before format characters were dropped: indexes already built
#: store these, so ordinary text must keep hashing exactly so.
PINNED = {
    "Do you encrypt customer data at rest?": "0c64c45e619aa91de636cc99bd4671bc"
    "19b903cecdcbf34106af291da2735703",
    "  Do you ENCRYPT data-at-rest? ": "3371b6a6d030ee4db7b6325489859f0f6d6811bfd9731ba1f3228010b7543e7a",
    "Résumé screening — über café?": "bc25d74bf79fb0bf834f6d827c0a2ffd3c3b8df51158cecd2b72230e32680710",
    "Hast du ein Straße-Verzeichnis": "04407ce87bea669d7ec1dd89d8b8009820624db5f6b1c2da028650e08dfc5d79",
    # full-width letters and an ideographic space
    "\uff2d\uff26\uff21\u3000required?": "f00949b97c249f86a9de30959f66802eb1be61d5d2979e3ca5fcd7918b15bb18",
}


@pytest.mark.parametrize(("text", "expected"), PINNED.items())
def test_hashes_of_ordinary_text_are_unchanged(text: str, expected: str) -> None:
    assert normalize_and_hash(text) == expected


@pytest.mark.parametrize(
    "invisible",
    ["\u00ad", "\u200b", "\u200c", "\u200d", "\u2060", "\ufeff", "\u200e"],
    ids=["soft-hyphen", "zwsp", "zwnj", "zwj", "word-joiner", "bom", "lrm"],
)
def test_format_characters_inside_a_word_do_not_split_it(invisible: str) -> None:
    plain = "Do you use encryption at rest?"
    assert normalize_question(f"Do you use encryp{invisible}tion at rest?") == normalize_question(plain)
    assert normalize_and_hash(f"Do you use encryp{invisible}tion at rest?") == normalize_and_hash(plain)


@pytest.mark.parametrize("empty", ["???", " - ", "\u200b", "", "¿¡…!"])
def test_a_criterion_without_words_has_no_linking_hash(empty: str) -> None:
    assert criterion_hash(empty) is None
    assert criterion_hash(None) is None
    assert criterion_hash("Do you use MFA?") == normalize_and_hash("do you use mfa")

from __future__ import annotations

import itertools

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from evidence.embed.tokenizer import token_offsets
from evidence.errors import DocumentParseError
from evidence.ids import chunk_id, content_hash
from evidence.ingest import chunk_document, extract_spans, make_passages, parse_text
from evidence.ingest.parsers.invisible import clean_text
from evidence.records import ChunkKind, ParsedDocument, Section, SpanType

SENT = "The study enrolled forty patients with chronic kidney disease and followed them for a year."


def prose(n: int) -> str:
    return " ".join(f"Sentence {i} says {SENT}" for i in range(n))


def tokens_in(text: str, a: int, b: int) -> int:
    return sum(1 for s, e in token_offsets(text) if s >= a and e <= b)


def test_passages_are_token_bounded_and_overlap() -> None:
    doc = ParsedDocument(text=prose(60))
    passages = make_passages(doc, extract_spans(doc), passage_tokens=64, overlap=16)
    assert len(passages) > 5
    for p in passages:
        assert p.tokens is not None
        assert p.tokens <= 64
        assert tokens_in(doc.text, p.char_start, p.char_end) == p.tokens
    for a, b in itertools.pairwise(passages):
        assert b.char_start < a.char_end  # overlapping windows
        assert b.char_start > a.char_start


def test_windows_prefer_sentence_ends() -> None:
    doc = ParsedDocument(text=prose(40))
    spans = extract_spans(doc)
    ends = {s.char_end for s in spans}
    starts = {s.char_start for s in spans}
    passages = make_passages(doc, spans, passage_tokens=64, overlap=32)
    # every sentence is ~22 tokens, so the last quarter of a 64-token window always holds a sentence end,
    # and a 32-token overlap always holds a sentence start
    for p in passages[:-1]:
        assert p.char_end in ends
    for p in passages[1:]:
        assert p.char_start in starts


def test_windows_prefer_paragraph_breaks() -> None:
    para = "alpha beta gamma delta " * 10  # 40 tokens, no sentence ends
    text = para.strip() + "\n\n" + para.strip() + "\n\n" + para.strip()
    doc = ParsedDocument(text=text)
    passages = make_passages(doc, [], passage_tokens=50, overlap=0)
    assert doc.text[passages[0].char_start : passages[0].char_end] == para.strip()


def test_passages_do_not_cross_sections_but_tiny_sections_merge() -> None:
    body = prose(8)
    text = f"# Intro\n\n{body}\n\n# Tiny\n\nShort.\n\n# Methods\n\n{body}\n"
    doc = parse_text(text, filename="x.md", fmt="md")
    passages = make_passages(doc, extract_spans(doc), passage_tokens=64, overlap=8)
    tiny = next(s for s in doc.sections if s.name == "Tiny")
    intro = next(s for s in doc.sections if s.name == "Intro")
    # the tiny section joins the one after it: no passage crosses its start, and none is named after it
    for p in passages:
        assert not p.char_start < tiny.char_start < p.char_end
        assert p.section in ("Intro", "Methods")
    assert {p.section for p in passages} == {"Intro", "Methods"}
    assert passages[0].char_start == intro.char_start


def test_section_larger_than_window_is_windowed_inside() -> None:
    text = "A\n" + prose(10) + "\nB\n" + prose(10)
    a_end = text.index("\nB\n") + 1
    doc = ParsedDocument(
        text=text, sections=(Section("A", 0, a_end), Section("B", a_end, len(text))), fmt="txt"
    )
    passages = make_passages(doc, extract_spans(doc), passage_tokens=64, overlap=8)
    for p in passages:
        assert p.char_end <= a_end or p.char_start >= a_end
        assert p.section == ("A" if p.char_end <= a_end else "B")


def test_chunk_document_ids_hashes_and_fields() -> None:
    text = "# Label\n\nTake 5 mg daily. Do not exceed 10 mg.\n\n- Keep cold\n"
    doc = parse_text(text, filename="label.md", fmt="md")
    meta = {"type": "tc_files", "vendor": "acme"}
    dc = chunk_document(doc, document_id="docs/label.md", source="label.md", metadata=meta)
    assert dc.document_id == "docs/label.md"
    passages = [c for c in dc.chunks if c.kind is ChunkKind.PASSAGE]
    spans = [c for c in dc.chunks if c.kind is ChunkKind.SPAN]
    assert len(passages) == 1
    assert [c.text for c in spans] == ["Take 5 mg daily.", "Do not exceed 10 mg.", "- Keep cold"]
    assert spans[2].span_type is SpanType.BULLET
    for c in dc.chunks:
        assert c.text == doc.text[c.char_start : c.char_end]
        assert c.title == "Label"
        assert c.source == "label.md"
        assert c.section == "Label"
        assert dict(c.metadata) == meta
        assert "section" not in c.metadata
        assert c.content_hash == content_hash(f"Label {c.text}")
    assert passages[0].chunk_id == chunk_id("docs/label.md", "passage", 0)
    assert spans[1].chunk_id == chunk_id("docs/label.md", "span", 1)
    assert len({c.chunk_id for c in dc.chunks}) == len(dc.chunks)


def test_document_hash_tracks_text_metadata_and_params() -> None:
    doc = ParsedDocument(text="Alpha. Beta.", title="T")
    base = chunk_document(doc, document_id="d", source="s", metadata={"type": "tc_files"})
    same = chunk_document(doc, document_id="d", source="s", metadata={"type": "tc_files"})
    assert base.content_hash == same.content_hash
    variants = [
        chunk_document(doc, document_id="d", source="s", metadata={"type": "followup_document"}),
        chunk_document(
            ParsedDocument(text="Alpha. Beta!", title="T"), document_id="d", source="s", metadata={}
        ),
        chunk_document(
            ParsedDocument(text="Alpha. Beta.", title="T2"), document_id="d", source="s", metadata={}
        ),
        chunk_document(doc, document_id="d", source="s", metadata={"type": "tc_files"}, passage_tokens=128),
    ]
    hashes = {base.content_hash, *(v.content_hash for v in variants)}
    assert len(hashes) == 5
    # key order of metadata does not matter
    a = chunk_document(doc, document_id="d", source="s", metadata={"x": "1", "y": "2"})
    b = chunk_document(doc, document_id="d", source="s", metadata={"y": "2", "x": "1"})
    assert a.content_hash == b.content_hash


def test_as_record_is_one_passage_unless_too_long() -> None:
    text = prose(30)  # ~700 tokens
    doc = ParsedDocument(text="  " + text + "\n", title="Rec")
    one = chunk_document(doc, document_id="r", source="c.jsonl", metadata={}, as_record=True)
    passages = [c for c in one.chunks if c.kind is ChunkKind.PASSAGE]
    assert [p.text for p in passages] == [text]
    assert any(c.kind is ChunkKind.SPAN for c in one.chunks)

    windowed = chunk_document(
        doc, document_id="r", source="c.jsonl", metadata={}, as_record=True, record_max_tokens=200
    )
    wp = [c for c in windowed.chunks if c.kind is ChunkKind.PASSAGE]
    assert len(wp) > 1
    assert all(tokens_in(doc.text, p.char_start, p.char_end) <= 256 for p in wp)


@pytest.mark.parametrize("text", ["", "   \n\t"])
def test_empty_document_is_an_error(text: str) -> None:
    with pytest.raises(DocumentParseError, match="empty"):
        chunk_document(ParsedDocument(text=text), document_id="d", source="empty.txt", metadata={})


@pytest.mark.parametrize(("tokens", "overlap"), [(4, 0), (64, 40), (64, -1)])
def test_bad_window_parameters(tokens: int, overlap: int) -> None:
    with pytest.raises(ValueError):
        make_passages(ParsedDocument(text="x y z"), passage_tokens=tokens, overlap=overlap)


def test_text_the_tokenizer_drops_still_makes_a_passage() -> None:
    doc = ParsedDocument(text="\u200b\u200b")
    dc = chunk_document(doc, document_id="d", source="s", metadata={})
    assert [c.text for c in dc.chunks if c.kind is ChunkKind.PASSAGE] == ["\u200b\u200b"]


# --- properties ------------------------------------------------------------------------------

_pieces = st.sampled_from(
    [
        "word",
        "Alpha",
        "beta.",
        " ",
        " ",
        "\n",
        "\n\n",
        "3.5",
        "e.g.",
        "Dr.",
        "- item\n",
        "| a | b |\n",
        "# Head\n",
        "Figure 1: x\n",
        "caf\u00e9",
        "\u4e2d\u6587",
        "!?",
        "(",
        ")",
        "\t",
        "\u200b",
        "unbelievably",
    ]
)


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(_pieces, min_size=1, max_size=300).map("".join), st.sampled_from([(16, 4), (32, 8), (24, 0)]))
def test_chunks_exact_unique_and_covering(text: str, window: tuple[int, int]) -> None:
    if not clean_text(text).strip():
        return  # nothing but whitespace and format characters: an empty document
    doc = parse_text(text, filename="p.md", fmt="md")
    tokens, overlap = window
    dc = chunk_document(
        doc, document_id="p", source="p.md", metadata={}, passage_tokens=tokens, overlap=overlap
    )
    for c in dc.chunks:
        assert doc.text[c.char_start : c.char_end] == c.text
    seqs = [c.sequence for c in dc.chunks if c.kind is ChunkKind.SPAN]
    assert len(seqs) == len(set(seqs))
    assert len({c.chunk_id for c in dc.chunks}) == len(dc.chunks)
    passages = [c for c in dc.chunks if c.kind is ChunkKind.PASSAGE]
    assert passages
    # every word piece lies inside some passage, and no passage is over budget
    covered = sorted((p.char_start, p.char_end) for p in passages)
    for s, e in token_offsets(doc.text):
        if e > s:
            assert any(a <= s and e <= b for a, b in covered), (s, e)
    for p in passages:
        assert tokens_in(doc.text, p.char_start, p.char_end) <= tokens


def test_next_window_starts_on_a_word() -> None:
    text = " ".join(f"(item{i}) unbelievably-long-hyphenated,words" for i in range(200))
    doc = ParsedDocument(text=text)
    # each item is ~15 word pieces, so a 16-token overlap always holds a word start
    passages = make_passages(doc, extract_spans(doc), passage_tokens=32, overlap=16)
    assert len(passages) > 10
    for p in passages:
        assert p.char_start == 0 or text[p.char_start - 1] == " "


@settings(max_examples=80, deadline=None)
@given(st.lists(_pieces, min_size=1, max_size=400).map("".join), st.integers(min_value=4, max_value=64))
def test_blockwise_word_pieces_equal_whole_text(text: str, block: int) -> None:
    from evidence.ingest.chunker import word_pieces

    assert word_pieces(text, block_chars=block) == token_offsets(text)


def test_blockwise_word_pieces_on_a_long_text_without_spaces() -> None:
    from evidence.ingest.chunker import word_pieces

    text = "a" * 5000 + " " + "\u4e2d\u6587" * 3000 + "\n" + "b" * 100
    assert word_pieces(text, block_chars=1000) == token_offsets(text)


def test_the_document_hash_follows_the_chunk_layout_not_only_the_text() -> None:
    """A parser change that moves span boundaries or sections without changing the text re-indexes
    the documents it changes (and only those): the hash covers where the chunks fall."""
    from dataclasses import replace

    from evidence.ingest import chunk_document
    from evidence.records import ParsedDocument, Section

    text = "Listing\n\nAcme Corporation\n100 Main Street\nSpringfield\n"
    plain = ParsedDocument(text=text, fmt="html")
    split = replace(plain, line_ends=(25, 41))
    named = replace(plain, sections=(Section(name="Listing", char_start=0, char_end=len(text)),))

    def digest(doc: ParsedDocument) -> str:
        return chunk_document(doc, document_id="d", source="a.html", metadata={}).content_hash

    assert digest(plain) == digest(ParsedDocument(text=text, fmt="html"))
    assert len({digest(plain), digest(split), digest(named)}) == 3

"""Passages (token-bounded windows) and fact spans → the chunks a backend stores.

Passages are counted in the embedder's own word pieces (`token_offsets`), so a
256-token passage is 256 tokens to the model too. A window prefers to end where
a paragraph or a fact span ends when one lies in its last quarter, and does not
cross a section boundary (sections smaller than a minimum are merged with their
neighbour instead, so a lone heading does not become a passage).
"""

from __future__ import annotations

import json
import re
from bisect import bisect_left, bisect_right
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from itertools import pairwise
from typing import Any

from evidence.embed.tokenizer import get_tokenizer, token_offsets
from evidence.errors import DocumentParseError
from evidence.ids import chunk_id, content_hash
from evidence.ingest.limits import DEFAULT_LIMITS, IngestLimits, check_count
from evidence.ingest.offsets import SourceOffsets
from evidence.ingest.qa import with_qa_fields
from evidence.ingest.spans import FactSpan, extract_spans, trim_offsets
from evidence.records import Chunk, ChunkKind, DocumentChunks, ParsedDocument, Section

DEFAULT_PASSAGE_TOKENS = 256
DEFAULT_OVERLAP = 32
DEFAULT_RECORD_MAX_TOKENS = 2048
# Bumped whenever chunking changes what it produces, so stores re-index instead of keeping stale chunks.
CHUNKER_VERSION = "1"
_WHITESPACE = re.compile(r"[ \n]")


@dataclass(frozen=True, slots=True)
class Passage:
    char_start: int
    char_end: int
    tokens: int | None  # None: not counted (a record short enough to skip the tokenizer)
    section: str
    page: int | None


_BLOCK_CHARS = 16_000


def word_pieces(text: str, *, block_chars: int = _BLOCK_CHARS) -> list[tuple[int, int]]:
    """`token_offsets(text)`, computed in whitespace-cut blocks for long texts.

    Word pieces never cross whitespace (the BERT pre-tokenizer splits there and its normaliser
    works per character), so cutting at a space or newline gives the very same offsets, while
    `encode_batch` spreads the blocks over the cores.
    """
    if len(text) <= 2 * block_chars:
        return token_offsets(text)
    spans: list[tuple[int, int]] = []
    a, n = 0, len(text)
    while a < n:
        b = min(a + block_chars, n)
        if b < n:
            cut = max(text.rfind(" ", a + 1, b), text.rfind("\n", a + 1, b))
            if cut == -1:
                ws = _WHITESPACE.search(text, b)
                cut = ws.start() if ws else n
            b = cut
        spans.append((a, b))
        a = b
    encodings = get_tokenizer().encode_batch([text[x:y] for x, y in spans], add_special_tokens=False)
    return [(s + x, e + x) for (x, _), enc in zip(spans, encodings, strict=True) for s, e in enc.offsets]


def _validate(passage_tokens: int, overlap: int) -> None:
    if passage_tokens < 8:
        raise ValueError(f"passage_tokens must be >= 8, got {passage_tokens}")
    if not 0 <= overlap <= passage_tokens // 2:
        raise ValueError(
            f"overlap must be between 0 and passage_tokens // 2 ({passage_tokens // 2}), got {overlap}"
        )


def make_passages(
    doc: ParsedDocument,
    spans: Sequence[FactSpan] = (),
    *,
    passage_tokens: int = DEFAULT_PASSAGE_TOKENS,
    overlap: int = DEFAULT_OVERLAP,
    min_section_tokens: int | None = None,
    single_up_to: int | None = None,
) -> list[Passage]:
    """Token windows over `doc.text`; `single_up_to` tokens or fewer → one passage (records)."""
    _validate(passage_tokens, overlap)
    text = doc.text
    # Word pieces never span two characters, so a record with no more non-space characters than
    # `single_up_to` fits without tokenizing: the tokenizer is most of the cost of chunking a corpus.
    if single_up_to is not None and (
        len(text) <= single_up_to or len(text) - sum(map(text.count, " \n\t\r")) <= single_up_to
    ):
        a, b = trim_offsets(text, 0, len(text))
        if b <= a:
            return []
        return [Passage(a, b, None, _dominant_section(doc.sections, a, b), doc.page_at(a))]
    offs = [(s, e) for s, e in word_pieces(text) if e > s]
    if not offs:
        a, b = trim_offsets(text, 0, len(text))
        if b <= a:
            return []
        return [Passage(a, b, 0, _dominant_section(doc.sections, a, b), doc.page_at(a))]
    n = len(offs)
    if single_up_to is not None and n <= single_up_to:
        a, b = trim_offsets(text, 0, len(text))
        return [Passage(a, b, n, _dominant_section(doc.sections, a, b), doc.page_at(a))]

    starts = [s for s, _ in offs]
    span_ends = {sp.char_end for sp in spans}
    span_starts = {sp.char_start for sp in spans}
    min_tokens = min_section_tokens if min_section_tokens is not None else max(8, passage_tokens // 8)

    # Region boundaries (token indices) at section starts, merging sections below the minimum.
    bounds = [0]
    for sec in doc.sections:
        idx = bisect_left(starts, sec.char_start)
        if 0 < idx < n and idx - bounds[-1] >= min_tokens:
            bounds.append(idx)
    if len(bounds) > 1 and n - bounds[-1] < min_tokens:
        bounds.pop()
    bounds.append(n)

    out: list[Passage] = []
    sec_starts = [sec.char_start for sec in doc.sections]
    tail = max(1, (passage_tokens * 3) // 4)
    for r0, r1 in pairwise(bounds):
        i = r0
        while True:
            j = min(i + passage_tokens, r1)
            k = j
            if j < r1:
                k = _best_end(text, offs, i + tail, j, span_ends)
            a, b = offs[i][0], offs[k - 1][1]
            section = _dominant_section(doc.sections, a, b, sec_starts)
            out.append(Passage(a, b, k - i, section, doc.page_at(a)))
            if k >= r1:
                break
            i = _next_start(text, offs, max(k - overlap, i + 1), k, span_starts)
    return out


def _next_start(text: str, offs: Sequence[tuple[int, int]], lo: int, hi: int, span_starts: set[int]) -> int:
    """Where the next window starts inside the overlap [lo, hi): a sentence start, else a word start.

    Never mid-word or on a closing bracket: "##ing" or ")" make a poor first token.
    """
    for t in range(lo, hi):
        if offs[t][0] in span_starts:
            return t
    for t in range(lo, hi):
        start = offs[t][0]
        if start == 0 or text[start - 1].isspace():
            return t
    return lo


def _best_end(text: str, offs: Sequence[tuple[int, int]], lo: int, hi: int, span_ends: set[int]) -> int:
    """Exclusive end token index in [lo, hi]: a paragraph break, else a span end, else `hi`."""
    sentence = -1
    for k in range(hi, lo - 1, -1):
        gap_start, gap_end = offs[k - 1][1], offs[k][0]
        if text.count("\n", gap_start, gap_end) >= 2:
            return k
        if sentence < 0 and gap_start in span_ends:
            sentence = k
    return sentence if sentence > 0 else hi


def _dominant_section(
    sections: Sequence[Section], a: int, b: int, starts: Sequence[int] | None = None
) -> str:
    """The section holding most of [a, b): a passage over merged small sections carries one name."""
    if not sections:
        return ""
    best, best_len = "", 0
    if starts is None:
        starts = [s.char_start for s in sections]
    i = max(bisect_right(starts, a) - 1, 0)
    while i < len(sections) and sections[i].char_start < b:
        sec = sections[i]
        ov = min(b, sec.char_end) - max(a, sec.char_start)
        if ov > best_len:
            best, best_len = sec.name, ov
        i += 1
    return best


def document_hash(
    text: str,
    *,
    title: str,
    source: str,
    metadata: Mapping[str, Any],
    params: Mapping[str, Any],
    layout: str = "",
) -> str:
    """Identity of everything that shapes the stored chunks: a change in any of it re-indexes.

    `layout` (`chunk_layout`) is where the chunks fall: a parser or extractor change that moves a
    span boundary or renames a section without changing the text (an HTML `<br>` line made a
    span of its own, a plain-text `EXHIBIT A` line made a section) re-indexes the documents it changes,
    and only those."""
    envelope = json.dumps(
        {
            "v": CHUNKER_VERSION,
            "title": title,
            "source": source,
            "metadata": metadata,
            "params": params,
            "layout": layout,
        },
        sort_keys=True,
        ensure_ascii=False,
        separators=(",", ":"),
        default=str,
    )
    return content_hash(text + "\x00" + envelope)


def chunk_layout(chunks: Sequence[Chunk]) -> str:
    """A digest of every chunk's kind, offsets, section, page and span type."""
    return content_hash(
        "\x1e".join(
            f"{c.kind.value}\x1f{c.char_start}\x1f{c.char_end}\x1f{c.section}\x1f{c.page}\x1f"
            f"{c.span_type.value if c.span_type else ''}"
            for c in chunks
        )
    )


def chunk_document(
    doc: ParsedDocument,
    *,
    document_id: str,
    source: str,
    metadata: Mapping[str, Any],
    passage_tokens: int = DEFAULT_PASSAGE_TOKENS,
    overlap: int = DEFAULT_OVERLAP,
    as_record: bool = False,
    record_max_tokens: int = DEFAULT_RECORD_MAX_TOKENS,
    limits: IngestLimits = DEFAULT_LIMITS,
) -> DocumentChunks:
    """Passages and fact spans of one document, with ids, hashes, section, page and metadata.

    `as_record`: the producer already made the text a retrieval unit (BEIR and JSONL
    records), so it stays one passage unless longer than `record_max_tokens`.
    """
    name = source or document_id
    check_count(name, "characters of text", len(doc.text), limits.max_chars, "split the document")
    if not doc.text.strip():
        raise DocumentParseError(name, "empty document")
    spans = extract_spans(doc)
    check_count(
        name, "fact spans (sentences, items, rows)", len(spans), limits.max_spans, "split the document"
    )
    passages = make_passages(
        doc,
        spans,
        passage_tokens=passage_tokens,
        overlap=overlap,
        single_up_to=record_max_tokens if as_record else None,
    )
    check_count(name, "passages", len(passages), limits.max_passages, "split the document")
    meta = dict(with_qa_fields(doc.text, metadata))
    title = doc.title
    # Offsets and texts from the upload itself when parsing changed its line ends.
    text = doc.source_text if doc.source_text is not None else doc.text
    at = SourceOffsets(text) if doc.source_text is not None else None
    chunks: list[Chunk] = []
    for pos, p in enumerate(passages):
        start, end = (at(p.char_start), at(p.char_end)) if at else (p.char_start, p.char_end)
        body = text[start:end]
        chunks.append(
            Chunk(
                chunk_id=chunk_id(document_id, ChunkKind.PASSAGE.value, pos),
                document_id=document_id,
                kind=ChunkKind.PASSAGE,
                text=body,
                char_start=start,
                char_end=end,
                sequence=pos,
                source=source,
                title=title,
                section=p.section,
                page=p.page,
                metadata=meta,
                # Hash of what is embedded and searched (title + text), so a title change is not a cache hit.
                content_hash=content_hash(f"{title} {body}" if title else body),
            )
        )
    for sp in spans:
        start, end = (at(sp.char_start), at(sp.char_end)) if at else (sp.char_start, sp.char_end)
        span_text = text[start:end] if at else sp.text
        chunks.append(
            Chunk(
                chunk_id=chunk_id(document_id, ChunkKind.SPAN.value, sp.sequence),
                document_id=document_id,
                kind=ChunkKind.SPAN,
                text=span_text,
                char_start=start,
                char_end=end,
                sequence=sp.sequence,
                source=source,
                title=title,
                section=sp.section,
                page=sp.page,
                span_type=sp.span_type,
                metadata=meta,
                content_hash=content_hash(f"{title} {span_text}" if title else span_text),
            )
        )
    params = {
        "passage_tokens": passage_tokens,
        "overlap": overlap,
        "as_record": as_record,
        "record_max_tokens": record_max_tokens if as_record else None,
    }
    return DocumentChunks(
        document_id=document_id,
        content_hash=document_hash(
            text, title=title, source=source, metadata=meta, params=params, layout=chunk_layout(chunks)
        ),
        source=source,
        chunks=tuple(chunks),
        metadata=meta,
    )

"""Span helpers shared by the cascade's paths: a span's canonical sections, heading similarity,
table header rows and the text a span is scored on, and document order."""

from __future__ import annotations

import re
from collections.abc import Sequence
from functools import lru_cache

from evidence.ingest.sections import SECTION_PATH_KEY, default_vocabulary
from evidence.ingest.spans import trim_offsets
from evidence.records import Chunk, SpanType


def inside(span: Chunk, passage: Chunk) -> bool:
    """Whether `span` lies within `passage`: the same document, inside its character offsets."""
    return (
        span.document_id == passage.document_id
        and passage.char_start <= span.char_start
        and span.char_end <= passage.char_end
    )


def span_path(chunk: Chunk) -> tuple[str, ...]:
    """Canonical section names of a span: recorded at ingestion, else read off its heading."""
    path = chunk.metadata.get(SECTION_PATH_KEY)
    if isinstance(path, list | tuple) and path:
        return tuple(str(p) for p in path)
    own = _canonical_heading(chunk.section) if chunk.section else None
    return (own,) if own else ()


#: Distinct strings each memo below holds, and the longest string it keeps (a longer one is
#: computed afresh): 32,768 headings or short span texts of at most 512 characters and their
#: keys, a few MB at most. The scope scan reads every span of the scope for every question
#: (`RunState.headers`: thousands of spans), so the same headings and texts came back question
#: after question: on the development store these normalisations were ~30 % of the verbatim
#: profile's time (bench/data/session44/verblat16.md).
_MEMO = 1 << 15
_MEMO_CHARS = 512


def _canonical_heading(heading: str) -> str | None:
    """`default_vocabulary().canonical(heading)`, remembered (the default vocabulary is one
    process-wide constant, so the name is a function of the heading alone)."""
    if len(heading) > _MEMO_CHARS:
        return default_vocabulary().canonical(heading)
    return _canonical_memo(heading)


@lru_cache(maxsize=_MEMO)
def _canonical_memo(heading: str) -> str | None:
    return default_vocabulary().canonical(heading)


def _trigrams(s: str) -> set[str]:
    s = f"  {s} "
    return {s[i : i + 3] for i in range(len(s) - 2)}


def trigram_similarity(a: str, b: str) -> float:
    """pg_trgm's similarity: shared trigrams over all trigrams of the two strings."""
    ta, tb = _trigrams(a), _trigrams(b)
    return len(ta & tb) / len(ta | tb) if ta and tb else 0.0


#: Questions answered by a figure: spans with a number in them rank a little higher.
_QUANTITY = re.compile(
    r"\bhow (?:much|many|often|long|frequent(?:ly)?|high|low|fast|quickly)\b"
    r"|\bwhat (?:percentage|percent|proportion|fraction|number|rate|incidence)\b|\bincidence\b",
    re.IGNORECASE,
)
_DIGIT = re.compile(r"\d")
_WHY = re.compile(r"\bwhy\b|\breasons?\b|\bhow come\b", re.IGNORECASE)
QUANTITY_BOOST = 1.25


def header_rows(spans: Sequence[Chunk]) -> set[int]:
    """Positions of table header rows (the first row of each run of rows): context for the rows
    under them (`scoring_texts`), never an answer on their own."""
    out = set()
    for i, c in enumerate(spans):
        if c.span_type is not SpanType.TABLE_ROW:
            continue
        prev = spans[i - 1] if i else None
        if prev is None or prev.span_type is not SpanType.TABLE_ROW or prev.section != c.section:
            out.add(i)
    return out


#: A table of contents' page reference: "References ........ 62", "Scope · · · 4". Looser than
#: the PDF parser's `_TOC_ENTRY` on purpose: this one only trims a span before it is compared with
#: its document's own headings (a trimmed span counts only if it then equals one), and spans come
#: from every format, whose leaders may be middle dots, ellipses or underscores.
_PAGE_REF = re.compile(r"(?:\s*[.\u00b7\u2026_]){3,}\s*\d+\s*$")
_BULLET = re.compile(r"^[\s\-*+\u2022\u25cf\u25aa\u2013]+")
_RUNS = re.compile(r"\s+")


def _heading_key(text: str) -> str:
    """A heading or a short span text as `heading_echoes` compares them, remembered (the same
    headings and table-of-contents entries are keyed for every question on their scope)."""
    return _heading_key_memo(text) if len(text) <= _MEMO_CHARS else _key_of_heading(text)


def _key_of_heading(text: str) -> str:
    return _RUNS.sub(" ", _BULLET.sub("", _PAGE_REF.sub("", text))).strip().lower()


_heading_key_memo = lru_cache(maxsize=_MEMO)(_key_of_heading)


def heading_echoes(spans: Sequence[Chunk]) -> set[int]:
    """Positions of spans that only repeat a heading of their document: a table of contents'
    entries ("* 3.4. The description of a package", an HTML page's list of links to its own
    sections), a running head. They name where an answer is, never state one, and a few of them
    take a 600-character budget's room from the spans that do."""
    headings: dict[str, set[str]] = {}
    for c in spans:
        if c.section:
            headings.setdefault(c.document_id, set()).add(_heading_key(c.section))
    return {
        i
        for i, c in enumerate(spans)
        if len(c.text) <= 200 and _heading_key(c.text) in headings.get(c.document_id, ())
    }


def scoring_texts(spans: Sequence[Chunk]) -> list[str]:
    """What each span is scored on: its text, and for a table row also its table's caption and
    header row — "| AUC0-inf | 214 (71) |" means nothing without "after a single 20 mg dose". A
    continuation (`continues`: "The type void." → "This cannot be used for argument types …",
    "user_data" → "An arbitrary datum …") is scored with the span before it, which says what it
    is about. A sentence opening on an anaphor ("This function is deprecated …") is not: scored
    with its antecedent it outranks the antecedent, which is often the answer (measured:
    docs/verbatim.md)."""
    out = []
    caption = header = ""
    prev: Chunk | None = None
    for c in spans:
        contiguous = prev is not None and prev.document_id == c.document_id and prev.section == c.section
        if c.span_type is SpanType.CAPTION:
            caption, header = c.text, ""
        elif c.span_type is SpanType.TABLE_ROW:
            if not (
                contiguous and prev is not None and prev.span_type in (SpanType.TABLE_ROW, SpanType.CAPTION)
            ):
                caption = (
                    caption if contiguous and prev is not None and prev.span_type is SpanType.CAPTION else ""
                )
                header = ""
            if not header:
                header = c.text
                out.append(f"{caption} {c.text}".strip())
                prev = c
                continue
            out.append(f"{caption} {header} {c.text}".strip())
            prev = c
            continue
        else:
            caption = header = ""
            if contiguous and prev is not None and prev.sequence + 1 == c.sequence and continues(prev, c):
                out.append(f"{prev.text} {c.text}")
                prev = c
                continue
        out.append(c.text)
        prev = c
    return out


_WORD = re.compile(r"\w+")
#: A span of at most this many words is a label when it comes to what a span is scored on (a
#: definition list's term "user_data", "The type void.", a line "Package."): the span after it is
#: what it labels. Read off a grid of 2-6 on the QA suite: 3 gains, 6 loses two standard answers.
CONTEXT_LABEL_WORDS = 3
#: ... and when it comes to reading order: a clause's number and title ("3. Public License
#: Fallback.") reads with the span after it. Grid 2-25: 4-8 gain the same, 10 and more lose.
READ_LABEL_WORDS = 6


def is_label(chunk: Chunk, words: int = READ_LABEL_WORDS) -> bool:
    """A few words that state nothing on their own (a term, a clause's number and title); never a
    table row, which has its header."""
    return chunk.span_type is not SpanType.TABLE_ROW and _word_count(chunk.text) <= words


@lru_cache(maxsize=16384)
def _word_count(text: str) -> int:
    """How many words (`_WORD`) `text` holds, remembered: `scoring_texts` asks it of every span
    pair it reads, the same spans question after question."""
    return len(_WORD.findall(text))


def continues(prev: Chunk, chunk: Chunk) -> bool:
    """Whether `chunk` is what the span before it labels: `prev` is a label and `chunk` is not (a
    definition list's term and its description; not a list of links, each a label)."""
    return is_label(prev, CONTEXT_LABEL_WORDS) and not is_label(chunk, CONTEXT_LABEL_WORDS)


def document_order(chunks: Sequence[Chunk]) -> list[Chunk]:
    return sorted(chunks, key=lambda c: (c.document_id, c.char_start, c.sequence))


def span_embedding_texts(chunks: Sequence[Chunk]) -> list[str]:
    """The texts the span scorer embeds for a document's spans (`span_rank.cosine_columns`: each
    span's `scoring_texts` and the distinct section headings), distinct, for embedding them at
    indexing time (`EVIDENCE_EMBED_SPANS_AT_INDEX`, docs/ingest.md#span-vectors-at-indexing).

    `chunks`: one document's chunks (passages and spans). Only what the two readers look up: the
    verbatim profile's span scorer (scope: whole documents) and the `default` profile's cache-only
    focus anchor (`cascade.spans_in_hits`, keyed as over the whole document) read each span's
    scoring text over its whole document, never a table's header row (`header_rows`: context for
    the rows under it, no candidate of either), and the headings of the spans they read. A heading
    echo is kept although neither reads one over a whole document: a scope cut short by `max_scan`
    can lose the heading it echoes. Not embedded: a span's scoring text over one passage alone (a
    row heading its passage's rows), which only the embedding anchor kept as a bench lever
    (`SpanAnchors(embed=…, within_hits=True)`) asks; it embeds a miss. A scope of several adjacent
    hits can still ask a table row with another header: a cache miss, as without this."""
    from evidence.records import ChunkKind

    spans = document_order([c for c in chunks if c.kind is ChunkKind.SPAN])
    if not spans:
        return []
    texts = scoring_texts(spans)
    headers = header_rows(spans)
    read = [i for i in range(len(spans)) if i not in headers]
    out = dict.fromkeys(texts[i] for i in read)
    out.update(dict.fromkeys(spans[i].section for i in read if spans[i].section))
    return list(out)


def anchor_spans(chunks: Sequence[Chunk]) -> list[Chunk]:
    """The spans of one document's `chunks` that the readers of `span_embedding_texts` read (each
    span but a table's header row), in document order: those that get a late-chunked vector
    (`EVIDENCE_EMBED_SPANS_AT_INDEX=late`, `embed.late`)."""
    from evidence.records import ChunkKind

    spans = document_order([c for c in chunks if c.kind is ChunkKind.SPAN])
    headers = header_rows(spans)
    return [c for i, c in enumerate(spans) if i not in headers]


def falling(scores: Sequence[float]) -> list[float]:
    """`scores` in the order given, each kept unless it is not below the one before, then just
    under it: an order other than the scores' (the MMR's, a continuation placed after its
    introducer) that still reads as a ranking to whatever compares or cuts by score after it."""
    out: list[float] = []
    for sc in scores:
        out.append(sc if not out or sc < out[-1] else out[-1] * 0.999)
    return out


#: A sentence that announces what follows it ("... include the following:").
_LEAD_IN = re.compile(r":\s*$")
#: A span that ends asking ("…?"): a question the document states (an FAQ's entry), which ranks
#: high for repeating the question's words and answers nothing until the span after it.
_ASKS = re.compile(r"\?\s*$")


def introduces(chunk: Chunk, *, labels: bool = True, asks: bool = True) -> bool:
    """Whether `chunk` states nothing until the span after it: a lead-in (ends with ":"), (`asks`)
    a question the document states (ends with "?") or (`labels`) a label (`is_label`). The
    reading order lets a lead-in's or a label's next span follow it from any rank; the cascade's
    `continue_intros` also adds it when it was not kept, after a stated question too."""
    text = chunk.text
    return bool(_LEAD_IN.search(text) or (asks and _ASKS.search(text))) or (labels and is_label(chunk))


class Neighbours:
    """Each of `chunks`' document-neighbours among `chunks`: spans of one document and section
    with consecutive `sequence` numbers (ingestion numbers a document's spans in text order).
    One map by (document, sequence) for the reading order and the cascade's `continue_intros`,
    which read a span's next (or previous) span the same way; where two chunks share a place,
    the later one stands for it."""

    def __init__(self, chunks: Sequence[Chunk]) -> None:
        self.chunks = chunks
        self._at = {(c.document_id, c.sequence): i for i, c in enumerate(chunks)}

    def of(self, chunk: Chunk, step: int = 1) -> int | None:
        """The position in `chunks` of `chunk`'s span `step` places on in its document, when it
        is there and in the same section; else None."""
        i = self._at.get((chunk.document_id, chunk.sequence + step))
        return None if i is None or self.chunks[i].section != chunk.section else i


def reading_order(spans: Sequence[Chunk], within_chars: int) -> list[int]:
    """Positions of `spans` (evidence in rank order) with each span's document-next span, when
    it is evidence too and ranked close after it, moved up to follow it.

    A sentence splitter cuts "65534: User "nobody". | The corresponding gid refers to the group
    "nogroup"." in two; ranked 1st and 4th, the two read apart and no line of the evidence holds
    the fact whole. Read in document order they do. The move is bounded: the next span follows
    its predecessor only when the spans ranked between them hold at most `within_chars`
    characters (about a sentence), since each span it jumps over is pushed down by its length,
    and pulling a neighbour from far down the ranking pushes better spans out of the first
    characters a reader sees (measured: docs/verbatim.md). A lead-in ("... according to the
    following rules:") is the exception: it states nothing until the item after it, which
    follows it from any rank. So does a label's (`is_label`: a clause's number and title, a
    definition list's term, which state nothing on their own), and a label ranked below the span
    after it is read right before that span. Neighbours are spans of one document and section with consecutive
    `sequence` numbers (`Neighbours`). The evidence kept is unchanged, only its order."""
    near = Neighbours(spans)
    placed = [False] * len(spans)
    out: list[int] = []
    for i in range(len(spans)):
        if placed[i]:
            continue
        cur = i
        p = near.of(spans[cur], -1)
        if p is not None and not placed[p] and is_label(spans[p]):
            # A label ranked below the span it labels ("3. Public License Fallback." after "Should
            # any part of the Waiver … be judged invalid …") is read right before it.
            out.append(p)
            placed[p] = True
        while True:
            out.append(cur)
            placed[cur] = True
            c = spans[cur]
            j = near.of(c)
            if j is None or placed[j]:
                break
            between = sum(len(spans[k].text) for k in range(cur + 1, j) if not placed[k])
            if between > within_chars and not introduces(c, asks=False):
                break
            cur = j
    return out


#: Where a span may be cut for a sub-span (`best_sub_span`): after a clause's punctuation followed
#: by a space ("; ", ", ", ": ", a sentence's end), and after a line end.
_CUT = re.compile(r"[;,:.!?](?=\s)|\n")


def _pieces(text: str) -> list[int]:
    """The positions a sub-span may start or end at: the text's ends and every `_CUT`."""
    return sorted({0, len(text), *(m.end() for m in _CUT.finditer(text))})


def best_sub_span(
    text: str, concepts: Sequence[tuple[float, frozenset[str]]], max_chars: int
) -> tuple[int, int] | None:
    """The best verbatim part of a span longer than `max_chars`: `(start, end)` offsets into
    `text`, or None when the span stays whole.

    The candidates are the runs of consecutive pieces (`_pieces`: cut after "; ", ", ", ": ", a
    sentence's end, a line end), whitespace trimmed at both ends, of at most `max_chars`
    characters that keep every question concept the whole span covers (`concepts`: each concept's
    weight and the words covering it, `SpanStats.concepts`); of those, the longest, then the
    earliest. None when no run keeps them all (a part that loses one loses what made the span
    evidence) or the span covers no concept (nothing to choose its part by). A run lies inside the
    span, so it covers no concept the span does not: the question-term weight it keeps is the
    whole span's.

    One run is analysed per start, not every run: from a start, a later end gives a run at least
    as long (trimmed), and one that covers at least the same concepts (a cut falls after
    punctuation followed by white space, or after a line end, where no analyser token runs on:
    a run's terms are its pieces' terms), so the run to the last end within `max_chars` is the
    start's longest and, if it misses a concept, every shorter one does too. That last end only
    moves on as the start does (two pointers): the starts' pass is linear in the pieces, with
    the same answer the pairs' pass gave (tests/unit/verbatim/test_trim.py compares them)."""
    if max_chars <= 0 or len(text) <= max_chars:
        return None
    whole = _covered(text, concepts)
    if not whole:
        return None
    cuts = _pieces(text)
    best: tuple[int, int] | None = None
    j = 0  # the first cut past the current start's reach (its run longer than `max_chars`)
    for i, a in enumerate(cuts):
        j = max(j, i + 1)
        while j < len(cuts) and _trimmed_length(text, a, cuts[j]) <= max_chars:
            j += 1
        if j - 1 <= i:
            continue  # its first piece alone is too long
        s, e = trim_offsets(text, a, cuts[j - 1])
        longer = best is None or e - s > best[1] - best[0]
        if e > s and longer and _covered(text[s:e], concepts) == whole:
            best = (s, e)
    return best


def _trimmed_length(text: str, start: int, end: int) -> int:
    s, e = trim_offsets(text, start, end)
    return e - s


def _covered(text: str, concepts: Sequence[tuple[float, frozenset[str]]]) -> frozenset[int]:
    """Positions of the concepts `text` covers (one of its terms is among a concept's words)."""
    from evidence.verbatim.scoring import terms

    words = set(terms(text))
    return frozenset(k for k, (_, covering) in enumerate(concepts) if not words.isdisjoint(covering))

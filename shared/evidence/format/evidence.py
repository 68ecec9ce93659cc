"""Evidence XML (seed 000 steps 5-6, seed 003's closing tags) and the structured-output schema.

Layout, one entry per ranked hit, then the linked follow-ups as ONE last entry so they sit at
the end of the LLM's context window (recency)::

    <index_1>
    <source>policy.pdf</source>
    <content>
    ...
    </content>
    </index_1>
    ...
    <index_7>
    <source>followups.csv (Multiple Rounds)</source>
    <content>
    [Round 2]
    Question: ...
    Answer: ...
    </content>
    </index_7>

Entries are sibling elements with no wrapper, so a consumer wraps them in a root element to
parse them. Text is escaped (`&`, `<`, `>`) and characters XML 1.0 forbids are removed, so a
chunk holding `</content>`, `]]>` or a NUL byte cannot break the document.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from xml.sax.saxutils import escape

from evidence.model import Followup, Hit
from evidence.rank.candidate import Candidate
from evidence.rank.followups import round_of

# Everything outside XML 1.0's Char production (control characters, lone surrogates, U+FFFE/F).
_XML_ILLEGAL = re.compile("[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")

#: What the LLM reads when nothing survived ranking (seed 003 gives its prompt an explicit
#: "No valid evidence found" too): an empty string would read as a formatting failure.
#: It is not an `<index_N>` entry, so nothing in it is citable and `valid_indexes` stays [].
NO_EVIDENCE_XML = "<no_evidence>No valid evidence found</no_evidence>"

#: A round marker at the start of a line ("[Round 9]", "[ round 2 ]"): only the progression writes
#: them; one inside a vendor's answer would read as a round of its own.
_ROUND_MARKER = re.compile(r"^([ \t]*)\[([ \t]*round\b[^\]\n]*)\]", re.IGNORECASE | re.MULTILINE)

DEFAULT_FOLLOWUP_SOURCE = "Follow-up Response"
DEFAULT_FOLLOWUPS_SOURCE = "Follow-up Responses"


def escape_text(text: str) -> str:
    """Text safe inside an XML element: illegal characters removed, markup characters escaped.

    Line ends become LF first: a parser would fold a trailing CR into the entry's own newline
    (CRLF normalisation), so the text an LLM sees and the text a parser reads would differ.
    """
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    return escape(_XML_ILLEGAL.sub("", text))


@dataclass(frozen=True, slots=True)
class EvidenceEntry:
    """One ranked hit as the formatter sees it."""

    source: str
    content: str


@dataclass(frozen=True, slots=True)
class FollowupEntry:
    """One matched follow-up response (one round)."""

    content: str
    filename: str | None = None
    round_number: int | None = None
    question: str | None = None
    answer: str | None = None


@dataclass(frozen=True, slots=True)
class EvidenceDocument:
    xml: str
    valid_indexes: list[int]


def _entry(index: int, source: str, content: str) -> str:
    return (
        f"<index_{index}>\n<source>{escape_text(source)}</source>\n"
        f"<content>\n{escape_text(content)}\n</content>\n</index_{index}>"
    )


def neutralise_rounds(text: str) -> str:
    """Round markers inside a question or answer as "(Round 9)": the progression's own "[Round N]"
    lines stay the only ones, so document text cannot forge a round (or its question)."""
    return _ROUND_MARKER.sub(r"\1(\2)", text)


def format_followups(followups: Sequence[FollowupEntry], index: int) -> str:
    """Seed 000 step 5: one follow-up is a standard entry; several are one Q/A progression."""
    if not followups:
        return ""
    if len(followups) == 1:
        fu = followups[0]
        return _entry(index, fu.filename or DEFAULT_FOLLOWUP_SOURCE, fu.content)
    # Stable sort: rounds ascending; equal rounds keep the caller's order.
    ordered = sorted(followups, key=lambda f: f.round_number or 0)
    parts = []
    for fu in ordered:
        round_label = "?" if fu.round_number is None else str(fu.round_number)
        question = neutralise_rounds(fu.question or "")
        answer = neutralise_rounds(fu.answer if fu.answer is not None else fu.content)
        parts.append(f"[Round {round_label}]\nQuestion: {question}\nAnswer: {answer}")
    source = f"{ordered[-1].filename or DEFAULT_FOLLOWUPS_SOURCE} (Multiple Rounds)"
    return _entry(index, source, "\n\n".join(parts))


def build_evidence(hits: Sequence[EvidenceEntry], followups: Sequence[FollowupEntry]) -> EvidenceDocument:
    """Hits as entries 1..N, follow-ups last as entry N+1. No evidence: `NO_EVIDENCE_XML` and []."""
    entries = [_entry(i, h.source, h.content) for i, h in enumerate(hits, start=1)]
    valid = list(range(1, len(entries) + 1))
    if followups:
        index = len(entries) + 1
        entries.append(format_followups(followups, index))
        valid.append(index)
    return EvidenceDocument(xml="\n".join(entries) if entries else NO_EVIDENCE_XML, valid_indexes=valid)


# --- adapters -------------------------------------------------------------------------------


def hit_source(candidate: Candidate) -> str:
    chunk = candidate.chunk
    return chunk.source or str(chunk.metadata.get("FILENAME") or chunk.document_id)


def _opt_str(metadata: Mapping[str, Any], key: str) -> str | None:
    value = metadata.get(key)
    return None if value is None else str(value)


def followup_entry(candidate: Candidate) -> FollowupEntry:
    meta = candidate.chunk.metadata
    has_round = meta.get("round_number") is not None or str(meta.get("type", "")).startswith(
        "followup_response:"
    )
    return FollowupEntry(
        content=candidate.chunk.text,
        # Seed 000 names a follow-up by its FILENAME metadata only, else "Follow-up Response(s)":
        # a chunk's source falls back to the document id, which is no name for the LLM to read.
        filename=_opt_str(meta, "FILENAME") or None,
        round_number=round_of(meta) if has_round else None,
        question=_opt_str(meta, "question"),
        answer=_opt_str(meta, "answer"),
    )


def evidence_from_candidates(hits: Sequence[Candidate], followups: Sequence[Candidate]) -> EvidenceDocument:
    return build_evidence(
        [EvidenceEntry(hit_source(c), c.chunk.text) for c in hits],
        [followup_entry(c) for c in followups],
    )


def evidence_from_models(hits: Sequence[Hit], followups: Sequence[Followup]) -> EvidenceDocument:
    """The same document from API models (POST /v1/format); hits are placed by their rank."""
    ordered = sorted(hits, key=lambda h: h.rank)
    return build_evidence(
        [EvidenceEntry(h.source, h.text) for h in ordered],
        [
            FollowupEntry(
                content=f.text,
                filename=_opt_str(f.metadata, "FILENAME") or None,
                round_number=f.round_number,
                question=f.question,
                answer=f.answer,
            )
            for f in followups
        ],
    )


def structured_output_schema(
    valid_indexes: Sequence[int],
    *,
    properties: Mapping[str, Any] | None = None,
    citation_field: str = "citations",
) -> dict[str, Any]:
    """JSON schema of the LLM's structured output whose citations may only name valid indexes.

    Seed 000's `get_dynamic_structured_out`: the enum is rebuilt per request so the follow-up
    entry (N+1) is citable and nothing else beyond N is. With no evidence the citation list
    must be empty (an empty `enum` is not valid JSON Schema, hence `maxItems: 0`).
    """
    citation_item: dict[str, Any] = {
        "type": "object",
        "properties": {
            "index": {"type": "integer", "enum": list(valid_indexes)},
            "quote": {"type": "string"},
        },
        "required": ["index"],
        "additionalProperties": False,
    }
    citations: dict[str, Any] = (
        {"type": "array", "items": citation_item, "uniqueItems": True}
        if valid_indexes
        else {"type": "array", "maxItems": 0}
    )
    props: dict[str, Any] = dict(properties or {})
    props[citation_field] = citations
    return {
        "type": "object",
        "properties": props,
        "required": sorted(props),
        "additionalProperties": False,
    }

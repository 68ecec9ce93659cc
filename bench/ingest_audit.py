"""Ingestion audit: parse documents as `evidence index` does and print what a parser defect shows.

No question is needed to see a parser defect: a document with no sections, text that never
reaches a span, spans that run over several facts, one section swallowing the document, junk
headings, words of the file missing from the parsed text, invisible characters left in it. For
each file (folders are walked) the audit prints one block:

    sections   count, deepest level, the first names
    passages   count; spans: count, length p50 / max, table rows
    covered    share of the parsed text's non-space characters inside a span
    long       spans over 600 characters (a merged run of facts, or an unsplit table)
    swallow    sections whose own text (up to the next heading) is > 50 % of the document
    junk       headings with no letter (but a version or date: `[3.11.3] - 2026-11-05`), over 120
               characters, or a trailing sentence
    lost       words (3+ letters, case-folded) of the raw file missing from the parsed text
               (raw: the decoded text; HTML without tags, scripts and styles; PDF pypdf's plain
               `extract_text`; SPL every text node of the body's sections). SPL drops its
               Highlights and product data by design and HTML its navigation, so a few lost words
               there are expected; a high share anywhere is a defect.
    odd        format characters (Unicode Cf: soft hyphen, zero-width space, BOM, bidi marks),
               controls, U+FFFD, private-use characters, ligatures (U+FB00-FB06)

    .venv/bin/python bench/ingest_audit.py DIR_OR_FILE... [--json OUT] [--examples 5]

The documents are not in the repository (docs/ingest.md, "Ingestion audit", lists where the
audit's set came from); `--json` writes the figures for comparison between two runs.
"""

from __future__ import annotations

import argparse
import html
import json
import re
import statistics
import sys
import unicodedata
from collections import Counter
from pathlib import Path
from typing import Any

from evidence.errors import EvidenceError
from evidence.ingest import chunk_document
from evidence.ingest.parsers import detect_format
from evidence.ingest.parsers.text import decode_text
from evidence.ingest.sources import SourceItem, file_items
from evidence.records import ChunkKind, ParsedDocument, Section, SpanType

_WORD = re.compile(r"[^\W\d_]{3,}")
_SCRIPT = re.compile(r"<(script|style|noscript|template|svg)\b.*?</\1\s*>", re.S | re.I)
_TAG = re.compile(r"<[^>]*>", re.S)
_COMMENT = re.compile(r"<!--.*?-->", re.S)
LONG_SPAN = 600


def raw_text(path: Path, fmt: str) -> str:
    """The file's own words, read without the project's parser (what "lost" is measured against)."""
    data = path.read_bytes()
    if fmt == "pdf":
        import pypdf

        reader = pypdf.PdfReader(path)
        return "\n".join(page.extract_text() or "" for page in reader.pages)
    if fmt == "spl":
        import xml.etree.ElementTree as ET

        root = ET.fromstring(data)
        ns = "{urn:hl7-org:v3}"
        out: list[str] = []
        for body in root.iter(f"{ns}structuredBody"):
            for sec in body.iter(f"{ns}section"):
                for child in sec:
                    if child.tag in (f"{ns}title", f"{ns}text"):
                        out.append(" ".join(child.itertext()))
        return "\n".join(out)
    text = decode_text(data, filename=path.name)
    if fmt == "html":
        text = _COMMENT.sub(" ", text)
        text = _SCRIPT.sub(" ", text)
        text = html.unescape(_TAG.sub(" ", text))
    return text


def words(text: str) -> Counter[str]:
    visible = "".join(ch for ch in text if unicodedata.category(ch) != "Cf")
    return Counter(w.casefold() for w in _WORD.findall(unicodedata.normalize("NFKC", visible)))


def odd_characters(text: str) -> Counter[str]:
    odd: Counter[str] = Counter()
    for ch in text:
        cat = unicodedata.category(ch)
        if cat == "Cf" or (cat == "Cc" and ch not in "\n\t") or cat == "Co" or ch == "\ufffd":
            odd[f"U+{ord(ch):04X} {unicodedata.name(ch, cat)}"] += 1
        elif "\ufb00" <= ch <= "\ufb06":
            odd[f"U+{ord(ch):04X} {unicodedata.name(ch)}"] += 1
    return odd


def own_extents(sections: tuple[Section, ...], n: int) -> list[tuple[Section, int]]:
    """Each section's own text: from its start to the next heading's start (any level)."""
    ordered = sorted(sections, key=lambda s: (s.char_start, -s.char_end))
    out = []
    for i, sec in enumerate(ordered):
        nxt = ordered[i + 1].char_start if i + 1 < len(ordered) else n
        end = sec.char_end if sec.char_end > sec.char_start else n
        out.append((sec, max(0, min(nxt, end) - sec.char_start)))
    return out


#: A heading without a letter that is still one: a release's version or date, bracketed or not, with
#: a date after it ("[20260107]", "[3.11.3] - 2026-11-05", "v2.0", "2024-01-31"); a bare short number
#: ("12": a page number read as a heading) and punctuation are not.
_VERSION_OR_DATE = re.compile(
    r"\[?v?(?:\d{4,}|\d+(?:[.\-/]\d+)+)\]?(?:[ \t]*[-\u2013\u2014][ \t]*\(?\d{4}-\d{2}-\d{2}\)?)?"
)


def junk_heading(name: str) -> str | None:
    stripped = name.strip()
    if not stripped:
        return "empty"
    if not any(ch.isalpha() for ch in stripped) and not _VERSION_OR_DATE.fullmatch(stripped):
        return "no letter"
    if len(stripped) > 120:
        return "over 120 chars"
    if re.search(r"[a-z]{2,}\. [A-Z][a-z]+ [a-z]+ [a-z]+", stripped):
        return "holds a sentence"
    return None


def audit(path: Path, examples: int) -> dict[str, Any]:
    items = list(file_items(path, {}))
    if not items or not isinstance(items[0], SourceItem):
        return {"file": path.name, "error": getattr(items[0], "reason", "no item") if items else "no item"}
    item = items[0]
    try:
        doc: ParsedDocument = item.parse()
        chunks = chunk_document(doc, document_id=item.document_id, source=item.source, metadata={})
    except EvidenceError as exc:
        return {"file": path.name, "error": str(exc)}
    fmt = detect_format(item.data or b"", filename=path.name)
    text = doc.text
    spans = [c for c in chunks.chunks if c.kind == ChunkKind.SPAN]
    passages = [c for c in chunks.chunks if c.kind == ChunkKind.PASSAGE]
    lengths = [len(s.text) for s in spans]
    covered = bytearray(len(text))
    for s in spans:
        covered[s.char_start : s.char_end] = b"\x01" * (s.char_end - s.char_start)
    nonspace = [i for i, ch in enumerate(text) if not ch.isspace()]
    cover = sum(covered[i] for i in nonspace) / max(1, len(nonspace))
    # Uncovered runs of text that are not headings: what no span holds.
    heading_starts = {sec.char_start for sec in doc.sections}
    uncovered: list[str] = []
    i = 0
    while i < len(text) and len(uncovered) < examples:
        if not covered[i] and not text[i].isspace():
            j = text.find("\n", i)
            j = len(text) if j < 0 else j
            line_start = text.rfind("\n", 0, i) + 1
            line = text[i:j].strip()
            if line_start not in heading_starts and i not in heading_starts and _WORD.search(line):
                uncovered.append(line[:100])
            i = j + 1
        else:
            i += 1
    n = max(1, len(text.strip()))
    swallow = [
        (sec.name, round(own / n, 2))
        for sec, own in own_extents(doc.sections, len(text))
        if own / n > 0.5 and len(text) > 2000
    ]
    junk = [(sec.name[:80], why) for sec in doc.sections if (why := junk_heading(sec.name))]
    raw = words(raw_text(path, fmt))
    parsed = words(text)
    missing = raw - parsed
    lost = sum(missing.values()) / max(1, sum(raw.values()))
    return {
        "file": path.name,
        "format": fmt,
        "chars": len(text),
        "sections": len(doc.sections),
        "depth": max((s.level for s in doc.sections), default=0),
        "first_sections": [s.name[:50] for s in doc.sections[:examples]],
        "passages": len(passages),
        "spans": len(spans),
        "span_p50": int(statistics.median(lengths)) if lengths else 0,
        "span_max": max(lengths, default=0),
        "table_rows": sum(1 for s in spans if s.span_type == SpanType.TABLE_ROW),
        "covered": round(cover, 3),
        "uncovered_examples": uncovered,
        "long_spans": sum(1 for n_ in lengths if n_ > LONG_SPAN),
        "long_examples": [s.text[:100] for s in spans if len(s.text) > LONG_SPAN][:examples],
        "swallow": swallow,
        "junk_headings": junk[:examples],
        "junk_count": len(junk),
        "lost_share": round(lost, 3),
        "lost_words": sum(missing.values()),
        "lost_examples": [w for w, _ in missing.most_common(examples * 2)],
        "odd": dict(odd_characters(text).most_common(examples)),
    }


def show(row: dict[str, Any]) -> str:
    if "error" in row:
        return f"== {row['file']}: ERROR {row['error']}"
    lines = [
        f"== {row['file']} ({row['format']}, {row['chars']:,} chars)",
        f"  sections {row['sections']} (depth {row['depth']}): {row['first_sections']}",
        f"  passages {row['passages']}; spans {row['spans']} (p50 {row['span_p50']}, max {row['span_max']}),"
        f" table rows {row['table_rows']}; covered {row['covered']:.1%}",
        f"  long spans (> {LONG_SPAN}) {row['long_spans']}: {row['long_examples'][:2]}",
        f"  swallowing sections {row['swallow']};"
        f" junk headings {row['junk_count']}: {row['junk_headings'][:3]}",
        f"  lost words {row['lost_words']} ({row['lost_share']:.1%}): {row['lost_examples']}",
        f"  odd characters {row['odd']}",
    ]
    if row["uncovered_examples"]:
        lines.append(f"  not in any span: {row['uncovered_examples'][:3]}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("paths", nargs="+", type=Path)
    ap.add_argument("--json", type=Path, help="write the figures here")
    ap.add_argument("--examples", type=int, default=5)
    args = ap.parse_args(argv)
    files: list[Path] = []
    for p in args.paths:
        files.extend(sorted(f for f in p.rglob("*") if f.is_file()) if p.is_dir() else [p])
    rows = []
    for f in files:
        row = audit(f, args.examples)
        rows.append(row)
        print(show(row), flush=True)
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1, ensure_ascii=False) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())

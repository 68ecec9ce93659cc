"""Ingestion on the real SciFact corpus: exact offsets, and sentence boundaries against gold rationales."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import pytest

from evidence.ingest import SourceItem, chunk_document, extract_spans, iter_sources
from evidence.records import ChunkKind, ParsedDocument
from tests.prerequisites import missing

# The datasets live next to the repository (../shared/datasets); the README says how to get them.
SCIFACT = Path(__file__).resolve().parents[4] / "shared" / "datasets" / "scifact"

pytestmark = [pytest.mark.slow]
if not (SCIFACT / "corpus.jsonl.gz").is_file():
    missing("SciFact dataset", "put the BEIR SciFact files in ../shared/datasets/scifact", module_level=True)


def _records(limit: int | None = None) -> list[SourceItem]:
    out = []
    for x in itertools.islice(iter_sources([SCIFACT / "corpus.jsonl.gz"]), limit):
        assert isinstance(x, SourceItem), x
        out.append(x)
    return out


def test_first_300_docs_keep_offsets_exact() -> None:
    docs = _records(300)
    assert len(docs) == 300
    spans_total = 0
    for item in docs:
        doc = item.parse()
        dc = chunk_document(
            doc, document_id=item.document_id, source=item.source, metadata=item.metadata, as_record=True
        )
        spans = [c for c in dc.chunks if c.kind is ChunkKind.SPAN]
        passages = [c for c in dc.chunks if c.kind is ChunkKind.PASSAGE]
        assert len(passages) >= 1
        assert [s.sequence for s in spans] == list(range(len(spans)))
        for c in dc.chunks:
            assert doc.text[c.char_start : c.char_end] == c.text
            assert c.title == doc.title
        spans_total += len(spans)
    assert spans_total / 300 > 3


def test_sentence_boundaries_match_gold_rationales() -> None:
    gold: dict[str, list[tuple[int, int, str]]] = {}
    with (SCIFACT / "rationales-test.jsonl").open() as fh:
        for line in fh:
            for ev in json.loads(line)["evidence"]:
                for s in ev["sentences"]:
                    gold.setdefault(ev["doc_id"], []).append((s["char_start"], s["char_end"], s["text"]))
    texts = {item.document_id: item.parse().text for item in _records() if item.document_id in gold}
    total = covered = exact = 0
    for doc_id, sentences in gold.items():
        text = texts[doc_id]
        spans = extract_spans(ParsedDocument(text=text))
        for a, b, gt in set(sentences):
            assert text[a:b] == gt
            total += 1
            best = max(
                (min(b, s.char_end) - max(a, s.char_start)) / (max(b, s.char_end) - min(a, s.char_start))
                for s in spans
            )
            covered += best >= 0.5
            exact += any(s.char_start == a and s.char_end == b for s in spans)
    assert total > 300
    assert covered / total >= 0.98
    assert exact / total >= 0.95

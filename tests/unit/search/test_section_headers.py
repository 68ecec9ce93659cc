"""Contextual section headers (`EVIDENCE_SECTION_HEADER*`, docs/ingest.md#section-headers): the
legs a rule names index a passage with its section heading (or parent heading and heading); off,
every text, hash and vector is what it was; changing the rule re-indexes a store's documents."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from evidence.config import HeaderLegs, SectionHeaderKind, Settings
from evidence.ingest.sections import SECTION_PARENT_KEY
from evidence.records import Chunk, ChunkKind, DocumentChunks
from evidence.search import opensearch_bodies as bodies
from evidence.search.headers import OFF, PARENT_KEY, SectionHeaders
from evidence.service import EvidenceService
from evidence.testing import RecordingEmbedder

INDEX = "manual"

# The answers' passages never name their topic: only the headings over them say "termination" and
# "renal" (the heading lines open the section's first passage, not the later ones).
DOC = """# Storage service agreement

## 8. Termination

The provider sends every notice under this agreement by registered mail to the address the
customer gave at signature, and a copy by electronic mail to the account owner of record.

A notice counts as received five business days after it was posted, or on the day the mail
was delivered when the customer confirmed receipt in writing before that day.

Either party may end this agreement with ninety days of written notice to the other party.

## 9. Dosage

### 9.2 Renal impairment

The tablets are swallowed whole with water, with or without food, at the same time each day,
and a missed tablet is taken as soon as remembered unless the next one is due within hours.

Patients keep the tablets in their original package and below twenty five degrees Celsius.

Halve the dose when creatinine clearance is below thirty millilitres per minute.
"""


def _service(store: Path, **rule: object) -> tuple[EvidenceService, RecordingEmbedder]:
    counting = RecordingEmbedder()
    settings = Settings(store_dir=store, passage_tokens=48, passage_overlap=8, **rule)  # type: ignore[arg-type]
    return EvidenceService(settings, embedder=counting), counting


def _index(service: EvidenceService, tmp_path: Path) -> dict[str, int]:
    docs = tmp_path / "docs"
    docs.mkdir(exist_ok=True)
    (docs / "agreement.md").write_text(DOC, encoding="utf-8")
    report = service.index_paths(INDEX, [docs])
    assert not report.failed
    return {s: report.count(s) for s in ("created", "updated", "unchanged")}


def _chunk(kind: ChunkKind = ChunkKind.PASSAGE, section: str = "9.2 Renal impairment") -> Chunk:
    return Chunk(
        chunk_id="d#0",
        document_id="d",
        kind=kind,
        text="Halve the dose.",
        char_start=0,
        char_end=15,
        sequence=0,
        title="Label",
        section=section,
        metadata={PARENT_KEY: "9. Dosage"},
    )


def test_parent_key_is_the_one_annotate_chunks_writes() -> None:
    assert PARENT_KEY == SECTION_PARENT_KEY


def test_header_by_rule() -> None:
    c = _chunk()
    assert OFF.header(c.kind, c.section, c.metadata) == ""
    heading = SectionHeaders(SectionHeaderKind.HEADING)
    path = SectionHeaders(SectionHeaderKind.PATH)
    assert heading.header(c.kind, c.section, c.metadata) == "9.2 Renal impairment"
    assert path.header(c.kind, c.section, c.metadata) == "9. Dosage 9.2 Renal impairment"
    # A section that is its own parent, or none: no repetition, no header.
    assert path.header(c.kind, "9. Dosage", c.metadata) == "9. Dosage"
    assert path.header(c.kind, "", c.metadata) == ""
    # Spans only with `spans`.
    assert path.header(ChunkKind.SPAN, c.section, c.metadata) == ""
    spans = SectionHeaders(SectionHeaderKind.PATH, spans=True)
    assert spans.header(ChunkKind.SPAN, c.section, c.metadata) == "9. Dosage 9.2 Renal impairment"


def test_path_leaves_out_a_heading_that_is_the_title() -> None:
    # A document whose first heading is its title: that heading is the parent of every
    # second-level section, and the title already leads what is indexed (session 46).
    c = _chunk()
    path = SectionHeaders(SectionHeaderKind.PATH)
    assert path.header(c.kind, c.section, c.metadata, title="9. Dosage") == "9.2 Renal impairment"
    assert path.header(c.kind, c.section, c.metadata, title=" 9.  DOSAGE") == "9.2 Renal impairment"
    assert path.header(c.kind, "9. Dosage", c.metadata, title="9. Dosage") == ""  # under the title itself
    assert path.header(c.kind, c.section, c.metadata, title="Label") == "9. Dosage 9.2 Renal impairment"
    titled = replace(c, title="9. Dosage")
    assert (
        path.dense_text(titled)
        == path.lexical_text(titled)
        == "9. Dosage 9.2 Renal impairment Halve the dose."
    )
    # `heading` is as it was (a measured rule); the hash records that `path` changed
    heading = SectionHeaders(SectionHeaderKind.HEADING)
    assert heading.header(c.kind, "9. Dosage", c.metadata, title="9. Dosage") == "9. Dosage"
    assert path.params() == {"kind": "path", "legs": "both", "spans": False, "title": "once"}
    assert heading.params() == {"kind": "heading", "legs": "both", "spans": False}


def test_path_indexes_the_title_once(tmp_path: Path) -> None:
    service, counting = _service(tmp_path / "store", section_header="path")
    _index(service, tmp_path)
    title = "Storage service agreement"
    notice = [t for t in counting.embedded if NOTICE in t]
    assert notice and all(t.startswith(f"{title} 8. Termination ") and t.count(title) == 1 for t in notice)
    assert _found(service, "termination", NOTICE)
    service.close()


def test_legs_pick_the_texts_and_search_text_never_changes() -> None:
    c = _chunk()
    lexical = SectionHeaders(SectionHeaderKind.HEADING, HeaderLegs.LEXICAL)
    dense = SectionHeaders(SectionHeaderKind.HEADING, HeaderLegs.DENSE)
    both = SectionHeaders(SectionHeaderKind.HEADING, HeaderLegs.BOTH)
    headed = "Label 9.2 Renal impairment Halve the dose."
    assert OFF.lexical_text(c) == OFF.dense_text(c) == c.search_text == "Label Halve the dose."
    assert (lexical.lexical_text(c), lexical.dense_text(c)) == (headed, c.search_text)
    assert (dense.lexical_text(c), dense.dense_text(c)) == (c.search_text, headed)
    assert (both.lexical_text(c), both.dense_text(c)) == (headed, headed)


def test_opensearch_lexical_field_carries_the_header() -> None:
    c = _chunk()
    assert bodies.chunk_source(c, "h", None)[bodies.LEXICAL_FIELD] == c.search_text
    rule = SectionHeaders(SectionHeaderKind.PATH, HeaderLegs.LEXICAL)
    source = bodies.chunk_source(c, "h", None, headers=rule)
    assert source[bodies.LEXICAL_FIELD] == "Label 9. Dosage 9.2 Renal impairment Halve the dose."
    assert source["text"] == c.text and source["title"] == c.title
    doc = DocumentChunks("d", "h", "", (c,))
    (action,) = bodies.bulk_actions("i", doc, None, headers=rule)
    assert action["_source"][bodies.LEXICAL_FIELD] == source[bodies.LEXICAL_FIELD]


def test_hashed_is_identity_off_and_differs_by_rule() -> None:
    doc = DocumentChunks("d", "h0", "", (_chunk(),))
    assert OFF.hashed(doc) is doc
    hashes = {
        SectionHeaders(kind, legs, spans).hashed(doc).content_hash
        for kind in (SectionHeaderKind.HEADING, SectionHeaderKind.PATH)
        for legs in HeaderLegs
        for spans in (False, True)
    }
    assert len(hashes) == 12 and "h0" not in hashes
    # No section anywhere (records, SciFact): every header is empty, the hash stays.
    bare = DocumentChunks("d", "h0", "", (_chunk(section=""),))
    assert SectionHeaders(SectionHeaderKind.PATH, spans=True).hashed(bare) is bare


def _unrecorded(store: Path) -> None:
    """The index as written before session 48: no record of its indexing settings."""
    import sqlite3

    with sqlite3.connect(store / "indexes" / INDEX / "records.sqlite3") as db:
        db.execute("DELETE FROM info WHERE key = 'written_with'")
    db.close()


def test_changing_the_rule_reindexes_a_store_without_a_record(tmp_path: Path) -> None:
    """A store indexed without headers before its settings were recorded is rewritten under a
    rule (and back), not kept with vectors and BM25 documents built without them; the same rule
    again costs nothing. A store that records its rule refuses another, with nothing written
    (docs/ingest.md#indexing-settings-of-an-index)."""
    from evidence.errors import IndexSettingsMismatchError

    store = tmp_path / "store"
    service, _ = _service(store)
    assert _index(service, tmp_path)["created"] == 1
    assert _index(service, tmp_path)["unchanged"] == 1
    service.close()
    service, counting = _service(store, section_header="path")
    with pytest.raises(IndexSettingsMismatchError, match="section_header='off'"):
        _index(service, tmp_path)
    assert not counting.embedded
    service.close()
    _unrecorded(store)
    service, counting = _service(store, section_header="path")
    assert _index(service, tmp_path)["updated"] == 1
    assert any(
        t.startswith("Storage service agreement 9. Dosage 9.2 Renal impairment ") for t in counting.embedded
    )
    assert _index(service, tmp_path)["unchanged"] == 1
    service.close()
    _unrecorded(store)
    service, _ = _service(store, section_header="path", section_header_legs="lexical")
    assert _index(service, tmp_path)["updated"] == 1
    service.close()
    _unrecorded(store)
    service, counting = _service(store)
    assert _index(service, tmp_path)["updated"] == 1
    assert counting.embedded and not any("9. Dosage 9.2 Renal impairment " in t for t in counting.embedded)
    service.close()


def _found(service: EvidenceService, query: str, answer: str, kind: ChunkKind = ChunkKind.PASSAGE) -> bool:
    """Whether BM25 finds, for `query`, a chunk whose text holds `answer`."""
    return any(answer in h.chunk.text for h in service.backend.lexical(INDEX, query, k=10, kind=kind))


NOTICE, DOSE = "ninety days", "Halve the dose"


@pytest.mark.parametrize("legs", ["lexical", "both"])
def test_bm25_finds_a_passage_by_its_heading(tmp_path: Path, legs: str) -> None:
    service, _ = _service(tmp_path / "store", section_header="path", section_header_legs=legs)
    _index(service, tmp_path)
    assert _found(service, "termination", NOTICE)
    assert _found(service, "renal", DOSE)
    # The parent heading too (path); the stored chunk is unchanged: text and search_text.
    assert _found(service, "dosage", DOSE)
    hits = [h for h in service.backend.lexical(INDEX, "termination", k=10) if NOTICE in h.chunk.text]
    assert "ermination" not in hits[0].chunk.text and "ermination" not in hits[0].chunk.search_text
    # Spans keep their body only (no `spans`).
    assert not _found(service, "termination", NOTICE, ChunkKind.SPAN)
    service.close()
    # An inverted index rebuilt from the records (derived data) gets the same header.
    for kind_dir in (tmp_path / "store" / "indexes" / INDEX / "lexical").iterdir():
        for f in kind_dir.iterdir():
            f.unlink()
    service, _ = _service(tmp_path / "store", section_header="path", section_header_legs=legs)
    assert _found(service, "termination", NOTICE)
    service.close()


def test_heading_rule_leaves_the_parent_out(tmp_path: Path) -> None:
    service, _ = _service(tmp_path / "store", section_header="heading", section_header_legs="lexical")
    _index(service, tmp_path)
    assert _found(service, "renal", DOSE) and not _found(service, "dosage", DOSE)
    service.close()


def test_off_and_dense_only_leave_bm25_as_it_was(tmp_path: Path) -> None:
    for i, rule in enumerate(({}, {"section_header": "path", "section_header_legs": "dense"})):
        service, _ = _service(tmp_path / f"store{i}", **rule)
        _index(service, tmp_path)
        assert not _found(service, "termination", NOTICE)
        assert not _found(service, "renal", DOSE)
        service.close()


def test_spans_rule_gives_spans_the_header(tmp_path: Path) -> None:
    service, _ = _service(tmp_path / "store", section_header="heading", section_header_spans=True)
    _index(service, tmp_path)
    assert _found(service, "termination", NOTICE, ChunkKind.SPAN)
    assert _found(service, "renal", DOSE, ChunkKind.SPAN)
    service.close()

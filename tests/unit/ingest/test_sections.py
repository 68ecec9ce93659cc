"""Section headings → canonical vocabulary: numbering, synonyms, LOINC codes, nesting, configuration."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from evidence.ingest import chunk_document, parse_text
from evidence.ingest.sections import (
    ENTITY_KEY,
    ENTITY_NAMES_KEY,
    SECTION_CANONICAL_KEY,
    SECTION_PARENT_KEY,
    SECTION_PATH_KEY,
    SectionVocabulary,
    annotate_chunks,
    default_vocabulary,
    document_subject,
    label_sections,
    normalise_heading,
)
from evidence.records import ChunkKind, ParsedDocument, Section


@pytest.mark.parametrize(
    ("heading", "expected"),
    [
        ("12.3 Pharmacokinetics:", "pharmacokinetics"),
        ("HOW SUPPLIED/STORAGE & HANDLING", "how supplied storage and handling"),
        ("**4 CONTRAINDICATIONS**", "contraindications"),
        ("Part II 4.3 Contra-indications", "contra indications"),
        ("iv. Overdose", "overdose"),
        ("", ""),
    ],
)
def test_normalise_heading(heading: str, expected: str) -> None:
    assert normalise_heading(heading) == expected


@pytest.mark.parametrize(
    ("heading", "canonical"),
    [
        # US prescribing information
        ("1 INDICATIONS AND USAGE", "indications"),
        ("2 DOSAGE AND ADMINISTRATION", "dosage"),
        ("3 DOSAGE FORMS AND STRENGTHS", "dosage_forms"),
        ("5 WARNINGS AND PRECAUTIONS", "warnings"),
        ("6.2 Postmarketing Experience", "adverse_reactions"),
        ("8.2 Lactation", "lactation"),
        ("8.6 Renal Impairment", "renal_impairment"),
        ("12.1 Mechanism of Action", "mechanism_of_action"),
        ("16 HOW SUPPLIED/STORAGE AND HANDLING", "storage"),
        ("17 PATIENT COUNSELING INFORMATION", "patient_information"),
        # EU SmPC and Canadian monograph headings
        ("4.2 Posology and method of administration", "dosage"),
        ("4.8 Undesirable effects", "adverse_reactions"),
        ("4.6 Fertility, pregnancy and lactation", "pregnancy"),
        ("6.1 List of excipients", "composition"),
        ("ACTION AND CLINICAL PHARMACOLOGY", "pharmacology"),
        ("Storage and Stability", "storage"),
        # the alias that starts earliest wins: a heading leads with its topic
        ("2.2 Dosage in Patients with Renal Impairment", "dosage"),
        ("Renal Impairment: Dosage Adjustment", "renal_impairment"),
        ("Acknowledgements", None),
    ],
)
def test_canonical_names(heading: str, canonical: str | None) -> None:
    assert default_vocabulary().canonical(heading) == canonical


def test_a_source_code_wins_over_the_heading() -> None:
    vocab = default_vocabulary()
    assert vocab.canonical("Unusual heading", code="34070-3") == "contraindications"
    assert vocab.canonical("8.6 Renal Impairment", code="42229-5") == "renal_impairment"  # unclassified


def test_nesting_gives_paths_and_unknown_subheadings_inherit() -> None:
    sections = [
        Section("12 CLINICAL PHARMACOLOGY", 0, 10, 2),
        Section("12.3 Pharmacokinetics", 10, 20, 3),
        Section("Absorption", 20, 30, 4),
        Section("Special Notes", 30, 40, 4),
        Section("13 NONCLINICAL TOXICOLOGY", 40, 50, 2),
    ]
    labels = label_sections(sections)
    assert [lab.canonical for lab in labels] == [
        "pharmacology",
        "pharmacokinetics",
        "pharmacokinetics",
        "pharmacokinetics",
        "nonclinical_toxicology",
    ]
    assert labels[1].path == ("pharmacology", "pharmacokinetics")
    assert (
        labels[3].path == ("pharmacology", "pharmacokinetics") and labels[3].parent == "12.3 Pharmacokinetics"
    )
    assert labels[4].path == ("nonclinical_toxicology",) and labels[4].parent == ""


def test_configuration_extends_or_replaces_the_vocabulary(tmp_path: Path) -> None:
    cfg = tmp_path / "vocab.json"
    cfg.write_text(
        json.dumps(
            {"sections": {"security": ["information security", "infosec"]}, "codes": {"X-1": "security"}}
        )
    )
    vocab = SectionVocabulary.from_file(cfg)
    assert vocab.canonical("3 Information Security Program") == "security"
    assert vocab.canonical("Other", code="X-1") == "security"
    assert vocab.canonical("4 CONTRAINDICATIONS") == "contraindications"  # defaults kept
    only = SectionVocabulary.from_config({"sections": {"security": ["infosec"]}, "replace": True})
    assert only.names == ["security"] and only.canonical("4 CONTRAINDICATIONS") is None


@pytest.mark.parametrize(
    "config",
    [
        {"sections": {"Bad Name": ["x"]}},
        {"sections": {"ok": "not a list"}},
        {"sections": {}, "codes": {"C": "missing"}},
    ],
)
def test_bad_configuration_is_refused(config: dict[str, object]) -> None:
    with pytest.raises(ValueError):
        SectionVocabulary.from_config(config)


def test_unreadable_configuration_names_the_file(tmp_path: Path) -> None:
    bad = tmp_path / "v.json"
    bad.write_text("{nope")
    with pytest.raises(ValueError, match=r"v\.json"):
        SectionVocabulary.from_file(bad)


LABEL = """# ZORVEX (talmopril maleate) tablets

## 4 CONTRAINDICATIONS

- Angioedema with a previous ACE inhibitor.

## 12 CLINICAL PHARMACOLOGY

### 12.3 Pharmacokinetics

The elimination half-life of talmopril is 11 hours.
"""


def test_annotate_records_sections_and_subject_on_every_chunk() -> None:
    doc = parse_text(LABEL, filename="z.md", fmt="md")
    chunks = chunk_document(doc, document_id="z", source="z.md", metadata={"type": "tc_files"})
    out = annotate_chunks(chunks, doc)
    assert out.metadata[ENTITY_KEY] == "ZORVEX"
    assert out.metadata[ENTITY_NAMES_KEY] == ["zorvex", "talmopril maleate", "talmopril"]
    assert out.content_hash != chunks.content_hash
    spans = {c.text: c for c in out.chunks if c.kind is ChunkKind.SPAN}
    half = spans["The elimination half-life of talmopril is 11 hours."]
    assert half.metadata[SECTION_CANONICAL_KEY] == "pharmacokinetics"
    assert half.metadata[SECTION_PATH_KEY] == ["pharmacology", "pharmacokinetics"]
    assert half.metadata[SECTION_PARENT_KEY] == "12 CLINICAL PHARMACOLOGY"
    assert half.metadata["type"] == "tc_files" and half.metadata[ENTITY_KEY] == "ZORVEX"
    angio = spans["- Angioedema with a previous ACE inhibitor."]
    assert angio.metadata[SECTION_PATH_KEY] == ["contraindications"]


def test_subject_from_meta_wins_then_the_document_then_its_title() -> None:
    doc = ParsedDocument(text="x", title="Plain Title", subject=("Brandix", "genericol sodium"))
    assert document_subject(doc, {ENTITY_KEY: "Other, otherine"}) == ["Other", "otherine"]
    assert document_subject(doc, {}) == ["Brandix", "genericol sodium", "genericol"]
    assert document_subject(ParsedDocument(text="x", title="Security Policy"), {}) == ["Security Policy"]
    assert document_subject(ParsedDocument(text="x"), {}) == []

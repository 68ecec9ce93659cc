"""Offsets into the original (issue 25 item 8): a CRLF upload's chunks slice the user's own file.

Parsers work on LF text; every chunk's `char_start`/`char_end` must still slice the decoded
upload, and its text be that slice, for txt, Markdown and JSONL records (through the CLI's
sources) and for the API's text uploads. HTML's chunks are of its extracted text, not of its
source (documented in docs/ingest.md).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from evidence.config import Settings
from evidence.ingest.offsets import SourceOffsets
from evidence.ingest.parsers.layout import normalise_newlines
from evidence.ingest.sources import SourceFailure, iter_sources
from evidence.model import IndexDocumentRequest
from evidence.records import ChunkKind
from evidence.search.embedded import EmbeddedBackend
from evidence.service import EvidenceService
from evidence.testing import HashingEmbedder

TXT = (
    "DATA RETENTION POLICY\r\n\r\n1. Scope\r\nThis policy covers customer data. It applies to all staff.\r\n"
    "\r\n2. Retention\r\nBackups are kept for 35 days.\r\nLogs are kept for one year.\r\n"
    "- Encrypted at rest with AES-256.\r\n- Keys rotate every 90 days.\r\n"
)
MD = (
    "# Security\r\n\r\nWe encrypt data at rest. Keys rotate yearly.\r\n\r\n## Access\r\n\r\n"
    "- MFA for all staff\r\n- Reviews every quarter\r\n\r\n"
    "| control | owner |\r\n|---|---|\r\n| MFA | IT |\r\n"
)


@pytest.fixture
def service(tmp_path: Path) -> EvidenceService:
    return EvidenceService(
        Settings(store_dir=tmp_path / "store"),
        backend=EmbeddedBackend(tmp_path / "store"),
        embedder=HashingEmbedder(32),
    )


def check_slices(original: str, chunks: list[tuple[int, int, str]]) -> None:
    assert chunks
    for start, end, text in chunks:
        assert original[start:end] == text, (start, end, text)


@pytest.mark.parametrize(("name", "content"), [("policy.txt", TXT), ("security.md", MD)])
def test_file_chunks_slice_the_original(
    service: EvidenceService, tmp_path: Path, name: str, content: str
) -> None:
    path = tmp_path / name
    path.write_bytes(content.encode("utf-8"))
    (item,) = list(iter_sources([path]))
    assert not isinstance(item, SourceFailure)
    chunks = service.chunk_source(item).chunks
    original = path.read_bytes().decode("utf-8")
    check_slices(original, [(c.char_start, c.char_end, c.text) for c in chunks])
    spans = [c for c in chunks if c.kind is ChunkKind.SPAN]
    assert any(c.text in {"Backups are kept for 35 days.", "We encrypt data at rest."} for c in spans)
    # The last span ends where it does in the file, not a line per CR earlier.
    assert max(c.char_end for c in chunks) > len(normalise_newlines(original.rstrip())) - 1


def test_jsonl_records_slice_their_text(service: EvidenceService, tmp_path: Path) -> None:
    path = tmp_path / "records.jsonl"
    records = [{"id": "r1", "text": TXT}, {"id": "r2", "text": "One line.\r\nTwo lines.\r\n"}]
    path.write_text("\n".join(json.dumps(r) for r in records), encoding="utf-8")
    for item, record in zip(iter_sources([path]), records, strict=True):
        assert not isinstance(item, SourceFailure)
        check_slices(
            record["text"], [(c.char_start, c.char_end, c.text) for c in service.chunk_source(item).chunks]
        )


def test_api_text_uploads_slice_the_original(service: EvidenceService) -> None:
    service.index_document("docs", IndexDocumentRequest(document_id="p", filename="policy.txt", text=TXT))
    hits = service.backend.lookup("docs", {"document_id": "p"}, limit=500)
    check_slices(TXT, [(h.chunk.char_start, h.chunk.char_end, h.chunk.text) for h in hits])


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from(["a", "b", " ", "\n", "\r", "\r\n"]), max_size=40))
def test_the_offset_map_inverts_newline_normalisation(parts: list[str]) -> None:
    original = "".join(parts)
    normal = normalise_newlines(original)
    at = SourceOffsets(original)
    for i in range(len(normal) + 1):
        for j in range(i, len(normal) + 1):
            assert normalise_newlines(original[at(i) : at(j)]) == normal[i:j]

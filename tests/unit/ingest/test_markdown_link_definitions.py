"""Markdown's link reference definitions ("[CVE-2024-1]: https://…") are drawn by no renderer:
each is a span of its own, not a run of URLs joined into one span with its neighbours."""

from __future__ import annotations

from evidence.ingest import chunk_document, parse_bytes
from evidence.records import ChunkKind

SOURCE = (
    "# Kettle news\n\n"
    "* Fixed a scalding bug ([CVE-2031-0001]).\n"
    "* Fixed a whistle bug ([CVE-2031-0002]).\n\n"
    "[^1]: A footnote is text, not a link definition.\n\n"
    "<!-- Links -->\n"
    + "".join(
        f"[CVE-2031-{n:04d}]: https://kettle.example/news/vulnerabilities.html#CVE-2031-{n:04d}\n"
        for n in range(1, 13)
    )
    + "\n```\n[not-a-link]: https://kettle.example/in/code\n[still-code]: https://kettle.example/x\n```\n"
)


def test_each_link_reference_definition_is_a_span_of_its_own() -> None:
    doc = parse_bytes(SOURCE.encode(), filename="news.md")
    chunks = chunk_document(doc, document_id="d", source="news.md", metadata={})
    spans = [c.text for c in chunks.chunks if c.kind is ChunkKind.SPAN]
    for c in chunks.chunks:
        assert doc.text[c.char_start : c.char_end] == c.text
    assert "[CVE-2031-0007]: https://kettle.example/news/vulnerabilities.html#CVE-2031-0007" in spans
    assert max(len(s) for s in spans) < 200
    assert "<!-- Links -->" in spans
    assert any(s.startswith("[^1]: A footnote is text") for s in spans)

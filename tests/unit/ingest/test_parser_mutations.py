"""Mutation fuzzing of the parsers (hypothesis): valid PDF, docx, HTML and SPL files with bytes
flipped, inserted, deleted or the tail cut off. Every outcome is a parsed document or a
`DocumentParseError` naming the file, never another exception, and each parse is bounded in
time (a hang or a quadratic blow-up fails the example's deadline)."""

from __future__ import annotations

import time
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from evidence.errors import DocumentParseError
from evidence.ingest.parsers import parse_bytes
from tests.unit.ingest.ingestkit import make_docx, make_pdf

#: Seconds one parse may take on these small inputs (generous: the CPU is shared).
BOUND_S = 5.0
SEEDS = {
    "report.pdf": make_pdf(
        [["1 Introduction", "Data at rest is encrypted with AES-256."], ["2 Access", "MFA."]]
    ),
    "policy.docx": make_docx(
        [
            ("Heading1", "Encryption"),
            ("", "Keys rotate yearly."),
            ("list", "AES-256"),
            [["a", "b"], ["c", "d"]],
        ]
    ),
    "page.html": b"<html><head><title>T</title></head><body><h1>Keys</h1><p>Rotate &amp; audit.</p>"
    b"<table><tr><td>a</td><td>b</td></tr></table><ul><li>one<li>two</ul></body></html>",
    "label.xml": (Path(__file__).parent / "data" / "spl-sample.xml").read_bytes()[:20_000],
}

mutation = st.tuples(
    st.sampled_from(["flip", "insert", "delete", "truncate", "repeat"]),
    st.floats(min_value=0, max_value=1),
    st.binary(min_size=1, max_size=16),
)


def mutate(data: bytes, edits: list[tuple[str, float, bytes]]) -> bytes:
    out = bytearray(data)
    for kind, where, chunk in edits:
        at = int(where * max(len(out) - 1, 0))
        if kind == "flip" and out:
            out[at] ^= chunk[0] or 0xFF
        elif kind == "insert":
            out[at:at] = chunk
        elif kind == "delete":
            del out[at : at + len(chunk)]
        elif kind == "truncate":
            del out[at:]
        else:  # a stretch repeated: nested structures, long runs
            out[at:at] = bytes(out[at : at + 64]) * 50
    return bytes(out)


@settings(max_examples=200, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(sorted(SEEDS)), st.lists(mutation, min_size=1, max_size=6))
def test_mutated_documents_parse_or_refuse_in_bounded_time(
    filename: str, edits: list[tuple[str, float, bytes]]
) -> None:
    data = mutate(SEEDS[filename], edits)
    # CPU time of this thread: a busy machine preempts the parse without charging it.
    started = time.thread_time()
    try:
        doc = parse_bytes(data, filename=filename)
    except DocumentParseError as exc:
        assert exc.source == filename
    else:
        assert doc.text.strip()
    assert time.thread_time() - started < BOUND_S

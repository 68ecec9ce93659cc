"""The synthetic corpus layout `bench/run.py --only 100k` and `bench/scale.py` both build: the
same ids and the same metadata, so their filtered measurements select the same share."""

from __future__ import annotations

from collections.abc import Sequence

from evidence.records import Chunk, ChunkKind, DocumentChunks

#: The metadata filter the benchmarks measure: it selects one document in ten.
FILTERED_TYPE = "followup_document"


def synthetic_document(d: int, texts: Sequence[str]) -> DocumentChunks:
    """Document `d`: one passage per text (ids `d{d}:{j}`), of type `FILTERED_TYPE` when `d` is a
    multiple of ten, else `tc_files`."""
    chunks = tuple(
        Chunk(
            chunk_id=f"d{d}:{j}",
            document_id=f"d{d}",
            kind=ChunkKind.PASSAGE,
            text=text,
            char_start=0,
            char_end=len(text),
            sequence=j,
            metadata={"type": FILTERED_TYPE if d % 10 == 0 else "tc_files"},
        )
        for j, text in enumerate(texts)
    )
    return DocumentChunks(f"d{d}", f"h{d}", f"d{d}", chunks, chunks[0].metadata)

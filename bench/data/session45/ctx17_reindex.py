"""ctx17 measurement helper: bring a COPY of the qa19 store up to the current section header rule
(EVIDENCE_SECTION_HEADER*) without deleting its indexes, so the embedding cache (scoped per index,
dropped with an index) keeps every vector whose text did not change: a lexical-only rule costs no
inference. Each family's documents are indexed again (every hash changes under a rule, so every
document is rewritten), the tantivy directories are removed (rebuilt from the records on the next
open: BM25 statistics with no deleted documents in them, as a fresh index has), and each family's
eval fingerprint is written, so `evidence eval --qa` uses the index as it is. Document ids are
absolute paths: documents of the copy that this checkout's paths did not write are deleted.

    EVIDENCE_STORE_DIR=/tmp/ctx17/h1 EVIDENCE_SECTION_HEADER=path EVIDENCE_SECTION_HEADER_LEGS=lexical \
        python bench/data/session45/ctx17_reindex.py build/qa19
"""

from __future__ import annotations

import shutil
import sys
import time
from pathlib import Path

from evidence.config import Settings
from evidence.evaluation.files import slug
from evidence.evaluation.suite import _qa_fingerprint, find_qa_families
from evidence.service import EvidenceService


def main(root: Path) -> None:
    settings = Settings()
    service = EvidenceService(settings)
    families = find_qa_families(root)
    marks = {}
    for family in families:
        index = f"qa-{slug(family.name)}"
        t0 = time.perf_counter()
        report = service.index_paths(index, [family.documents])
        changed = sum(1 for r in report.indexed if r.status != "unchanged")
        print(
            f"{family.name}: {changed}/{len(report.indexed)} rewritten, {len(report.failed)} failed,"
            f" {time.perf_counter() - t0:.0f} s",
            flush=True,
        )
        # The store's documents are named by their absolute path (the copy was indexed from
        # another checkout): the ones this run did not write are the old copies, removed.
        written = {r.document_id for r in report.indexed}
        stale = [d.document_id for d in service.backend.list_documents(index) if d.document_id not in written]
        for doc_id in stale:
            service.delete_document(index, doc_id)
        print(f"  {len(stale)} documents of the old checkout removed", flush=True)
        marks[index] = _qa_fingerprint(family, service)
    service.close()
    for index, fp in marks.items():
        shutil.rmtree(settings.store_dir / "indexes" / index / "lexical", ignore_errors=True)
        (settings.store_dir / "eval" / f"{index}.fingerprint").write_text(fp)


if __name__ == "__main__":
    main(Path(sys.argv[1]))

"""migrate19: what `evidence migrate` would carry from the store (CachedAnchors), per index, and
how many spans a no-tokenizer placement (every input assumed to fit its first window) would put
elsewhere. Read only; nothing embedded."""
import json, sys, time
from pathlib import Path
from evidence.config import Settings
from evidence.cli.migrate import source_anchors, embedded_source
from evidence.embed.late import late_ranges
from evidence.records import ChunkKind
from evidence.search.embedded import iter_chunks
from evidence.verbatim.spans import anchor_spans

store = Path(sys.argv[1])
settings = Settings(store_dir=store)
src = embedded_source(settings, store)
tot = {"documents": 0, "passages_with": 0, "spans": 0, "headings": 0, "anchor_spans": 0, "moved_without_tokenizer": 0, "seconds": 0.0}
for idx in sorted(p.name for p in (store / "indexes").iterdir()):
    anchors = source_anchors(settings, store, idx)
    t = time.process_time()
    for doc, _ in iter_chunks(src, idx):
        tot["documents"] += 1
        got = anchors(doc)
        tot["passages_with"] += len(got)
        tot["spans"] += sum(len(a.spans) for a in got.values())
        tot["headings"] += sum(len(a.headings) for a in got.values())
        spans = anchor_spans(doc.chunks)
        tot["anchor_spans"] += len(spans)
        if got:
            at = sorted((i for i, c in enumerate(doc.chunks) if c.kind is ChunkKind.PASSAGE), key=lambda i: (doc.chunks[i].char_start, i))
            ps = [doc.chunks[i] for i in at]
            inputs = [anchors.headers.dense_text(c) for c in ps]
            naive = late_ranges(ps, inputs, [len(x) for x in inputs], spans)
            where = {q: ci for ci, a in got.items() for q in a.spans}
            tot["moved_without_tokenizer"] += sum(1 for s, r in zip(spans, naive) if s.sequence in where and (r is None or at[r.passage] != where[s.sequence]))
    tot["seconds"] += time.process_time() - t
    anchors.embedder.cache.close()
print(json.dumps(tot))

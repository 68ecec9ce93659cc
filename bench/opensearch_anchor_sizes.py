"""What the focus span anchor's vectors cost on OpenSearch (docs/opensearch.md#anchor-vectors),
measured on an embedded store indexed with late span vectors (the store's cache holds exactly the
vectors OpenSearch indexing keeps: the same pooling, the same float32 bits).

Usage: python bench/opensearch_anchor_sizes.py --store DIR --qa build/qa19 [--families A,B]
       [--questions N] [--json]

- **Index**: for every document of each family's index, the `anchor_vectors` each passage
  document would carry (`Indexing._embed_late_kept`'s rule: each anchor span's late vector on the
  passage `late_ranges` pools it in, and those spans' headings' vectors), serialised as the bulk
  request does (`opensearch_bodies.chunk_source`): bytes per span, per passage document, against
  the passage document without it (its text, metadata and 384-float `embedding`).
- **Questions** (the first N of each family, all by default), asked of `default` on the embedded
  store: the hits the anchor reads (`SpanAnchors.find`), the OpenSearch response the anchor's
  read would get (`anchor_vectors_body`: the passages overlapping those hits, their
  `anchor_vectors` and ids only) and the time to decode it (`parse_anchor_vectors`), against what
  the request's other reads return (the first stage's lexical and dense legs: their hits'
  `_source` as OpenSearch returns it, vectors excluded; the spans lookup is not counted, the
  embedded store answers it from memory), and what of those the
  anchor's scoring itself reads (`anchor_dense_*`: the `dense` model's passage feature, one k-NN
  read over the hits' documents; `anchor_lookup_*`: the spans of the hits' documents).
- **Quantisation (information)**: how many anchors (`SpanAnchors.find`'s pick in a hit) change
  when every vector the anchor reads is rounded to float16, or to int8 with a per-vector scale.

Nothing is written to the store (read only), nothing is embedded but the questions.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np


def _json_bytes(obj: Any) -> int:
    return len(json.dumps(obj, ensure_ascii=False).encode("utf-8"))


def _hit_source(chunk: Any) -> dict[str, Any]:
    """A hit's `_source` as a lexical / k-NN / lookup read returns it (vectors excluded)."""
    from evidence.search import opensearch_bodies as bodies

    source = bodies.chunk_source(chunk, "0" * 64, None, "0" * 25)
    source.pop(bodies.LEXICAL_FIELD, None)
    return {"_index": "idx", "_id": chunk.chunk_id, "_score": 1.0, "_source": source}


def _light_source(chunk: Any) -> dict[str, Any]:
    """A hit as a light read returns it (`opensearch_bodies.LIGHT_FIELDS` only)."""
    from evidence.search import opensearch_bodies as bodies

    hit = _hit_source(chunk)
    hit["_source"] = {k: v for k, v in hit["_source"].items() if k in bodies.LIGHT_FIELDS}
    return hit


def _tally(reads: dict[str, int], name: str, out: Sequence[Any], *, light: bool) -> None:
    """Count a read's response bytes whole, and light too when it was asked light."""
    reads[name] += _json_bytes({"hits": {"hits": [_hit_source(h.chunk) for h in out]}})
    if light:
        reads[name + "_light"] += _json_bytes({"hits": {"hits": [_light_source(h.chunk) for h in out]}})


def index_sizes(service: Any, index: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """Per family: the payloads by passage chunk id (`AnchorVectors`) and the size figures."""
    from evidence.embed.late import late_ranges, read_late
    from evidence.records import ChunkKind
    from evidence.search import opensearch_bodies as bodies
    from evidence.search.base import AnchorVectors
    from evidence.search.headers import SectionHeaders
    from evidence.verbatim.spans import anchor_spans

    backend = service.backend
    cache = service.document_embedder(index)
    minilm = cache.inner
    headers = SectionHeaders.from_settings(service.settings)
    chunks = [h.chunk for h in backend.lookup(index, {}, limit=10**7, kind=None)]
    by_doc: dict[str, list[Any]] = {}
    for c in chunks:
        by_doc.setdefault(c.document_id, []).append(c)
    payloads: dict[str, AnchorVectors] = {}
    added: list[int] = []
    without: list[int] = []
    spans_kept = anchor_count = 0
    vec_of = backend.vectors(index, [c.chunk_id for c in chunks if c.kind is ChunkKind.PASSAGE])
    for _doc, own in sorted(by_doc.items()):
        passages = sorted(
            (c for c in own if c.kind is ChunkKind.PASSAGE), key=lambda c: (c.char_start, c.sequence)
        )
        spans = anchor_spans(own)
        anchor_count += len(spans)
        inputs = [headers.dense_text(p) for p in passages]
        first = minilm.first_window_chars(inputs, keep=False) if inputs else []
        placed = late_ranges(
            passages, inputs, first, spans, past_window=service.settings.late_spans_past_window
        )
        # Read as the anchor reads them (`embed.late.read_late`).
        doc_hash = backend.document_hash(index, _doc) or ""
        late = read_late(cache.cached_late, spans, [doc_hash] * len(spans))
        held: dict[int, list[tuple[Any, Any]]] = {}
        for s, rng, v in zip(spans, placed, late, strict=True):
            if rng is not None and v is not None:
                held.setdefault(rng.passage, []).append((s, v))
        names = list(dict.fromkeys(s.section for pairs in held.values() for s, _ in pairs if s.section))
        heads = dict(zip(names, cache.cached_documents(names), strict=True))
        for k, p in enumerate(passages):
            vec = vec_of.get(p.chunk_id)
            base = bodies.chunk_source(p, "0" * 64, None if vec is None else vec, "0" * 25, headers)
            without.append(_json_bytes(base))
            pairs = held.get(k)
            if not pairs:
                added.append(0)
                continue
            payload = AnchorVectors(
                {s.sequence: v for s, v in pairs},
                {
                    s.section: heads[s.section]
                    for s, _ in pairs
                    if s.section and heads.get(s.section) is not None
                },
                p.document_id,
            )
            payloads[p.chunk_id] = payload
            spans_kept += len(pairs)
            # What the field adds to the document as sent: `, "anchor_vectors": {...}`.
            added.append(
                len(f', "{bodies.ANCHOR_FIELD}": '.encode()) + _json_bytes(bodies.anchor_source(payload))
            )
    return payloads, {
        "passages": len(added),
        "anchor_spans": anchor_count,
        "spans_kept": spans_kept,
        "added_bytes": sum(added),
        "passage_doc_bytes": sum(without),
        "added_per_passage": added,
        "without_per_passage": without,
    }


def _quantised(v: Any, how: str) -> Any:
    if v is None:
        return None
    if how == "f16":
        return np.asarray(v, dtype=np.float16).astype(np.float32)
    scale = float(np.abs(v).max()) / 127.0 or 1.0
    return (np.round(np.asarray(v) / scale).clip(-127, 127) * scale).astype(np.float32)


def questions(service: Any, index: str, qs: Sequence[str], payloads: dict[str, Any]) -> dict[str, Any]:
    from evidence.embed.cache import CachedEmbedder
    from evidence.model import RetrieveRequest
    from evidence.search import opensearch_bodies as bodies
    from evidence.search.opensearch_responses import parse_anchor_vectors
    from evidence.verbatim.cascade import SpanAnchors

    backend = service.backend
    # `dense_light`: what a `dense(..., light=True)` read returns on OpenSearch (`_source` =
    # `LIGHT_FIELDS`); such a read is also counted whole under `dense` (what it returned before).
    reads: dict[str, int] = {"lexical": 0, "dense": 0, "lookup": 0, "dense_light": 0}
    originals = {name: getattr(backend, name) for name in ("lexical", "dense", "lookup")}

    def counting(name: str) -> Any:
        def read(*args: Any, **kwargs: Any) -> Any:
            out = originals[name](*args, **kwargs)
            _tally(reads, name, out, light=bool(kwargs.get("light")))
            return out

        return read

    for name in originals:
        setattr(backend, name, counting(name))
    rows: list[dict[str, Any]] = []
    mode = {"q": ""}
    late0, docs0 = CachedEmbedder.cached_late, CachedEmbedder.cached_documents

    def late_q(self: Any, keys: Any) -> Any:
        return [_quantised(v, mode["q"]) for v in late0(self, keys)] if mode["q"] else late0(self, keys)

    def docs_q(self: Any, texts: Any) -> Any:
        return [_quantised(v, mode["q"]) for v in docs0(self, texts)] if mode["q"] else docs0(self, texts)

    # `FocusHits` calls `find_with_cosines` (the anchor order's cosines; `find` is its first half).
    find0 = SpanAnchors.find_with_cosines
    current: dict[str, Any] = {}

    def find(self: Any, hits: Any, ctx: Any) -> Any:
        before = dict(reads)
        result = find0(self, hits, ctx)
        out = result[0]
        if self.vectors is None:
            return result
        # What the anchor's own scoring reads besides its vectors (the `dense` model's passage
        # feature: one k-NN read over the hits' documents; the spans lookup).
        inside = {k: reads[k] - before[k] for k in reads}
        ranges = [(h.chunk.document_id, h.chunk.char_start, h.chunk.char_end) for h in hits]
        # The passages overlapping a hit: what `anchor_vectors_body` matches.
        over = [
            cid
            for cid, (d0, a0, b0) in places.items()
            if any(d0 == d and a0 < e and b0 > s for d, s, e in ranges)
        ]
        response = {
            "took": 3,
            "timed_out": False,
            "hits": {
                "hits": [
                    {
                        "_index": "idx",
                        "_id": cid,
                        "_score": 0.0,
                        "_source": {
                            "chunk_id": cid,
                            "document_id": payloads[cid].document_id,
                            bodies.ANCHOR_FIELD: bodies.anchor_source(payloads[cid]),
                        },
                    }
                    for cid in over
                ]
            },
        }
        t0 = time.perf_counter()
        parse_anchor_vectors(response)
        decode = time.perf_counter() - t0
        changed = {}
        counted = dict(reads)  # the re-runs below are not the request's reads
        for q in ("f16", "i8"):
            mode["q"] = q
            try:
                other = find0(self, hits, ctx)[0]
            finally:
                mode["q"] = ""
            changed[q] = sum(1 for i in set(out) | set(other) if out.get(i) != other.get(i))
        reads.update(counted)
        current.update(
            anchors=len(out),
            passages_read=len(over),
            anchor_response_bytes=_json_bytes(response),
            decode_ms=decode * 1000,
            changed=changed,
            request_bytes=_json_bytes(bodies.anchor_vectors_body(ranges)),
            inside_find_bytes=inside,
        )
        return result

    places: dict[str, tuple[str, int, int]] = {}
    for h in originals["lookup"](index, {}, limit=10**7, kind=None):
        if h.chunk.chunk_id in payloads:
            places[h.chunk.chunk_id] = (h.chunk.document_id, h.chunk.char_start, h.chunk.char_end)
    CachedEmbedder.cached_late = late_q  # type: ignore[method-assign]
    CachedEmbedder.cached_documents = docs_q  # type: ignore[method-assign]
    SpanAnchors.find_with_cosines = find  # type: ignore[method-assign]
    try:
        for text in qs:
            for name in reads:
                reads[name] = 0
            current.clear()
            service.retrieve(index, RetrieveRequest(query=text, profile="default"))
            if current:
                rows.append({**current, "other_response_bytes": dict(reads)})
    finally:
        CachedEmbedder.cached_late = late0  # type: ignore[method-assign]
        CachedEmbedder.cached_documents = docs0  # type: ignore[method-assign]
        SpanAnchors.find_with_cosines = find0  # type: ignore[method-assign]
        for name, fn in originals.items():
            setattr(backend, name, fn)
    return {"rows": rows}


def _pct(xs: Sequence[float], q: float) -> float:
    if not xs:
        return 0.0
    s = sorted(xs)
    return float(s[min(len(s) - 1, round(q * (len(s) - 1)))])


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--store", type=Path, required=True)
    ap.add_argument("--qa", type=Path, default=Path("build/qa19"))
    ap.add_argument("--families", default="")
    ap.add_argument("--questions", type=int, default=0, help="per family; 0: all")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)

    from evidence.config import Settings
    from evidence.evaluation.suite import slug
    from evidence.service import EvidenceService

    service = EvidenceService(Settings(store_dir=args.store))
    wanted = {f for f in args.families.split(",") if f}
    families = sorted(p for p in args.qa.iterdir() if (p / "questions.jsonl").exists())
    out: dict[str, Any] = {"families": {}}
    all_rows: list[dict[str, Any]] = []
    totals = {"passages": 0, "anchor_spans": 0, "spans_kept": 0, "added_bytes": 0, "passage_doc_bytes": 0}
    per_passage_added: list[int] = []
    for fam in families:
        if wanted and fam.name not in wanted:
            continue
        index = f"qa-{slug(fam.name)}"
        payloads, sizes = index_sizes(service, index)
        per_passage_added.extend(sizes.pop("added_per_passage"))
        sizes.pop("without_per_passage")
        qs = [
            json.loads(line)["question"]
            for line in (fam / "questions.jsonl").read_text().splitlines()
            if line.strip()
        ]
        if args.questions:
            qs = qs[: args.questions]
        got = questions(service, index, qs, payloads)
        all_rows.extend(got["rows"])
        out["families"][fam.name] = sizes
        for k in totals:
            totals[k] += sizes[k]
        print(fam.name, sizes, len(got["rows"]), file=sys.stderr)
    rows = all_rows
    other = [sum(v for k, v in r["other_response_bytes"].items() if k != "dense_light") for r in rows]
    # On OpenSearch before the change the anchor found no vector and stopped before its scoring:
    # the request read the first stage's legs (and the spans, not counted here: the embedded
    # store answers `ordered_lookup` from memory); now it also reads the anchor's vectors and the
    # `dense` model's k-NN read.
    before_change = [o - r["inside_find_bytes"]["dense"] for o, r in zip(other, rows, strict=True)]
    after_change = [o + r["anchor_response_bytes"] for o, r in zip(other, rows, strict=True)]
    after_light = [
        a - r["inside_find_bytes"]["dense"] + r["inside_find_bytes"]["dense_light"]
        for a, r in zip(after_change, rows, strict=True)
    ]
    out["index"] = {
        **totals,
        "bytes_per_span_kept": totals["added_bytes"] / max(1, totals["spans_kept"]),
        "added_per_passage_mean": totals["added_bytes"] / max(1, totals["passages"]),
        "added_per_passage_p50": _pct(per_passage_added, 0.5),
        "added_per_passage_max": max(per_passage_added or [0]),
        "passage_doc_mean_without": totals["passage_doc_bytes"] / max(1, totals["passages"]),
    }
    out["questions"] = {
        "asked_with_anchor": len(rows),
        "anchor_response_bytes_p50": _pct([r["anchor_response_bytes"] for r in rows], 0.5),
        "anchor_response_bytes_p95": _pct([r["anchor_response_bytes"] for r in rows], 0.95),
        "anchor_response_bytes_mean": statistics.fmean(r["anchor_response_bytes"] for r in rows)
        if rows
        else 0,
        "anchor_request_bytes_p50": _pct([r["request_bytes"] for r in rows], 0.5),
        "passages_read_p50": _pct([r["passages_read"] for r in rows], 0.5),
        "passages_read_p95": _pct([r["passages_read"] for r in rows], 0.95),
        "other_response_bytes_p50": _pct(other, 0.5),
        "other_response_bytes_p95": _pct(other, 0.95),
        "other_response_bytes_mean": statistics.fmean(other) if other else 0,
        "anchor_dense_read_bytes_p50": _pct([r["inside_find_bytes"]["dense"] for r in rows], 0.5),
        "anchor_dense_read_bytes_p95": _pct([r["inside_find_bytes"]["dense"] for r in rows], 0.95),
        "request_bytes_before_p50": _pct(before_change, 0.5),
        "request_bytes_before_p95": _pct(before_change, 0.95),
        "request_bytes_after_p50": _pct(after_change, 0.5),
        "request_bytes_after_p95": _pct(after_change, 0.95),
        "anchor_dense_reads": sum(1 for r in rows if r["inside_find_bytes"]["dense"]),
        # The same read asked light (session 47, osread19): ids, kind, offsets, sequence only.
        "anchor_dense_light_bytes_p50": _pct([r["inside_find_bytes"]["dense_light"] for r in rows], 0.5),
        "anchor_dense_light_bytes_p95": _pct([r["inside_find_bytes"]["dense_light"] for r in rows], 0.95),
        "anchor_dense_light_reads": sum(1 for r in rows if r["inside_find_bytes"]["dense_light"]),
        "request_bytes_after_light_p50": _pct(after_light, 0.5),
        "request_bytes_after_light_p95": _pct(after_light, 0.95),
        "anchor_lookup_bytes_p50": _pct([r["inside_find_bytes"]["lookup"] for r in rows], 0.5),
        "decode_ms_p50": _pct([r["decode_ms"] for r in rows], 0.5),
        "decode_ms_p95": _pct([r["decode_ms"] for r in rows], 0.95),
        "anchors": sum(r["anchors"] for r in rows),
        "anchors_changed_f16": sum(r["changed"]["f16"] for r in rows),
        "questions_changed_f16": sum(1 for r in rows if r["changed"]["f16"]),
        "anchors_changed_i8": sum(r["changed"]["i8"] for r in rows),
        "questions_changed_i8": sum(1 for r in rows if r["changed"]["i8"]),
    }
    print(json.dumps(out if args.json else {k: out[k] for k in ("index", "questions")}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

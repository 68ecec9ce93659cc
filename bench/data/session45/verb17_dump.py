"""verb17: dump every development question's verbatim run with what the cascade knew:
the path used, the rule path's own spans (before the fill), the span scorer's ranking (top 40:
score, span, passage feature), the bound and the final hits (after reading order).
Usage: verb17_dump.py STORE OUT [families]"""
import json, sys
from pathlib import Path
ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT / "shared"))
from evidence.config import Settings
from evidence.evaluation import ensure_qa_index, find_qa_families, load_qa
from evidence.model import RetrieveRequest
from evidence.service import EvidenceService
from evidence.verbatim import cascade as C
from evidence.verbatim import cascade_paths as CP

REC: dict = {}

def span(c, **kw):
    return {"id": c.chunk_id, "doc": c.document_id, "start": c.char_start, "end": c.char_end,
            "section": c.section, "seq": c.sequence, "stype": str(c.span_type or ""), "len": len(c.text), "text": c.text, **kw}

orig_features = CP.CascadePaths.hybrid_features
def features(self):
    lex, cand, note = orig_features(self)
    REC["passage"] = {int(i): float(lex["passage"][i]) for i in range(len(self.spans))}
    return lex, cand, note
CP.CascadePaths.hybrid_features = features

orig_ranking = CP.CascadePaths.hybrid_ranking
def ranking(self):
    ranked, cand, note = orig_ranking(self)
    pas = REC.get("passage", {})
    REC["ranking"] = [span(self.spans[i], score=float(sc), passage=pas.get(i, 0.0), idx=int(i)) for sc, i in ranked[:40]]
    return ranked, cand, note
CP.CascadePaths.hybrid_ranking = ranking

orig_run_path = CP.CascadePaths.run_path
def run_path(self, path):
    hits, note = orig_run_path(self, path)
    REC.setdefault("paths", []).append({"path": path, "hits": [span(h.chunk, score=float(h.score), path=h.path) for h in hits]})
    return hits, note
CP.CascadePaths.run_path = run_path

orig_bound = C.VerbatimCascade._bound
orig_ro = C.VerbatimCascade._reading_order
def ro(self, hits):
    REC["bound"] = [span(h.chunk, score=float(h.score), path=h.path) for h in hits]
    out = orig_ro(self, hits)
    REC["final"] = [span(h.chunk, score=float(h.score), path=h.path) for h in out]
    return out
C.VerbatimCascade._reading_order = ro

store, out = sys.argv[1], sys.argv[2]
fams = sys.argv[3].split(",") if len(sys.argv) > 3 else None
service = EvidenceService(Settings(store_dir=Path(store)))
rows = []
for family in find_qa_families(ROOT / "build/qa19", fams):
    index, _ = ensure_qa_index(service, family)
    for rec in load_qa(family.questions):
        REC.clear()
        resp = service.retrieve(index, RetrieveRequest(query=rec["question"], profile="verbatim"))
        rows.append({
            "family": family.name, "question": rec["question"], "answers": rec["answers"],
            "path": resp.telemetry.path_used,
            "hits": [h.text for h in resp.hits],
            "hit_ids": [h.chunk_id for h in resp.hits],
            **{k: v for k, v in REC.items() if k != "passage"},
        })
    print(family.name, len(rows), file=sys.stderr, flush=True)
json.dump(rows, open(out, "w"))

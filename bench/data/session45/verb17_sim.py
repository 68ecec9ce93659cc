"""verb17: offline replay of reorderings of each question's bound evidence (the spans the
grounding check read; selection unchanged, so no refusal can move), then the shipped reading
order, then the answer checked within 600 / 2000 characters as `evidence eval --qa` checks it."""
import json, sys
from collections import Counter, defaultdict
sys.path.insert(0, "/work/wt/verb17/shared")
from evidence.evaluation.qa import answer_found
from evidence.records import Chunk, ChunkKind, SpanType
from evidence.verbatim.spans import reading_order

JOIN = 200

def chunk(h):
    return Chunk(chunk_id=h["id"], document_id=h["doc"], kind=ChunkKind.SPAN, text=h["text"], char_start=h["start"],
                 char_end=h["end"], sequence=h["seq"], section=h["section"],
                 span_type=SpanType(h["stype"]) if h["stype"] else None)

def final_texts(bound):
    order = reading_order([chunk(h) for h in bound], JOIN)
    return [bound[j]["text"] for j in order]

def section_penalty(lam, key=lambda h: (h["doc"], h["section"]), keep_first=True, hybrid_only=False):
    def f(row, bound):
        if hybrid_only and row["path"] != "HYBRID_FACTSPAN":
            return bound
        seen = Counter(); keyed = []
        for i, h in enumerate(bound):
            k = key(h)
            keyed.append((i + lam * seen[k], i, h)); seen[k] += 1
        out = [h for _, _, h in sorted(keyed, key=lambda t: (t[0], t[1]))]
        if keep_first and out[0] is not bound[0]:
            out.remove(bound[0]); out.insert(0, bound[0])
        return out
    return f

def evaluate(rows, fn):
    per = defaultdict(lambda: [0, 0]); gained, lost = [], []
    n6 = n2 = 0
    for r in rows:
        if not r["answers"] or not r.get("bound") or r["path"] == "NO_RESULT":
            continue
        base = r["hits"]
        new = final_texts(fn(r, list(r["bound"])))
        b6, a6 = answer_found(base, r["answers"]), answer_found(new, r["answers"])
        n6 += a6; n2 += answer_found(new, r["answers"], 2000)
        if a6 and not b6: gained.append((r["family"], r["question"])); per[r["family"]][0] += 1
        if b6 and not a6: lost.append((r["family"], r["question"])); per[r["family"]][1] += 1
    return n6, n2, gained, lost, per

if __name__ == "__main__":
    rows = json.load(open(sys.argv[1]))
    base6, base2, *_ = evaluate(rows, lambda r, b: b)
    print("identity", base6, base2)
    for hyb in (False, True):
        for keyname, key in (("section", lambda h: (h["doc"], h["section"])), ("doc", lambda h: h["doc"])):
            for lam in (0.5, 1, 1.5, 2, 3, 5, 100):
                n6, n2, g, l, per = evaluate(rows, section_penalty(lam, key, hybrid_only=hyb))
                print(f"hybrid_only={hyb} key={keyname} lam={lam}: @600 {n6} ({n6-base6:+d}: +{len(g)} -{len(l)}) @2000 {n2}")

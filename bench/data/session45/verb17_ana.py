"""verb17: what precedes a late answer (in the evidence past 600 characters, within 2,000)."""
import json, re, sys, statistics as st
from collections import Counter
sys.path.insert(0, "/work/wt/verb17/shared")
from evidence.evaluation.qa import answer_found, squash
from evidence.verbatim.cascade import question_groups  # noqa
rows = json.load(open(sys.argv[1]))
ans = [r for r in rows if r["answers"]]
f600 = sum(answer_found(r["hits"], r["answers"]) for r in ans)
f2k = sum(answer_found(r["hits"], r["answers"], 2000) for r in ans)
print("found600", f600, "found2000", f2k)
late = [r for r in ans if not answer_found(r["hits"], r["answers"]) and answer_found(r["hits"], r["answers"], 10**6)]
print("late", len(late))
W = re.compile(r"[a-z0-9]+")
c = Counter()
for r in late:
    fin = r["final"]
    k = next((i for i, h in enumerate(fin) if any(squash(a) in squash(h["text"]) for a in r["answers"])), None)
    if k is None:
        c["across"] += 1; continue
    ah = fin[k]; ahead = fin[:k]
    c["path=" + r["path"]] += 1
    c["answer hit path=" + ah["path"]] += 1
    same_sec = sum(h["section"] == ah["section"] and h["doc"] == ah["doc"] for h in ahead)
    same_doc = sum(h["doc"] == ah["doc"] for h in ahead)
    c["ahead all same section"] += same_sec == len(ahead)
    c["ahead none same section"] += same_sec == 0
    c["ahead all same doc"] += same_doc == len(ahead)
    secs_ahead = len({(h["doc"], h["section"]) for h in ahead})
    c[f"distinct sections ahead={secs_ahead}"] += 1
    # rank of answer span in the span scorer ranking
    rk = next((i for i, h in enumerate(r.get("ranking", [])) if h["id"] == ah["id"]), None)
    # is answer's section the first time its section appears?
    first_of_sec = same_sec == 0
    # position in bound (before reading order)
    kb = next((i for i, h in enumerate(r["bound"]) if h["id"] == ah["id"]), None)
    print(f"{r['family'][:22]:22} {r['path'][:14]:14} k={k} kb={kb} rk={rk} ahead={len(ahead)} sameSec={same_sec} sameDoc={same_doc} secs={secs_ahead} firstOfSec={first_of_sec} "
          f"lens={[h['len'] for h in ahead]} anspath={ah['path'][:6]} paths_ahead={''.join(h['path'][0] for h in ahead)} | {r['question'][:70]}")
for k, v in sorted(c.items()): print(k, v)

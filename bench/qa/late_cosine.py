"""verblate18 (session 46): an in-context ("late-chunked") span cosine for the verbatim span scorer.

Usage:
    python bench/qa/late_cosine.py run ROOT --store DIR --out OUT.pkl [--w W --v V] [--families a,b]
    python bench/qa/late_cosine.py diag OUT.pkl
    python bench/qa/late_cosine.py lofo OUT.pkl
    python bench/qa/late_cosine.py heldout CHOICES.json RUN1.pkl RUN2.pkl ...

`run` asks every question of the families under ROOT with `verbatim`, as `evidence eval --qa`
does (`evaluation.suite.ask_family`), with the span scorer's head re-scored as
`z + w * late_cosine - v * span_cosine` (`z`: the shipped tokens model's logit; w = v = 0 is main,
unchanged) and records, per question, the head (its spans' texts, `z`, `span_cosine`,
`late_cosine`) and the outcome. A span's late vector: its passage's `search_text` (title, space,
text; the first window of 254 pieces, as the index embeds a passage) run through MiniLM once, the
last hidden state's pieces that cover the span's characters mean-pooled and L2-normalised; of the
passages holding the span whose window covers it, the one starting first. No such passage: the
span's own cosine stands in (counted). The vectors are cached on disk (`--cache`, sqlite) by the
passage's text and the span's offsets in it, so reruns run no model for them.

`diag`: AUC of answer spans vs the rest of the head by each cosine and the logit, the answer
span's rank by each, for all answerable questions and the late answers (in the evidence past 600
characters). `lofo`: the grid of (w, v) replayed offline on the recorded heads (`HYBRID_FACTSPAN`'s
evidence: repeats dropped, 8 spans, 1,500 characters) and each family's choice fitted on the other
18. `heldout`: each family's end-to-end outcome from the run with its fold's choice.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import pickle
import sqlite3
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
if str(ROOT / "shared") not in sys.path:
    sys.path.insert(0, str(ROOT / "shared"))

from evidence.evaluation.qa import answer_found, squash  # noqa: E402

ROOM = 254  # a window's word pieces without [CLS]/[SEP] (max_tokens 256)
W_GRID = (0.0, 1.0, 2.0, 3.0, 4.0, 6.0)
V_GRID = (0.0, 1.375, 2.75)
MAX_SPANS, MAX_CHARS, LIMIT = 8, 1500, 600


class LateVectors:
    """Late-chunked span vectors, by (passage text, span offsets in it), in process and on disk."""

    def __init__(self, model: Any, path: Path) -> None:
        self.model = model
        self.db = sqlite3.connect(str(path), check_same_thread=False)
        self.db.execute("create table if not exists v (k blob primary key, v blob)")
        self.mem: dict[bytes, np.ndarray | None] = {}
        self.passages: dict[tuple[str, str], list[Any]] = {}
        self.tokens: dict[str, tuple[list[int], list[tuple[int, int]]]] = {}
        self.lock = threading.Lock()
        self.model_seconds = 0.0
        self.passes = 0
        self.fallback = 0
        self.asked = 0
        self.text_mismatch = 0

    def _passages_of(self, state: Any, doc: str) -> list[Any]:
        from evidence.records import ChunkKind

        key = (state.index, doc)
        if key not in self.passages:
            hits = state.backend.lookup(
                state.index, {"document_id": doc}, limit=state.cfg.max_scan, kind=ChunkKind.PASSAGE
            )
            self.passages[key] = sorted((h.chunk for h in hits), key=lambda c: (c.char_start, c.char_end))
        return self.passages[key]

    def _tok(self, text: str) -> tuple[list[int], list[tuple[int, int]]]:
        from evidence.embed.tokenizer import get_tokenizer

        got = self.tokens.get(text)
        if got is None:
            enc = get_tokenizer().encode(text, add_special_tokens=False)
            got = self.tokens[text] = (list(enc.ids), [(int(a), int(b)) for a, b in enc.offsets])
        return got

    @staticmethod
    def _key(text: str, a: int, b: int) -> bytes:
        return hashlib.blake2b(f"{a}:{b}\x00{text}".encode(), digest_size=16).digest()

    def _place(self, p: Any, s: Any) -> tuple[bytes, list[int]] | None:
        """The span's cache key and its piece positions in the passage's window, or None."""
        if p.document_id != s.document_id or not (p.char_start <= s.char_start and s.char_end <= p.char_end):
            return None
        text = p.search_text
        prefix = len(text) - len(p.text)
        a, b = s.char_start - p.char_start + prefix, s.char_end - p.char_start + prefix
        _, offs = self._tok(text)
        pieces = [j for j, (x, y) in enumerate(offs) if x < b and y > a]
        if not pieces or pieces[-1] >= ROOM:
            return None
        return self._key(text, a, b), pieces

    def vectors(self, state: Any, wanted: Sequence[Any]) -> list[np.ndarray | None]:
        """Late vectors of the spans `wanted` (None: no passage window holds the span)."""
        with self.lock:
            return self._vectors(state, wanted)

    def _vectors(self, state: Any, wanted: Sequence[Any]) -> list[np.ndarray | None]:
        places: list[tuple[Any, bytes, list[int]] | None] = []
        for s in wanted:
            self.asked += 1
            place = None
            for p in self._passages_of(state, s.document_id):
                got = self._place(p, s)
                if got is not None:
                    place = (p, *got)
                    break
            if place is None:
                self.fallback += 1
            elif p.text[s.char_start - p.char_start : s.char_end - p.char_start] != s.text:
                self.text_mismatch += 1
            places.append(place)
        todo = [pl for pl in places if pl is not None and pl[1] not in self.mem]
        if todo:
            keys = [pl[1] for pl in todo]
            found = dict(
                self.db.execute(
                    f"select k, v from v where k in ({','.join('?' * len(keys))})", keys
                ).fetchall()
            )
            for k, v in found.items():
                self.mem[bytes(k)] = np.frombuffer(v, dtype=np.float32)
            todo = [pl for pl in todo if pl[1] not in self.mem]
        if todo:
            self._run(state, {id(pl[0]): pl[0] for pl in todo})
        return [None if pl is None else self.mem.get(pl[1]) for pl in places]

    def _run(self, state: Any, passages: dict[int, Any]) -> None:
        """One forward pass per passage; every scope span inside its window pooled and cached."""
        from evidence.embed.tokenizer import get_tokenizer

        tok = get_tokenizer()
        cls_id, sep_id = tok.token_to_id("[CLS]"), tok.token_to_id("[SEP]")
        plist = list(passages.values())
        inputs = []
        for p in plist:
            ids, _ = self._tok(p.search_text)
            inputs.append([cls_id, *ids[:ROOM], sep_id])
        t0 = time.process_time()
        hidden_of: dict[int, np.ndarray] = {}
        for batch, _, hidden in self.model._hidden(inputs, 32, 64):
            for row, j in enumerate(batch):
                hidden_of[j] = np.asarray(hidden[row], dtype=np.float32)
        self.model_seconds += time.process_time() - t0
        self.passes += len(plist)
        rows = []
        for j, p in enumerate(plist):
            h = hidden_of[j]
            for s in state.spans:
                got = self._place(p, s)
                if got is None:
                    continue
                key, pieces = got
                if key in self.mem:
                    continue
                v = h[[1 + x for x in pieces]].mean(axis=0)
                v = v / max(float(np.linalg.norm(v)), 1e-12)
                self.mem[key] = v.astype(np.float32)
                rows.append((key, self.mem[key].tobytes()))
        self.db.executemany("insert or replace into v values (?, ?)", rows)
        self.db.commit()


def install(late: LateVectors, w: float, v: float, records: dict[str, Any]) -> None:
    """Patch the cascade's span scorer: record its head, re-score it by `z + w*late - v*own`."""
    from evidence.verbatim import cascade_paths as CP
    from evidence.verbatim import span_rank as SR

    local = threading.local()
    scored: list[tuple[Any, dict[str, np.ndarray]]] = []
    orig_score = SR.LinearModel.score

    def score(self: Any, columns: Any) -> Any:
        scored.append((self, dict(columns)))
        return orig_score(self, columns)

    SR.LinearModel.score = score  # type: ignore[method-assign]
    orig_rank = CP.rank_spans

    def rank_spans(spans: Sequence[Any], lexical: Any, **kw: Any) -> list[tuple[float, int]]:
        scored.clear()
        ranked = orig_rank(spans, lexical, **kw)
        model = kw["model"]
        scorer = None
        cols = None
        for m, c in reversed(scored):
            if m is model.tokens or m is model.dense:
                scorer, cols = m, c
                break
        state = getattr(local, "state", None)
        if scorer is None or cols is None or state is None or "span_cosine" not in cols:
            return ranked
        n = len(cols["span_cosine"])
        head = [i for _, i in ranked[:n]]
        # the head's columns are in the lexical order; ranked[:n] is the scorer's order of them
        lex = model.lexical.score(
            {k: vv[np.asarray(kw["candidates"], dtype=np.int64)] for k, vv in lexical.items()}
        )
        cand = list(kw["candidates"])
        lex_head = [cand[j] for j in sorted(range(len(cand)), key=lambda j: (-lex[j], int(cand[j])))][:n]
        assert sorted(lex_head) == sorted(head), "head mismatch"
        z = np.full(n, scorer.bias)
        for f, wt in scorer.weights.items():
            if wt and f in cols:
                z = z + wt * cols[f]
        own = np.asarray(cols["span_cosine"], dtype=np.float64)
        vecs = late.vectors(state, [spans[i] for i in lex_head])
        q = np.asarray(state.vector, dtype=np.float32).reshape(-1)
        q = q / max(float(np.linalg.norm(q)), 1e-12)
        late_cos = np.asarray(
            [own[j] if vec is None else float(vec @ q) for j, vec in enumerate(vecs)], dtype=np.float64
        )
        z2 = z + w * late_cos - v * own
        order = sorted(range(n), key=lambda j: (-z2[j], lex_head[j]))
        rec = {
            "idx": lex_head,
            "z": z,
            "own": own,
            "late": late_cos,
            "late_ok": np.asarray([vec is not None for vec in vecs]),
            "texts": [spans[i].text for i in lex_head],
            "tail": [spans[i].text for _, i in ranked[n : n + 24]],
            "sections": [spans[i].section for i in lex_head],
        }
        records.setdefault(state.question, rec)
        if w == 0 and v == 0:
            return ranked
        p = 1.0 / (1.0 + np.exp(-z2))
        floor = float(p.min())
        return [(float(p[j]), lex_head[j]) for j in order] + [
            (min(sc, floor) * 0.999, i) for sc, i in ranked[n:]
        ]

    CP.rank_spans = rank_spans
    orig_hr = CP.CascadePaths.hybrid_ranking

    def hybrid_ranking(self: Any) -> Any:
        local.state = self
        try:
            return orig_hr(self)
        finally:
            local.state = None

    CP.CascadePaths.hybrid_ranking = hybrid_ranking  # type: ignore[method-assign]


def cmd_run(args: argparse.Namespace) -> None:
    from evidence.config import Settings
    from evidence.evaluation import ensure_qa_index, find_qa_families
    from evidence.evaluation.suite import ask_family
    from evidence.service import EvidenceService

    service = EvidenceService(Settings(store_dir=Path(args.store)))
    model = service.embedder
    seen = 0
    while not hasattr(model, "_hidden") and seen < 8:
        model = model.inner
        seen += 1
    late = LateVectors(model, Path(args.cache))
    records: dict[str, Any] = {}
    install(late, args.w, args.v, records)
    out: dict[str, Any] = {"w": args.w, "v": args.v, "families": {}}
    t0 = time.perf_counter()
    try:
        fams = args.families.split(",") if args.families else None
        for family in find_qa_families(Path(args.root), fams):
            index, _ = ensure_qa_index(service, family)
            records.clear()
            outcomes = ask_family(service, family, index=index, profile=args.profile)
            out["families"][family.name] = [{"outcome": o, "head": records.get(o.question)} for o in outcomes]
            found = sum(o.found_600 for o in outcomes if o.answerable)
            print(
                f"{family.name}: {found} @600, late passes {late.passes}, fallback {late.fallback}/"
                f"{late.asked}, {time.perf_counter() - t0:.0f}s",
                file=sys.stderr,
                flush=True,
            )
    finally:
        service.close()
    out["late"] = {
        "passes": late.passes,
        "model_cpu_seconds": round(late.model_seconds, 1),
        "fallback": late.fallback,
        "asked": late.asked,
        "text_mismatch": late.text_mismatch,
    }
    with open(args.out, "wb") as fh:
        pickle.dump(out, fh)
    print(json.dumps(summary(out)), flush=True)


def _load(path: str) -> Any:
    with open(path, "rb") as fh:
        return pickle.load(fh)


def summary(run: dict[str, Any]) -> dict[str, Any]:
    per = {}
    tot = {"a600": 0, "a2000": 0, "ans": 0, "refused_unans": 0, "unans": 0, "false_ref": 0}
    for fam, items in run["families"].items():
        os_ = [it["outcome"] for it in items]
        a = [o for o in os_ if o.answerable]
        u = [o for o in os_ if not o.answerable]
        f = {
            "a600": sum(o.found_600 for o in a),
            "a2000": sum(o.found_2000 for o in a),
            "ans": len(a),
            "refused_unans": sum(o.refused for o in u),
            "unans": len(u),
            "false_ref": sum(o.refused for o in a),
        }
        per[fam] = f
        for k in tot:
            tot[k] += f[k]
    return {"w": run["w"], "v": run["v"], "pooled": tot, "late": run.get("late"), "families": per}


def positives(head: dict[str, Any], answers: Sequence[str]) -> np.ndarray:
    wanted = [squash(a) for a in answers]
    return np.asarray([any(x in squash(t) for x in wanted) for t in head["texts"]])


def auc(pos: np.ndarray, score: np.ndarray) -> float:
    p, n = score[pos], score[~pos]
    gt = (p[:, None] > n[None, :]).sum() + 0.5 * (p[:, None] == n[None, :]).sum()
    return float(gt / (len(p) * len(n)))


def rank_of(pos: np.ndarray, score: np.ndarray) -> int:
    order = np.argsort(-score, kind="stable")
    return int(np.flatnonzero(pos[order])[0])


def cmd_diag(args: argparse.Namespace) -> None:
    run = _load(args.run)
    groups: dict[str, list[dict[str, float]]] = {"all": [], "late": [], "found600": [], "missed2000": []}
    ahead: list[tuple[float, float, float]] = []
    fb = ok = 0
    for items in run["families"].values():
        for it in items:
            o, head = it["outcome"], it["head"]
            if not o.answerable or head is None:
                continue
            pos = positives(head, o.answers)
            fb += int((~head["late_ok"]).sum())
            ok += int(head["late_ok"].sum())
            if not pos.any() or pos.all():
                continue
            z, own, late = head["z"], head["own"], head["late"]
            row = {
                "auc_own": auc(pos, own),
                "auc_late": auc(pos, late),
                "auc_z": auc(pos, z),
                "auc_zlate": auc(pos, z + 2.0 * late),
                "rank_own": rank_of(pos, own),
                "rank_late": rank_of(pos, late),
                "rank_z": rank_of(pos, z),
                "late_ok_pos": float(head["late_ok"][pos].mean()),
            }
            groups["all"].append(row)
            if o.found_600:
                groups["found600"].append(row)
            elif o.found_2000:
                groups["late"].append(row)
                # the answer span (best by z) vs the spans the scorer ranks ahead of it
                order = np.argsort(-z, kind="stable")
                k = int(np.flatnonzero(pos[order])[0])
                a, before = order[k], order[:k]
                if len(before):
                    ahead.append(
                        (
                            float(own[a] - own[before].mean()),
                            float(late[a] - late[before].mean()),
                            float(np.mean(late[a] > late[before]) - np.mean(own[a] > own[before])),
                        )
                    )
            else:
                groups["missed2000"].append(row)
    out: dict[str, Any] = {"late_vectors": {"ok": ok, "fallback_own": fb}}
    for g, rows in groups.items():
        if not rows:
            continue
        out[g] = (
            {"n": len(rows)}
            | {k: round(float(np.mean([r[k] for r in rows])), 4) for k in rows[0]}
            | {
                "late_beats_own_auc": sum(r["auc_late"] > r["auc_own"] for r in rows),
                "own_beats_late_auc": sum(r["auc_late"] < r["auc_own"] for r in rows),
                "median_rank_own": float(np.median([r["rank_own"] for r in rows])),
                "median_rank_late": float(np.median([r["rank_late"] for r in rows])),
            }
        )
    if ahead:
        a = np.asarray(ahead)
        out["late_answer_vs_spans_ahead"] = {
            "n": len(a),
            "own_cos_minus_ahead_mean": round(float(a[:, 0].mean()), 4),
            "late_cos_minus_ahead_mean": round(float(a[:, 1].mean()), 4),
            "share_ahead_beaten_late_minus_own": round(float(a[:, 2].mean()), 4),
        }
    print(json.dumps(out, indent=1))


def proxy_found(head: dict[str, Any], answers: Sequence[str], w: float, v: float) -> bool:
    from evidence.rank.guardrail import within_chars
    from evidence.verbatim.hybrid import same_text

    z2 = head["z"] + w * head["late"] - v * head["own"]
    order = sorted(range(len(z2)), key=lambda j: (-z2[j], head["idx"][j]))
    texts = [head["texts"][j] for j in order] + list(head["tail"])
    picked: list[str] = []
    seen: set[str] = set()
    for t in texts:
        if len(picked) >= MAX_SPANS:
            break
        k = same_text(t)
        if k not in seen:
            seen.add(k)
            picked.append(t)
    n, _ = within_chars([len(t) for t in picked], MAX_CHARS)
    return answer_found(picked[:n], answers, LIMIT)


def cmd_lofo(args: argparse.Namespace) -> None:
    run = _load(args.run)
    grid = [(w, v) for w in W_GRID for v in V_GRID]
    counts: dict[str, dict[tuple[float, float], int]] = {}
    for fam, items in run["families"].items():
        counts[fam] = {}
        qs = [(it["head"], it["outcome"].answers) for it in items if it["outcome"].answerable and it["head"]]
        for g in grid:
            counts[fam][g] = sum(proxy_found(h, a, *g) for h, a in qs)
    fams = list(counts)
    pooled = {g: sum(counts[f][g] for f in fams) for g in grid}
    choices = {}
    for fam in fams:
        others = {g: sum(counts[f][g] for f in fams if f != fam) for g in grid}
        best = max(others.values())
        choices[fam] = min((g for g in grid if others[g] == best), key=lambda g: (g[0], g[1]))
    held = sum(counts[f][choices[f]] for f in fams)
    base = pooled[(0.0, 0.0)]
    print(
        json.dumps(
            {
                "proxy_in_sample": {f"w={g[0]},v={g[1]}": pooled[g] - base for g in grid},
                "proxy_base": base,
                "proxy_heldout": held,
                "proxy_heldout_minus_base": held - base,
                "per_family": {
                    f: {"choice": choices[f], "heldout": counts[f][choices[f]], "base": counts[f][(0.0, 0.0)]}
                    for f in fams
                },
            },
            indent=1,
        )
    )
    if args.choices:
        Path(args.choices).write_text(json.dumps({f: list(c) for f, c in choices.items()}))


def cmd_heldout(args: argparse.Namespace) -> None:
    choices = {f: tuple(c) for f, c in json.loads(Path(args.choices).read_text()).items()}
    runs = {}
    for path in args.runs:
        r = _load(path)
        runs[(float(r["w"]), float(r["v"]))] = summary(r)["families"]
    tot: dict[str, int] = {}
    per = {}
    for fam, c in choices.items():
        f = runs[(float(c[0]), float(c[1]))][fam]
        per[fam] = {"choice": c, **f}
        for k, x in f.items():
            tot[k] = tot.get(k, 0) + x
    print(json.dumps({"pooled": tot, "families": per}, indent=1))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run")
    r.add_argument("root")
    r.add_argument("--store", required=True)
    r.add_argument("--out", required=True)
    r.add_argument("--w", type=float, default=0.0)
    r.add_argument("--v", type=float, default=0.0)
    r.add_argument("--families", default="")
    r.add_argument("--profile", default="verbatim")
    r.add_argument("--cache", default="/tmp/verblate18/late.sqlite3")
    d = sub.add_parser("diag")
    d.add_argument("run")
    lo = sub.add_parser("lofo")
    lo.add_argument("run")
    lo.add_argument("--choices", default="")
    h = sub.add_parser("heldout")
    h.add_argument("choices")
    h.add_argument("runs", nargs="+")
    args = ap.parse_args()
    {"run": cmd_run, "diag": cmd_diag, "lofo": cmd_lofo, "heldout": cmd_heldout}[args.cmd](args)


if __name__ == "__main__":
    main()

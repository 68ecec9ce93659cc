"""Per-index refusal calibration from pseudo-questions (issue 22, Deliver 5): measured, not shipped.

Usage: python bench/refusal_pseudo.py rows [QA_ROOT] --store DIR [--per-index 24] > pseudo.json
       python bench/refusal_pseudo.py fit ROWS.json PSEUDO.json [--variants kw,mid,sent]
           [--quantile 0.03] [--alpha 1] [--normalise cosine,agreement [--per-profile]]
           [--blind BLIND_ROWS.json BLIND_PSEUDO.json] [--json]
(ROWS.json: `bench/refusal_rows.py`'s, as `make refusal-fit` records it; docs/verbatim.md,
"Per-index calibration".)

The idea tested: the answer probability of *answerable* questions sits at a different level in
every index (vocabulary, span length, document style), so one global floor does not keep its
false-refusal budget on new documents. Questions that the index answers by construction can be
made from its own spans without labels or an LLM: spans are drawn (deterministically, by a hash
of their chunk ids, a fair share per document), and questions are built from each
(`pseudo_questions`). Each runs through both profiles with every refusal floor off, as
`bench/refusal_rows.py` runs the suite, so the refusal signal reads them exactly as it reads a
user's question.

`fit` then measures, leave-one-family-out (the model and global floors fitted on the other six
families by `bench/refusal_fit.py`'s `Fitter`, the shipped settings: budget `answerable`, 3 %,
default cap 0.30, bar 0.3, the shipped five features; the per-index part read from the held-out
family's own pseudo-questions only, no label of it), whether a per-index floor separates the
suite's answerable from its unanswerable questions better than the global floors:

- `global`: the shipped scheme (the baseline; reproduces `make refusal-fit`'s held-out line);
- `rank`: each row's probability replaced by its rank among its index's pseudo-questions of the
  same profile (their empirical CDF), and the floors fitted on that scale;
- `quantile-min` / `quantile-max`: the global floor, or the `--quantile` quantile of the index's
  pseudo-question probabilities if lower (min) or higher (max);
- `shift`: the global floor moved by `--alpha` times the index's pseudo median's distance from
  the training indexes' mean pseudo median (the floor follows the index's level);
- `normalised` (with `--normalise`): those features read relative to their mean over the
  index's pseudo-questions, the model and floors refitted on that scale.

`--blind`: new indexes (a blind set's rows and pseudo rows), scored with what every suite family
fits, as it would ship: measured, never chosen on.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "shared"))
sys.path.insert(0, str(ROOT / "bench"))

#: A span used for a pseudo-question has at least this many content words.
MIN_WORDS = 5
#: The "sent" question keeps at most this many of the span's words.
MAX_WORDS = 16
_WORD = re.compile(r"[A-Za-z][A-Za-z'\-]*[A-Za-z]")


def _key(text: str) -> str:
    return hashlib.sha1(text.encode()).hexdigest()


def content(text: str) -> list[str]:
    """The words of `text` that analyse to a term (stop words out), in order, each once."""
    from evidence.plan.verbatim import content_words
    from evidence.verbatim.scoring import terms

    return [w for w in content_words(text) if _WORD.fullmatch(w) and terms(w)]


def pseudo_questions(text: str) -> dict[str, str]:
    """Questions a span answers by construction: `kw`, its three rarest content words (English
    rarity, `word_rarity`) in the span's order behind "What about"; `mid`, the same with its three
    words of middling rarity (a vaguer question); `sent`, the span's first `MAX_WORDS` words
    without its rarest one (a question that has to be found by the rest)."""
    from evidence.verbatim.grounding import word_rarity

    words = content(text)
    if len(words) < MIN_WORDS:
        return {}
    by_rarity = sorted(range(len(words)), key=lambda i: (-word_rarity(words[i]), i))
    kw = " ".join(words[i] for i in sorted(by_rarity[:3]))
    rarest = words[by_rarity[0]]
    plain = [w for w in text.split()[:MAX_WORDS] if w.strip(".,;:()[]\"'").lower() != rarest.lower()]
    mid = len(by_rarity) // 2
    common = " ".join(words[i] for i in sorted(by_rarity[max(0, mid - 1) : mid + 2]))
    return {
        "kw": f"What about {kw}?",
        "mid": f"What about {common}?",
        "sent": " ".join(plain).rstrip(".,;:") + "?",
    }


def sample_spans(backend: Any, index: str, n: int) -> list[Any]:
    """`n` spans of `index` with enough content words, drawn by the hash of their chunk ids (the
    same draw every run), at most a fair share per document so one long document does not fill it."""
    from evidence.records import ChunkKind

    docs = sorted(d.document_id for d in backend.list_documents(index))
    share = max(3, -(-2 * n // max(1, len(docs))))
    pool = []
    for d in docs:
        spans = [h.chunk for h in backend.lookup(index, {"document_id": d}, limit=5000, kind=ChunkKind.SPAN)]
        spans = [c for c in spans if len(content(c.text)) >= MIN_WORDS]
        pool.extend(sorted(spans, key=lambda c: _key(c.chunk_id))[:share])
    return sorted(pool, key=lambda c: _key(c.chunk_id))[:n]


def rows_main(args: argparse.Namespace) -> int:
    import refusal_rows as rr

    from evidence.evaluation import ensure_qa_index, find_qa_families
    from evidence.model import RetrieveRequest

    # The same service the suite's rows are read with, so the pseudo-questions score alike.
    service = rr.recording_service(args.store)
    wanted = [f for f in args.families.split(",") if f] or None
    rows: list[dict[str, Any]] = []
    try:
        for family in find_qa_families(args.root, wanted):
            index, _ = ensure_qa_index(service, family)
            rr.CURRENT.update(service=service, index=index)
            for span in sample_spans(service.backend, index, args.per_index):
                for variant, question in pseudo_questions(span.text).items():
                    for profile in rr.PROFILES:
                        rr.SEEN.clear()
                        resp = service.retrieve(index, RetrieveRequest(query=question, profile=profile))
                        rows.append(
                            {
                                "family": family.name,
                                "variant": variant,
                                "question": question,
                                "span": span.chunk_id,
                                "profile": profile,
                                "path": resp.telemetry.path_used,
                                "found": any(span.text[:80] in h.text for h in resp.hits),
                                "can_answer": resp.can_answer,
                                "confidence": float(resp.confidence),
                                "judged": rr.SEEN[-1] if rr.SEEN else None,
                            }
                        )
            print(f"{family.name}: done", file=sys.stderr)
    finally:
        service.close()
    json.dump(rows, sys.stdout)
    return 0


def ecdf(reference: np.ndarray, values: np.ndarray) -> np.ndarray:
    """The share of `reference` strictly below each of `values` (0 when `reference` is empty)."""
    if not len(reference):
        return np.zeros(len(values))
    return np.searchsorted(np.sort(reference), values, side="left") / len(reference)


SCHEMES = ("global", "rank", "quantile-min", "quantile-max", "shift", "normalised")


@dataclass
class Data:
    """The suite's (and, with `--blind`, new indexes') rows with every refusal floor off, and
    their indexes' pseudo-questions, as arrays: `x`/`xp` the model's features of each."""

    rows: list[dict[str, Any]]
    pseudo: list[dict[str, Any]]
    columns: list[str]
    min_confidence: float

    def __post_init__(self) -> None:
        import refusal_fit as rf

        for r in [*self.rows, *self.pseudo]:
            if r["profile"] == "default":
                # as refusal_fit.py --min-confidence re-reads the cosine/coverage refusals
                r["can_answer"] = r["confidence"] >= self.min_confidence
        self.x, self.xp = self.matrix(self.rows), self.matrix(self.pseudo)
        self.fam = np.array([r["family"] for r in self.rows])
        self.prof = np.array([r["profile"] for r in self.rows])
        self.found = np.array([bool(r["found"]) for r in self.rows])
        self.answerable = np.array([bool(r["answerable"]) for r in self.rows])
        self.net = np.array(
            [r["profile"] == "verbatim" and r.get("path") == rf.SAFETY_NET for r in self.rows]
        )
        self.already = np.array(
            [r["profile"] == "default" and not r.get("can_answer", True) for r in self.rows]
        )
        self.pfam = np.array([r["family"] for r in self.pseudo])
        self.pprof = np.array([r["profile"] for r in self.pseudo])

    def matrix(self, rows: Sequence[dict[str, Any]]) -> np.ndarray:
        import refusal_fit as rf

        read = [r.setdefault("_features", rf.features(r)) for r in rows]
        return np.array([[f.get(c, 0.0) for c in self.columns] for f in read])

    def pseudo_of(self, family: str, profile: str) -> np.ndarray:
        return (self.pfam == family) & (self.pprof == profile)

    def per_row(self, values: dict[tuple[str, str], float]) -> np.ndarray:
        """A (family, profile) statistic spread over the rows."""
        return np.array([values.get((f, p), np.nan) for f, p in zip(self.fam, self.prof, strict=True)])

    def normalised(self, features: Sequence[str], per_profile: bool) -> np.ndarray:
        """`x` with `features` read relative to their index's level: the mean over its own
        pseudo-questions (of the same profile with `per_profile`, else both)."""
        out = self.x.copy()
        for c in features:
            j = self.columns.index(c)
            for f in set(self.fam):
                for pr in set(self.prof):
                    mine = self.pseudo_of(f, pr) if per_profile else self.pfam == f
                    level = float(np.mean(self.xp[mine, j])) if mine.any() else 0.0
                    sel = (self.fam == f) & (self.prof == pr)
                    out[sel, j] = self.x[sel, j] - level
        return out


@dataclass(frozen=True)
class Options:
    max_loss: float
    default_cap: float
    quantile: float
    alpha: float
    normalise: tuple[str, ...]
    per_profile: bool


def refusals(d: Data, train: np.ndarray, opt: Options) -> dict[str, np.ndarray]:
    """Every row's refusal under each scheme, the model and global floors fitted on `train`
    (labels read only there); the per-index part from each index's own pseudo-questions."""
    import refusal_fit as rf

    losses = dict.fromkeys(rf.PROFILES, opt.max_loss)
    fitter = rf.Fitter(d.x, d.found, d.prof, d.answerable, d.net, d.found, d.already, opt.default_cap)
    w, floors = fitter.fit_at(train, losses)
    p, pp, bars = rf.probability(d.x, w), rf.probability(d.xp, w), fitter.bars(floors)
    keys = {(f, pr) for f in set(d.fam) for pr in rf.PROFILES}
    out = {"global": (p < bars) | d.already}
    # rank: each row's probability as its rank among its index's pseudo-questions of its
    # profile, the floors fitted on that scale on `train`
    c = np.zeros(len(p))
    for f, pr in keys:
        sel = (d.fam == f) & (d.prof == pr)
        c[sel] = ecdf(pp[d.pseudo_of(f, pr)], p[sel])
    v, df = train & (d.prof == "verbatim"), train & (d.prof == "default")
    fl, nf = rf.pick_floors(c[v], d.answerable[v], d.net[v], opt.max_loss, d.found[v])
    dfl = rf.pick_floor(c[df], d.answerable[df], opt.max_loss, d.already[df])
    out["rank"] = (c < np.where(d.prof == "default", dfl, np.where(d.net, nf, fl))) | d.already
    # quantile: the index's pseudo-questions' `quantile` as its floor, with the global one
    q = d.per_row(
        {k: float(np.quantile(pp[d.pseudo_of(*k)], opt.quantile)) for k in keys if d.pseudo_of(*k).any()}
    )
    q = np.where(np.isnan(q), bars, q)
    out["quantile-min"] = (p < np.minimum(bars, q)) | d.already
    out["quantile-max"] = (p < np.maximum(bars, q)) | d.already
    # shift: the global floor moved by the index's pseudo median's distance from the training
    # indexes' mean pseudo median
    med = {k: float(np.median(pp[d.pseudo_of(*k)])) for k in keys if d.pseudo_of(*k).any()}
    trained = {
        pr: float(np.mean([m for (f, x), m in med.items() if x == pr and f in set(d.fam[train])]))
        for pr in rf.PROFILES
    }
    shift = d.per_row({k: m - trained[k[1]] for k, m in med.items()})
    out["shift"] = (p < bars + opt.alpha * np.nan_to_num(shift)) | d.already
    if opt.normalise:
        xn = d.normalised(opt.normalise, opt.per_profile)
        nfit = rf.Fitter(xn, d.found, d.prof, d.answerable, d.net, d.found, d.already, opt.default_cap)
        wn, fn = nfit.fit_at(train, losses)
        out["normalised"] = (rf.probability(xn, wn) < nfit.bars(fn)) | d.already
    return out


def tally(d: Data, refused: np.ndarray, rows: np.ndarray) -> dict[str, Any]:
    """Per profile, over `rows`: unanswerable refused, answerable refused (false refusals)."""
    import refusal_fit as rf

    out: dict[str, Any] = {}
    for pr in rf.PROFILES:
        sel = rows & (d.prof == pr)
        una, ans = sel & ~d.answerable, sel & d.answerable
        out[pr] = {
            "refused": f"{int((refused & una).sum())}/{int(una.sum())}",
            "false": f"{int((refused & ans).sum())}/{int(ans.sum())}",
            "false_rate": round(float((refused & ans).sum() / max(1, ans.sum())), 4),
            "per_family_false": {
                f: int((refused & ans & (d.fam == f)).sum()) for f in sorted(set(d.fam[sel]))
            },
        }
    return out


def fit_main(args: argparse.Namespace) -> int:
    variants = set(args.variants.split(","))

    def load(path: str) -> list[dict[str, Any]]:
        return [
            r
            for r in json.loads(Path(path).read_text())
            if r.get("variant", "") in variants or "variant" not in r
        ]

    rows, pseudo = load(args.rows), load(args.pseudo)
    blind = 0
    if args.blind:
        # new indexes: scored with what every suite family fits (what would ship)
        extra = load(args.blind[0])
        blind = len(extra)
        rows, pseudo = [*rows, *extra], [*pseudo, *load(args.blind[1])]
    opt = Options(
        args.max_loss,
        args.default_cap,
        args.quantile,
        args.alpha,
        tuple(c for c in args.normalise.split(",") if c),
        args.per_profile,
    )
    d = Data(rows, pseudo, [c for c in args.features.split(",") if c], args.min_confidence)
    suite = np.arange(len(rows)) < len(rows) - blind
    held: dict[str, np.ndarray] = {}
    for f in sorted(set(d.fam[suite])):
        got = refusals(d, suite & (d.fam != f), opt)
        for s, r in got.items():
            held.setdefault(s, np.zeros(len(rows), dtype=bool))[d.fam == f] = r[d.fam == f]
    report: dict[str, Any] = {"held_out": {s: tally(d, r, suite) for s, r in held.items()}}
    if blind:
        report["blind"] = {s: tally(d, r, ~suite) for s, r in refusals(d, suite, opt).items()}
    if args.json:
        print(json.dumps(report, indent=1))
        return 0
    for part, schemes in report.items():
        for s, t in schemes.items():
            cells = "  ".join(
                f"{pr} {v['refused']} refused, false {v['false']} ({v['false_rate']:.1%})"
                for pr, v in t.items()
            )
            print(f"{part:<9} {s:<13} {cells}")
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("rows")
    r.add_argument("root", nargs="?", type=Path, default=ROOT / "bench" / "qa")
    r.add_argument("--store", type=Path, default=Path(".evidence"))
    r.add_argument("--families", default="")
    r.add_argument("--per-index", type=int, default=30)
    f = sub.add_parser("fit")
    f.add_argument("rows")
    f.add_argument("pseudo")
    f.add_argument("--variants", default="kw,mid,sent")
    f.add_argument("--quantile", type=float, default=0.03)
    f.add_argument("--alpha", type=float, default=1.0)
    f.add_argument("--max-loss", type=float, default=0.03)
    f.add_argument("--default-cap", type=float, default=0.30)
    f.add_argument("--min-confidence", type=float, default=0.3)
    f.add_argument("--features", default="grounding,cosine,typed_key,agreement,typed_rarest")
    f.add_argument(
        "--normalise", default="", help="features read relative to the index's pseudo-question mean"
    )
    f.add_argument("--per-profile", action="store_true", help="that mean per profile (else both pooled)")
    f.add_argument("--blind", nargs=2, metavar=("ROWS", "PSEUDO"), help="new indexes' rows and pseudo rows")
    f.add_argument("--json", action="store_true")
    args = ap.parse_args()
    return rows_main(args) if args.cmd == "rows" else fit_main(args)


if __name__ == "__main__":
    raise SystemExit(main())

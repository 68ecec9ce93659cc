"""Where the `default` profile's answers sit in its evidence, and the `focus` rule fitted
leave-one-family-out.

Usage: python bench/qa/focus_fit.py [ROOT] [--families A,B] [--store DIR] [--misses] [--fit] [--json]
       [--repeats] [--static TABLE [--static-floors F,…] [--static-weights W,…] [--static-lofo K,…]]
       [--span-anchor [--span-anchor-models lexical,full,dense,within,cached-dense…] [--span-anchor-fill]]

Every family is indexed as `evidence eval --qa` does (re-used while unchanged) and each question
asked once with the `default` profile **without** its `focus` stage: the hits as `top_k` leaves
them (whole passages, possibly merged by `collapse_overlaps`) and the response's answer signal are
kept in memory. Every `focus` rule is then applied to those hits offline, so a sweep costs no
retrieval; the answer signal (`can_answer`, the grounding check) is recomputed on the focused
hits, because the grounding check reads the hits' text.

- `--misses`: for each answerable question the shipped rule misses within 2,000 characters, the
  rank of the first hit holding an answer (before focus), the answer's offset in that hit, the
  offset of the sentence focus picked, and whether focus cut the answer out; counted by class:
  `not_retrieved` (no hit holds it; `lost_at`: the stage after which no candidate held it,
  `first_stage` when none ever did; `candidate_rank`: its rank in the list `top_k` cut), `cut`
  (focus cut it out of its hit; `sentences_from_run`: how far the answer's sentence is from the
  run kept), `late` (kept, but more than 2,000 characters of evidence come before it); `merged`:
  whether `collapse_overlaps` widened the hit (docs/ranking.md#default-misses). `miss_classes`
  counts them per family in four classes: `not_in_hits`; `past_budget` (the answer's hit starts
  after 2,000 characters of earlier hits, kept or cut); `cut_first` (focus cut it out of the
  first hit); `cut_later` (focus cut it out of a later hit that starts within the budget).
  With `--fit` too: `lofo_misses`, the same rows for the **held-out** rule (each family under the
  sizes its fold chose on the others), `fold_choice` marking the misses the shipped rule finds
  in-sample (lost to the fold's choice of sizes), and `lofo_miss_classes`, their four classes.
- `--fit`: the rule's `window`, `first_window`, `lead`, `second_window`, `type_weight` and
  `collapse_space` (whether sizes count a whitespace run once, as the budget does) chosen on four
  families by pooled recall@2000
  (ties: recall@600, then fewer evidence characters), measured on the fifth; prints
  the held-out figures per family and pooled (recall@600, recall@2000, evidence characters per
  question, unanswerable questions refused, false refusals). `fill` (runs grown back to the
  reader's 2,000 characters when the hits come to less) is not in the grid: it is the budget
  itself, at its default (docs/ranking.md#focus-fill).
- `--repeats`: the shipped rule with `drop_repeats` (a hit whose kept text is already in the
  evidence before it dropped; no constant, so in-sample is held out), per family, with the
  questions whose figures it changes (docs/ranking.md#focus-repeats).
- `--static TABLE` (built by `bench/static_pieces.py`): the static word-piece paraphrase credit
  in the run value (`FocusHits(paraphrase=…)`), in-sample for each point of `--static-floors` x
  `--static-weights` x credit for every lacking term / only for terms the hit lacks, with each
  point's focus CPU time a question; `--static-lofo K,…` fits those points (and the lever off)
  leave-one-family-out with the sizes (docs/ranking.md#focus-static).
- `--span-anchor`: each hit's run anchored on its best span by the `verbatim` profile's span
  scorer (`FocusHits(anchors=…)`), lexical and full model, both anchor modes, in-sample at the
  shipped sizes; the five families the span scorer was fitted on reported apart, with the
  anchors' time a question (docs/ranking.md#focus-span-anchor). `--span-anchor-models
  cached-cos,cached-cos_head,cached-cheap,cached-dense`: the cache-only anchors (span vectors
  read from the store's embedding cache, never embedded; `span_cache` reports the share of the
  in-hit spans it holds), with `--span-anchor-fill` after embedding the in-hit spans it lacks, as
  indexing every fact span would (docs/ranking.md#focus-span-anchor-cached).
"""

from __future__ import annotations

import argparse
import itertools
import json
import statistics
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
if str(ROOT / "shared") not in sys.path:
    sys.path.insert(0, str(ROOT / "shared"))

from evidence.config import Settings  # noqa: E402
from evidence.evaluation.qa import load_qa, squash  # noqa: E402
from evidence.evaluation.suite import ensure_qa_index, find_qa_families  # noqa: E402
from evidence.model import RetrieveRequest  # noqa: E402
from evidence.profiles import register_profile, unregister_profile  # noqa: E402
from evidence.profiles.base import ProfileEnv  # noqa: E402
from evidence.profiles.default import DefaultPlugin  # noqa: E402
from evidence.rank.candidate import Candidate  # noqa: E402
from evidence.rank.context import RankContext, Trace  # noqa: E402
from evidence.rank.dedup import FocusHits  # noqa: E402
from evidence.rank.pipeline import Profile, RankOutcome  # noqa: E402
from evidence.service import EvidenceService  # noqa: E402
from evidence.verbatim.answer_types import answer_types  # noqa: E402

_CAPTURE = "default-unfocused"


@dataclass
class Asked:
    """One question and what the unfocused `default` profile returned for it."""

    family: str
    question: str
    answers: tuple[str, ...]
    ctx: RankContext
    hits: list[Candidate]
    outcome: RankOutcome
    env: ProfileEnv
    #: Each stage's output before focus, in stage order (where a miss was lost).
    stages: tuple[tuple[str, tuple[Candidate, ...]], ...] = ()


class _Capture(DefaultPlugin):
    """`default` with `focus` removed; keeps each run's context and outcome."""

    name = _CAPTURE

    def __init__(self) -> None:
        super().__init__()
        self.runs: list[tuple[RankContext, RankOutcome, ProfileEnv]] = []
        self._ctx: RankContext | None = None
        self.stage_out: list[tuple[str, tuple[Candidate, ...]]] = []

    def build(self) -> Profile:
        base = super().build()
        capture = self

        class Record:
            name = "record"

            def run(self, candidates: Sequence[Candidate], ctx: RankContext) -> list[Candidate]:
                capture._ctx = ctx
                return list(candidates)

        class Watch:
            """A stage as it is, its output kept (the first stage's output starts a new run)."""

            def __init__(self, stage: Any, first: bool) -> None:
                self.stage, self.first, self.name = stage, first, stage.name

            def run(self, candidates: Sequence[Candidate], ctx: RankContext) -> list[Candidate]:
                out = self.stage.run(candidates, ctx)
                if self.first:
                    capture.stage_out = []
                capture.stage_out.append((self.name, tuple(out)))
                return list(out)

        stages = tuple(
            Record() if isinstance(s, FocusHits) else Watch(s, i == 0) for i, s in enumerate(base.stages)
        )
        return replace(base, stages=stages)

    def answer_signal(self, query: str, outcome: RankOutcome, env: ProfileEnv) -> Any:
        assert self._ctx is not None
        self.runs.append((self._ctx, outcome, env))
        return super().answer_signal(query, outcome, env)


def capture(service: EvidenceService, root: Path, families: Sequence[str] | None) -> list[Asked]:
    plugin = _Capture()
    register_profile(_CAPTURE, lambda: plugin)
    asked: list[Asked] = []
    try:
        for family in find_qa_families(root, families):
            index, _ = ensure_qa_index(service, family)
            for rec in load_qa(family.questions):
                service.retrieve(index, RetrieveRequest(query=rec["question"], profile=_CAPTURE))
                ctx, outcome, env = plugin.runs[-1]
                asked.append(
                    Asked(
                        family.name,
                        rec["question"],
                        tuple(rec["answers"]),
                        ctx,
                        list(outcome.hits),
                        outcome,
                        env,
                        tuple(plugin.stage_out),
                    )
                )
    finally:
        unregister_profile(_CAPTURE)
    return asked


FocusRule = Callable[[Sequence[Candidate], RankContext], list[Candidate]]


@dataclass
class Scored:
    family: str
    answerable: bool
    found_600: bool
    found_2000: bool
    chars: int
    refused: bool | None


def _fresh(ctx: RankContext) -> RankContext:
    return replace(ctx, trace=Trace())


def score(asked: Sequence[Asked], rule: FocusRule, *, refusals: bool = False) -> list[Scored]:
    plugin = DefaultPlugin()
    out = []
    for a in asked:
        hits = rule(a.hits, _fresh(a.ctx))
        head = squash("\n".join(h.chunk.text for h in hits))
        wanted = [squash(x) for x in a.answers]
        refused = None
        if refusals:
            signal = plugin.answer_signal(a.question, replace(a.outcome, hits=hits), a.env)
            refused = not signal.can_answer
        out.append(
            Scored(
                a.family,
                bool(a.answers),
                any(w in head[:600] for w in wanted),
                any(w in head[:2000] for w in wanted),
                len(head),
                refused,
            )
        )
    return out


def figures(rows: Sequence[Scored]) -> dict[str, Any]:
    ans = [r for r in rows if r.answerable]
    un = [r for r in rows if not r.answerable]
    out: dict[str, Any] = {
        "answerable": len(ans),
        "recall_600": round(sum(r.found_600 for r in ans) / len(ans), 4) if ans else None,
        "recall_2000": round(sum(r.found_2000 for r in ans) / len(ans), 4) if ans else None,
        "chars": round(statistics.fmean(r.chars for r in rows), 1) if rows else 0.0,
    }
    if rows and rows[0].refused is not None:
        out["refused_unanswerable"] = f"{sum(bool(r.refused) for r in un)}/{len(un)}"
        out["false_refusals"] = round(sum(bool(r.refused) for r in ans) / len(ans), 4) if ans else None
    return out


def misses(asked: Sequence[Asked], rule: FocusRule) -> list[dict[str, Any]]:
    """Every answerable question `rule` misses within 2,000 characters, located."""
    rows = []
    for a in asked:
        if not a.answers:
            continue
        wanted = [squash(x) for x in a.answers]
        focused = rule(a.hits, _fresh(a.ctx))
        head = squash("\n".join(h.chunk.text for h in focused))
        if any(w in head[:2000] for w in wanted):
            continue
        row: dict[str, Any] = {"family": a.family, "question": a.question}
        where = next(
            ((i, h) for i, h in enumerate(a.hits) if any(w in squash(h.chunk.text) for w in wanted)),
            None,
        )
        if where is None:
            row["class"] = "not_retrieved"
            row["lost_at"] = _lost_at(a, wanted)
            row["candidate_rank"] = _candidate_rank(a, wanted)
            rows.append(row)
            continue
        i, hit = where
        flat = squash(hit.chunk.text)
        offset = min(flat.find(w) for w in wanted if w in flat)
        mine = next((f for f in focused if f.chunk_id == hit.chunk_id), None)
        kept = mine is not None and any(w in squash(mine.chunk.text) for w in wanted)
        before = sum(len(squash(f.chunk.text)) + 1 for f in focused[: focused.index(mine)]) if mine else None
        row.update(
            {
                "class": "late" if kept else "cut",
                "rank": i + 1,
                "hit_chars": len(flat),
                "merged": _merged(a, hit),
                "answer_offset": offset,
                "focus_start": (mine.chunk.char_start - hit.chunk.char_start) if mine else None,
                "focus_chars": len(squash(mine.chunk.text)) if mine else None,
                "sentences_from_run": None if kept or mine is None else _sentences_off(hit, mine, a.answers),
                "evidence_before": before,
            }
        )
        rows.append(row)
    return rows


def miss_classes(rows: Sequence[dict[str, Any]]) -> dict[str, dict[str, int]]:
    """`misses` rows counted per family (and `all`) in four classes (module docstring); held-out
    rows (`held_out_misses`) also count `fold_choice`, across the classes."""
    names = ("not_in_hits", "past_budget", "cut_first", "cut_later")
    out: dict[str, dict[str, int]] = {}
    for r in rows:
        if r["class"] == "not_retrieved":
            kind = names[0]
        elif (r["evidence_before"] or 0) >= 2000:
            kind = names[1]
        else:
            kind = names[2] if r["rank"] == 1 else names[3]
        for key in (r["family"], "all"):
            counts = out.setdefault(key, dict.fromkeys(names, 0))
            counts[kind] += 1
            if "fold_choice" in r:  # held-out rows: how many of them the shipped rule finds
                counts["fold_choice"] = counts.get("fold_choice", 0) + bool(r["fold_choice"])
    return out


def held_out_misses(
    asked: Sequence[Asked],
    lofo: dict[str, Any],
    build: Callable[..., FocusRule],
    shipped_misses: set[tuple[str, str]],
) -> list[dict[str, Any]]:
    """`misses` of each family under the rule its fold chose on the other families (the held-out
    misses `--fit` counts), each marked `fold_choice` when the shipped rule finds it in-sample:
    those are lost to the fit choosing other sizes, not to focus as such."""
    rows = []
    for name, fold in lofo["families"].items():
        mine = [a for a in asked if a.family == name]
        for row in misses(mine, build(**fold["parameter"])):
            row["fold_choice"] = (row["family"], row["question"]) not in shipped_misses
            rows.append(row)
    return rows


def _candidate_rank(a: Asked, wanted: Sequence[str]) -> int | None:
    """1-based rank of the first candidate holding an answer in the list `top_k` cut (None: none)."""
    names = [n for n, _ in a.stages]
    if "top_k" not in names or names.index("top_k") == 0:
        return None
    before = a.stages[names.index("top_k") - 1][1]
    return next((k + 1 for k, c in enumerate(before) if any(w in squash(c.chunk.text) for w in wanted)), None)


def _merged(a: Asked, hit: Candidate) -> bool | None:
    """Whether `collapse_overlaps` widened the hit (its offsets differ from the passage's own)."""
    names = [n for n, _ in a.stages]
    if "collapse_overlaps" not in names or names.index("collapse_overlaps") == 0:
        return None
    own = next(
        (c for c in a.stages[names.index("collapse_overlaps") - 1][1] if c.chunk_id == hit.chunk_id), None
    )
    return (
        None
        if own is None
        else (own.chunk.char_start, own.chunk.char_end) != (hit.chunk.char_start, hit.chunk.char_end)
    )


def _sentences_off(hit: Candidate, kept: Candidate, answers: Sequence[str]) -> int | None:
    """Sentences between the answer's and the kept run (focus's splitter; + after the run, - before)."""
    from evidence.rank.dedup import _sentences

    text = hit.chunk.text
    at = next((text.find(x[:25]) for x in answers if x[:25] in text), -1)
    if at < 0:
        return None
    spans = _sentences(text)
    answer = next((k for k, (s, e) in enumerate(spans) if s <= at <= e), None)
    lo, hi = kept.chunk.char_start - hit.chunk.char_start, kept.chunk.char_end - hit.chunk.char_start
    run = [k for k, (s, e) in enumerate(spans) if s >= lo and e <= hi]
    if answer is None or not run:
        return None
    return answer - run[-1] if answer > run[-1] else answer - run[0]


def _lost_at(a: Asked, wanted: Sequence[str]) -> str:
    """The stage after which no candidate holds an answer (`first_stage`: never a candidate)."""
    held = [any(any(w in squash(c.chunk.text) for w in wanted) for c in out) for _, out in a.stages]
    if not any(held):
        return a.stages[0][0] if a.stages else "first_stage"
    last = max(i for i, h in enumerate(held) if h)
    return a.stages[last + 1][0] if last + 1 < len(a.stages) else "focus"


def leave_one_family_out(
    asked: Sequence[Asked], grid: Sequence[dict[str, Any]], build: Callable[..., FocusRule]
) -> dict[str, Any]:
    """Each family scored with the grid point that does best on the other four (recall@2000,
    then recall@600, then fewer evidence characters), refusals recomputed on its focused hits."""
    rows_by_point = [score(asked, build(**p)) for p in grid]
    names = list(dict.fromkeys(a.family for a in asked))
    report: dict[str, Any] = {"families": {}}
    held: list[Scored] = []

    def keys(held_out: str | None) -> list[tuple[int, int, int]]:
        return [
            (
                sum(r.found_2000 for r in rows if r.family != held_out and r.answerable),
                sum(r.found_600 for r in rows if r.family != held_out and r.answerable),
                -sum(r.chars for r in rows if r.family != held_out),
            )
            for rows in rows_by_point
        ]

    def ties(key: Sequence[tuple[int, int, int]], best: int) -> dict[str, int]:
        # How many grid points the choice was made among: tied on recall@2000 (then broken by
        # recall@600 and characters), and tied on all three (then the grid's first is taken).
        return {
            "tied_2000": sum(k[0] == key[best][0] for k in key),
            "tied_2000_600": sum(k[:2] == key[best][:2] for k in key),
            "tied_all": sum(k == key[best] for k in key),
        }

    for name in names:
        key = keys(name)
        best = max(range(len(grid)), key=lambda k: key[k])
        mine = score([a for a in asked if a.family == name], build(**grid[best]), refusals=True)
        held.extend(mine)
        report["families"][name] = {"parameter": grid[best], **ties(key, best), **figures(mine)}
    report["held_out"] = figures(held)
    key = keys(None)
    every = max(range(len(grid)), key=lambda k: key[k])
    report["fitted_on_all"] = {
        "parameter": grid[every],
        **ties(key, every),
        **figures(rows_by_point[every]),
        "families": by_family(rows_by_point[every]),
    }
    return report


def by_family(rows: Sequence[Scored]) -> dict[str, Any]:
    """`figures` per family (in-sample figures of one rule, to compare with the shipped one)."""
    return {n: figures([r for r in rows if r.family == n]) for n in dict.fromkeys(r.family for r in rows)}


def _memoise(expected: Callable[[str], Sequence[Any]]) -> Callable[[str], Sequence[Any]]:
    """Analysis, sentence splitting and answer-type tests memoised for a sweep: every grid point
    reads the same hits, so each text is analysed once, not once per point (~3x faster). The
    results are the same: all three are pure functions of their text."""
    import functools

    from evidence.rank import dedup
    from evidence.search import analysis

    real = analysis.get_analyzer()
    memo = functools.lru_cache(maxsize=None)(lambda text: tuple(real.analyze(text)))

    class Memo:
        def analyze(self, text: str) -> list[str]:
            return list(memo(text))

    shared = Memo()
    analysis.get_analyzer = lambda config=None: shared if config is None else real.__class__(config)  # type: ignore[assignment]
    dedup._sentences = functools.lru_cache(maxsize=None)(dedup._sentences)

    class Kind:
        def __init__(self, kind: Any) -> None:
            self.reads_in = functools.lru_cache(maxsize=None)(kind.reads_in)

    return functools.lru_cache(maxsize=None)(lambda q: tuple(Kind(k) for k in expected(q)))


def size_grid(**axes: Sequence[Any]) -> list[dict[str, Any]]:
    """Every combination of the given `FocusHits` sizes, as its keyword arguments, in the order
    the axes are given (the fits break ties by that order)."""
    return [dict(zip(axes, combo, strict=True)) for combo in itertools.product(*axes.values())]


def _report(service: EvidenceService, args: argparse.Namespace) -> dict[str, Any]:
    asked = capture(service, Path(args.root), [f for f in args.families.split(",") if f] or None)
    expected = answer_types().expected  # as the `default` plug-in builds its focus
    shipped = FocusHits(expected=expected)
    report: dict[str, Any] = {"unfocused": figures(score(asked, lambda h, c: list(h), refusals=True))}
    kept = score(asked, shipped.run, refusals=True)
    report["shipped"] = {**figures(kept), "families": by_family(kept)}
    if args.misses:
        report["misses"] = misses(asked, shipped.run)
        report["miss_classes"] = miss_classes(report["misses"])
    if args.repeats:
        report["repeats"] = _repeats(asked, kept, FocusHits(expected=expected, drop_repeats=True))
    if args.static:
        report["static"] = _static_lever(asked, expected, args)
    if args.span_anchor:
        models = args.span_anchor_models.split(",")
        report["span_anchor"] = _span_anchor_lever(asked, expected, kept, models, fill=args.span_anchor_fill)
    if args.fit:
        fast = _memoise(expected)
        grid = size_grid(
            window=(150, 200, 300),
            first_window=(900, 1000, 1200),
            lead=(200, 400, 600),
            second_window=(200, 300, 400, 500),
            type_weight=(0.0, 1.5),
            collapse_space=(False, True),
        )
        report["lofo"] = leave_one_family_out(asked, grid, lambda **p: FocusHits(**p, expected=fast).run)
        if args.misses:
            found_shipped = {(m["family"], m["question"]) for m in report["misses"]}
            report["lofo_misses"] = held_out_misses(
                asked, report["lofo"], lambda **p: FocusHits(**p, expected=fast).run, found_shipped
            )
            report["lofo_miss_classes"] = miss_classes(report["lofo_misses"])
    return report


def _repeats(asked: Sequence[Asked], shipped: Sequence[Scored], rule: FocusHits) -> dict[str, Any]:
    """`drop_repeats` against the shipped rule on the same captured hits: figures, answers found
    per family, and each question whose recall@600/@2000 or refusal it changes."""
    rows = score(asked, rule.run, refusals=True)
    found = {n: sum(r.found_2000 for r in rows if r.family == n and r.answerable) for n in by_family(rows)}
    changed = [
        {
            "family": a.family,
            "answerable": new.answerable,
            "found_2000": [old.found_2000, new.found_2000],
            "found_600": [old.found_600, new.found_600],
            "refused": [old.refused, new.refused],
        }
        for a, old, new in zip(asked, shipped, rows, strict=True)
        if (old.found_2000, old.found_600, old.refused) != (new.found_2000, new.found_600, new.refused)
    ]
    return {**figures(rows), "found_2000": found, "changed": changed}


def _static_lever(asked: Sequence[Asked], expected: Any, args: argparse.Namespace) -> dict[str, Any]:
    """The static word-piece paraphrase credit (`bench/static_pieces.py`) in focus's run value
    (docs/ranking.md#focus-static): in-sample at the shipped sizes for every (floor, weight,
    absent_only) point, each point's focus CPU time a question (the first point of a floor reads
    every hit's words; later points find them cached); with `--static-lofo K,…` those in-sample
    points (and the lever off) fitted leave-one-family-out with the sizes on a 96-point sub-grid
    (it reproduces `--fit`'s held-out figure with the lever off)."""
    import time

    sys.path.insert(0, str(HERE.parent))
    from static_pieces import StaticPieces

    fast = _memoise(expected)
    table = StaticPieces.load(Path(args.static)).table
    floors = [float(x) for x in args.static_floors.split(",")]
    weights = [float(x) for x in args.static_weights.split(",")]
    models = {(f, ab): StaticPieces(table, floor=f, absent_only=ab) for f in floors for ab in (False, True)}
    levers: list[dict[str, Any]] = [{"paraphrase_weight": 0.0}]
    for ab, f, w in itertools.product((False, True), floors, weights):
        levers.append({"absent_only": ab, "floor": f, "paraphrase_weight": w})

    def build(lever: int = 0, **sizes: Any) -> FocusRule:
        p = levers[lever]
        model = models[(p["floor"], p["absent_only"])] if p["paraphrase_weight"] > 0 else None
        return FocusHits(
            **sizes, paraphrase=model, paraphrase_weight=p["paraphrase_weight"], expected=fast
        ).run

    out: dict[str, Any] = {"in_sample": []}
    for k, lever in enumerate(levers):
        t0 = time.process_time()
        rows = score(asked, build(k))
        cpu = (time.process_time() - t0) / len(asked) * 1000
        found = {
            n: sum(r.found_2000 for r in rows if r.family == n and r.answerable) for n in by_family(rows)
        }
        line = {
            "point": k,
            **lever,
            "found_2000": sum(found.values()),
            "cpu_ms": round(cpu, 2),
            "families": found,
        }
        out["in_sample"].append(line)
        print(json.dumps(line), file=sys.stderr, flush=True)
    chosen = [0, *(int(x) for x in args.static_lofo.split(",") if x)]
    if len(chosen) > 1:
        sizes = size_grid(
            window=(150, 200),
            first_window=(1000, 1200),
            lead=(400, 600),
            second_window=(200, 400, 500),
            type_weight=(0.0, 1.5),
            collapse_space=(False, True),
        )
        for name, points in (("lofo_off", [0]), ("lofo", chosen)):
            fit = leave_one_family_out(asked, [{**sz, "lever": k} for k in points for sz in sizes], build)
            out[name] = {
                "held_out": fit["held_out"],
                "families": {
                    n: {
                        "parameter": f["parameter"],
                        "recall_2000": f["recall_2000"],
                        "tied_2000": f["tied_2000"],
                    }
                    for n, f in fit["families"].items()
                },
                "fitted_on_all": fit["fitted_on_all"]["parameter"],
            }
    out["levers"] = levers
    return out


#: The families the shipped span scorer was fitted on (`verbatim/data/span_rank.json`: bench/qa's
#: first five): in-sample for it, so the span-anchor lever reports the others apart.
SPAN_FITTED = ("clinical-guideline", "contract", "drug-labels", "standard", "technical-manual")


@dataclass
class _Fixed:
    """Anchors found once a question (`FocusHits(anchors=…)` asks on every scoring)."""

    by_question: dict[tuple[str, str], Any]

    def find(self, hits: Sequence[Candidate], ctx: RankContext) -> dict[int, tuple[int, int]]:
        found: dict[int, tuple[int, int]] = self.by_question[(ctx.index, ctx.query)]
        return found


def _span_cache(asked: Sequence[Asked], *, fill: bool) -> dict[str, Any]:
    """How many of the spans inside the captured hits (and of their headings) the store's
    embedding cache holds a vector of, per text as the cache-only anchor reads them
    (`verbatim.cascade.spans_in_hits`); with `fill`, the missing ones are then embedded into it
    (`embed_documents`), as indexing every fact span would have: the cache-only anchors then
    behave as on a store whose indexer embedded its spans."""
    from evidence.embed.cache import CachedEmbedder
    from evidence.records import ChunkKind
    from evidence.verbatim.cascade import spans_in_hits

    texts = heads = cached_texts = cached_heads = 0
    filled = 0
    for a in asked:
        services = a.env.services
        if services is None:
            continue
        emb = services.document_embedder(a.ctx.index)
        if not isinstance(emb, CachedEmbedder):
            continue
        passages = [h.chunk for h in a.hits if h.chunk.kind is ChunkKind.PASSAGE]
        found = spans_in_hits(a.ctx.backend, a.ctx.index, passages)
        headings = list(dict.fromkeys(c.section for c in found.spans if c.section))
        read = emb.cached_documents([*found.texts, *headings])
        n = len(found.texts)
        texts += n
        heads += len(headings)
        cached_texts += sum(v is not None for v in read[:n])
        cached_heads += sum(v is not None for v in read[n:])
        if fill:
            todo = [t for t, v in zip([*found.texts, *headings], read, strict=True) if v is None]
            if todo:
                emb.embed_documents(list(dict.fromkeys(todo)))
                filled += len(set(todo))
    return {
        "span_texts": texts,
        "span_texts_cached": cached_texts,
        "cached_fraction": round(cached_texts / texts, 4) if texts else None,
        "headings": heads,
        "headings_cached": cached_heads,
        "filled": filled,
    }


def _span_anchor_lever(
    asked: Sequence[Asked],
    expected: Any,
    shipped: Sequence[Scored],
    models: Sequence[str],
    *,
    fill: bool = False,
) -> dict[str, Any]:
    """The `verbatim` profile's span scorer anchoring each hit's run (`FocusHits(anchors=…)`,
    `verbatim.cascade.SpanAnchors`), at the shipped sizes, in-sample (nothing fitted; the span
    scorer's weights were fitted on `SPAN_FITTED`, reported apart): for the lexical model alone
    (no embedding), the full one (dense / tokens model over the `top_n` spans, the index's
    embedder through the store's caches, as `verbatim` runs it) and `dense` (the full one without
    word pieces: span and heading vectors only) and `within` (the full one over the spans inside
    the hits only, not every span of their documents), each anchor mode (`models`: which of them). The anchors
    are found once per question and model (the time of that, a question, is reported: the first
    model to run pays the embedding of spans the store's cache does not hold yet)."""
    import time

    from evidence.verbatim.cascade import CascadeConfig, SpanAnchors
    from evidence.verbatim.span_rank import IndexEmbed, IndexVectors, load_model

    def index_embedder(a: Asked, wrap: Any) -> Any:
        """`wrap` (IndexEmbed or IndexVectors) over the asked index's document embedder."""
        services, index = a.env.services, a.ctx.index
        if services is None:
            return None
        embedder = services.document_embedder
        return wrap(lambda: embedder(index))

    def split(rows: Sequence[Scored]) -> dict[str, Any]:
        fitted = [r for r in rows if r.family in SPAN_FITTED]
        other = [r for r in rows if r.family not in SPAN_FITTED]

        def found(part: Sequence[Scored]) -> dict[str, Any]:
            ans = [r for r in part if r.answerable]
            n600, n2000 = sum(r.found_600 for r in ans), sum(r.found_2000 for r in ans)
            falsely = sum(bool(r.refused) for r in ans)
            return {**figures(part), "found_600": n600, "found_2000": n2000, "false_refused": falsely}

        return {"all": found(rows), "span_fitted_5": found(fitted), "other_14": found(other)}

    out: dict[str, Any] = {"shipped": split(shipped)}
    if any(m.startswith("cached-") for m in models):
        out["span_cache"] = _span_cache(asked, fill=fill)
    # `dense`: the dense model without the word-piece (tokens) one, span and heading vectors only.
    dense = CascadeConfig(span_model=replace(load_model(), tokens=None))
    for model in models:
        found: dict[int, Any] = {}
        ms: list[float] = []
        for a in asked:
            if model.startswith("cached-"):
                anchors = SpanAnchors(
                    vectors=index_embedder(a, IndexVectors), scorer=model.removeprefix("cached-")
                )
            else:
                anchors = SpanAnchors(
                    embed=None if model == "lexical" else index_embedder(a, IndexEmbed),
                    config=dense if model == "dense" else None,
                    within_hits=model == "within",
                )
            t0 = time.perf_counter()
            found[id(a)] = anchors.find(a.hits, _fresh(a.ctx))
            ms.append((time.perf_counter() - t0) * 1000)
        qs = statistics.quantiles(ms, n=20)
        by_question = {(a.ctx.index, a.question): found[id(a)] for a in asked}
        for mode in ("contain", "start"):
            rule = FocusHits(expected=expected, anchors=_Fixed(by_question), anchor_mode=mode)
            rows = score(asked, rule.run, refusals=True)
            out[f"{model}/{mode}"] = {**split(rows), "families": by_family(rows)}
        out[f"{model}/anchor_ms"] = {"p50": round(statistics.median(ms), 1), "p95": round(qs[18], 1)}
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("root", nargs="?", default=str(HERE))
    ap.add_argument("--families", default="")
    ap.add_argument("--store", default=None)
    ap.add_argument("--misses", action="store_true")
    ap.add_argument("--fit", action="store_true")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--repeats", action="store_true", help="the drop_repeats lever against the shipped rule")
    ap.add_argument("--static", default=None, help="the paraphrase lever's table (bench/static_pieces.py)")
    ap.add_argument("--static-floors", default="0.5,0.6")
    ap.add_argument("--static-weights", default="1,2,4")
    ap.add_argument("--static-lofo", default="", help="in-sample lever points fitted with the sizes")
    ap.add_argument("--span-anchor", action="store_true", help="the span scorer anchoring focus runs")
    ap.add_argument(
        "--span-anchor-models",
        default="lexical,full",
        help="lexical, full, dense, within; cached-cos, cached-cos_head, cached-cheap, cached-dense",
    )
    ap.add_argument(
        "--span-anchor-fill",
        action="store_true",
        help="embed the in-hit spans the cache lacks before the cached-* models (as indexing would)",
    )
    args = ap.parse_args()
    settings = Settings(store_dir=Path(args.store)) if args.store else Settings()
    service = EvidenceService(settings)
    try:
        report = _report(service, args)
    finally:
        service.close()  # after scoring: the answer signal may read stored vectors
    print(json.dumps(report, indent=None if args.json else 1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Evaluate the coach on labelled queries: does `can_answer` / `needs_clarification` mean something?

Labelled queries are JSONL, one object per line:

    {"query": "...", "label": "in_scope" | "ambiguous" | "out_of_scope",
     "expected_los": ["LO-..."]?, "intent": "tutoring"?, "subject": "..."?,
     "conversation_snippet": "..."?, "seek_clarification": false?}

(`in-scope`, `out-of-scope`, `oos` and `unanswerable` are read too.) Reported: precision and
recall of `can_answer` (positive: in_scope) and of `needs_clarification` (positive: ambiguous),
the 3x3 confusion matrix, the Brier score of `confidence` against "in scope", LO hit@1 and
hit@3 (an expected LO among the matched ones) on in-scope queries, intent accuracy where an
intent is labelled, and latency p50/p95 per stage and in total.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from evidence.coach.contract import CoachRequest, CoachResponse

LABELS = ("in_scope", "ambiguous", "out_of_scope")
_ALIASES = {
    "in_scope": "in_scope",
    "in-scope": "in_scope",
    "inscope": "in_scope",
    "answerable": "in_scope",
    "ambiguous": "ambiguous",
    "clarify": "ambiguous",
    "needs_clarification": "ambiguous",
    "out_of_scope": "out_of_scope",
    "out-of-scope": "out_of_scope",
    "oos": "out_of_scope",
    "unanswerable": "out_of_scope",
}


@dataclass(frozen=True)
class LabelledQuery:
    query: str
    label: str
    id: str = ""
    expected_los: tuple[str, ...] = ()
    intent: str | None = None
    subject: str | None = None
    conversation_snippet: str | None = None
    seek_clarification: bool = False

    def request(self) -> CoachRequest:
        """The request a coach would send, without the labelled intent (the retriever classifies)."""
        return CoachRequest(
            query=self.query,
            subject=self.subject,
            conversation_snippet=self.conversation_snippet,
            seek_clarification=self.seek_clarification,
        )


def load_queries(path: Path) -> list[LabelledQuery]:
    out = []
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        obj = json.loads(line)
        label = _ALIASES.get(str(obj.get("label", "")).strip().lower())
        if label is None:
            raise ValueError(
                f"{path}:{n}: label must be one of {', '.join(LABELS)}, got {obj.get('label')!r}"
            )
        out.append(
            LabelledQuery(
                query=str(obj["query"]),
                label=label,
                id=str(obj.get("id", n)),
                expected_los=tuple(obj.get("expected_los") or ()),
                intent=obj.get("intent"),
                subject=obj.get("subject"),
                conversation_snippet=obj.get("conversation_snippet"),
                seek_clarification=bool(obj.get("seek_clarification", False)),
            )
        )
    return out


def predicted_label(r: CoachResponse) -> str:
    if r.can_answer:
        return "in_scope"
    return "ambiguous" if r.needs_clarification else "out_of_scope"


def _pr(tp: int, fp: int, fn: int) -> dict[str, float]:
    p = tp / (tp + fp) if tp + fp else 0.0
    r = tp / (tp + fn) if tp + fn else 0.0
    f1 = 2 * p * r / (p + r) if p + r else 0.0
    return {"precision": round(p, 4), "recall": round(r, 4), "f1": round(f1, 4), "tp": tp, "fp": fp, "fn": fn}


def percentile(values: Sequence[float], q: float) -> float:
    if not values:
        return 0.0
    ordered = sorted(values)
    k = (len(ordered) - 1) * q
    lo, hi = int(k), min(int(k) + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (k - lo)


@dataclass
class Outcome:
    query: LabelledQuery
    response: CoachResponse
    ms: float

    @property
    def predicted(self) -> str:
        return predicted_label(self.response)


@dataclass
class Report:
    outcomes: list[Outcome] = field(default_factory=list)

    def metrics(self) -> dict[str, Any]:
        outs = self.outcomes
        conf = {a: dict.fromkeys(LABELS, 0) for a in LABELS}
        for o in outs:
            conf[o.query.label][o.predicted] += 1

        def counts(positive: str, pred: Callable[[Outcome], bool]) -> dict[str, float]:
            tp = sum(1 for o in outs if pred(o) and o.query.label == positive)
            fp = sum(1 for o in outs if pred(o) and o.query.label != positive)
            fn = sum(1 for o in outs if not pred(o) and o.query.label == positive)
            return _pr(tp, fp, fn)

        in_scope = [o for o in outs if o.query.label == "in_scope" and o.query.expected_los]
        hit1 = sum(
            1
            for o in in_scope
            if o.response.matched_los and o.response.matched_los[0].id in o.query.expected_los
        )
        hit3 = sum(
            1 for o in in_scope if {m.id for m in o.response.matched_los[:3]} & set(o.query.expected_los)
        )
        labelled_intent = [o for o in outs if o.query.intent]
        intent_ok = sum(1 for o in labelled_intent if o.response.intent.value == o.query.intent)
        brier = sum((o.response.confidence - (o.query.label == "in_scope")) ** 2 for o in outs) / max(
            len(outs), 1
        )
        stages: dict[str, list[float]] = {}
        for o in outs:
            for name, ms in o.response.telemetry.stages.items():
                stages.setdefault(name, []).append(ms)
        totals = [o.ms for o in outs]
        return {
            "queries": len(outs),
            "labels": {a: sum(1 for o in outs if o.query.label == a) for a in LABELS},
            "accuracy": round(sum(1 for o in outs if o.predicted == o.query.label) / max(len(outs), 1), 4),
            "can_answer": counts("in_scope", lambda o: o.response.can_answer),
            "needs_clarification": counts("ambiguous", lambda o: o.response.needs_clarification),
            "out_of_scope": counts("out_of_scope", lambda o: o.predicted == "out_of_scope"),
            "confusion": conf,
            "confidence_brier": round(brier, 4),
            "lo_hit_at_1": round(hit1 / len(in_scope), 4) if in_scope else None,
            "lo_hit_at_3": round(hit3 / len(in_scope), 4) if in_scope else None,
            "intent_accuracy": round(intent_ok / len(labelled_intent), 4) if labelled_intent else None,
            "latency_ms": {
                "total": {
                    "p50": round(percentile(totals, 0.5), 2),
                    "p95": round(percentile(totals, 0.95), 2),
                },
                **{
                    k: {
                        "p50": round(percentile(v, 0.5), 2),
                        "p95": round(percentile(v, 0.95), 2),
                        "runs": len(v),
                    }
                    for k, v in sorted(stages.items())
                },
            },
        }

    def errors(self) -> list[dict[str, Any]]:
        return [
            {
                "id": o.query.id,
                "query": o.query.query,
                "label": o.query.label,
                "predicted": o.predicted,
                "confidence": o.response.confidence,
                "matched": [m.id for m in o.response.matched_los],
                "detail": o.response.telemetry.detail,
            }
            for o in self.outcomes
            if o.predicted != o.query.label
        ]


def evaluate(run: Callable[[CoachRequest], CoachResponse], queries: Iterable[LabelledQuery]) -> Report:
    report = Report()
    for q in queries:
        t0 = time.perf_counter()
        response = run(q.request())
        report.outcomes.append(Outcome(q, response, (time.perf_counter() - t0) * 1000.0))
    return report

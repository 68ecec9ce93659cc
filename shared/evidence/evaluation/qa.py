"""Verbatim QA (seed 002): answer recall and NO_RESULT precision of a QA file over an index."""

from __future__ import annotations

import re
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from evidence.errors import RequestValidationError
from evidence.evaluation.files import jsonl_objects
from evidence.evaluation.metrics import percentile
from evidence.progress import ProgressFn
from evidence.service import EvidenceService

#: Only this much of the evidence counts: minimal evidence, not the whole label.
QA_EVIDENCE_CHARS = 600
_SPACE = re.compile(r"\s+")


def load_qa(path: Path) -> list[dict[str, Any]]:
    """JSONL `{"question": str, "answers": [str, ...]}` (`[]` = unanswerable); other keys are kept."""
    out = []
    for n, rec in jsonl_objects(path, "QA file", str(path), field="qa"):
        question, answers = rec.get("question"), rec.get("answers")
        if not isinstance(question, str) or not question.strip():
            raise RequestValidationError(f"{path}:{n}: 'question' must be a non-empty string", field="qa")
        if not isinstance(answers, list) or not all(isinstance(a, str) and a.strip() for a in answers):
            raise RequestValidationError(
                f"{path}:{n}: 'answers' must be a list of non-empty strings ([] = unanswerable)",
                field="qa",
            )
        out.append(rec)
    if not out:
        raise RequestValidationError(f"QA file {path} holds no questions", field="qa")
    return out


def squash(text: str) -> str:
    return _SPACE.sub(" ", text).strip()


def answer_found(evidence: Sequence[str], answers: Sequence[str], limit: int = QA_EVIDENCE_CHARS) -> bool:
    """Whether an expected answer is in the first `limit` characters of the evidence (hit texts in
    rank order, one per line); whitespace runs compare as one space."""
    head = squash("\n".join(evidence))[:limit]
    return any(squash(a) in head for a in answers)


def run_qa(
    service: EvidenceService,
    qa_file: Path,
    *,
    index: str,
    profile: str = "verbatim",
    progress: ProgressFn | None = None,
    overrides: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """Answer recall, NO_RESULT precision, path distribution and latency of a verbatim QA file
    (`overrides`: request knobs such as `min_similarity`, as the workbench compares them)."""
    from evidence.model import RetrieveRequest

    items = load_qa(qa_file)
    service.backend.get_index(index)
    answerable = found = 0
    no_result = no_result_right = unanswerable = 0
    paths: dict[str, int] = {}
    by_mode: dict[str, list[int]] = {}
    latencies: list[float] = []
    misses: list[dict[str, Any]] = []
    for i, rec in enumerate(items):
        t0 = time.perf_counter()
        resp = service.retrieve(
            index, RetrieveRequest(query=rec["question"], profile=profile, **(overrides or {}))
        )
        latencies.append((time.perf_counter() - t0) * 1000)
        path = resp.telemetry.path_used
        paths[path] = paths.get(path, 0) + 1
        empty = not resp.hits
        if empty:
            no_result += 1
        if rec["answers"]:
            answerable += 1
            ok = answer_found([h.text for h in resp.hits], rec["answers"])
            found += ok
        else:
            unanswerable += 1
            ok = empty
            no_result_right += ok
        mode = str(rec.get("mode", "")) or None
        if mode:
            by_mode.setdefault(mode, [0, 0])
            by_mode[mode][0] += ok
            by_mode[mode][1] += 1
        if not ok:
            misses.append({"question": rec["question"], "path_used": path})
        if progress and (i + 1) % 10 == 0:
            progress(i + 1, len(items), "questions")
    return {
        "qa_file": qa_file.name,
        "index": index,
        "profile": profile,
        "questions": len(items),
        "answerable": answerable,
        "unanswerable": unanswerable,
        "evidence_chars": QA_EVIDENCE_CHARS,
        "answer_recall": round(found / answerable, 4) if answerable else 0.0,
        "no_result_precision": round(no_result_right / no_result, 4) if no_result else 1.0,
        "no_result_recall": round(no_result_right / unanswerable, 4) if unanswerable else 1.0,
        "paths": dict(sorted(paths.items(), key=lambda kv: -kv[1])),
        "by_mode": {m: round(a / n, 4) for m, (a, n) in sorted(by_mode.items())},
        "latency_ms": {
            "p50": round(percentile(latencies, 50), 2),
            "p95": round(percentile(latencies, 95), 2),
        },
        "misses": misses,
    }

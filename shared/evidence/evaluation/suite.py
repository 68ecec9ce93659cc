"""The QA suite (issue 22): families of documents and questions, each indexed and asked, as outcomes
and figures (`evidence eval --qa DIR`)."""

from __future__ import annotations

import hashlib
import json
import statistics
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from evidence.embed.base import document_key
from evidence.errors import RequestValidationError
from evidence.evaluation.files import ingest_code_digest, late_version_tag, slug
from evidence.evaluation.indexes import ensure_eval_index, header_tag
from evidence.evaluation.metrics import percentile
from evidence.evaluation.qa import QA_EVIDENCE_CHARS, answer_found, load_qa, squash
from evidence.progress import ProgressFn
from evidence.service import EvidenceService

#: The wider window the default profile's answers are also judged in (issue 22's acceptance).
QA_WIDE_CHARS = 2000
_QA_QUESTIONS = "questions.jsonl"
_QA_DOCUMENTS = "documents"


@dataclass(frozen=True)
class QaFamily:
    """One family of the QA suite: `DIR/<name>/documents/…` and `DIR/<name>/questions.jsonl`."""

    name: str
    documents: Path
    questions: Path


def find_qa_families(root: Path, only: Sequence[str] | None = None) -> list[QaFamily]:
    """The families under `root` (folders holding `questions.jsonl` and `documents/`), by name;
    `only` restricts them (an unknown name is an error listing the known ones)."""
    if not root.is_dir():
        raise RequestValidationError(f"QA folder {root} does not exist", field="qa")
    found = {
        d.name: QaFamily(d.name, d / _QA_DOCUMENTS, d / _QA_QUESTIONS)
        for d in sorted(root.iterdir())
        if d.is_dir() and (d / _QA_QUESTIONS).is_file() and (d / _QA_DOCUMENTS).is_dir()
    }
    if not found:
        raise RequestValidationError(
            f"{root} holds no QA family (a folder with {_QA_QUESTIONS} and {_QA_DOCUMENTS}/)", field="qa"
        )
    if not only:
        return list(found.values())
    unknown = [n for n in only if n not in found]
    if unknown:
        raise RequestValidationError(
            f"unknown QA famil{'y' if len(unknown) == 1 else 'ies'} {', '.join(unknown)}; "
            f"known: {', '.join(found)}",
            field="families",
        )
    return [found[n] for n in dict.fromkeys(only)]


def is_refusal(response: Any) -> bool:
    """The one refusal signal every profile is scored by: the verbatim cascade's `NO_RESULT` path,
    or `can_answer: false` (the answerability of the other profiles; verbatim sets it false
    exactly when it ends in `NO_RESULT`). Hits withheld below `withhold_below` are a refusal too,
    since they come with `can_answer: false`."""
    from evidence.verbatim.cascade import NO_RESULT

    return bool(response.telemetry.path_used == NO_RESULT or not response.can_answer)


@dataclass(frozen=True)
class QaOutcome:
    """One question asked of its family's index: what a metric or a tuner needs, without the hits.

    `first_rank` is the 1-based rank of the hit by which the evidence holds an expected answer
    (None: it never does); `found_600`/`found_2000` whether an answer is within the first
    600/2,000 characters of the evidence (hit texts in rank order, whitespace runs as one space,
    as `answer_found`)."""

    family: str
    question: str
    answers: tuple[str, ...]
    mode: str | None
    document: str | None
    profile: str
    path_used: str
    refused: bool
    can_answer: bool
    confidence: float
    features: Mapping[str, float]
    first_rank: int | None
    found_600: bool
    found_2000: bool
    evidence_chars: int
    hits: int
    right_document_first: bool | None
    latency_ms: float

    @property
    def answerable(self) -> bool:
        return bool(self.answers)


def _qa_fingerprint(family: QaFamily, service: EvidenceService) -> str:
    """Documents (names and bytes), chunking and embedding settings, and the ingestion code itself,
    so a changed parser or chunker re-indexes the suite instead of scoring a stale index."""
    h = hashlib.sha256()
    for path in sorted(p for p in family.documents.rglob("*") if p.is_file()):
        h.update(path.relative_to(family.documents).as_posix().encode() + b"\0")
        h.update(path.read_bytes())
    h.update(ingest_code_digest().encode())
    s = service.settings
    h.update(
        json.dumps(
            [s.passage_tokens, s.passage_overlap, s.record_max_tokens, document_key(service.embedder)]
        ).encode()
    )
    h.update(late_version_tag())
    h.update(header_tag(s))
    return h.hexdigest()


def ensure_qa_index(
    service: EvidenceService, family: QaFamily, *, progress: ProgressFn | None = None
) -> tuple[str, float]:
    """Index a family's documents as `qa-<family>` unless they (and the code and settings that
    index them) are unchanged since the last run; a changed family is deleted and indexed afresh,
    so no stale document stays (`evaluation.indexes.ensure_eval_index`)."""
    index = f"qa-{slug(family.name)}"
    seconds = ensure_eval_index(
        service,
        index,
        _qa_fingerprint(family, service),
        [family.documents],
        unit=f"{family.name} documents",
        failure=lambda n, source, reason: RequestValidationError(
            f"{family.name}: {n} document(s) failed to index, first: {source}: {reason}", field="qa"
        ),
        progress=progress,
    )
    return index, seconds


def _first_answering_rank(texts: Sequence[str], answers: Sequence[str]) -> int | None:
    """The number of hits, in rank order, the evidence needs before it holds an answer (compared
    as `answer_found` does, so an answer running across two adjacent hits counts at the second)."""
    wanted = [squash(a) for a in answers]
    for rank in range(1, len(texts) + 1):
        flat = squash("\n".join(texts[:rank]))
        if any(w in flat for w in wanted):
            return rank
    return None


def ask_family(
    service: EvidenceService,
    family: QaFamily,
    *,
    index: str,
    profile: str,
    progress: ProgressFn | None = None,
) -> list[QaOutcome]:
    """Every question of a family, asked of its index with `profile`, as outcomes."""
    from evidence.model import RetrieveRequest

    items = load_qa(family.questions)
    out: list[QaOutcome] = []
    for i, rec in enumerate(items):
        t0 = time.perf_counter()
        resp = service.retrieve(index, RetrieveRequest(query=rec["question"], profile=profile))
        latency = (time.perf_counter() - t0) * 1000
        texts = [h.text for h in resp.hits]
        answers = tuple(rec["answers"])
        document = rec.get("document")
        features = dict(resp.telemetry.answer.features) if resp.telemetry.answer else {}
        if resp.hits:
            features.setdefault("top_score", float(resp.hits[0].score))
        out.append(
            QaOutcome(
                family=family.name,
                question=rec["question"],
                answers=answers,
                mode=str(rec["mode"]) if rec.get("mode") else None,
                document=document if isinstance(document, str) else None,
                profile=profile,
                path_used=resp.telemetry.path_used,
                refused=is_refusal(resp),
                can_answer=resp.can_answer,
                confidence=float(resp.confidence),
                features=features,
                first_rank=_first_answering_rank(texts, answers) if answers else None,
                found_600=bool(answers) and answer_found(texts, answers, QA_EVIDENCE_CHARS),
                found_2000=bool(answers) and answer_found(texts, answers, QA_WIDE_CHARS),
                evidence_chars=len(squash("\n".join(texts))),
                hits=len(texts),
                right_document_first=(
                    Path(resp.hits[0].source).name == document
                    if resp.hits and isinstance(document, str)
                    else None
                ),
                latency_ms=latency,
            )
        )
        if progress and (i + 1) % 10 == 0:
            progress(i + 1, len(items), f"{family.name} questions")
    return out


def _ratio(num: int, den: int) -> float | None:
    return round(num / den, 4) if den else None


def qa_metrics(outcomes: Sequence[QaOutcome]) -> dict[str, Any]:
    """The suite's figures over some outcomes (a family, all of them, a held-out family).

    Answer recall counts the evidence returned, whether or not the response also refused (a
    default-profile response keeps its hits with `can_answer: false`); a refusal that withholds
    the hits finds nothing. NO_RESULT precision = refused unanswerable / refused (None when
    nothing was refused); recall = refused unanswerable / unanswerable (None when every question
    is answerable); false refusals = refused answerable / answerable."""
    answerable = [o for o in outcomes if o.answerable]
    unanswerable = [o for o in outcomes if not o.answerable]
    refused = [o for o in outcomes if o.refused]
    ranks = [o.first_rank for o in answerable if o.first_rank is not None]
    located = [o for o in answerable if o.right_document_first is not None]
    chars = [o.evidence_chars for o in outcomes]
    paths: dict[str, int] = {}
    for o in outcomes:
        paths[o.path_used] = paths.get(o.path_used, 0) + 1
    latencies = [o.latency_ms for o in outcomes]
    return {
        "questions": len(outcomes),
        "answerable": len(answerable),
        "unanswerable": len(unanswerable),
        "answer_recall_600": _ratio(sum(o.found_600 for o in answerable), len(answerable)),
        "answer_recall_2000": _ratio(sum(o.found_2000 for o in answerable), len(answerable)),
        "answer_in_evidence": _ratio(len(ranks), len(answerable)),
        "first_answer_rank": {
            "mean": round(statistics.fmean(ranks), 2) if ranks else None,
            "median": float(statistics.median(ranks)) if ranks else None,
        },
        "right_document_first": _ratio(sum(bool(o.right_document_first) for o in located), len(located)),
        "evidence_chars": {
            "mean": round(statistics.fmean(chars), 1) if chars else 0.0,
            "p50": round(percentile(chars, 50), 1),
            "max": max(chars, default=0),
        },
        "no_result_precision": _ratio(sum(not o.answerable for o in refused), len(refused)),
        "no_result_recall": _ratio(sum(o.refused for o in unanswerable), len(unanswerable)),
        "false_refusals": _ratio(sum(o.refused for o in answerable), len(answerable)),
        "paths": dict(sorted(paths.items(), key=lambda kv: (-kv[1], kv[0]))),
        "latency_ms": {
            "p50": round(percentile(latencies, 50), 2),
            "p95": round(percentile(latencies, 95), 2),
        },
    }


def collect_qa_outcomes(
    service: EvidenceService,
    root: Path,
    *,
    profile: str = "verbatim",
    families: Sequence[str] | None = None,
    progress: ProgressFn | None = None,
) -> tuple[list[QaOutcome], dict[str, float]]:
    """Index (when changed) and ask every family under `root`: the outcomes, and each family's
    indexing seconds (0 when its index was re-used)."""
    from evidence.profiles import unknown_profile

    problem = unknown_profile(profile)
    if problem:
        raise RequestValidationError(problem, field="profile")
    outcomes: list[QaOutcome] = []
    index_seconds: dict[str, float] = {}
    for family in find_qa_families(root, families):
        load_qa(family.questions)  # a malformed file fails before any indexing
        index, seconds = ensure_qa_index(service, family, progress=progress)
        index_seconds[family.name] = round(seconds, 2)
        outcomes.extend(ask_family(service, family, index=index, profile=profile, progress=progress))
    return outcomes, index_seconds


def run_qa_suite(
    service: EvidenceService,
    root: Path,
    *,
    profile: str = "verbatim",
    families: Sequence[str] | None = None,
    progress: ProgressFn | None = None,
) -> dict[str, Any]:
    """`evidence eval --qa DIR`: per-family and overall figures (overall pools every question)."""
    outcomes, index_seconds = collect_qa_outcomes(
        service, root, profile=profile, families=families, progress=progress
    )
    by_family: dict[str, list[QaOutcome]] = {}
    for o in outcomes:
        by_family.setdefault(o.family, []).append(o)
    return {
        "qa_dir": root.resolve().name,
        "profile": profile,
        "evidence_chars": [QA_EVIDENCE_CHARS, QA_WIDE_CHARS],
        "overall": qa_metrics(outcomes),
        "families": {
            name: {**qa_metrics(items), "index_seconds": index_seconds[name]}
            for name, items in by_family.items()
        },
        "misses": [
            {"family": o.family, "question": o.question, "path_used": o.path_used, "first_rank": o.first_rank}
            for o in outcomes
            if (o.answerable and not o.found_600) or (not o.answerable and not o.refused)
        ],
    }

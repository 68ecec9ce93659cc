"""Evaluate a QA or qrels set under one or two settings: `evidence eval`'s computation
(`evidence.evaluation.run_qa` / `run_qrels`), run once per setting, then compared question by
question. Sets live in `<store>/eval/<index>/NAME.jsonl`, or come in the request body."""

from __future__ import annotations

import json
import re
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from evidence.errors import NotFoundError, RequestValidationError
from evidence.model import Overrides
from evidence.names import MAX_QUERY_CHARS

if TYPE_CHECKING:
    from evidence.service import EvidenceService

SET_NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,120}\.jsonl$"
_SET_NAME = re.compile(SET_NAME_PATTERN)
#: Questions per run: each is one retrieval per setting, inside one request's deadline.
MAX_QUESTIONS = 500
Kind = Literal["qa", "qrels"]


class EvalSetNotFoundError(NotFoundError):
    code = "eval_set_not_found"


class EvalSetting(Overrides):
    """A profile plus knobs (`min_similarity`, `max_chars`, `followup_boost`, …)."""

    profile: str = Field(default="default", max_length=64)


class EvaluateRequest(BaseModel):
    """`POST /v1/indexes/{index}/evaluate`: exactly one of `set` (a file of the store's eval
    folder for this index) or `jsonl` (the text of an uploaded file)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    set: str | None = Field(default=None, pattern=SET_NAME_PATTERN)
    jsonl: str | None = Field(default=None, min_length=1, max_length=5_000_000)
    settings: list[EvalSetting] = Field(min_length=1, max_length=2)


class EvalSet(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str
    kind: Kind | None
    questions: int


class ListEvalSetsResponse(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    index: str
    sets: list[EvalSet]


class QuestionOutcome(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    question: str
    #: One score per setting: 1/0 (answer found, or NO_RESULT rightly) for QA, nDCG@10 for qrels.
    scores: list[float]
    #: Setting 2 against setting 1: "win", "loss" or "tie" (null with one setting).
    verdict: Literal["win", "loss", "tie"] | None


class EvaluateResponse(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    index: str
    set: str
    kind: Kind
    questions: int
    #: Per setting, what `evidence eval` reports (QA: answer recall, NO_RESULT precision, paths…;
    #: qrels: nDCG@10, recall@100, MRR@10), latency included.
    runs: list[dict[str, Any]]
    per_question: list[QuestionOutcome]
    wins: int
    losses: int
    ties: int


def eval_dir(service: EvidenceService, index: str) -> Path:
    return Path(service.settings.store_dir) / "eval" / index


def _kind(first_line: str) -> Kind | None:
    try:
        rec = json.loads(first_line)
    except json.JSONDecodeError:
        return None
    if isinstance(rec, dict) and "answers" in rec:
        return "qa"
    if isinstance(rec, dict) and "relevant" in rec:
        return "qrels"
    return None


def _scan(path: Path) -> tuple[Kind | None, int]:
    lines = [ln for ln in path.read_text(encoding="utf-8", errors="replace").splitlines() if ln.strip()]
    return (_kind(lines[0]) if lines else None), len(lines)


def list_sets(service: EvidenceService, index: str) -> ListEvalSetsResponse:
    service.backend.get_index(index)
    folder = eval_dir(service, index)
    sets = []
    if folder.is_dir():
        for path in sorted(folder.glob("*.jsonl")):
            if _SET_NAME.fullmatch(path.name) and path.is_file():
                kind, n = _scan(path)
                sets.append(EvalSet(name=path.name, kind=kind, questions=n))
    return ListEvalSetsResponse(index=index, sets=sets)


def _runner(kind: Kind) -> Callable[..., dict[str, Any]]:
    from evidence.evaluation import run_qa, run_qrels

    return run_qa if kind == "qa" else run_qrels


def evaluate(service: EvidenceService, index: str, request: EvaluateRequest) -> EvaluateResponse:
    if (request.set is None) == (request.jsonl is None):
        raise RequestValidationError("give exactly one of 'set' or 'jsonl'", field="set")
    from evidence.profiles import profile_names

    for n, setting in enumerate(request.settings):
        if setting.profile not in profile_names():
            raise RequestValidationError(
                f"unknown profile {setting.profile!r}; valid: {', '.join(profile_names())}",
                field=f"settings.{n}.profile",
            )
    service.backend.get_index(index)
    if request.set is not None:
        path = eval_dir(service, index) / request.set
        if not path.is_file():
            raise EvalSetNotFoundError(f"no eval set {request.set!r} for index {index!r}", field="set")
        return _evaluate_file(service, index, path, request.set, request.settings)
    with tempfile.TemporaryDirectory(prefix="evidence-eval-") as tmp:
        path = Path(tmp) / "uploaded.jsonl"
        path.write_text(request.jsonl or "", encoding="utf-8")
        return _evaluate_file(service, index, path, "uploaded.jsonl", request.settings)


def _evaluate_file(
    service: EvidenceService, index: str, path: Path, name: str, settings: list[EvalSetting]
) -> EvaluateResponse:
    kind, n = _scan(path)
    if kind is None:
        raise RequestValidationError(
            f"{name}: the first line is neither QA ({{question, answers}}) nor qrels ({{query, relevant}})",
            field="jsonl",
        )
    if n > MAX_QUESTIONS:
        raise RequestValidationError(f"{name}: {n} questions; at most {MAX_QUESTIONS} per run", field="jsonl")
    run = _runner(kind)
    runs = []
    for setting in settings:
        knobs = setting.model_dump(exclude={"profile"}, exclude_none=True)
        result = run(service, path, index=index, profile=setting.profile, overrides=knobs)
        result["setting"] = setting.model_dump(exclude_none=True)
        runs.append(result)
    scores = [_scores(kind, r, path) for r in runs]
    questions = _questions(kind, runs[0], path)
    for r in runs:
        r.pop("per_query", None)
        r.pop("qa_file", None)
        r.pop("qrels_file", None)
    per_question = []
    for i, q in enumerate(questions):
        row = [s[i] for s in scores]
        verdict: Literal["win", "loss", "tie"] | None = None
        if len(row) == 2:
            verdict = "win" if row[1] > row[0] else "loss" if row[1] < row[0] else "tie"
        per_question.append(QuestionOutcome(question=q[:MAX_QUERY_CHARS], scores=row, verdict=verdict))
    return EvaluateResponse(
        index=index,
        set=name,
        kind=kind,
        questions=len(questions),
        runs=runs,
        per_question=per_question,
        wins=sum(q.verdict == "win" for q in per_question),
        losses=sum(q.verdict == "loss" for q in per_question),
        ties=sum(q.verdict == "tie" for q in per_question),
    )


def _questions(kind: Kind, run: dict[str, Any], path: Path) -> list[str]:
    if kind == "qrels":
        return [q["query"] for q in run["per_query"]]
    from evidence.evaluation import load_qa

    return [rec["question"] for rec in load_qa(path)]


def _scores(kind: Kind, run: dict[str, Any], path: Path) -> list[float]:
    if kind == "qrels":
        return [float(q["ndcg_at_10"]) for q in run["per_query"]]
    from evidence.evaluation import load_qa

    # run_qa lists the questions it got wrong, in file order: every other one it got right.
    misses = [m["question"] for m in run["misses"]]
    out, j = [], 0
    for rec in load_qa(path):
        if j < len(misses) and misses[j] == rec["question"]:
            out.append(0.0)
            j += 1
        else:
            out.append(1.0)
    return out

"""`evidence eval`: retrieval quality and latency on a BEIR-layout dataset.

Metrics follow pytrec_eval / trec_eval: nDCG@10 with graded gains and a log2
discount (ideal DCG from the judged relevant documents), recall@100, MRR@10,
averaged over every query that has judgments (a query with no hit scores 0).
Only a query's `_id` and `text` are read: SciFact's query metadata is the answer key.

Chunk hits become document rankings by each document's best chunk (max-passage).
An unchanged dataset is not re-indexed: the index records a fingerprint of the
corpus file and the chunking/embedding settings.
"""

from __future__ import annotations

import gzip
import hashlib
import itertools
import json
import math
import re
import statistics
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import IO, Any, TypeVar

from evidence.errors import RequestValidationError
from evidence.progress import ProgressFn
from evidence.rank.first_stage import FirstStage, RetrievalMode
from evidence.service import EvidenceService, IndexProgress

EVAL_MODES = ("bm25", "dense", "hybrid", "full")
T = TypeVar("T")


@dataclass(frozen=True)
class Dataset:
    name: str
    corpus: Path
    queries: Path
    qrels: Path
    rationales: Path | None


def _first(root: Path, names: Sequence[str]) -> Path | None:
    for n in names:
        if (root / n).exists():
            return root / n
    return None


def find_dataset(root: Path) -> Dataset:
    if not root.is_dir():
        raise RequestValidationError(f"dataset folder {root} does not exist", field="dataset")
    corpus = _first(root, ["corpus.jsonl", "corpus.jsonl.gz"])
    queries = _first(root, ["queries.jsonl", "queries.jsonl.gz"])
    qrels = _first(root, ["qrels-test.tsv", "qrels/test.tsv"])
    missing = [
        n
        for n, p in (
            ("corpus.jsonl[.gz]", corpus),
            ("queries.jsonl[.gz]", queries),
            ("qrels-test.tsv or qrels/test.tsv", qrels),
        )
        if p is None
    ]
    if missing or corpus is None or queries is None or qrels is None:
        raise RequestValidationError(f"{root} lacks {', '.join(missing)} (BEIR layout)", field="dataset")
    return Dataset(root.resolve().name, corpus, queries, qrels, _first(root, ["rationales-test.jsonl"]))


def _open(path: Path) -> IO[str]:
    if path.suffix == ".gz":
        return gzip.open(path, "rt", encoding="utf-8")
    return path.open(encoding="utf-8")


def load_queries(path: Path, wanted: set[str]) -> list[tuple[str, str]]:
    out = []
    with _open(path) as fh:
        for line in fh:
            if not line.strip():
                continue
            rec = json.loads(line)
            qid = str(rec["_id"])
            if qid in wanted:
                out.append((qid, str(rec["text"])))  # never the metadata: it holds the answers
    return out


def load_qrels(path: Path) -> dict[str, dict[str, int]]:
    qrels: dict[str, dict[str, int]] = {}
    with path.open(encoding="utf-8") as fh:
        for i, line in enumerate(fh):
            parts = line.rstrip("\r\n").split("\t")
            if i == 0 and parts[0] == "query-id":
                continue
            if len(parts) < 3:
                continue
            qid, did, rel = parts[0], parts[1], int(parts[2])
            qrels.setdefault(qid, {})[did] = rel
    return qrels


def subset_dataset(dataset: Path, documents: set[str], queries: set[str], folder: Path) -> Path:
    """A BEIR-layout copy of `dataset` holding only these documents, queries and their qrels:
    a fixed slice that `run_eval` scores like the whole (the quality gate, docs/ranking.md)."""
    ds = find_dataset(dataset)
    folder.mkdir(parents=True, exist_ok=True)
    with _open(ds.corpus) as src, (folder / "corpus.jsonl").open("w", encoding="utf-8") as dst:
        dst.writelines(line for line in src if line.strip() and str(json.loads(line)["_id"]) in documents)
    with _open(ds.queries) as src, (folder / "queries.jsonl").open("w", encoding="utf-8") as dst:
        dst.writelines(line for line in src if line.strip() and str(json.loads(line)["_id"]) in queries)
    with (
        ds.qrels.open(encoding="utf-8") as src,
        (folder / "qrels-test.tsv").open("w", encoding="utf-8") as dst,
    ):
        for i, line in enumerate(src):
            if (i == 0 and line.startswith("query-id")) or line.split("\t")[0] in queries:
                dst.write(line)
    return folder


# --- metrics (pytrec_eval semantics) --------------------------------------------------------


def ndcg_at(ranked: Sequence[str], rels: Mapping[str, int], k: int) -> float:
    dcg = sum(rels.get(d, 0) / math.log2(i + 2) for i, d in enumerate(ranked[:k]))
    ideal = sorted((r for r in rels.values() if r > 0), reverse=True)[:k]
    idcg = sum(r / math.log2(i + 2) for i, r in enumerate(ideal))
    return dcg / idcg if idcg > 0 else 0.0


def recall_at(ranked: Sequence[str], rels: Mapping[str, int], k: int) -> float:
    relevant = {d for d, r in rels.items() if r > 0}
    return len(relevant & set(ranked[:k])) / len(relevant) if relevant else 0.0


def mrr_at(ranked: Sequence[str], rels: Mapping[str, int], k: int) -> float:
    for i, d in enumerate(ranked[:k]):
        if rels.get(d, 0) > 0:
            return 1.0 / (i + 1)
    return 0.0


def percentile(values: Sequence[float], p: float) -> float:
    if not values:
        return 0.0
    ordered = sorted(values)
    pos = (len(ordered) - 1) * p / 100
    lo, hi = math.floor(pos), math.ceil(pos)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)


def documents_from_chunks(doc_ids: Sequence[str]) -> list[str]:
    """Ranked chunks → ranked documents, each at its best chunk's position."""
    return list(dict.fromkeys(doc_ids))


# --- span metrics (rationale sentences) -----------------------------------------------------


def _overlap(a0: int, a1: int, b0: int, b1: int) -> int:
    return max(0, min(a1, b1) - max(a0, b0))


def span_metrics(
    retrieved: Sequence[tuple[str, int, int]], gold: Sequence[tuple[str, int, int]], k: int
) -> tuple[float, float]:
    """(sentence recall@k, span precision@k) as the dataset README defines them."""
    top = retrieved[:k]
    covered = sum(
        1
        for gd, g0, g1 in gold
        if any(d == gd and _overlap(s0, s1, g0, g1) * 2 >= (g1 - g0) for d, s0, s1 in top)
    )
    precise = sum(
        1
        for d, s0, s1 in top
        if any(d == gd and _overlap(s0, s1, g0, g1) * 2 >= (s1 - s0) for gd, g0, g1 in gold)
    )
    return covered / len(gold) if gold else 0.0, precise / len(top) if top else 0.0


# --- the run --------------------------------------------------------------------------------


def _fingerprint(ds: Dataset, service: EvidenceService, with_vectors: bool) -> str:
    h = hashlib.sha256()
    with ds.corpus.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    s = service.settings
    h.update(
        json.dumps(
            [
                s.passage_tokens,
                s.passage_overlap,
                s.record_max_tokens,
                with_vectors,
                service.embedder.model_id if with_vectors else "",
            ]
        ).encode()
    )
    return h.hexdigest()


def ensure_indexed(
    service: EvidenceService, ds: Dataset, *, with_vectors: bool, progress: ProgressFn | None
) -> tuple[str, float]:
    """Index the corpus unless the same corpus with the same settings is already there."""
    from evidence.search.embedded import EmbeddedBackend

    index = f"eval-{_slug(ds.name)}" + ("" if with_vectors else "-bm25")
    fp = _fingerprint(ds, service, with_vectors)
    marker = service.settings.store_dir / "eval" / f"{index}.fingerprint"
    backend = service.backend
    if marker.exists() and marker.read_text() == fp:
        try:
            backend.get_index(index)
            return index, 0.0
        except Exception:
            pass
    start = time.perf_counter()

    def written(p: IndexProgress) -> None:
        if progress:
            progress(p.documents, None, "documents")

    if not with_vectors and isinstance(backend, EmbeddedBackend):
        report = service.index_paths(index, [ds.corpus], progress=written, embed=False)
    else:
        report = service.index_paths(index, [ds.corpus], progress=written)
    if report.failed:
        source, reason = report.failed[0]
        raise RequestValidationError(
            f"{len(report.failed)} corpus records failed to index, first: {source}: {reason}", field="dataset"
        )
    marker.parent.mkdir(parents=True, exist_ok=True)
    marker.write_text(fp)
    return index, time.perf_counter() - start


def _slug(name: str) -> str:
    out = "".join(ch if ch.isalnum() else "-" for ch in name.lower()).strip("-")
    return out[:40] or "dataset"


def _iter_gold(path: Path | None) -> Iterator[tuple[str, list[tuple[str, int, int]]]]:
    if path is None:
        return
    with path.open(encoding="utf-8") as fh:
        for line in fh:
            rec = json.loads(line)
            gold = {
                (str(ev["doc_id"]), int(s["char_start"]), int(s["char_end"]))
                for ev in rec["evidence"]
                for s in ev["sentences"]
            }
            yield str(rec["query_id"]), sorted(gold)


def run_eval(
    service: EvidenceService,
    dataset: Path,
    *,
    mode: str = "hybrid",
    spans: bool = False,
    limit: int | None = None,
    progress: ProgressFn | None = None,
    first_stage: FirstStage | None = None,
) -> dict[str, Any]:
    if mode not in EVAL_MODES:
        raise RequestValidationError(f"unknown mode {mode!r}; valid: {', '.join(EVAL_MODES)}", field="mode")
    ds = find_dataset(dataset)
    qrels = load_qrels(ds.qrels)
    queries = load_queries(ds.queries, set(qrels))
    if limit:
        queries = queries[:limit]
    with_vectors = mode != "bm25"
    index, index_seconds = ensure_indexed(service, ds, with_vectors=with_vectors, progress=progress)
    backend = service.backend
    stage = first_stage or FirstStage(mode=RetrievalMode.parse(mode if mode != "full" else "hybrid"))
    ndcgs, recalls, mrrs, latencies = [], [], [], []
    for i, (qid, text) in enumerate(queries):
        t0 = time.perf_counter()
        if mode == "full":
            from evidence.model import RetrieveRequest

            resp = service.retrieve(index, RetrieveRequest(query=text, top_k=100, first_stage_k=100))
            chunk_docs = [h.document_id for h in resp.hits]
        else:
            vector = service.query_vector(index, text) if mode in ("dense", "hybrid") else None
            result = stage.retrieve(backend, index, query=text, vector=vector, k=100)
            chunk_docs = [c.chunk.document_id for c in result.candidates]
        latencies.append((time.perf_counter() - t0) * 1000)
        ranked = documents_from_chunks(chunk_docs)
        rels = qrels.get(qid, {})
        ndcgs.append(ndcg_at(ranked, rels, 10))
        recalls.append(recall_at(ranked, rels, 100))
        mrrs.append(mrr_at(ranked, rels, 10))
        if progress and (i + 1) % 25 == 0:
            progress(i + 1, len(queries), "queries")
    out: dict[str, Any] = {
        "dataset": ds.name,
        "mode": mode,
        "queries": len(queries),
        "ndcg_at_10": round(statistics.fmean(ndcgs), 4) if ndcgs else 0.0,
        "recall_at_100": round(statistics.fmean(recalls), 4) if recalls else 0.0,
        "mrr_at_10": round(statistics.fmean(mrrs), 4) if mrrs else 0.0,
        "latency_ms": {
            "p50": round(percentile(latencies, 50), 2),
            "p95": round(percentile(latencies, 95), 2),
        },
        "index_seconds": round(index_seconds, 2),
    }
    if spans:
        out["spans"] = _span_eval(service, index, ds, dict(queries), limit, with_vectors=with_vectors)
    return out


def _span_eval(
    service: EvidenceService,
    index: str,
    ds: Dataset,
    queries: Mapping[str, str],
    limit: int | None,
    *,
    with_vectors: bool,
) -> dict[str, Any]:
    """Rationale-sentence recall and precision of passage-then-sentence span ranking
    (`verbatim.sentences`): passages by the first stage (hybrid when the index has vectors), then
    the sentences inside the top passages."""
    from evidence.verbatim.sentences import SpanRanking

    ranking = SpanRanking()
    ks = (5, 10, 20)
    rec: dict[int, list[float]] = {k: [] for k in ks}
    prec: dict[int, list[float]] = {k: [] for k in ks}
    n = 0
    for qid, gold in _iter_gold(ds.rationales):
        if qid not in queries:
            continue
        text = queries[qid]
        vector = service.query_vector(index, text) if with_vectors else None
        ranked = ranking.rank(service.backend, index, text, vector=vector, k=max(ks))
        got = [(r.chunk.document_id, r.chunk.char_start, r.chunk.char_end) for r in ranked]
        for k in ks:
            r, p = span_metrics(got, gold, k)
            rec[k].append(r)
            prec[k].append(p)
        n += 1
        if limit and n >= limit:
            break
    return {
        "queries": n,
        "averaging": "macro",
        **{f"sentence_recall_at_{k}": round(statistics.fmean(rec[k]), 4) if rec[k] else 0.0 for k in ks},
        **{f"span_precision_at_{k}": round(statistics.fmean(prec[k]), 4) if prec[k] else 0.0 for k in ks},
    }


# --- verbatim QA (seed 002) -------------------------------------------------------------------

#: Only this much of the evidence counts: minimal evidence, not the whole label.
QA_EVIDENCE_CHARS = 600
_SPACE = re.compile(r"\s+")


def _jsonl_objects(path: Path, what: str, shown: str, *, field: str) -> Iterator[tuple[int, dict[str, Any]]]:
    """(line number, object) of each non-blank line; a missing file, a line that is not JSON or
    not an object is a 4xx on `field` naming the line."""
    if not path.is_file():
        raise RequestValidationError(f"{what} {shown} does not exist", field=field)
    with path.open(encoding="utf-8") as fh:
        for n, line in enumerate(fh, start=1):
            if not line.strip():
                continue
            try:
                rec = json.loads(line)
            except json.JSONDecodeError as exc:
                raise RequestValidationError(f"{shown}:{n}: not JSON ({exc.msg})", field=field) from None
            if not isinstance(rec, dict):
                raise RequestValidationError(f"{shown}:{n}: each line must be a JSON object", field=field)
            yield n, rec


def load_qa(path: Path) -> list[dict[str, Any]]:
    """JSONL `{"question": str, "answers": [str, ...]}` (`[]` = unanswerable); other keys are kept."""
    out = []
    for n, rec in _jsonl_objects(path, "QA file", str(path), field="qa"):
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


def _squash(text: str) -> str:
    return _SPACE.sub(" ", text).strip()


def answer_found(evidence: Sequence[str], answers: Sequence[str], limit: int = QA_EVIDENCE_CHARS) -> bool:
    """Whether an expected answer is in the first `limit` characters of the evidence (hit texts in
    rank order, one per line); whitespace runs compare as one space."""
    head = _squash("\n".join(evidence))[:limit]
    return any(_squash(a) in head for a in answers)


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


# --- QA suite: families of documents and questions, leave-one-family-out (issue 22) -----------

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
    from evidence import ingest

    h = hashlib.sha256()
    for path in sorted(p for p in family.documents.rglob("*") if p.is_file()):
        h.update(path.relative_to(family.documents).as_posix().encode() + b"\0")
        h.update(path.read_bytes())
    for path in sorted(Path(ingest.__file__).parent.rglob("*.py")):
        h.update(path.read_bytes())
    s = service.settings
    h.update(
        json.dumps(
            [s.passage_tokens, s.passage_overlap, s.record_max_tokens, service.embedder.model_id]
        ).encode()
    )
    return h.hexdigest()


def ensure_qa_index(
    service: EvidenceService, family: QaFamily, *, progress: ProgressFn | None = None
) -> tuple[str, float]:
    """Index a family's documents as `qa-<family>` unless they (and the code that chunks them) are
    unchanged since the last run; a changed family is indexed afresh, so no stale document stays."""
    index = f"qa-{_slug(family.name)}"
    fp = _qa_fingerprint(family, service)
    marker = service.settings.store_dir / "eval" / f"{index}.fingerprint"
    backend = service.backend
    exists = True
    try:
        backend.get_index(index)
    except Exception:
        exists = False
    if exists and marker.exists() and marker.read_text() == fp:
        return index, 0.0
    if exists:
        service.delete_index(index)
    start = time.perf_counter()

    def written(p: IndexProgress) -> None:
        if progress:
            progress(p.documents, None, f"{family.name} documents")

    report = service.index_paths(index, [family.documents], progress=written)
    if report.failed:
        source, reason = report.failed[0]
        raise RequestValidationError(
            f"{family.name}: {len(report.failed)} document(s) failed to index, first: {source}: {reason}",
            field="qa",
        )
    marker.parent.mkdir(parents=True, exist_ok=True)
    marker.write_text(fp)
    return index, time.perf_counter() - start


def _first_answering_rank(texts: Sequence[str], answers: Sequence[str]) -> int | None:
    """The number of hits, in rank order, the evidence needs before it holds an answer (compared
    as `answer_found` does, so an answer running across two adjacent hits counts at the second)."""
    wanted = [_squash(a) for a in answers]
    for rank in range(1, len(texts) + 1):
        flat = _squash("\n".join(texts[:rank]))
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
                evidence_chars=len(_squash("\n".join(texts))),
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


# --- leave-one-family-out tuning ---------------------------------------------------------------


def refuse_below(outcome: QaOutcome, threshold: float, feature: Callable[[QaOutcome], float]) -> QaOutcome:
    """The outcome as if the hits had been withheld when `feature` falls below `threshold` (what
    `withhold_below` does with `confidence`): a refusal, with no evidence left to find an answer in."""
    if outcome.refused or feature(outcome) >= threshold:
        return outcome
    return replace(
        outcome,
        refused=True,
        can_answer=False,
        first_rank=None,
        found_600=False,
        found_2000=False,
        evidence_chars=0,
        hits=0,
        right_document_first=None,
    )


def tune_refusal_threshold(
    train: Sequence[QaOutcome],
    feature: Callable[[QaOutcome], float] = lambda o: o.confidence,
    *,
    max_false_refusals: float = 0.03,
) -> float:
    """The threshold on `feature` that refuses the most unanswerable training questions while
    refusing at most `max_false_refusals` of the answerable ones (ties: the lowest such
    threshold, taken halfway between two observed values). 0.0 (refuse nothing more) when no
    threshold helps, or when the outcomes already refuse more answerable questions than allowed."""
    answerable = [o for o in train if o.answerable]
    values = sorted({feature(o) for o in train})
    # Midpoints between neighbouring values leave a margin on both sides for the held-out family.
    candidates = [0.0, *((lo + hi) / 2 for lo, hi in itertools.pairwise(values)), *values[-1:]]
    if values:
        candidates[-1] += 1e-6  # just above the largest value: refuse everything
    best, best_caught = 0.0, -1
    for t in candidates:
        tuned = [refuse_below(o, t, feature) for o in train]
        wrong = sum(o.refused for o in tuned if o.answerable)
        if answerable and wrong / len(answerable) > max_false_refusals:
            continue
        caught = sum(o.refused for o in tuned if not o.answerable)
        if caught > best_caught:
            best, best_caught = t, caught
    return best


def leave_one_family_out(
    outcomes: Sequence[QaOutcome],
    fit: Callable[[Sequence[QaOutcome]], T],
    apply: Callable[[QaOutcome, T], QaOutcome],
) -> dict[str, Any]:
    """Fit on every family but one, measure on that one, for each family in turn.

    `fit` sees only the training families' outcomes and returns a parameter (a threshold, a
    set of rules); `apply` turns one held-out outcome into what it would have been with it.
    Returns each held-out family's parameter and figures, and `held_out`: the figures over all
    held-out outcomes pooled (what the README reports)."""
    families = list(dict.fromkeys(o.family for o in outcomes))
    if len(families) < 2:
        raise RequestValidationError("leave-one-family-out needs at least two families", field="families")
    per_family: dict[str, Any] = {}
    pooled: list[QaOutcome] = []
    for held in families:
        param = fit([o for o in outcomes if o.family != held])
        tested = [apply(o, param) for o in outcomes if o.family == held]
        pooled.extend(tested)
        per_family[held] = {"parameter": param, **qa_metrics(tested)}
    return {"families": per_family, "held_out": qa_metrics(pooled)}


# --- qrels over an existing index (the workbench's Evaluate) ---------------------------------


def load_qrels_jsonl(path: Path) -> list[dict[str, Any]]:
    """JSONL `{"query": str, "relevant": {document_id: grade}, "query_id"?}`: judgments against
    the documents of an index that already exists (a BEIR folder indexes its own corpus)."""
    out = []
    for n, rec in _jsonl_objects(path, "qrels file", path.name, field="qrels"):
        query, relevant = rec.get("query"), rec.get("relevant")
        if not isinstance(query, str) or not query.strip():
            raise RequestValidationError(
                f"{path.name}:{n}: 'query' must be a non-empty string", field="qrels"
            )
        if not isinstance(relevant, dict) or not all(
            isinstance(k, str) and isinstance(v, int) and not isinstance(v, bool) for k, v in relevant.items()
        ):
            raise RequestValidationError(
                f"{path.name}:{n}: 'relevant' must map document ids to integer grades", field="qrels"
            )
        out.append(rec)
    if not out:
        raise RequestValidationError(f"qrels file {path.name} holds no queries", field="qrels")
    return out


def run_qrels(
    service: EvidenceService,
    qrels_file: Path,
    *,
    index: str,
    profile: str = "default",
    overrides: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """nDCG@10, recall@100 and MRR@10 of an index's retrieval under one profile and knobs, with
    `run_eval`'s `full` mode computation (hits → documents by best chunk → the same metrics);
    per query too, so two settings can be compared question by question."""
    from evidence.model import RetrieveRequest

    items = load_qrels_jsonl(qrels_file)
    service.backend.get_index(index)
    fields: dict[str, Any] = {"top_k": 100, "first_stage_k": 100, **(overrides or {})}
    per_query: list[dict[str, Any]] = []
    latencies: list[float] = []
    for n, rec in enumerate(items, start=1):
        t0 = time.perf_counter()
        resp = service.retrieve(index, RetrieveRequest(query=rec["query"], profile=profile, **fields))
        latencies.append((time.perf_counter() - t0) * 1000)
        ranked = documents_from_chunks([h.document_id for h in resp.hits])
        rels = rec["relevant"]
        per_query.append(
            {
                "query_id": str(rec.get("query_id", n)),
                "query": rec["query"],
                "ndcg_at_10": ndcg_at(ranked, rels, 10),
                "recall_at_100": recall_at(ranked, rels, 100),
                "mrr_at_10": mrr_at(ranked, rels, 10),
            }
        )
    metrics = ("ndcg_at_10", "recall_at_100", "mrr_at_10")
    means = {key: round(statistics.fmean(q[key] for q in per_query), 4) for key in metrics}
    for q in per_query:  # rounded for display only, after averaging (as run_eval averages)
        q.update({key: round(q[key], 4) for key in metrics})

    return {
        "qrels_file": qrels_file.name,
        "index": index,
        "profile": profile,
        "queries": len(per_query),
        **means,
        "latency_ms": {
            "p50": round(percentile(latencies, 50), 2),
            "p95": round(percentile(latencies, 95), 2),
        },
        "per_query": per_query,
    }

"""Evaluation: `evidence eval`'s metrics and runs, and the workbench's Evaluate.

* `metrics`: nDCG, recall, MRR (pytrec_eval semantics), percentiles, span metrics;
* `beir`: a BEIR-layout dataset indexed and scored (`evidence eval DATASET`);
* `qa`: a verbatim QA file over an index (`evidence eval --qa FILE`);
* `suite`: the QA suite, families of documents and questions (`evidence eval --qa DIR`);
* `refusal`: leave-one-family-out tuning of a refusal threshold over the suite's outcomes;
* `qrels`: JSONL qrels over an existing index (the workbench's Evaluate);
* `files`: reading their inputs;
* `indexes`: the indexes `beir` and `suite` write for themselves, reused or indexed afresh.

This package's namespace is the public API: callers import from `evidence.evaluation`.
"""

from evidence.evaluation.beir import (
    EVAL_MODES,
    Dataset,
    ensure_indexed,
    find_dataset,
    load_qrels,
    load_queries,
    run_eval,
    subset_dataset,
)
from evidence.evaluation.metrics import (
    documents_from_chunks,
    mrr_at,
    ndcg_at,
    percentile,
    recall_at,
    span_metrics,
)
from evidence.evaluation.qa import QA_EVIDENCE_CHARS, answer_found, load_qa, run_qa
from evidence.evaluation.qrels import load_qrels_jsonl, run_qrels
from evidence.evaluation.refusal import leave_one_family_out, refuse_below, tune_refusal_threshold
from evidence.evaluation.suite import (
    QA_WIDE_CHARS,
    QaFamily,
    QaOutcome,
    ask_family,
    collect_qa_outcomes,
    ensure_qa_index,
    find_qa_families,
    is_refusal,
    qa_metrics,
    run_qa_suite,
)

__all__ = [
    "EVAL_MODES",
    "QA_EVIDENCE_CHARS",
    "QA_WIDE_CHARS",
    "Dataset",
    "QaFamily",
    "QaOutcome",
    "answer_found",
    "ask_family",
    "collect_qa_outcomes",
    "documents_from_chunks",
    "ensure_indexed",
    "ensure_qa_index",
    "find_dataset",
    "find_qa_families",
    "is_refusal",
    "leave_one_family_out",
    "load_qa",
    "load_qrels",
    "load_qrels_jsonl",
    "load_queries",
    "mrr_at",
    "ndcg_at",
    "percentile",
    "qa_metrics",
    "recall_at",
    "refuse_below",
    "run_eval",
    "run_qa",
    "run_qa_suite",
    "run_qrels",
    "span_metrics",
    "subset_dataset",
    "tune_refusal_threshold",
]

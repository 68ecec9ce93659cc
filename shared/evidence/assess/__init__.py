"""Batch assessments: plan → retrieve → format for every criterion of a batch.

`models` (the payloads), `store` (where results go) and `steps` (what the planner, retriever
and formatter Lambdas run for a batch task, and the whole chain in-process for
`evidence assess`).

Task payloads (also in events/stepfunctions/; built by infra/evidence_infra/batch.py):

* plan step (planner function):   {task: "plan", index, profile, criterion: {id, question}, output_uri}
                                  → the same + plan
* retrieve step (retriever function, non-HTTP event): {task: "retrieve", …, plan}
                                  → … + retrieve_uri, hits
* format step (formatter function): {task: "format", …, plan, retrieve_uri, hits}
                                  → {id, status, result_uri, hits}
"""

from evidence.assess.models import AssessmentInput, Criterion, CriterionResult, CriterionTask
from evidence.assess.steps import (
    failure,
    format_step,
    plan_step,
    retrieve_step,
    run_assessment,
    run_criterion,
)
from evidence.assess.store import MemoryStore, ResultStore, S3Store, store_for

__all__ = [
    "AssessmentInput",
    "Criterion",
    "CriterionResult",
    "CriterionTask",
    "MemoryStore",
    "ResultStore",
    "S3Store",
    "failure",
    "format_step",
    "plan_step",
    "retrieve_step",
    "run_assessment",
    "run_criterion",
    "store_for",
]

"""The API's batch assessments (docs/api.md#batch-assessments): ids, errors, the HTTP payloads and
the `Launcher` protocol every launcher (`assess.stepfunctions`, `assess.threads`,
`evidence.local_sfn`) implements."""

from __future__ import annotations

import re
import uuid
from typing import Literal, Protocol

from pydantic import BaseModel, ConfigDict, Field, field_validator

from evidence.assess.models import AssessmentInput, Criterion, CriterionResult
from evidence.errors import EvidenceError, NotFoundError, UpstreamError
from evidence.names import reject_blank, reject_control_characters

#: uuid4 hex: also a valid Step Functions execution name (≤ 80 of [A-Za-z0-9_-]).
ASSESSMENT_ID_PATTERN = r"^[0-9a-f]{32}$"
ASSESSMENT_ID_RE = re.compile(ASSESSMENT_ID_PATTERN)
#: The batch size limit of the state machine's input, reused for the API.
MAX_CRITERIA = int(AssessmentInput.model_fields["criteria"].metadata[0].max_length)

Status = Literal["running", "succeeded", "failed"]


class AssessmentNotFoundError(NotFoundError):
    """Unknown id, or not the caller's: the same answer, so an id's existence leaks nothing."""

    code = "assessment_not_found"

    def __init__(self) -> None:
        super().__init__("no such assessment for this caller", field="assessment_id")


class AssessmentExistsError(EvidenceError):
    """Step Functions already holds an execution of that name with another input."""

    status = 409
    code = "assessment_exists"


class BatchLaunchError(UpstreamError):
    """Step Functions refused or failed the call for a reason that is not the caller's."""

    code = "batch_unavailable"


def new_assessment_id() -> str:
    return uuid.uuid4().hex


# --- the HTTP payloads --------------------------------------------------------------------------


class RequestCriterion(Criterion):
    """A criterion of the HTTP body: strict (unknown fields refused), and a question as a query."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    _filled = field_validator("question")(reject_blank)
    _plain = field_validator("question")(reject_control_characters)


class AssessmentRequest(BaseModel):
    """POST /v1/indexes/{index}/assessments. No `principal`, no `output_s3_uri`: the batch runs
    as the caller and writes where the state machine's default says."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    profile: str = Field(default="default", max_length=64)
    criteria: list[RequestCriterion] = Field(min_length=1, max_length=MAX_CRITERIA)

    @field_validator("profile")
    @classmethod
    def _profile(cls, v: str) -> str:
        from evidence.profiles import unknown_profile

        if why := unknown_profile(v):
            raise ValueError(why)
        return v

    @field_validator("criteria")
    @classmethod
    def _unique(cls, v: list[RequestCriterion]) -> list[RequestCriterion]:
        # Results are keyed by criterion id (one S3 object each): a repeat would overwrite one.
        seen: set[str] = set()
        for c in v:
            if c.id in seen:
                raise ValueError(f"duplicate criterion id {c.id!r}")
            seen.add(c.id)
        return v

    def batch(self, index: str, principal: str | None) -> AssessmentInput:
        criteria = [Criterion(id=c.id, question=c.question) for c in self.criteria]
        return AssessmentInput(index=index, profile=self.profile, criteria=criteria, principal=principal)


class AssessmentStarted(BaseModel):
    model_config = ConfigDict(extra="forbid")

    assessment_id: str
    status: Status
    index: str
    criteria: int
    status_url: str


class AssessmentStatus(BaseModel):
    """GET /v1/assessments/{id}. `done`/`failed` count criteria (null where the launcher cannot
    tell: a Step Functions batch still running); `results` once finished; `reason` when the
    batch itself failed."""

    model_config = ConfigDict(extra="forbid")

    assessment_id: str
    index: str
    status: Status
    criteria: int
    done: int | None = None
    failed: int | None = None
    results: list[CriterionResult] | None = None
    reason: str | None = None


def status_url(assessment_id: str) -> str:
    return f"/v1/assessments/{assessment_id}"


class Launcher(Protocol):
    def start(self, assessment_id: str, batch: AssessmentInput) -> None: ...

    def status(self, assessment_id: str, principal: str | None) -> AssessmentStatus:
        """The assessment if `principal` started it, else AssessmentNotFoundError."""
        ...

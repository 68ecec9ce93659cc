"""The batch assessment's payloads: the state machine's input, what one Map iteration carries
from state to state (pointers, never evidence: a state payload is capped at 256 KB), and one
line of the summary."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from evidence.model import Plan
from evidence.names import MAX_QUERY_CHARS, validate_index_name


class Criterion(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)

    id: str = Field(min_length=1, max_length=256)
    question: str = Field(min_length=1, max_length=MAX_QUERY_CHARS)


class AssessmentInput(BaseModel):
    """The state machine's input (and `evidence assess`'s, built from flags)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    index: str
    profile: str = Field(default="default", max_length=64)
    criteria: list[Criterion] = Field(max_length=10_000)
    output_s3_uri: str | None = Field(default=None, pattern=r"^s3://[^/]+(/.*)?$")
    #: Whom the batch runs as: every step checks this principal's read access to `index`
    #: (evidence/access.py). Empty = no principal (allowed only without an access policy).
    principal: str | None = Field(default=None, max_length=2048)

    @field_validator("index")
    @classmethod
    def _index(cls, v: str) -> str:
        return validate_index_name(v)


class CriterionTask(BaseModel):
    """What one Map iteration passes from state to state: pointers, never evidence."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    index: str
    profile: str = "default"
    criterion: Criterion
    output_uri: str
    principal: str | None = Field(default=None, max_length=2048)
    plan: Plan | None = None
    retrieve_uri: str | None = None
    hits: int | None = None

    @field_validator("index")
    @classmethod
    def _index(cls, v: str) -> str:
        return validate_index_name(v)

    @field_validator("principal")
    @classmethod
    def _principal(cls, v: str | None) -> str | None:
        return v or None  # the state machine's default is "" (it cannot carry null through JsonMerge)


class CriterionResult(BaseModel):
    """One line of the batch summary (and of `evidence assess --out`)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str
    status: str  # "ok" | "failed"
    result_uri: str | None = None
    hits: int | None = None
    error: dict[str, Any] | None = None

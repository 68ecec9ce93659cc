"""The LLM planner (seed 002) through Bedrock Converse: the question in, the seed's JSON plan out.

The model sees **only the question** — never document text — and must answer by calling one tool
whose input schema is the plan (`PLAN_SCHEMA`), at temperature 0. The tool input is validated
against that schema (types, the enums, lengths) and against the section vocabulary; anything
else — an error, a timeout past the time budget, no tool call, invalid JSON, a plan that fails
validation — gives the rule plan instead, with a `planner_*` marker for `telemetry.degraded`.
The planner never fails a request.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from evidence.aws import Converse
from evidence.plan.verbatim import QUERY_MODES, RulePlan, VerbatimRules, default_rules, plan_question

TOOL_NAME = "retrieval_plan"

PLAN_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "entity": {
            "type": ["string", "null"],
            "maxLength": 200,
            "description": "the drug or subject asked about",
        },
        "query_mode": {"type": "string", "enum": list(QUERY_MODES)},
        "attribute": {"type": ["string", "null"], "maxLength": 64, "pattern": "^[a-z][a-z0-9_]*$"},
        "candidate_sections": {"type": "array", "items": {"type": "string", "maxLength": 64}, "maxItems": 6},
        "search_phrases": {
            "type": "array",
            "items": {"type": "string", "minLength": 1, "maxLength": 200},
            "minItems": 1,
            "maxItems": 12,
        },
        "extraction_level": {"type": "string", "enum": ["sentence", "block"]},
    },
    "required": [
        "entity",
        "query_mode",
        "attribute",
        "candidate_sections",
        "search_phrases",
        "extraction_level",
    ],
    "additionalProperties": False,
}

SYSTEM_PROMPT = """You plan retrieval for a drug-label question-answering system. You never see the \
documents and you never answer the question: you only say how to search.

Call the tool `retrieval_plan` once, with:
- entity: the drug or product the question is about, as written (null if none);
- query_mode: SECTION (asks for a named section), ATTRIBUTE (one fact such as a half-life),
  MULTI_SECTION (needs several sections, e.g. "why ..."), GENERIC (what is X), GLOBAL (anything else);
- attribute: one of {attributes} when the question asks for one, else null;
- candidate_sections: likely sections, from {sections};
- search_phrases: search terms with medical synonyms, lay terms translated ("kidney" -> "renal"),
  abbreviations expanded ("t1/2" -> "half-life");
- extraction_level: sentence for a single fact, block for a list or an explanation."""


class PlanValidationError(ValueError):
    pass


def _check_string(value: Any, name: str, *, nullable: bool = False, max_len: int = 200) -> str | None:
    if value is None and nullable:
        return None
    if not isinstance(value, str):
        raise PlanValidationError(f"{name} must be a string{' or null' if nullable else ''}")
    if len(value) > max_len:
        raise PlanValidationError(f"{name} is longer than {max_len} characters")
    return value


def validate_plan(data: Any, rules: VerbatimRules) -> RulePlan:
    """The tool input as a plan, or PlanValidationError naming what is wrong (PLAN_SCHEMA's rules)."""
    if not isinstance(data, Mapping):
        raise PlanValidationError("the plan must be a JSON object")
    props = PLAN_SCHEMA["properties"]
    missing = [k for k in PLAN_SCHEMA["required"] if k not in data]
    if missing:
        raise PlanValidationError(f"missing {', '.join(missing)}")
    extra = [k for k in data if k not in props]
    if extra:
        raise PlanValidationError(f"unexpected {', '.join(map(str, extra))}")
    entity = _check_string(data["entity"], "entity", nullable=True)
    mode = data["query_mode"]
    if mode not in QUERY_MODES:
        raise PlanValidationError(f"query_mode must be one of {', '.join(QUERY_MODES)}")
    attribute = _check_string(data["attribute"], "attribute", nullable=True, max_len=64)
    if attribute is not None and not re.fullmatch(props["attribute"]["pattern"], attribute):
        raise PlanValidationError("attribute must be snake_case")
    sections = data["candidate_sections"]
    if not isinstance(sections, list) or len(sections) > 6:
        raise PlanValidationError("candidate_sections must be a list of at most 6 names")
    known = set(rules.vocabulary.names)
    # Names outside the vocabulary cannot match a section: keep the ones that can.
    clean_sections = [
        s for s in (_check_string(x, "candidate_sections[]", max_len=64) for x in sections) if s in known
    ]
    phrases = data["search_phrases"]
    if not isinstance(phrases, list) or not 1 <= len(phrases) <= 12:
        raise PlanValidationError("search_phrases must be a list of 1 to 12 strings")
    clean_phrases = [p for p in (_check_string(x, "search_phrases[]") for x in phrases) if p and p.strip()]
    if not clean_phrases:
        raise PlanValidationError("search_phrases holds no text")
    level = data["extraction_level"]
    if level not in ("sentence", "block"):
        raise PlanValidationError("extraction_level must be sentence or block")
    return RulePlan(
        entity=entity.strip() if entity and entity.strip() else None,
        query_mode=str(mode),
        attribute=attribute,
        candidate_sections=tuple(dict.fromkeys(clean_sections)),
        search_phrases=tuple(dict.fromkeys(p.strip() for p in clean_phrases)),
        extraction_level=str(level),
    )


@dataclass(frozen=True)
class PlanOutcome:
    plan: RulePlan
    planner: str  # "llm" | "rules" | "fallback"
    degraded: list[str] = field(default_factory=list)
    detail: str = ""


class BedrockPlanner:
    """Converse with a forced tool call; `plan()` always returns a usable plan."""

    def __init__(
        self,
        *,
        model_id: str,
        region: str | None,
        timeout_s: float = 3.0,
        client: Any = None,
        rules: VerbatimRules | None = None,
        max_tokens: int = 512,
    ) -> None:
        if timeout_s <= 0:
            raise ValueError("planner timeout must be > 0")
        self.model_id = model_id
        self.region = region
        self.timeout_s = timeout_s
        self.rules = rules or default_rules()
        self.max_tokens = max_tokens
        self._converse = Converse(region=region, timeout_s=timeout_s, client=client, pool="planner")

    def request(self, question: str) -> dict[str, Any]:
        """The Converse request: the question and nothing else from the caller."""
        attrs = ", ".join(a.name for a in self.rules.attributes)
        sections = ", ".join(self.rules.vocabulary.names)
        return {
            "modelId": self.model_id,
            "system": [{"text": SYSTEM_PROMPT.format(attributes=attrs, sections=sections)}],
            "messages": [{"role": "user", "content": [{"text": question}]}],
            "inferenceConfig": {"temperature": 0.0, "maxTokens": self.max_tokens},
            "toolConfig": {
                "tools": [
                    {
                        "toolSpec": {
                            "name": TOOL_NAME,
                            "description": "The retrieval plan for the question.",
                            "inputSchema": {"json": PLAN_SCHEMA},
                        }
                    }
                ],
                "toolChoice": {"tool": {"name": TOOL_NAME}},
            },
        }

    def _call(self, question: str) -> RulePlan:
        response = self._converse.call(self.request(question))
        content = response.get("output", {}).get("message", {}).get("content", [])
        for block in content:
            use = block.get("toolUse") if isinstance(block, Mapping) else None
            if use and use.get("name") == TOOL_NAME:
                return validate_plan(use.get("input"), self.rules)
        for block in content:  # a model that answered in text: accept a JSON object, nothing else
            text = block.get("text") if isinstance(block, Mapping) else None
            if text:
                try:
                    return validate_plan(json.loads(text), self.rules)
                except json.JSONDecodeError as exc:
                    raise PlanValidationError(
                        f"the model answered with text that is not JSON: {exc}"
                    ) from exc
        raise PlanValidationError("the model did not call the plan tool")

    def plan(self, question: str, *, known_entities: Sequence[str] = ()) -> PlanOutcome:
        try:
            plan = self._converse.within(lambda: self._call(question), self.timeout_s)
        except TimeoutError:
            return self._fallback(
                question, known_entities, "planner_timeout", f"no plan within {self.timeout_s}s"
            )
        except PlanValidationError as exc:
            return self._fallback(question, known_entities, "planner_invalid_plan", str(exc))
        except Exception as exc:  # the SDK's errors, throttling, credentials: the rules take over
            return self._fallback(question, known_entities, "planner_error", f"{type(exc).__name__}: {exc}")
        if plan.entity is None or (known_entities and plan.entity not in known_entities):
            # The model names the drug as the user wrote it; the index may know it by another alias.
            rule = plan_question(question, known_entities=known_entities, rules=self.rules)
            if rule.entity is not None:
                plan = RulePlan(
                    rule.entity,
                    plan.query_mode,
                    plan.attribute,
                    plan.candidate_sections,
                    plan.search_phrases,
                    plan.extraction_level,
                )
        return PlanOutcome(plan, "llm")

    def _fallback(self, question: str, known: Sequence[str], marker: str, detail: str) -> PlanOutcome:
        return PlanOutcome(
            plan_question(question, known_entities=known, rules=self.rules), "fallback", [marker], detail
        )


def rule_outcome(
    question: str, *, known_entities: Sequence[str] = (), rules: VerbatimRules | None = None
) -> PlanOutcome:
    return PlanOutcome(plan_question(question, known_entities=known_entities, rules=rules), "rules")

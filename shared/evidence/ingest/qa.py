"""A follow-up response written as "Q: …\nA: …" text: its question and answer as metadata.

The evidence formatter shows a follow-up's `question` and `answer` metadata (docs/seeds.md#seed-000)
and follow-up extraction compares the question with the criterion. A vendor who uploads the
response as a text file, not as JSON fields, still wrote both: we read them from the text.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from evidence.rank.followups import is_followup_response

# A label at the start of a line: "Q:", "Question:", "**Q:**", "Q1." … and the same for answers.
# Possessive (`*+`): a label line of 60,000 spaces is one pass, not a search over their splits.
_LABEL = r"^[ \t]*+(?:\*\*|__)?{word}[ \t]*+(?:\d{{1,3}}[ \t]*+)?[:.)](?:\*\*|__)?[ \t]*+"
_QUESTION = re.compile(_LABEL.format(word="(?:q|question)"), re.IGNORECASE | re.MULTILINE)
_ANSWER = re.compile(_LABEL.format(word="(?:a|answer)"), re.IGNORECASE | re.MULTILINE)
_WS = re.compile(r"\s+")


def split_qa(text: str) -> tuple[str, str] | None:
    """(question, answer) of a text holding exactly one "Q:" line followed by one "A:" line, else None.

    Several pairs are a questionnaire, not one response: no single question describes it.
    """
    questions = list(_QUESTION.finditer(text))
    answers = list(_ANSWER.finditer(text))
    if len(questions) != 1 or len(answers) != 1:
        return None
    q, a = questions[0], answers[0]
    if q.start() != len(text) - len(text.lstrip()) or a.start() < q.end():
        return None  # the question must open the text and come before the answer
    question = _WS.sub(" ", text[q.end() : a.start()]).strip()
    answer = text[a.end() :].strip()
    if not question or not answer:
        return None
    return question, answer


def with_qa_fields(text: str, metadata: Mapping[str, Any]) -> Mapping[str, Any]:
    """`metadata` with `question`/`answer` read from a follow-up response's Q/A text when absent.

    Only follow-up responses (`type` followup_response…) are read; metadata given explicitly wins.
    """
    if not is_followup_response(metadata) or ("question" in metadata and "answer" in metadata):
        return metadata
    found = split_qa(text)
    if found is None:
        return metadata
    out = dict(metadata)
    out.setdefault("question", found[0])
    out.setdefault("answer", found[1])
    return out

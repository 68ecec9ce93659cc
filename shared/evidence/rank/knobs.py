"""The per-profile knob table of docs/ranking.md, rendered from the code.

Every value comes from the registered profiles' `defaults` and every range from the API model
(`pipeline.BOUNDS`, `pipeline.CHOICES`); only the words saying what a knob acts on live here. The
table sits in the doc between `BEGIN` and `END`; `python -m evidence.rank.knobs --write
docs/ranking.md` rewrites it, and a test fails when the doc and the code differ.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Mapping, Sequence
from dataclasses import fields
from pathlib import Path

from evidence.rank.context import ProfileParams
from evidence.rank.pipeline import BOUNDS, CHOICES

BEGIN = (
    "<!-- knobs:begin (generated from the code: python -m evidence.rank.knobs --write docs/ranking.md) -->"
)
END = "<!-- knobs:end -->"
#: The profiles the table shows, in its column order.
PROFILES = ("default", "vrm", "verbatim", "coach")
#: Knobs for which 0 (or 1, for mmr_lambda) switches them off, as None does.
_OFF_AT = {
    "min_similarity": 0,
    "max_chars": 0,
    "withhold_below": 0,
    "mmr_lambda": 1,
    "followup_max_rounds": 0,
    "followup_boost": 1,
}
#: What each knob acts on (the only prose here). A knob missing from it fails the doc test.
ACTS_ON = {
    "first_stage_k": "candidates per leg of the first stage",
    "rerank_k": "top by **first-stage** score sent to the reranker",
    "top_k": "hits returned (the guardrail; `verbatim`: spans, the cascade's cap; the coach endpoint "
    "has its own `constraints.top_k`)",
    "rerank_cutoff": "reranker scores; with no reranker, `vrm` applies it to a calibrated relevance per "
    "hit (below), `default` cuts nothing",
    "followup_max_rounds": "latest linked follow-up *responses* kept (one response = one document and round)",
    "followup_boost": '`type == "followup_document"`, after rerank, before top-k',
    "followup_boost_cap": "only when the score is a reranker score; never lowers a score",
    "min_similarity": "the guardrail's floor on similarity, inclusive ([Guardrail](#guardrail))",
    "max_chars": "the guardrail's budget: total `len(text)` of the hits (`verbatim`: the cascade's cap; "
    "coach endpoint: its quoted bullets and snippets)",
    "mmr_lambda": "diversity over stored embeddings",
    "max_chunks_per_document": "hits per document",
    "withhold_below": "withholds the hits when `confidence` is below it ([Answerability](#answerability))",
    "fusion": "how the hybrid first stage (`default`, `vrm`) fuses its two legs ([Fusion](#fusion)); the "
    "verbatim cascade and the coach keep their own; a request that names it is fused client-side on "
    "every backend (the cluster's search pipeline has its method fixed at deploy time)",
}


def _value(name: str, value: object) -> str:
    if value is None:
        return "zscore" if name == "fusion" else "off"
    if (
        isinstance(value, float)
        and value.is_integer()
        and name not in ("followup_boost", "followup_boost_cap")
    ):
        value = int(value)
    text = str(value)
    return f"{text} (off)" if name in _OFF_AT and value == _OFF_AT[name] else text


def _range(name: str) -> str:
    if name in CHOICES:
        return ", ".join(f"`{c}`" for c in CHOICES[name])
    lo, hi, _ = BOUNDS[name]
    fmt = [str(int(x)) if float(x).is_integer() else str(x) for x in (lo, hi)]
    hi_text = "10M" if hi == 10_000_000 else fmt[1]
    off = f" ({_OFF_AT[name]} = off)" if name in _OFF_AT and lo <= _OFF_AT[name] <= hi else ""
    return f"{fmt[0]}\u2013{hi_text}{off}"  # an en dash, as the doc writes ranges


def profile_defaults(profiles: Sequence[str] = PROFILES) -> dict[str, ProfileParams]:
    """The defaults of each registered profile, by name."""
    from evidence.rank.profiles import get_profile

    return {p: get_profile(p).defaults for p in profiles}


def render_table(defaults_by_profile: Mapping[str, ProfileParams] | None = None) -> str:
    """The markdown table: one row per knob, one column of defaults per profile."""
    by_profile = profile_defaults() if defaults_by_profile is None else defaults_by_profile
    profiles, defaults = list(by_profile), list(by_profile.values())
    head = ["knob", *(f"`{p}`" for p in profiles), "range", "acts on"]
    rows = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for f in fields(ProfileParams):
        cells = [f"`{f.name}`", *(_value(f.name, getattr(d, f.name)) for d in defaults)]
        rows.append("| " + " | ".join([*cells, _range(f.name), ACTS_ON[f.name]]) + " |")
    return "\n".join(rows)


def with_table(doc: str, table: str | None = None) -> str:
    """`doc` with the text between the markers replaced by the table (ValueError: no markers)."""
    start, end = doc.find(BEGIN), doc.find(END)
    if start < 0 or end < start:
        raise ValueError(f"the doc has no {BEGIN!r} ... {END!r} markers")
    return doc[: start + len(BEGIN)] + "\n" + (table or render_table()) + "\n" + doc[end:]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", type=Path, help="rewrite the table in this markdown file")
    args = parser.parse_args(argv)
    if args.write is None:
        print(render_table())
        return 0
    text = args.write.read_text(encoding="utf-8")
    args.write.write_text(with_table(text), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())

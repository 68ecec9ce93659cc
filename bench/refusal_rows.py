"""The evidence every QA question gets with the refusal off, for fitting the refusal signal.

Usage: python bench/refusal_rows.py [QA_ROOT] [--store DIR] [--families a,b] > rows.json

Every family of QA_ROOT (default bench/qa) is indexed as `evidence eval --qa` does, then every
question runs through the `verbatim` and `default` profiles with every refusal floor off (the
cascade's grounding floors 0, `EVIDENCE_ANSWER_MIN_GROUNDING` 0). A row holds the question,
whether it is answerable, whether an expected answer is within the evidence (600 characters for
verbatim, 2,000 for default: what the suite's recall counts), the path, and what the refusal
signal read (`verbatim.grounding.judge`: evidence texts, their bodies without headings, the concepts
they carry by construction, the question's concepts, the cosine, the dense/BM25 agreement).
`bench/refusal_fit.py` fits and measures the signal on them,
leave-one-family-out, without asking the service again.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "shared"))

from evidence.config import Settings  # noqa: E402
from evidence.evaluation import (  # noqa: E402
    QA_EVIDENCE_CHARS,
    QA_WIDE_CHARS,
    answer_found,
    ensure_qa_index,
    find_qa_families,
    load_qa,
)
from evidence.model import RetrieveRequest  # noqa: E402
from evidence.service import EvidenceService  # noqa: E402

PROFILES = {"verbatim": QA_EVIDENCE_CHARS, "default": QA_WIDE_CHARS}


def floors_off() -> None:
    from evidence.profiles import register_profile
    from evidence.profiles.verbatim import VerbatimPlugin
    from evidence.verbatim.cascade import CascadeConfig
    from evidence.verbatim.profile import verbatim_profile

    # The verbatim plug-in (its planner, signal and bundle) over a cascade without floors.
    off = CascadeConfig(min_grounding=0.0, safety_net_grounding=0.0)
    register_profile("verbatim", lambda: VerbatimPlugin(verbatim_profile(off)))


SEEN: list[dict[str, Any]] = []
#: The service and index the questions run against, for `index_df` (set per family).
CURRENT: dict[str, Any] = {}


def record_judgements() -> None:
    """Keep what the refusal signal read (`verbatim.grounding.judge`: the evidence texts and their
    bodies, the concepts they carry by construction, the question's concepts, the cosine, the
    agreement), so
    that `bench/refusal_fit.py` can refit it offline."""
    import evidence.verbatim.cascade as vc
    import evidence.verbatim.grounding as rg
    import evidence.verbatim.run_state as rs

    judge = rg.judge

    def recorded(
        question: str,
        texts: Any,
        *,
        cosine: Any = None,
        groups: Any = None,
        given: Any = (),
        bodies: Any = None,
        agreement: Any = None,
        df: Any = None,
    ) -> Any:
        if groups is None:
            groups = vc.question_groups(question)
        if df is None and CURRENT:
            df = rg.index_df(
                CURRENT["service"].backend, CURRENT["index"], [t for g in groups for t in g], question
            )
        SEEN.append(
            {
                "texts": list(texts),
                "groups": [list(g) for g in groups],
                "cosine": cosine,
                "given": list(given),
                "bodies": None if bodies is None else list(bodies),
                "agreement": agreement,
                "df": df,
            }
        )
        return judge(
            question,
            texts,
            cosine=cosine,
            groups=groups,
            given=given,
            bodies=bodies,
            agreement=agreement,
            df=df,
        )

    rg.judge = recorded
    rs.judge = recorded  # type: ignore[attr-defined]


def recording_service(store: Path) -> EvidenceService:
    """A service over `store` with every refusal floor off and each judgement recorded in `SEEN`:
    the rows' features are read where no floor has cut the evidence yet."""
    floors_off()
    record_judgements()
    # The cosine/coverage bar at 0.5, where its confidence is its probability: `refusal_fit.py
    # --min-confidence` re-reads its refusals at the bar being fitted.
    settings = Settings(store_dir=store).model_copy(
        update={"answer_min_grounding": 0.0, "answer_min_confidence": 0.5}
    )
    return EvidenceService(settings)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("root", nargs="?", type=Path, default=ROOT / "bench" / "qa")
    ap.add_argument("--store", type=Path, default=Path(".evidence"))
    ap.add_argument("--families", default="")
    args = ap.parse_args()
    service = recording_service(args.store)
    wanted = [f for f in args.families.split(",") if f] or None
    rows: list[dict[str, Any]] = []
    try:
        for family in find_qa_families(args.root, wanted):
            index, _ = ensure_qa_index(service, family)
            CURRENT.update(service=service, index=index)
            for rec in load_qa(family.questions):
                for profile, limit in PROFILES.items():
                    SEEN.clear()
                    resp = service.retrieve(index, RetrieveRequest(query=rec["question"], profile=profile))
                    texts = [h.text for h in resp.hits]
                    answers = list(rec["answers"])
                    features = dict(resp.telemetry.answer.features) if resp.telemetry.answer else {}
                    rows.append(
                        {
                            "family": family.name,
                            "question": rec["question"],
                            "answerable": bool(answers),
                            "profile": profile,
                            "path": resp.telemetry.path_used,
                            "found": bool(answers) and answer_found(texts, answers, limit),
                            "can_answer": resp.can_answer,
                            "confidence": float(resp.confidence),
                            "features": features,
                            "judged": SEEN[-1] if SEEN else None,
                        }
                    )
            print(f"{family.name}: done", file=sys.stderr)
    finally:
        service.close()
    json.dump(rows, sys.stdout)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

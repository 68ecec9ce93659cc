"""The evidence every QA question gets with the refusal off, for fitting the refusal signal.

Usage: python bench/refusal_rows.py [QA_ROOT] [--store DIR] [--families a,b] [--ablation] > rows.json
(`--ablation` also records the rankings key-term ablation reads, `ablation_rankings`:
docs/verbatim.md#refusal-key-ablation)

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
if str(ROOT / "bench") not in sys.path:  # refusal_fit, a sibling script, when imported from elsewhere
    sys.path.insert(0, str(ROOT / "bench"))

from refusal_fit import without  # noqa: E402

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
#: `--ablation`: record the rankings key-term ablation reads (`ablation_rankings`).
OPTIONS = {"ablation": False}
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
        tokens: Any = None,
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
                # The terms the index holds in another form (`grounding.TermCounts.variants`).
                "df_variants": sorted(rg.variants_of(df)),
                "ablation": ablation_rankings(question, groups, df) if OPTIONS["ablation"] else None,
                # The dense and BM25 passage rankings the agreement read (`passage_rankings`).
                "rankings": passage_rankings(question),
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
            tokens=tokens,
        )

    rg.judge = recorded
    rs.judge = recorded  # type: ignore[attr-defined]


#: `record_ablation`: the last `passage_agreement` call's (backend, index, vector, documents), by question.
RANKED: dict[str, tuple[Any, str, Any, tuple[str, ...]]] = {}
#: Rankings already read, by (question, documents): the cascade judges several paths' evidence.
ABLATED: dict[tuple[str, tuple[str, ...]], dict[str, Any]] = {}


def key_concepts(question: str, groups: Any, df: Any) -> dict[str, list[tuple[str, ...]]]:
    """The question's key concepts as the refusal signal reads them (`grounding.key_concepts`, the
    code `read_evidence` calls): `key`, the heaviest subject concepts by English rarity (what
    `typed_key` asks a span to hold); `rarest`, the subject concepts the index uses least (what
    `typed_rarest` asks for; not read without counts). A reading with no concept is left out."""
    import evidence.verbatim.grounding as rg
    from evidence.verbatim.answer_types import answer_types

    keys = rg.key_concepts(
        question,
        rg.unique_concepts(groups),
        rg.concept_weights(question, groups),
        answer_types().expected(question),
        df,
    )
    return {name: concepts for name, concepts in (("key", keys.key), ("rarest", keys.rarest)) if concepts}


def ranked(hits: Any) -> list[list[Any]]:
    """A backend ranking as [document, start, end, score] rows (the dense leg's cosine when given)."""
    return [
        [
            h.chunk.document_id,
            h.chunk.char_start,
            h.chunk.char_end,
            float(h.dense if h.dense is not None else h.score),
        ]
        for h in hits
    ]


#: `passage_rankings`: the rankings already read, by (question, documents).
RANKINGS: dict[tuple[str, tuple[str, ...]], dict[str, Any]] = {}


def passage_rankings(question: str) -> dict[str, Any] | None:
    """The dense and BM25 passage rankings (k `AGREEMENT_DEPTH`, [document, start, end, score]) of
    `question` within the evidence's documents, as the last `passage_agreement` call read them:
    what a reading of the rankings' shape (the first passage's margin over the others) reads."""
    import evidence.verbatim.grounding as rg
    from evidence.records import ChunkKind

    if question not in RANKED:
        return None
    backend, index, vector, documents = RANKED[question]
    memo = (question, documents)
    if memo not in RANKINGS:
        filters = {"document_id": sorted(set(documents))}
        k = rg.AGREEMENT_DEPTH
        RANKINGS[memo] = {
            "dense": ranked(backend.dense(index, vector, k=k, filters=filters, kind=ChunkKind.PASSAGE)),
            "lexical": ranked(backend.lexical(index, question, k=k, filters=filters, kind=ChunkKind.PASSAGE)),
        }
    return RANKINGS[memo]


def ablation_rankings(question: str, groups: Any, df: Any) -> dict[str, Any] | None:
    """Key-term ablation's raw material (docs/verbatim.md#refusal-key-ablation): the dense and BM25
    passage rankings, within the evidence's documents (those the agreement read), of the question
    and of the question without its key concepts (each of `key_concepts`' readings)."""
    import evidence.verbatim.grounding as rg
    from evidence.records import ChunkKind

    if question not in RANKED:
        return None
    backend, index, vector, documents = RANKED[question]
    memo = (question, documents)
    if memo in ABLATED:
        return ABLATED[memo]
    filters = {"document_id": sorted(set(documents))}
    k = rg.AGREEMENT_DEPTH

    def rank(text: str, vec: Any) -> dict[str, Any]:
        return {
            "text": text,
            "dense": ranked(backend.dense(index, vec, k=k, filters=filters, kind=ChunkKind.PASSAGE)),
            "lexical": ranked(backend.lexical(index, text, k=k, filters=filters, kind=ChunkKind.PASSAGE))
            if text
            else [],
        }

    out: dict[str, Any] = {"full": rank(question, vector)}
    service = CURRENT["service"]
    for name, concepts in key_concepts(question, groups, df).items():
        rest = without(question, concepts)
        if rest and rest != question:
            out[name] = {
                "concepts": [list(c) for c in concepts],
                **rank(rest, service.query_vector(index, rest)),
            }
    ABLATED[memo] = out
    return out


def record_ablation() -> None:
    """Remember each `passage_agreement` call's inputs, so the judgement that follows can record the
    rankings key-term ablation reads (`ablation_rankings`)."""
    import evidence.verbatim.grounding as rg
    import evidence.verbatim.run_state as rs

    agree = rg.passage_agreement

    def remembered(backend: Any, index: str, question: str, vector: Any, documents: Any) -> Any:
        if vector is not None and documents:
            RANKED[question] = (backend, index, vector, tuple(sorted(set(documents))))
        return agree(backend, index, question, vector, documents)

    rg.passage_agreement = remembered
    rs.passage_agreement = remembered  # type: ignore[attr-defined]


def recording_service(store: Path) -> EvidenceService:
    """A service over `store` with every refusal floor off and each judgement recorded in `SEEN`:
    the rows' features are read where no floor has cut the evidence yet."""
    floors_off()
    # The variants `absent_rare` reads (`grounding.READ_VARIANTS`) and `absent_named`
    # (`READ_NAMED`), recorded whether or not the shipped model reads them, so that
    # `refusal_fit.py --features …,absent_rare` can.
    import evidence.verbatim.grounding as rg

    rg.READ_VARIANTS = rg.READ_RARE = rg.READ_NAMED = True
    record_judgements()
    record_ablation()
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
    ap.add_argument("--ablation", action="store_true", help="also record key-term ablation's rankings")
    args = ap.parse_args()
    OPTIONS["ablation"] = args.ablation
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
                    RANKED.clear()
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
                            # The hits as returned (document, score, the legs' scores): what a
                            # reading of the evidence's ranking (a margin, the documents) reads.
                            "hits": [[h.document_id, float(h.score), h.scores or {}] for h in resp.hits],
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

"""The cascade on a real embedded store: each path, its bounds, the order, the entity scope, NO_RESULT."""

from __future__ import annotations

import pytest

from evidence.plan.verbatim import RulePlan, plan_question
from evidence.service import EvidenceService
from evidence.verbatim.cascade import (
    ATTRIBUTE_LOOKUP,
    BM25_FACTSPAN,
    GLOBAL_FACTSPAN_SCAN,
    HYBRID_FACTSPAN,
    MULTI_SECTION_EVIDENCE,
    NO_RESULT,
    SECTION_EXACT,
    SECTION_FUZZY,
    CascadeConfig,
    VerbatimCascade,
    trigram_similarity,
)
from tests.unit.verbatim.verbatimkit import rank_context, span

INDEX = "label"

KNOWN = ["lipravex", "ferlostatin calcium", "ferlostatin", "zorvex", "talmopril maleate", "talmopril"]


def run(
    service: EvidenceService, question: str, config: CascadeConfig | None = None, plan: RulePlan | None = None
):
    p = plan or plan_question(question, known_entities=KNOWN)
    return VerbatimCascade(config).run(service.backend, INDEX, question, p)


def test_section_exact_returns_the_section_in_order(label_service: EvidenceService) -> None:
    res = run(label_service, "What are the contraindications for Lipravex?")
    assert res.path_used == SECTION_EXACT and res.entity == "LIPRAVEX"
    texts = [h.chunk.text for h in res.hits]
    assert texts[0] == "LIPRAVEX is contraindicated in the following conditions:"
    assert "- Concomitant use with gemfibrozil." in texts
    assert all(h.chunk.document_id.endswith("lipravex.md") for h in res.hits)


def test_attribute_lookup_prefers_the_attribute_home_section(label_service: EvidenceService) -> None:
    res = run(label_service, "What is the t½ of ferlostatin?")
    assert res.path_used == ATTRIBUTE_LOOKUP
    assert (
        res.hits[0].chunk.text
        == "The terminal elimination half-life of ferlostatin is approximately 19 hours."
    )
    # The safety net ran after it only to fill the rest of the bundle.
    assert [t.path for t in res.tried] == [SECTION_EXACT, SECTION_FUZZY, ATTRIBUTE_LOOKUP, HYBRID_FACTSPAN]
    assert res.tried[-1].note.startswith("fill:")


def test_a_rule_paths_evidence_is_followed_by_the_safety_nets_spans(label_service: EvidenceService) -> None:
    question = "What is the t½ of ferlostatin?"
    filled = run(label_service, question, CascadeConfig(interleave_fill=False))
    alone = run(label_service, question, CascadeConfig(fill_spans=0))
    assert filled.path_used == alone.path_used == ATTRIBUTE_LOOKUP
    n = len(alone.hits)
    # the rule's spans first, unchanged; then HYBRID_FACTSPAN's, none of them a repeat, in the bound
    assert [h.chunk.chunk_id for h in filled.hits[:n]] == [h.chunk.chunk_id for h in alone.hits]
    assert all(h.path == ATTRIBUTE_LOOKUP for h in filled.hits[:n])
    rest = filled.hits[n:]
    assert rest and all(h.path == HYBRID_FACTSPAN for h in rest)
    assert len({h.chunk.text for h in filled.hits}) == len(filled.hits) <= CascadeConfig().max_spans
    assert sum(len(h.chunk.text) for h in filled.hits) <= CascadeConfig().max_chars
    assert [t.path for t in alone.tried][-1] == ATTRIBUTE_LOOKUP
    scores = [h.score for h in filled.hits]
    assert scores == sorted(scores, reverse=True)  # the fill ranks below the rule's spans


def test_a_rule_path_that_picked_spans_by_relevance_alternates_with_the_safety_net(
    label_service: EvidenceService,
) -> None:
    # The lever, off by default (measured +2 of 839, docs/verbatim.md#rule-paths): ATTRIBUTE_LOOKUP
    # picks the spans matching the attribute's pattern; its first span stays first, then the span
    # scorer's best, then the rule's second, ...
    question = "What is the t½ of ferlostatin?"
    mixed = run(label_service, question, CascadeConfig(interleave_fill=True))
    alone = run(label_service, question, CascadeConfig(fill_spans=0))
    after = run(label_service, question)
    assert mixed.path_used == alone.path_used == ATTRIBUTE_LOOKUP
    rule = [h.chunk.chunk_id for h in alone.hits]
    assert len(rule) >= 2
    paths = [h.path for h in mixed.hits]
    assert paths[: 2 * len(rule)] == [ATTRIBUTE_LOOKUP, HYBRID_FACTSPAN] * len(rule)
    assert [h.chunk.chunk_id for h in mixed.hits if h.path == ATTRIBUTE_LOOKUP] == rule
    # the same spans as the fill that follows the rule (both bounded alike), only their order differs
    assert {h.chunk.chunk_id for h in mixed.hits} == {h.chunk.chunk_id for h in after.hits}
    assert len({h.chunk.text for h in mixed.hits}) == len(mixed.hits) <= CascadeConfig().max_spans
    scores = [h.score for h in mixed.hits]
    assert scores == sorted(scores, reverse=True)


def test_a_section_asked_for_by_name_alone_is_not_interleaved(label_service: EvidenceService) -> None:
    # A whole section (block level) is the answer in its own order: the fill still follows it.
    res = run(
        label_service, "What are the contraindications for Lipravex?", CascadeConfig(interleave_fill=True)
    )
    alone = run(label_service, "What are the contraindications for Lipravex?", CascadeConfig(fill_spans=0))
    assert res.path_used == SECTION_EXACT
    n = len(alone.hits)
    assert [h.chunk.chunk_id for h in res.hits[:n]] == [h.chunk.chunk_id for h in alone.hits][: len(res.hits)]


def test_an_attribute_with_no_span_in_its_sections_can_leave_the_question_to_the_span_scorer(
    label_service: EvidenceService,
) -> None:
    # The lever, off by default (measured +1 of 839, one more false refusal): with
    # `attribute_needs_home`, ATTRIBUTE_LOOKUP finds nothing unless a span matching the attribute's
    # pattern sits in one of its home sections. Here half-life is made to live in "storage".
    from dataclasses import asdict

    from evidence.plan.verbatim import default_rules
    from evidence.verbatim.cascade import VerbatimCascade as Cascade

    half_life = default_rules().attribute("half_life")
    assert half_life is not None
    attr = asdict(half_life)
    elsewhere = default_rules().from_config({"attributes": [{**attr, "sections": ["storage"]}]})
    question = "What is the t½ of ferlostatin?"
    plan = plan_question(question, known_entities=KNOWN)
    assert plan.attribute == "half_life"
    plan = RulePlan(
        plan.entity, plan.query_mode, plan.attribute, (), plan.search_phrases, plan.extraction_level
    )
    needs = CascadeConfig(attribute_needs_home=True)

    def path(config: CascadeConfig, rules=None) -> str:
        return Cascade(config, rules).run(label_service.backend, INDEX, question, plan).path_used

    assert path(needs) == ATTRIBUTE_LOOKUP  # the label's pharmacokinetics holds a half-life
    assert path(CascadeConfig(), elsewhere) == ATTRIBUTE_LOOKUP  # off: the pattern alone decides
    res = Cascade(needs, elsewhere).run(label_service.backend, INDEX, question, plan)
    assert res.path_used == HYBRID_FACTSPAN
    assert any(t.path == ATTRIBUTE_LOOKUP and "none in its sections" in t.note for t in res.tried)


def test_interleaved_skips_repeats_and_keeps_scores_falling() -> None:
    from evidence.verbatim.cascade import SpanHit, _interleaved
    from evidence.verbatim.hybrid import same_text

    def hit(text: str, score: float, path: str) -> SpanHit:
        return SpanHit(span(0, text), score, path)  # `_interleaved` tells repeats by text alone

    rule = [hit("r1", 3.0, ATTRIBUTE_LOOKUP), hit("r2", 2.0, ATTRIBUTE_LOOKUP)]
    fill = [hit("r1", 0.9, HYBRID_FACTSPAN), hit("h1", 0.8, HYBRID_FACTSPAN), hit("h2", 0.7, HYBRID_FACTSPAN),
            hit("h3", 0.6, HYBRID_FACTSPAN)]  # fmt: skip
    out = _interleaved(rule, fill, {same_text(h.chunk.text) for h in rule})
    assert [h.chunk.text for h in out] == ["r1", "h1", "r2", "h2", "h3"]
    scores = [h.score for h in out]
    assert scores == sorted(scores, reverse=True) and scores[0] == 3.0 and scores[-1] == 0.6


def test_the_entity_scopes_every_path(label_service: EvidenceService) -> None:
    res = run(label_service, "What is the half-life of Zorvex?")
    assert res.entity == "ZORVEX"
    assert res.hits and all(h.chunk.document_id.endswith("zorvex.md") for h in res.hits)
    assert "11 hours" in res.hits[0].chunk.text


def test_bm25_and_global_scan_find_facts_no_section_names(label_service: EvidenceService) -> None:
    res = run(label_service, "Has tendon rupture been reported with Lipravex?")
    assert res.path_used == HYBRID_FACTSPAN  # the default order ranks spans before the lexical paths
    assert "tendon rupture" in res.hits[0].chunk.text
    bm25 = run(
        label_service,
        "Has tendon rupture been reported with Lipravex?",
        CascadeConfig(order=(BM25_FACTSPAN,)),
    )
    assert bm25.path_used == BM25_FACTSPAN and "tendon rupture" in bm25.hits[0].chunk.text
    scan = run(
        label_service,
        "Has tendon rupture been reported with Lipravex?",
        CascadeConfig(order=(GLOBAL_FACTSPAN_SCAN,)),
    )
    assert scan.path_used == GLOBAL_FACTSPAN_SCAN and "tendon rupture" in scan.hits[0].chunk.text


# Yes/no questions whose concept is absent ("Can Lipravex be given to dogs?", "Is Lipravex covered
# by Medicare?") were refused here until the refit of 2026-11-26: in this lexical-only index they
# now land at p 0.41 against the safety net's 0.40 (docs/verbatim.md#honest-refusal, the classes
# still answered). A floor moved for them would be tuning to a bundled document.
@pytest.mark.parametrize(
    "question",
    [
        "How much does a month of Lipravex cost?",
        "What does a month of Lipravex cost in euros?",
    ],
)
def test_unanswerable_questions_get_no_result(label_service: EvidenceService, question: str) -> None:
    res = run(label_service, question)
    assert res.path_used == NO_RESULT and res.hits == []
    # Every path ran until one found something: the hybrid ranking always does, and the grounding
    # check refused it (the question's key concept is in no span).
    order = list(CascadeConfig().order)
    assert [t.path for t in res.tried] == order[: order.index(HYBRID_FACTSPAN) + 1]
    assert res.refused == HYBRID_FACTSPAN


def test_section_fuzzy_matches_headings_outside_the_vocabulary(label_service: EvidenceService) -> None:
    plan = RulePlan(
        "Lipravex", "SECTION", None, ("specific_populations_overview",), ("populations",), "block"
    )
    res = run(label_service, "Lipravex specific populations", plan=plan)
    assert res.path_used == SECTION_FUZZY
    assert res.hits[0].chunk.section == "Specific Populations"
    assert trigram_similarity("renal impairment", "renal impairment") == 1.0
    assert trigram_similarity("renal", "") == 0.0


def test_bounds_and_order_are_configuration(label_service: EvidenceService) -> None:
    small = run(label_service, "Lipravex warnings and precautions", CascadeConfig(max_spans=2))
    assert len(small.hits) == 2
    tight = run(label_service, "Lipravex warnings and precautions", CascadeConfig(max_chars=250))
    assert sum(len(h.chunk.text) for h in tight.hits) <= 250 or len(tight.hits) == 1
    reordered = run(
        label_service,
        "What are the contraindications for Lipravex?",
        CascadeConfig(order=(BM25_FACTSPAN, SECTION_EXACT)),
    )
    assert reordered.tried[0].path == BM25_FACTSPAN
    with pytest.raises(ValueError, match="unknown cascade paths"):
        CascadeConfig(order=("SQL_EXACT",))
    with pytest.raises(ValueError, match="twice"):
        CascadeConfig(order=(SECTION_EXACT, SECTION_EXACT))


def test_multi_section_questions_bundle_several_sections(label_service: EvidenceService) -> None:
    res = run(label_service, "Why is the Lipravex dose reduced in patients with severe renal impairment?")
    # Seed 002's multi-section assembly is reported as such (issue 25 item 7).
    assert res.path_used == MULTI_SECTION_EVIDENCE and res.multi_section
    joined = " ".join(h.chunk.text for h in res.hits)
    assert "2.1-fold" in joined


class _Passages:
    """A backend whose BM25 returns passages of given documents, each with or without a subject."""

    def __init__(self, subjects: list[str | None]) -> None:
        from types import SimpleNamespace

        self.hits = [
            SimpleNamespace(chunk=SimpleNamespace(metadata={"entity_names": [s]} if s else {}))
            for s in subjects
        ]

    def lexical(self, index, query, k, kind):  # the one read resolve_entity makes
        return self.hits[:k]

    def lookup(self, *args, **kwargs):
        return []


def _resolve(subjects: list[str | None], question: str = "Can the server name be an IP address?"):
    plan = plan_question(question)
    return VerbatimCascade().resolve_entity(_Passages(subjects), INDEX, question, plan)  # type: ignore[arg-type]


def test_the_best_passages_name_the_subject_only_if_they_all_have_it() -> None:
    # All ten best passages are one subject's: the run is scoped to it.
    assert _resolve(["cookies"] * 10) == ("cookies", {"entity_names": "cookies"})
    # Nine of a document without a subject and one of a document with one: no agreement, so the
    # run is not scoped to the one (it was, before: the subjectless passages did not vote).
    assert _resolve([None] * 9 + ["cookies"]) == (None, None)
    assert _resolve(["cookies", None]) == (None, None)
    # Two subjects: no agreement either; a question naming one still picks it.
    assert _resolve(["cookies", "tls"]) == (None, None)
    named = _resolve([None, "cookies"], "How long do cookies last?")
    assert named == ("cookies", {"entity_names": "cookies"})
    assert _resolve([None] * 10) == (None, None)


def test_a_subject_with_punctuation_or_quotes_is_said_by_its_words() -> None:
    """A subject name is read as names are elsewhere (`name_words`): "zentrax®" and a quoted
    '"widget license"' are said by the words, a name's numbers must be said too, and a subject
    said as written comes first (synthetic subjects)."""
    from evidence.verbatim.cascade import says_name

    brand = ["zentrax®", "quellamide"]
    assert _resolve([None, *brand], "How much Zentrax should a child take?") == (
        "zentrax®",
        {"entity_names": "zentrax®"},
    )
    quoted = ['the "widget license"']
    assert _resolve([None, *quoted], "Does the Widget License allow resale?")[0] == quoted[0]
    versioned = ["frob public license version 2.0"]
    assert _resolve([None, *versioned], "Is the Frob Public License 2.0 viral?")[0] == versioned[0]
    assert _resolve([None, *versioned], "Is the Frob Public License 1.1 viral?") == (None, None)
    # As written wins over said by words, whatever the passages' order.
    assert _resolve([None, "zentrax®", "zentrax tablets"], "Are zentrax tablets coated?")[0] == (
        "zentrax tablets"
    )
    # Words out of order, or only some of them, say nothing.
    assert _resolve([None, *quoted], "Is a license for a widget needed?") == (None, None)
    assert not says_name(["widget"], "widget", "widget license")
    assert not says_name(["anything"], "anything", "®")


def test_span_ranking_and_anchors_read_the_span_scorer_on_the_hits_documents(
    label_service: EvidenceService,
) -> None:
    """`span_ranking` is `HYBRID_FACTSPAN`'s ranking of the named documents' spans (lexical model
    on a store without vectors); `SpanAnchors` gives each passage hit the best of them inside its
    offsets, what `default`'s focus may anchor its run on (docs/ranking.md#focus-span-anchor)."""
    from dataclasses import replace

    from evidence.rank.candidate import Candidate
    from evidence.records import ChunkKind
    from evidence.verbatim.cascade import SpanAnchors, span_ranking

    backend = label_service.backend
    question = "What is the elimination half-life of talmopril?"
    passages = [h.chunk for h in backend.lexical(INDEX, question, k=5, kind=ChunkKind.PASSAGE)]
    docs = list(dict.fromkeys(p.document_id for p in passages))
    ranked = span_ranking(backend, INDEX, question, docs)
    assert ranked and all(s.kind is ChunkKind.SPAN and s.document_id in docs for _, s in ranked)
    assert [sc for sc, _ in ranked] == sorted((sc for sc, _ in ranked), reverse=True)
    assert "half-life of talmopril is approximately 11 hours" in ranked[0][1].text
    assert span_ranking(backend, INDEX, question, []) == []
    # `within`: only the spans inside the given passages are ranked.
    inside = span_ranking(backend, INDEX, question, docs, within=passages[:1])
    p0 = passages[0]
    assert inside and all(
        s.document_id == p0.document_id and p0.char_start <= s.char_start and s.char_end <= p0.char_end
        for _, s in inside
    )

    ctx = rank_context(backend, INDEX, question)
    hits = [Candidate(chunk=p, score=1.0, first_stage_score=1.0) for p in passages]
    found = SpanAnchors().find(hits, ctx)
    assert found
    for i, (a, b) in found.items():
        p = hits[i].chunk
        assert p.char_start <= a < b <= p.char_end
    top = ranked[0][1]
    holding = [
        i
        for i, h in enumerate(hits)
        if h.chunk.document_id == top.document_id
        and h.chunk.char_start <= top.char_start
        and top.char_end <= h.chunk.char_end
    ]
    assert holding and found[holding[0]] == (top.char_start, top.char_end)
    assert SpanAnchors(within_hits=True).find(hits, ctx)[holding[0]] == (top.char_start, top.char_end)
    # A hit that is not a passage gets no anchor.
    span_hit = Candidate(chunk=replace(top, kind=ChunkKind.SPAN), score=1.0, first_stage_score=1.0)
    assert 0 not in SpanAnchors().find([span_hit], ctx)


def test_spans_within_keeps_the_spans_inside_a_passage_of_their_own_document_in_order() -> None:
    """`spans_within` is `spans.inside` over every passage, by document at once: the same spans,
    in the same order (against the span-by-passage comparison it replaces)."""
    import random

    from evidence.records import Chunk, ChunkKind
    from evidence.verbatim.cascade import spans_within
    from evidence.verbatim.spans import inside

    rng = random.Random(7)

    def chunk(doc: str, a: int, b: int, kind: ChunkKind) -> Chunk:
        return Chunk(
            chunk_id=f"{doc}:{a}:{b}:{kind.value}",
            document_id=doc,
            text="x" * (b - a),
            char_start=a,
            char_end=b,
            kind=kind,
            sequence=a,
        )

    spans = []
    for _ in range(400):
        a = rng.randrange(0, 2000)
        spans.append(chunk(rng.choice("abc"), a, a + rng.randrange(1, 120), ChunkKind.SPAN))
    passages = []
    for _ in range(12):
        a = rng.randrange(0, 1800)
        passages.append(chunk(rng.choice("ab"), a, a + rng.randrange(50, 400), ChunkKind.PASSAGE))
    want = [s for s in spans if any(inside(s, p) for p in passages)]
    assert want and len(want) < len(spans)
    assert spans_within(spans, passages) == want
    # The bounds are inclusive; another document's passage holds nothing.
    p = chunk("a", 100, 200, ChunkKind.PASSAGE)
    edge = [
        chunk("a", 100, 200, ChunkKind.SPAN),
        chunk("a", 99, 150, ChunkKind.SPAN),
        chunk("a", 150, 201, ChunkKind.SPAN),
        chunk("b", 120, 130, ChunkKind.SPAN),
    ]
    assert spans_within(edge, [p]) == edge[:1]
    assert spans_within(edge, []) == []

"""Extractive compression: verbatim sentences of cited nodes, coverage, order, exclusions."""

from __future__ import annotations

import numpy as np

from evidence.coach.budget import TokenCounter
from evidence.coach.compress import Plan, Sentence, Source, compress, split_node
from evidence.graph.documents import NodeView
from evidence.search.analysis import get_analyzer


def _node(node_id: str, text: str, *, kind: str = "LO", title: str = "") -> NodeView:
    return NodeView(
        id=node_id,
        graph="g",
        type=kind,
        title=title or node_id,
        text=text,
        chunk_id=f"{node_id}#p",
        document_id=f"g#{node_id}",
    )


def _terms(text: str) -> frozenset[str]:
    return frozenset(get_analyzer().analyze(text))


def _run(sources: list[Source], query: str, plan: Plan, *, with_vectors: bool = False) -> list:  # type: ignore[type-arg]
    sentences = {s.node.id: split_node(s.node) for s in sources}
    return compress(
        sources,
        sentences,
        query_terms=_terms(query),
        query_vector=None,
        plan=plan,
        tokens=TokenCounter(),
        analyze=get_analyzer().analyze,
    )


def test_fragments_a_formula_split_off_are_joined_back_verbatim() -> None:
    text = "The series is e^x = 1 + x + x^2/2! + x^3/3! + ... for every x. It converges everywhere."
    view = _node("LO-E", text)
    sents = split_node(view)
    assert [s.text for s in sents] == [
        "The series is e^x = 1 + x + x^2/2! + x^3/3! + ... for every x.",
        "It converges everywhere.",
    ]
    assert all(s.text in text for s in sents)


def test_bullets_are_verbatim_cover_each_lo_and_follow_learning_order() -> None:
    pre = _node(
        "LO-1", "Composition applies one function to the output of another. Order matters in composition."
    )
    main = _node(
        "LO-2",
        "The chain rule differentiates a composition of functions. "
        "Multiply the outer derivative by the inner one. It is used everywhere in calculus.",
    )
    ex = _node(
        "EX-1", "Differentiate (3x + 1)^2 with the chain rule. The answer is 6(3x + 1).", kind="Example"
    )
    sources = [
        Source(pre, "supporting", 0.6, 0),
        Source(main, "matched", 0.9, 1),
        Source(ex, "content", 0.7, 2),
    ]
    bullets = _run(sources, "chain rule composition", Plan(max_bullets=4, min_bullets=3))
    assert 3 <= len(bullets) <= 4
    by_id = {"LO-1": pre.text, "LO-2": main.text, "EX-1": ex.text}
    assert all(b.text in by_id[b.node_id] for b in bullets)
    assert {"LO-1", "LO-2"} <= {b.node_id for b in bullets}, "every cited LO gets a bullet first"
    orders = [b.order for b in bullets]
    assert orders == sorted(orders), "prerequisite first, then the matched LO, then content"


def test_exclusions_and_length_limits() -> None:
    view = _node(
        "LO-3",
        "Add 9 to both sides to complete the square. Then take square roots of both sides. "
        "A very long sentence that goes on and on about many different things that are not needed at all "
        "for the student to make progress on the problem they asked about, padding every clause.",
    )
    plan = Plan(
        max_bullets=3,
        min_bullets=1,
        max_tokens=20,
        exclude=("We will add 9 to both sides to complete the square. ok",),
    )
    bullets = _run([Source(view, "matched", 1.0, 0)], "square roots", plan)
    assert [b.text for b in bullets] == ["Then take square roots of both sides."]


def test_near_duplicates_are_not_repeated() -> None:
    a = _node("LO-A", "The derivative of x^2 is 2x.")
    b = _node("LO-B", "The derivative of x^2 is 2x. Slopes of tangents come from derivatives.")
    bullets = _run(
        [Source(a, "matched", 1.0, 0), Source(b, "matched", 0.9, 1)], "derivative of x^2", Plan(max_bullets=3)
    )
    texts = [x.text for x in bullets]
    assert texts.count("The derivative of x^2 is 2x.") == 1


def test_sentence_vectors_steer_the_choice() -> None:
    view = _node("LO-V", "Alpha sentence here. Beta sentence here.")
    sents = [
        Sentence("Alpha sentence here.", "LO-V", 0, np.array([0.0, 1.0], dtype=np.float32)),
        Sentence("Beta sentence here.", "LO-V", 1, np.array([1.0, 0.0], dtype=np.float32)),
    ]
    bullets = compress(
        [Source(view, "matched", 1.0, 0)],
        {"LO-V": sents},
        query_terms=frozenset(),
        query_vector=np.array([1.0, 0.0], dtype=np.float32),
        plan=Plan(max_bullets=1, min_bullets=1),
        tokens=TokenCounter(),
        analyze=get_analyzer().analyze,
    )
    assert [b.text for b in bullets] == ["Beta sentence here."]


def test_nothing_to_quote_gives_nothing() -> None:
    assert _run([], "x", Plan()) == []

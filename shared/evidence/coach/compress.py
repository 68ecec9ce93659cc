"""Context compression: 3-7 extractive bullets, each a verbatim sentence of a cited node.

Sentences are the fact spans stored with every node (their vectors too, so nothing is embedded
per request). The sentence splitter is built for prose; where it cuts inside a formula (a
factorial "3!" or an ellipsis followed by "+ ..."), the fragment is joined back to the sentence
before it, and the joined text is still a slice of the node's text. A sentence scores

    score = weight(node)^0.5 * role * (0.6 * (1 + cos(query, sentence))/2 + 0.4 * overlap + bonus)

where `overlap` is the share of the query's stemmed topic words in the sentence, `role` prefers
matched LOs (1.0) over their prerequisites (0.8) and content (0.7), and `bonus` favours the first
sentence of an LO (it usually states the idea) and, for troubleshooting, sentences about checks
and common mistakes. Every matched and supporting LO gets its best sentence first (coverage);
the rest are filled by score with a redundancy penalty (maximal marginal relevance). Bullets are
then put in learning order: prerequisites first, then the matched LOs, then content.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from evidence.coach.budget import TokenCounter
from evidence.graph.documents import NodeView
from evidence.rank.similarity import MarginalRelevance, cosine
from evidence.records import ChunkKind
from evidence.search.base import SearchReader

ROLE_WEIGHT = {"matched": 1.0, "supporting": 0.8, "content": 0.7}
#: Cosine (or word overlap, without vectors) above which a sentence repeats one already chosen.
NEAR_DUPLICATE = 0.92
_JOINER = re.compile("^[-+=*/\u00d7\u00b7,;:)\\]}\u2264\u2265<>^]|^[a-z]")
_ENDS_SENTENCE = re.compile(r"[.?]['\")\]]*$")
_CHECK_CUES = re.compile(
    r"\b(check|checks|checking|mistake|mistakes|error|errors|wrong|common|always|never|must|careful|"
    r"instead|only|not|cannot|forget|forgetting|sign|signs|test|confirm|substitut\w*)\b",
    re.IGNORECASE,
)


@dataclass(frozen=True, slots=True)
class Source:
    """A node whose sentences may be quoted: its role, weight in [0, 1] and place in learning order."""

    node: NodeView
    role: str
    weight: float
    order: int


@dataclass(frozen=True, slots=True)
class Sentence:
    text: str
    node_id: str
    position: int
    vector: np.ndarray | None = field(default=None, compare=False)


@dataclass(frozen=True, slots=True)
class Bullet:
    text: str
    node_id: str
    score: float
    order: tuple[int, int]


@dataclass(frozen=True, slots=True)
class Plan:
    max_bullets: int = 5
    min_bullets: int = 3
    #: Longer sentences are left out (practice asks for no long bullets); None = no limit.
    max_tokens: int | None = None
    #: Sentences already in the conversation are not repeated (follow-ups are delta-only).
    exclude: tuple[str, ...] = ()
    checks: bool = False
    #: Bullets per node at most.
    per_node: int = 3


def _norm(text: str) -> str:
    return " ".join(text.split()).lower()


def _joined(node: NodeView, spans: Sequence[tuple[int, int, np.ndarray | None]], base: int) -> list[Sentence]:
    """Spans → sentences, re-joining fragments a formula split off; text is sliced from the node."""
    units: list[list[int | np.ndarray | None]] = []
    for a, b, vec in spans:
        piece = node.text[a - base : b - base]
        if units:
            prev = node.text[int(units[-1][0]) - base : int(units[-1][1]) - base]  # type: ignore[arg-type]
            if _JOINER.match(piece) or not _ENDS_SENTENCE.search(prev):
                units[-1][1] = b
                units[-1].append(vec)
                continue
        units.append([a, b, vec])
    out = []
    for i, unit in enumerate(units):
        a, b = int(unit[0]), int(unit[1])  # type: ignore[arg-type]
        vecs = [v for v in unit[2:] if isinstance(v, np.ndarray)]
        vec = np.mean(vecs, axis=0).astype(np.float32) if vecs else None
        out.append(Sentence(node.text[a - base : b - base], node.id, i, vec))
    return out


def load_sentences(backend: SearchReader, index: str, nodes: Iterable[NodeView]) -> dict[str, list[Sentence]]:
    """Sentences of each node from its stored fact spans (two backend calls in all).

    A node stored without spans falls back to the splitter run on its text here.
    """
    views = {v.document_id: v for v in nodes}
    if not views:
        return {}
    hits = backend.lookup(index, {"document_id": list(views)}, limit=5000, kind=ChunkKind.SPAN)
    vectors = backend.vectors(index, [h.chunk.chunk_id for h in hits]) if hits else {}
    grouped: dict[str, list[tuple[int, int, int, np.ndarray | None]]] = {}
    for h in hits:
        c = h.chunk
        grouped.setdefault(c.document_id, []).append(
            (c.sequence, c.char_start, c.char_end, vectors.get(c.chunk_id))
        )
    out: dict[str, list[Sentence]] = {}
    for doc_id, view in views.items():
        spans = sorted(grouped.get(doc_id, []), key=lambda s: s[0])
        # Span offsets are into the node's document text; the passage (the node text) starts at char_start.
        if spans and all(
            view.char_start <= a and b - view.char_start <= len(view.text) for _, a, b, _ in spans
        ):
            out[view.id] = _joined(view, [(a, b, v) for _, a, b, v in spans], view.char_start)
        else:
            out[view.id] = split_node(view)
    return out


def split_node(view: NodeView) -> list[Sentence]:
    from evidence.ingest.spans import split_sentences

    raw: list[tuple[int, int, np.ndarray | None]] = []
    for start, end in split_sentences(view.text):
        a, b = start, end
        while a < b and view.text[a].isspace():
            a += 1
        while b > a and view.text[b - 1].isspace():
            b -= 1
        if b > a:
            raw.append((a, b, None))
    return _joined(view, raw, 0)


#: A candidate bullet: (score, sentence, its source, its analysed terms).
_Scored = tuple[float, Sentence, Source, frozenset[str]]


def compress(
    sources: Sequence[Source],
    sentences: Mapping[str, Sequence[Sentence]],
    *,
    query_terms: frozenset[str],
    query_vector: np.ndarray | None,
    plan: Plan,
    tokens: TokenCounter,
    analyze: Callable[[str], list[str]],
) -> list[Bullet]:
    """Pick and order the bullets. `analyze(text) -> list[str]` gives stemmed terms."""
    scored = _score_sentences(
        sources,
        sentences,
        query_terms=query_terms,
        query_vector=query_vector,
        plan=plan,
        tokens=tokens,
        analyze=analyze,
    )
    if not scored:
        return []
    scored.sort(key=lambda x: (-x[0], x[2].order, x[1].position))
    chosen = _Selection(plan, scored).choose(sources)
    bullets = [
        Bullet(text=s.text, node_id=s.node_id, score=round(score, 4), order=(src.order, s.position))
        for score, s, src, _ in chosen
    ]
    bullets.sort(key=lambda b: b.order)
    return bullets


def _score_sentences(
    sources: Sequence[Source],
    sentences: Mapping[str, Sequence[Sentence]],
    *,
    query_terms: frozenset[str],
    query_vector: np.ndarray | None,
    plan: Plan,
    tokens: TokenCounter,
    analyze: Callable[[str], list[str]],
) -> list[_Scored]:
    """Every sentence that may become a bullet, with its score."""
    excluded = [_norm(t) for t in plan.exclude if t.strip()]
    scored: list[_Scored] = []
    for src in sources:
        for s in sentences.get(src.node.id, ()):
            n_tok = tokens.count(s.text)
            if plan.max_tokens is not None and n_tok > plan.max_tokens:
                continue
            if not re.search(r"[A-Za-z]{2}", s.text) or n_tok < 4:
                continue
            low = _norm(s.text)
            if any(low in e for e in excluded):
                continue
            terms = frozenset(analyze(s.text))
            overlap = len(terms & query_terms) / len(query_terms) if query_terms else 0.0
            cos = cosine(query_vector, s.vector)
            sim = 0.5 if cos is None else (1.0 + cos) / 2.0
            score = (
                math.sqrt(max(src.weight, 0.0))
                * ROLE_WEIGHT.get(src.role, 0.7)
                * (0.6 * sim + 0.4 * overlap + _bonus(s, src, plan, n_tok))
            )
            scored.append((score, s, src, terms))
    return scored


def _bonus(s: Sentence, src: Source, plan: Plan, n_tok: int) -> float:
    """An LO's opening sentence and a check cue when checks are asked for lift; a long one sinks."""
    bonus = 0.0
    if s.position == 0 and src.node.is_lo:
        bonus += 0.1
    if plan.checks and _CHECK_CUES.search(s.text):
        bonus += 0.15
    if n_tok > 60:
        bonus -= 0.1
    return bonus


class _Selection:
    """Coverage first (the best sentence of every cited LO), then relevance minus redundancy.

    Redundancy is the largest similarity to a chosen sentence, floored at 0: the cosine of their
    vectors, or the Jaccard overlap of their terms when either has no vector.
    """

    def __init__(self, plan: Plan, scored: list[_Scored]) -> None:
        self.plan = plan
        self.scored = scored
        self.order: list[int] = []
        self.per_node: dict[str, int] = {}
        self.rejected = np.zeros(len(scored), dtype=bool)
        self.state = MarginalRelevance(
            [x[0] for x in scored], self._similarity, w_rel=1.0, w_red=0.5, initial=0.0
        )

    def _similarity(self, j: int) -> np.ndarray:
        _, chosen, _, chosen_terms = self.scored[j]
        row = np.empty(len(self.scored), dtype=np.float64)
        for i, (_, s, _, terms) in enumerate(self.scored):
            c = cosine(s.vector, chosen.vector)
            if c is None:
                union = terms | chosen_terms
                c = len(terms & chosen_terms) / len(union) if union else 0.0
            row[i] = c
        return row

    def take(self, i: int) -> None:
        self.order.append(i)
        self.state.choose(i)
        node = self.scored[i][1].node_id
        self.per_node[node] = self.per_node.get(node, 0) + 1

    def choose(self, sources: Sequence[Source]) -> list[_Scored]:
        self._cover(sources)
        self._fill()
        return [self.scored[i] for i in self.order]

    def _cover(self, sources: Sequence[Source]) -> None:
        """The best sentence of every LO that is cited, best LO first."""
        plan, state = self.plan, self.state
        for src in sorted((s for s in sources if s.role != "content"), key=lambda s: (-s.weight, s.order)):
            if len(self.order) >= plan.max_bullets:
                break
            best = next(
                (
                    i
                    for i, x in enumerate(self.scored)
                    if x[2] is src and not state.chosen[i] and state.redundancy[i] <= NEAR_DUPLICATE
                ),
                None,
            )
            if best is not None:
                self.take(best)

    def _fill(self) -> None:
        """Relevance minus redundancy, until max_bullets (near-duplicates never)."""
        plan, state, scored = self.plan, self.state, self.scored
        target = max(plan.min_bullets, 0)
        while len(self.order) < plan.max_bullets:
            eligible = ~self.rejected & np.array(
                [self.per_node.get(x[1].node_id, 0) < plan.per_node for x in scored], dtype=bool
            )
            best = state.best(eligible, tie_break=lambda i: (-scored[i][2].order, -scored[i][1].position))
            if best is None:
                break
            if state.redundancy[best] > NEAR_DUPLICATE:
                self.rejected[best] = True
                continue
            if len(self.order) >= target and state.values()[best] < 0.25:
                break
            self.take(best)

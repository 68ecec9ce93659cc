"""Deadlines on an injected clock, stage cost estimates, token counting."""

from __future__ import annotations

from evidence.coach.budget import Deadline, StageCosts, TokenCounter


class Clock:
    def __init__(self) -> None:
        self.t = 100.0

    def __call__(self) -> float:
        return self.t


def test_deadline() -> None:
    clock = Clock()
    d = Deadline(200, clock=clock)
    assert d.allows(200) and not d.allows(201)
    clock.t += 0.150
    assert round(d.elapsed_ms) == 150 and round(d.remaining_ms) == 50
    assert d.allows(49.9) and not d.allows(60)


def test_stage_costs_move_towards_what_was_observed() -> None:
    costs = StageCosts({"rerank": 250.0}, alpha=0.5)
    costs.observe("rerank", 50.0)
    assert costs.estimate("rerank") == 150.0
    costs.observe("new", 7.0)
    assert costs.estimate("new") == 7.0 and costs.estimate("unknown") == 0.0


def test_tokens_are_word_pieces() -> None:
    tokens = TokenCounter()
    assert tokens.count("") == 0
    assert tokens.count("The chain rule") == 3
    assert tokens.count('{"id":"LO-ALG-021"}') > 5
    assert TokenCounter(len).count("abc") == 3

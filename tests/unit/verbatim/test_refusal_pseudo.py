"""Per-index refusal calibration's measurement (`bench/refusal_pseudo.py`, not shipped): the
pseudo-questions a span answers by construction, and the schemes' floors relative to the global
one."""

from __future__ import annotations

from types import ModuleType
from typing import Any

import numpy as np
import pytest

from tests.benchkit import load_bench
from tests.unit.verbatim.verbatimkit import refusal_row


@pytest.fixture(scope="module")
def pseudo() -> ModuleType:
    return load_bench("refusal_pseudo.py", "refusal_pseudo")


SPAN = "The recommended starting dose of levorphanol in patients with severe renal impairment is 2 mg."


def test_pseudo_questions_are_built_from_the_span_alone(pseudo: ModuleType) -> None:
    qs = pseudo.pseudo_questions(SPAN)
    assert qs == pseudo.pseudo_questions(SPAN)  # deterministic
    assert set(qs) == {"kw", "mid", "sent"}
    # `kw` asks for the span's rarest words; `sent` is the span without the rarest one.
    assert "levorphanol" in qs["kw"] and qs["kw"].startswith("What about ")
    assert "levorphanol" not in qs["sent"] and "renal impairment" in qs["sent"]
    assert all(w.lower() in SPAN.lower() for w in qs["mid"].removeprefix("What about ").rstrip("?").split())
    assert pseudo.pseudo_questions("See table 2.") == {}


def test_ecdf_is_the_share_strictly_below(pseudo: ModuleType) -> None:
    ref = np.array([0.2, 0.4, 0.4, 0.8])
    assert list(pseudo.ecdf(ref, np.array([0.1, 0.4, 0.5, 0.9]))) == [0.0, 0.25, 0.75, 1.0]
    assert list(pseudo.ecdf(np.array([]), np.array([0.5]))) == [0.0]


def _row(
    family: str, k: int, profile: str, answerable: bool, *, variant: str | None = None
) -> dict[str, Any]:
    row = refusal_row(family, answerable, profile, cosine=0.2 + 0.05 * k, agreement=1.0 / (1 + k % 3))
    row["confidence"] = 0.9
    if variant:
        row["variant"] = variant
    return row


def test_quantile_floors_bracket_the_global_one(pseudo: ModuleType) -> None:
    rows = [
        _row(f"f{i}", k, pr, k % 4 != 0) for i in range(3) for k in range(8) for pr in ("verbatim", "default")
    ]
    pseudos = [
        _row(f"f{i}", k + i, pr, True, variant="kw")
        for i in range(3)
        for k in range(6)
        for pr in ("verbatim", "default")
    ]
    data = pseudo.Data(rows, pseudos, ["grounding", "cosine", "agreement"], 0.3)
    opt = pseudo.Options(0.1, 1.0, 0.5, 1.0, ("cosine",), False)
    got = pseudo.refusals(data, data.fam != "f0", opt)
    assert set(got) == set(pseudo.SCHEMES)
    # min never refuses a row the global floor keeps; max never keeps a row it refuses.
    assert not (got["quantile-min"] & ~got["global"]).any()
    assert not (got["global"] & ~got["quantile-max"]).any()
    report = pseudo.tally(data, got["global"], data.fam == "f0")
    assert report["verbatim"]["refused"].endswith("/2") and report["verbatim"]["false"].endswith("/6")

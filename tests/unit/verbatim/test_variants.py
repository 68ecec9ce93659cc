"""A question term no passage uses, read as present when the index holds it in another form
(`verbatim.grounding.index_variants`, docs/verbatim.md#refusal-abbreviations)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from evidence.records import Chunk
from evidence.search.scoped import bind_filters
from evidence.verbatim import grounding
from evidence.verbatim.cascade import question_groups
from evidence.verbatim.grounding import (
    DF_CAP,
    TermCounts,
    absent_rarity,
    concept_weights,
    index_df,
    number_spellings,
    read_evidence,
    variant_ways,
)
from tests.unit.rank.rankkit import INDEX, chunk, new_backend


@pytest.fixture(autouse=True)
def _read_variants(monkeypatch: pytest.MonkeyPatch) -> None:
    """`index_df` reads the variants only when the model reads `absent_rare` (`READ_VARIANTS`), and
    `read_evidence` reads `absent_rare` only then (`READ_RARE`)."""
    monkeypatch.setattr(grounding, "READ_VARIANTS", True)
    monkeypatch.setattr(grounding, "READ_RARE", True)


LICENCE = "This Program is made available under the Eclipse Public License, Version 2.0."
GPL = "Distributed under the GNU General Public License version 2 or any later version."


def _at(cid: str, text: str, doc: str) -> Chunk:
    return replace(chunk(cid, text, doc=doc), char_start=0, char_end=len(text))


def _variants(
    tmp_path: Path, passages: list[Chunk], question: str, filters: dict[str, Any] | None = None
) -> frozenset[str]:
    backend = new_backend(tmp_path / "s", passages)
    try:
        view = bind_filters(backend, filters)
        df = index_df(view, INDEX, [t for g in question_groups(question) for t in g], question)
        assert isinstance(df, TermCounts)
        return df.variants
    finally:
        backend.close()


def test_an_acronym_of_a_name_the_passages_spell_out_is_present(tmp_path: Path) -> None:
    found = _variants(tmp_path, [_at("a", LICENCE, "epl")], "What does the EPL say about patents?")
    assert found == {"epl"}


def test_an_acronym_whose_initials_no_name_spells_stays_absent(tmp_path: Path) -> None:
    # "PKCE" and the mixed-case "XPath": no capitalised run of the index has those initials.
    q = "Does the EPL allow PKCE or XPath?"
    assert _variants(tmp_path, [_at("a", LICENCE, "epl")], q) == {"epl"}


def test_a_name_with_its_version_glued_on_is_the_name_and_the_number(tmp_path: Path) -> None:
    passages = [_at("a", GPL, "gpl")]
    assert _variants(tmp_path, passages, "What happens if I breach GPLv2?") == {"gplv2"}
    # The name present, the version not: "GPLv7" stays absent.
    assert _variants(tmp_path / "b", passages, "What happens if I breach GPLv7?") == frozenset()
    # "v2" alone needs only the number; "EPL-2.0" is "EPL" and "2" and "0".
    assert "v2" in _variants(tmp_path / "c", passages, "Is v2 still supported?")


def test_a_number_written_otherwise_is_present() -> None:
    assert number_spellings("2") == ["2", "2.0", "2.0.0"]
    assert number_spellings("2.0") == ["2.0", "2", "2.0.0"]
    assert number_spellings("1.3") == ["1.3", "1.3.0", "1.3.0.0"]


def test_a_number_in_another_spelling_is_read_from_the_index(tmp_path: Path) -> None:
    passages = [_at("a", "Requires protocol 2.0 or later.", "p")]
    found = _variants(tmp_path, passages, "Does it require the protocol 2 handshake?")
    assert found == {"2"}  # the passages write "2.0" only
    assert _variants(
        tmp_path / "b", [_at("a", "Requires protocol 2 or later.", "p")], "Is 2.0 required?"
    ) == {"2.0"}


def test_an_expansion_counts_only_within_the_callers_filters(tmp_path: Path) -> None:
    # The table is index-wide, but the words of the name must be used by passages the view sees:
    # another tenant's documents never make a term present.
    passages = [_at("a", LICENCE, "epl"), _at("b", "Nothing of interest here.", "other")]
    assert _variants(tmp_path, passages, "What does the EPL say?", {"document_id": ["other"]}) == frozenset()


def test_variant_ways_read_the_question_as_written() -> None:
    table = {"epl": (("Eclipse", "Public", "License"),), "gpl": (("General", "Public", "License"),)}
    calls: list[int] = []

    def read() -> dict[str, Any]:
        calls.append(1)
        return table

    ways = variant_ways("Does EPL-2.0 or GPLv2 cover NSAIDs and epl?", ["epl", "gplv2", "nsaid", "0"], read)
    assert ways["epl"] == [[["Eclipse"], ["Public"], ["License"]]]
    assert [["GPL"], ["2", "2.0", "2.0.0"]] in ways["gplv2"]
    assert [["General"], ["Public"], ["License"], ["2", "2.0", "2.0.0"]] in ways["gplv2"]
    assert "nsaid" not in ways  # an acronym no name of the table spells
    assert ways["0"] == [[["0", "0.0", "0.0.0"]]]
    assert len(calls) == 1  # the table is read once, only when an acronym is asked
    calls.clear()
    assert variant_ways("what is xpath?", ["xpath"], read) == {} and not calls
    # A backend without a table: acronyms read nothing, versions still split.
    none = variant_ways("Is GPLv2 ok?", ["gplv2"], lambda: None)
    assert none == {"gplv2": [[["GPL"], ["2", "2.0", "2.0.0"]]]}


def test_absent_rare_reads_a_variant_as_present() -> None:
    q = "What does the EPL say about XPath?"
    groups = question_groups(q)
    weights = concept_weights(q, groups)
    used = {t: DF_CAP for g in groups for t in g} | {"epl": 0, "xpath": 0}
    evidence = ["The licence grants patent rights."]
    both = read_evidence(q, evidence, groups, df=TermCounts(used))
    assert both.absent_rare == pytest.approx(max(weights["epl"], weights["xpath"]) - 0.1)
    only_xpath = read_evidence(q, evidence, groups, df=TermCounts(used, {"epl"}))
    assert only_xpath.absent_rare == pytest.approx(weights["xpath"] - 0.1)
    none = absent_rarity(
        [("epl",), ("xpath",)], ["epl", "xpath"], weights, TermCounts(used, {"epl", "xpath"})
    )
    assert none == 0.0
    # A plain mapping (rows recorded before the variants) has none.
    assert read_evidence(q, evidence, groups, df=used).absent_rare == both.absent_rare


def test_variants_are_read_only_when_the_model_reads_absent_rare(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert grounding.READ_VARIANTS is True  # the fixture
    monkeypatch.setattr(grounding, "READ_VARIANTS", False)
    assert _variants(tmp_path, [_at("a", LICENCE, "epl")], "What does the EPL say?") == frozenset()

"""The initials of the names an index's passages spell out (search/initialisms.py)."""

from __future__ import annotations

from pathlib import Path

from evidence.search.initialisms import MAX_EXPANSIONS, build
from evidence.search.scoped import bind_filters
from tests.unit.rank.rankkit import INDEX, chunk, new_backend


def test_a_run_of_capitalised_words_gives_its_initials_and_its_words() -> None:
    t = build(["This Program is under the Eclipse Public License - v 2.0, see below."])
    assert t["epl"] == (("Eclipse", "Public", "License"),)
    assert t["pl"] == (("Public", "License"),)
    # A lower-case word that is no connector ("is", "v") ends the name.
    assert "tpepl" not in t and "pepl" not in t


def test_connectors_may_stand_between_with_their_letter_kept_or_dropped() -> None:
    t = build(["the Department of Defense and the GNU Affero General Public License"])
    assert t["dod"] == t["dd"] == (("Department", "Defense"),)
    assert t["agpl"] == (("Affero", "General", "Public", "License"),)
    assert t["gagpl"] == (("GNU", "Affero", "General", "Public", "License"),)
    # A name neither begins nor ends with a connector.
    assert "dof" not in t and "ddat" not in t


def test_hyphens_and_line_breaks_join_words_punctuation_does_not() -> None:
    t = build(["Non-Steroidal Anti-Inflammatory\nDrugs", "Transport Layer. Security"])
    assert t["nsaid"] == (("Non", "Steroidal", "Anti", "Inflammatory", "Drugs"),)
    assert "tl" in t and "tls" not in t and "ls" not in t


def test_expansions_are_capped_and_lower_case_text_gives_none() -> None:
    names = [f"{a}lpha {b}eta" for a, b in zip("ABCDEFG", "BBBBBBB", strict=True)]
    t = build([n.title() for n in names])
    assert len(t["ab"]) == 1 and len(t["bb"]) == 1 and "cb" in t
    many = build([f"Alpha{i} Beta{i}" for i in range(MAX_EXPANSIONS + 3)])
    assert len(many["ab"]) == MAX_EXPANSIONS
    assert build(["non-steroidal anti-inflammatory drugs"]) == {}


def test_the_store_reads_every_passage_once_per_generation_and_the_view_forwards_it(tmp_path: Path) -> None:
    backend = new_backend(tmp_path / "s", [chunk("a", "Licensed under the Mozilla Public License.")])
    try:
        table = backend.initialisms(INDEX)
        assert table["mpl"] == (("Mozilla", "Public", "License"),)
        assert backend.initialisms(INDEX) is table  # cached: the same generation
        from tests.unit.rank.rankkit import store

        store(backend, [chunk("b", "See the Free Software Foundation.")], INDEX)
        fresh = backend.initialisms(INDEX)
        assert "fsf" in fresh and "mpl" in fresh
        # A request's view forwards the index-wide table (its words are counted in the view).
        assert bind_filters(backend, {"chunk_id": ["a"]}).initialisms(INDEX) is fresh
        assert bind_filters(object(), None).initialisms(INDEX) is None  # type: ignore[arg-type]
    finally:
        backend.close()

"""`verbatim.scoring.grounding`: reading only the evidence words that share a question term's
first three letters gives what reading every word gives."""

from __future__ import annotations

import itertools
import random
import re
from collections import Counter
from collections.abc import Sequence
from typing import Any

from evidence.verbatim.scoring import SpanStats, _prefix_hit, grounding, spelling_variant, terms


def _reference(
    groups: Sequence[Sequence[str]], bag: Counter[str], weights: dict[str, float]
) -> tuple[float, list[str]]:
    """The rule as written before the prefix index: every evidence word against every term."""

    def extends(term: str) -> bool:
        return len(term) >= 4 and any(
            ((w.startswith(term) or (term.startswith(w) and len(term) - len(w) <= 2)) and len(w) >= 4)
            or spelling_variant(term, w)
            for w in bag
        )

    total = got = 0.0
    missing: list[str] = []
    for g in dict.fromkeys(tuple(x) for x in groups if x):
        w = max(weights.get(t, 1.0) for t in g)
        total += w
        if any(t in bag or extends(t) for t in g):
            got += w
        else:
            missing.append(g[0])
    return (got / total if total else 1.0), missing


def test_grounding_equals_reading_every_word() -> None:
    rng = random.Random(23)
    # Words crowded on a few prefixes, so extensions, truncations and one-letter variants (at the
    # fourth letter too, where a four-letter index would miss them) all occur.
    stems = ["lic", "org", "mut", "who", "ab", "x"]
    alphabet = "aeinrsz"

    def word() -> str:
        return rng.choice(stems) + "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 6)))

    checked = 0
    for _ in range(400):
        evidence = [" ".join(word() for _ in range(rng.randint(0, 12))) for _ in range(rng.randint(0, 3))]
        groups = [tuple(word() for _ in range(rng.randint(1, 2))) for _ in range(rng.randint(0, 5))]
        weights = {t: rng.choice([1.0, 2.5]) for g in groups for t in g}
        bag: Counter[str] = Counter(itertools.chain.from_iterable(terms(t) for t in evidence))
        assert grounding(groups, evidence, weights) == _reference(groups, bag, weights)
        checked += 1
    assert checked == 400


def test_grounding_finds_a_spelling_variant_at_the_fourth_letter_and_an_extension() -> None:
    """Variants and extensions sharing only the first three letters are still found."""
    evidence = ["lizens licenc mutagenic wholesale"]
    bag = Counter(terms(evidence[0]))
    assert set(bag) == {"lizen", "licenc", "mutagen", "wholesal"}  # the analyzer's stems
    for term in ("licanc", "licens", "mutag", "whole", "wholesale", "abcdef"):
        assert grounding([(term,)], evidence) == _reference([(term,)], bag, {})
    # "licanc": one letter apart at the fourth; "mutag": extended by "mutagen".
    assert grounding([("licanc",), ("mutag",)], evidence) == (1.0, [])
    assert grounding([("abcdef",)], evidence) == (0.0, ["abcdef"])


def test_an_identifier_carries_its_parts() -> None:
    """The question's concepts are read word by word ("ffi_call" → "ffi", "call") while the
    analyser keeps an identifier whole ("ffi_cal"): the identifier carries its parts."""
    assert terms("use the ffi_call function") == ("us", "ffi_cal", "function")
    assert grounding([("ffi",), ("call",)], ["use the ffi_call function"]) == (1.0, [])
    assert grounding([("ffi",), ("prep",)], ["use the ffi_call function"]) == (0.5, ["prep"])


def test_an_identifier_is_read_from_the_start_of_its_run_only() -> None:
    """A match starts only where a run of word characters starts, so a long run is scanned
    once (no retry from each of its characters), and the identifiers found are the same."""
    from evidence.verbatim.scoring import _IDENTIFIER, identifier_parts

    assert _IDENTIFIER.match("ffi_call", 1) is None  # not from inside the run
    assert _IDENTIFIER.match("größe_max", 2) is None
    text = "x ffi_call SQLITE_MAX_LENGTH _private_name my__var " + "a" * 50 + " end_"
    assert _IDENTIFIER.findall(text) == ["ffi_call", "SQLITE_MAX_LENGTH", "_private_name", "my__var", "end_"]
    # Runs without an underscore (a hash, a blob, in any script), 200,000 characters: a match
    # tried again from each of their characters would take minutes here (quadratic), one read
    # of each run takes milliseconds. No clock is read: a quadratic scan shows as a hung test.
    for run in ("a" * 200_000, "é" * 200_000, "9f" * 100_000):
        assert identifier_parts(f"{run} {run}_tail {run}") == [run, "tail"]


#: The identifier before `__` and other scripts were read: ASCII letters and digits joined by
#: single underscores.
_OLD_IDENTIFIER = re.compile(r"(?<![A-Za-z0-9])[A-Za-z0-9]+(?:_[A-Za-z0-9]+)+")


def test_identifiers_joined_by_one_underscore_keep_their_parts() -> None:
    """ASCII identifiers joined by single underscores split exactly as before."""
    from evidence.verbatim.scoring import identifier_parts

    texts = [
        "use ffi_call, ffi_prep_cif and SQLITE_MAX_LENGTH",
        "x_1_ a.b_c (_private_name) 2_3 ffi_type_uint8; v1_2_3-rc_4",
        "call ffi_prep_closure_loc(cl, &ffi_type_pointer, fn)",
    ]
    for text in texts:
        old = [p for ident in _OLD_IDENTIFIER.findall(text) for p in ident.split("_")]
        assert identifier_parts(text) == old


def test_identifiers_joined_by_double_underscores_or_in_other_scripts_carry_their_parts() -> None:
    """`FFI_DEFAULT__ABI`, `__init__`, `foo__bar` and `größe_max` are each one term to the
    analyser; the question's concepts are read word by word, so each carries its parts."""
    from evidence.verbatim.scoring import identifier_parts

    assert terms("FFI_DEFAULT__ABI") == ("ffi_default__abi",)
    assert identifier_parts("set FFI_DEFAULT__ABI or foo__bar in __init__") == [
        "FFI",
        "DEFAULT",
        "ABI",
        "foo",
        "bar",
        "init",
    ]
    assert identifier_parts("größe_max und naïve_bayes") == ["größe", "max", "naïve", "bayes"]
    assert grounding([("default",), ("abi",)], ["Pass FFI_DEFAULT__ABI here."]) == (1.0, [])
    assert grounding([("init",)], ["def __init__(self): ..."]) == (1.0, [])
    assert grounding([("bar",)], ["foo__bar()"]) == (1.0, [])
    assert grounding([terms("größe"), ("max",)], ["größe_max = 10"]) == (1.0, [])
    assert grounding([terms("naïve"), ("bay",)], ["naïve_bayes(x)"]) == (1.0, [])


def _coverage_per_span(stats: SpanStats, i: int, query: list[Any]) -> float:
    """`SpanStats.coverage` as it was before its per-query plan (everything per span)."""
    groups = [(g,) if isinstance(g, str) else tuple(g) for g in query]
    groups = [g for g in dict.fromkeys(groups) if g]
    if not groups:
        return 0.0
    weights = stats.weights([t for g in groups for t in g])
    bag = stats.bags[i]
    total = got = 0.0
    for g in groups:
        present = [weights[t] for t in g if t in stats.df]
        w = max(present) if present else weights[g[0]]
        total += w
        if any(t in bag or _prefix_hit(t, bag) for t in g):
            got += w
    return got / total if total else 0.0


def test_coverage_plan_is_the_per_span_computation() -> None:
    texts = [
        "Mutagenic effects were not observed in the carcinogenicity studies.",
        "The maximum length of a string is one billion bytes.",
        "Mutagens and carcinogens are listed in section 11.",
        "Store at room temperature; protect from light.",
        "",
    ]
    stats = SpanStats(texts).with_headings(["Toxicology", "Limits", "", "Storage", "Limits"])
    queries: list[list[Any]] = [
        ["mutagen", "carcinogen"],
        [("mutag", "genotox"), "studi", "length"],
        ["maximum", ["maxim", "limit"], "maximum", "string"],
        ["temperatur", "light", "absent"],
        [],
        [()],
    ]
    for q in queries:
        for i in range(stats.n):
            assert stats.coverage(i, q) == _coverage_per_span(stats, i, q)
        assert stats.coverage(0, q) == _coverage_per_span(stats, 0, q)  # the plan reused
        assert stats.coverages(q) == [_coverage_per_span(stats, i, q) for i in range(stats.n)]


def test_with_headings_bags_are_the_sums() -> None:
    base = SpanStats(["alpha beta beta", "gamma", ""])
    headed = base.with_headings(["beta delta", "", "alpha"])
    for bag, h, got in zip(base.bags, ["beta delta", "", "alpha"], headed.bags, strict=True):
        want = bag + Counter(terms(h))
        assert got == want and list(got) == list(want)


def test_remembered_bags_are_the_texts_analysis_and_never_changed() -> None:
    # `SpanStats` reads each text's bag and each (text, heading) bag from per-process caches
    # (`_counted`, `_headed`): the same bags, lengths and document frequencies (in the same key
    # order) as analysing every text anew, and the shared bags stay as they were whatever is
    # asked of the statistics.
    texts = ["alpha beta beta", "gamma", "", "Mutagenic effects of beta", "alpha beta beta"]
    heads = ["beta delta", "", "alpha", "Toxicology", "Limits"]
    for _ in range(2):  # the second time from the caches
        stats = SpanStats(texts)
        bags = [Counter(terms(t)) for t in texts]
        assert stats.bags == bags and [list(b) for b in stats.bags] == [list(b) for b in bags]
        assert stats.lengths == [sum(b.values()) for b in bags]
        df: Counter[str] = Counter()
        for b in bags:
            df.update(b.keys())
        assert stats.df == df and list(stats.df) == list(df)
        headed = stats.with_headings(heads)
        given = SpanStats(list(texts), bags=[Counter(b) for b in bags]).with_headings(heads)  # not remembered
        assert headed.texts == given.texts and headed.lengths == given.lengths
        assert headed.bags == given.bags and [list(b) for b in headed.bags] == [list(b) for b in given.bags]
        assert headed.df == given.df and list(headed.df) == list(given.df)
        assert headed.avg_length == given.avg_length
        for q in (["beta", "alpha"], ["mutagen", "toxic", "gamma"], ["absent"]):
            assert headed.coverages(q) == given.coverages(q)
            assert [headed.bm25(i, q) for i in range(headed.n)] == [given.bm25(i, q) for i in range(given.n)]
        assert headed.coverages([("mutagen", "toxic"), "gamma"]) == given.coverages(
            [("mutagen", "toxic"), "gamma"]
        )
    assert SpanStats(texts).bags == [Counter(terms(t)) for t in texts]  # unchanged by the reads


def test_prefix_df_is_the_scan_over_every_word() -> None:
    stats = SpanStats(["mutagenic mutagens carcinogenicity", "maximal length", "limits"])
    for term in [
        "mutag",
        "mutagen",
        "mutagenicity",
        "carcinogen",
        "maxim",
        "maximum",
        "limit",
        "len",
        "zzzzzz",
    ]:
        scan = len(term) >= 5 and any(
            w.startswith(term[:5]) and (w.startswith(term) or term.startswith(w)) for w in stats.df
        )
        assert stats._prefix_df(term) == scan

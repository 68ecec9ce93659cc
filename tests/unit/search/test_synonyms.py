"""English synonyms from WordNet 3.0 (search/synonyms.py, bench/synonyms_build.py)."""

from __future__ import annotations

import gzip
import subprocess
import sys
from pathlib import Path

from bench import synonyms_build
from evidence.search.synonyms import DATA_FILE, WordNet, synonyms


def test_a_word_reads_its_synsets_in_every_part_of_speech() -> None:
    assert "use" in synonyms("employ")
    assert "violate" in synonyms("breach")
    assert "break" in synonyms("breach")  # noun and verb synsets both


def test_an_inflected_word_reads_the_synonyms_of_its_base_forms() -> None:
    assert {"permit", "allow"} <= synonyms("permitted")  # verb.exc: permitted -> permit
    assert "violate" in synonyms("breaches")  # the rule s -> ""
    assert synonyms("Permitted") == synonyms("permitted")


def test_the_word_itself_and_unknown_words() -> None:
    assert "employ" not in synonyms("employ")
    assert synonyms("qwzxv") == frozenset()


WORDNET = (
    "S\tv\tlet permit allow\n"
    "S\tn\tbox\n"
    "S\tv\tbox spar\n"
    "S\ta\tdeep\n"
    "S\ta\tthick fat\n"
    "X\tv\tleft\tleave\n"
    "S\tv\tleave go\n"
    "S\tn\tfell hide\n"
)


def test_base_forms_follow_the_part_of_speech_the_rule_belongs_to(tmp_path: Path) -> None:
    path = tmp_path / "wn.tsv.gz"
    path.write_bytes(gzip.compress(WORDNET.encode()))
    wn = WordNet.load(path)
    assert wn.synonyms("boxes") == {"box", "spar"}  # noun rule xes -> x finds "box"
    assert wn.synonyms("left") == {"leave", "go"}  # the exception list, not a rule
    assert wn.synonyms("thickest") == {"thick", "fat"}  # adjective rule est -> ""
    assert wn.synonyms("deeper") == frozenset()  # a lemma alone in its synset has no synonym
    assert wn.synonyms("boxing") == {"box", "spar"}  # verb rule ing -> ""
    assert wn.synonyms("lets") == {"let", "permit", "allow"}  # the base form is a synonym too
    # "er" -> "" is an adjective rule: "fell" is held as a noun only, so it is no base of "feller"
    assert wn.synonyms("feller") == frozenset()
    assert wn.synonyms("fell") == {"hide"}


def test_the_data_loads_on_first_use_not_at_import() -> None:
    code = (
        "import evidence.search.synonyms as s\n"
        "assert s._wordnet.cache_info().currsize == 0\n"
        "s.synonyms('employ')\n"
        "assert s._wordnet.cache_info().currsize == 1\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, cwd=Path(__file__).parents[3] / "shared")


def test_the_build_reads_wordnet_files_as_shipped(tmp_path: Path) -> None:
    wordnet = tmp_path / "wn"
    wordnet.mkdir()
    header = "  1 This software and database is being provided to you\n"
    (wordnet / "data.noun").write_text(
        header + "00001740 03 n 02 box 0 boxful 0 000 | a container\n"
        "00001741 03 n 02 Box_Hill 0 Surrey 0 000 | a hill\n"
    )
    (wordnet / "data.verb").write_text(header + "00001742 35 v 02 box 0 spar 0 000 | fight\n")
    (wordnet / "data.adj").write_text(header + "00001743 00 s 02 outback(a) 0 remote 0 000 | far\n")
    (wordnet / "data.adv").write_text(header)
    (wordnet / "noun.exc").write_text("oxen ox\n")
    (wordnet / "verb.exc").write_text("boxt box\nlay-by lay_by\n")
    (wordnet / "adj.exc").write_text("")
    (wordnet / "adv.exc").write_text("")
    out = tmp_path / "out.tsv.gz"
    assert synonyms_build.main([str(wordnet), "--out", str(out)]) == 0
    assert gzip.decompress(out.read_bytes()).decode().splitlines() == [
        "S\tn\tbox boxful",  # "Box_Hill" (several words) and "Surrey" (a name) dropped
        "S\tv\tbox spar",
        "S\ta\toutback remote",  # the position marker stripped
        "X\tn\toxen\tox",
        "X\tv\tboxt\tbox",
    ]
    first = out.read_bytes()
    synonyms_build.main([str(wordnet), "--out", str(out)])
    assert out.read_bytes() == first  # gzip mtime 0: the same bytes every build


def test_the_shipped_data_is_small() -> None:
    assert DATA_FILE.stat().st_size < 3_000_000
    assert (DATA_FILE.parent / "WORDNET_LICENSE").read_text().startswith("WordNet Release 3.0")

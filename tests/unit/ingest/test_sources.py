from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from evidence.errors import DocumentParseError, RequestValidationError
from evidence.ids import normalize_and_hash
from evidence.ingest import SourceFailure, SourceItem, enrich_metadata, iter_sources, type_note


def write_jsonl(path: Path, lines: list[object | str]) -> None:
    body = "\n".join(x if isinstance(x, str) else json.dumps(x) for x in lines) + "\n"
    if path.name.endswith(".gz"):
        with gzip.open(path, "wt", encoding="utf-8") as fh:
            fh.write(body)
    else:
        path.write_text(body, encoding="utf-8")


def items(out: list[SourceItem | SourceFailure]) -> list[SourceItem]:
    return [x for x in out if isinstance(x, SourceItem)]


def failures(out: list[SourceItem | SourceFailure]) -> list[SourceFailure]:
    return [x for x in out if isinstance(x, SourceFailure)]


def test_folder_walk_is_sorted_recursive_and_skips_hidden(tmp_path: Path) -> None:
    root = tmp_path / "docs"
    (root / "b_sub" / "deep").mkdir(parents=True)
    (root / ".git").mkdir()
    (root / "z.txt").write_text("Zed.")
    (root / "a.md").write_text("# A\n\nAy.")
    (root / "b_sub" / "deep" / "c.html").write_text("<p>See.</p>")
    (root / ".hidden.txt").write_text("secret")
    (root / ".git" / "config.txt").write_text("secret")
    out = list(iter_sources([root], doc_type="tc_files", metadata={"vendor": "acme"}))
    assert not failures(out)
    got = items(out)
    files = [root / "a.md", root / "b_sub" / "deep" / "c.html", root / "z.txt"]
    assert [i.document_id for i in got] == [f.resolve().as_posix() for f in files]
    # sources identify the document: the path (tmp_path is not below the working directory)
    assert [i.source for i in got] == [f.resolve().as_posix() for f in files]
    for item in got:
        assert item.metadata == {"type": "tc_files", "vendor": "acme"}
        assert item.data is not None
        assert not item.as_record
    assert got[1].parse().text == "See."


def test_file_given_directly_uses_its_name(tmp_path: Path) -> None:
    f = tmp_path / "sub" / "policy.txt"
    f.parent.mkdir()
    f.write_text("Policy text.")
    (item,) = list(iter_sources([f]))
    assert isinstance(item, SourceItem)
    assert item.document_id == f.resolve().as_posix()
    assert item.parse().text == "Policy text."


def test_missing_path_and_unsupported_file_fail_alone(tmp_path: Path) -> None:
    (tmp_path / "ok.txt").write_text("Fine.")
    (tmp_path / "pic.png").write_bytes(b"\x89PNG....")
    (tmp_path / "bad.pdf").write_bytes(b"%PDF-1.4 nonsense")
    out = list(iter_sources([tmp_path / "nope", tmp_path]))
    fails = failures(out)
    assert fails[0].source.endswith("nope")
    assert "no such file" in fails[0].reason
    assert any(f.source.endswith("pic.png") and "unsupported" in f.reason for f in fails)
    ok = items(out)
    assert [Path(i.document_id).name for i in ok] == ["bad.pdf", "ok.txt"]
    # the corrupt PDF fails when parsed, naming the file; the other file still parses
    with pytest.raises(DocumentParseError, match=r"^bad\.pdf: "):
        ok[0].parse()
    assert ok[1].parse().text == "Fine."


def test_beir_corpus_jsonl_gz(tmp_path: Path) -> None:
    corpus = tmp_path / "corpus.jsonl.gz"
    write_jsonl(
        corpus,
        [
            {"_id": "4983", "title": "Microstructure", "text": "Alterations occur. They matter."},
            {"_id": 5836, "title": "", "text": "Second doc."},
        ],
    )
    out = list(iter_sources([corpus], doc_type=None, metadata={}))
    got = items(out)
    assert [i.document_id for i in got] == ["4983", "5836"]
    first = got[0]
    assert first.as_record
    assert first.parsed is not None
    assert first.parsed.text == "Alterations occur. They matter."  # title is not part of the text
    assert first.parsed.title == "Microstructure"
    assert first.source == f"{corpus.resolve().as_posix()}#4983"
    assert first.metadata == {}


def test_record_jsonl_with_bad_lines_keeps_the_rest(tmp_path: Path) -> None:
    records = tmp_path / "answers.jsonl"
    write_jsonl(
        records,
        [
            {
                "id": "fu-1",
                "text": "We rotate keys yearly.",
                "metadata": {
                    "type": "followup_response:2",
                    "criterion_question": "Do you rotate keys?",
                    "FILENAME": "followups.xlsx",
                },
            },
            "{not json",
            {"text": "No id here.", "metadata": {"round_number": "3"}},
            {"id": "x", "metadata": {}},
            ["a", "list"],
            "",
            {"id": "bad-round", "text": "t", "metadata": {"round_number": "two"}},
            {"id": "last", "text": "Still read."},
        ],
    )
    out = list(iter_sources([records], doc_type=None, metadata={}))
    fails = failures(out)
    assert [f.source for f in fails] == [f"{records}:2", f"{records}:4", f"{records}:5", f"{records}:7"]
    assert "invalid JSON" in fails[0].reason
    assert "'text'" in fails[1].reason
    assert "JSON object" in fails[2].reason
    assert "round_number" in fails[3].reason
    got = items(out)
    assert [i.document_id for i in got] == ["fu-1", f"{records.resolve().as_posix()}#3", "last"]
    fu = got[0]
    assert fu.source == "followups.xlsx"
    assert fu.metadata["criterion_question_hash"] == normalize_and_hash("do you rotate keys")
    assert fu.metadata["round_number"] == 2
    assert got[1].source == f"{records.resolve().as_posix()}#3"
    assert got[2].source == f"{records.resolve().as_posix()}#last"
    assert got[1].metadata == {"round_number": 3}
    assert all(i.as_record for i in got)


def test_cli_type_and_meta_override_record_metadata(tmp_path: Path) -> None:
    records = tmp_path / "r.jsonl"
    write_jsonl(records, [{"id": "1", "text": "T.", "metadata": {"type": "tc_files", "owner": "a"}}])
    (item,) = list(iter_sources([records], doc_type="followup_document", metadata={"owner": "b", "k": "v"}))
    assert isinstance(item, SourceItem)
    assert item.metadata == {"type": "followup_document", "owner": "b", "k": "v"}


def test_iteration_is_lazy(tmp_path: Path) -> None:
    records = tmp_path / "big.jsonl"
    write_jsonl(records, [{"id": str(i), "text": f"Doc {i}."} for i in range(1000)])
    gen = iter_sources([records])
    first = next(gen)
    assert isinstance(first, SourceItem)
    assert first.document_id == "0"
    # a generator over an open file, not a list: the rest is read only on demand
    assert next(gen).document_id == "1"  # type: ignore[union-attr]


def test_truncated_gzip_reports_failure_after_good_lines(tmp_path: Path) -> None:
    corpus = tmp_path / "corpus.jsonl.gz"
    write_jsonl(corpus, [{"_id": str(i), "title": "t", "text": "x " * 200} for i in range(50)])
    data = corpus.read_bytes()
    corpus.write_bytes(data[: len(data) // 2])
    out = list(iter_sources([corpus]))
    assert items(out)
    assert isinstance(out[-1], SourceFailure)
    assert "corpus.jsonl.gz" in out[-1].source


# --- metadata --------------------------------------------------------------------------------


def test_enrich_metadata_hash_round_and_types() -> None:
    meta = enrich_metadata({"criterion_question": "  Do you ENCRYPT data-at-rest? ", "round_number": "2"})
    assert meta["criterion_question_hash"] == normalize_and_hash("do you encrypt data at rest")
    assert meta["round_number"] == 2
    assert enrich_metadata({"type": "followup_response:3"})["round_number"] == 3
    assert enrich_metadata({"round_number": 4.0})["round_number"] == 4
    assert enrich_metadata({"a": None, "tags": ["x", 1]}) == {"tags": ["x", "1"]}


@pytest.mark.parametrize(
    ("meta", "field"),
    [
        ({"round_number": "two"}, "metadata.round_number"),
        ({"round_number": True}, "metadata.round_number"),
        ({"type": "followup_response:abc"}, "metadata.type"),
        ({"type": "followup_response:2", "round_number": 3}, "metadata.round_number"),
        ({"type": "soc2_summary:"}, "metadata.type"),
        ({"type": ""}, "metadata.type"),
        ({"criterion_question": 5}, "metadata.criterion_question"),
        ({"nested": {"a": 1}}, "metadata.nested"),
    ],
)
def test_enrich_metadata_rejects(meta: dict[str, object], field: str) -> None:
    with pytest.raises(RequestValidationError) as info:
        enrich_metadata(meta)
    assert info.value.field == field


def test_type_taxonomy_notes() -> None:
    for known in ("tc_files", "followup_response:1", "soc2_summary:overview", "followup_document"):
        assert type_note(known) is None
    note = type_note("marketing")
    assert note is not None
    assert "marketing" in note


def test_beir_folder_indexes_only_the_corpus(tmp_path: Path) -> None:
    ds = tmp_path / "scifact"
    (ds / "qrels").mkdir(parents=True)
    write_jsonl(ds / "corpus.jsonl.gz", [{"_id": "1", "title": "T", "text": "Doc one."}])
    write_jsonl(ds / "queries.jsonl", [{"_id": "q1", "text": "a question", "metadata": {}}])
    (ds / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\nq1\t1\t1\n")
    (tmp_path / "notes.txt").write_text("Unrelated notes.")
    out = list(iter_sources([tmp_path]))
    got = [i.document_id for i in items(out)]
    assert got == [(tmp_path / "notes.txt").resolve().as_posix(), "1"]  # path order: notes < scifact/
    skipped = sorted(Path(f.source).name for f in failures(out))
    assert skipped == ["queries.jsonl", "test.tsv"]
    assert all("BEIR" in f.reason for f in failures(out))


@pytest.mark.parametrize(("raw", "expected"), [(2, 2), (2.0, 2), ("2", 2), ("2.0", 2), (" 3 ", 3)])
def test_round_numbers_accept_integral_values(raw: object, expected: int) -> None:
    assert enrich_metadata({"round_number": raw})["round_number"] == expected


@pytest.mark.parametrize("raw", [2.5, "2.5", "two", "", True, "nan"])
def test_round_numbers_refuse_anything_else_naming_the_field(raw: object) -> None:
    with pytest.raises(RequestValidationError) as info:
        enrich_metadata({"type": "followup_response:2", "round_number": raw})
    assert info.value.field == "metadata.round_number" and "integer" in info.value.message


def test_a_criterion_question_without_words_is_refused() -> None:
    with pytest.raises(RequestValidationError) as info:
        enrich_metadata({"criterion_question": "???"})
    assert info.value.field == "metadata.criterion_question"


# --- identity: collision-proof and stable ------------------------------------------------------


def test_same_named_files_in_different_folders_are_different_documents(tmp_path: Path) -> None:
    kinesis, ecr = tmp_path / "cdk" / "aws-kinesis", tmp_path / "cdk" / "aws-ecr"
    for folder, text in ((kinesis, "Kinesis streams."), (ecr, "ECR repositories.")):
        folder.mkdir(parents=True)
        (folder / "README.md").write_text(text)
    got = items(list(iter_sources([kinesis, ecr])))
    assert len({i.document_id for i in got}) == 2
    assert len({i.source for i in got}) == 2  # and an LLM can tell them apart


def test_the_same_file_through_another_argument_is_the_same_document(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    corpus = tmp_path / "corpus"
    (corpus / "cdk" / "aws-kinesis").mkdir(parents=True)
    (corpus / "cdk" / "aws-kinesis" / "README.md").write_text("Kinesis streams.")
    (corpus / "top.md").write_text("Top.")
    (tmp_path / "link").symlink_to(corpus / "cdk", target_is_directory=True)
    monkeypatch.chdir(tmp_path)
    whole = {i.source: i.document_id for i in items(list(iter_sources([Path("corpus")])))}
    part = items(list(iter_sources([Path("corpus/cdk")])))
    dotted = items(list(iter_sources([Path("./corpus/../corpus/cdk/aws-kinesis/README.md")])))
    linked = items(list(iter_sources([Path("link")])))
    readme = whole["corpus/cdk/aws-kinesis/README.md"]  # shown relative to the working directory
    assert [i.document_id for i in part] == [readme]
    assert [i.document_id for i in dotted] == [readme]
    assert [i.document_id for i in linked] == [readme]


def test_symlinks_leaving_the_folder_are_refused_unless_allowed(tmp_path: Path) -> None:
    """Issue 26: a link in an indexed folder to a file outside it (e.g. /etc/passwd) is not read."""
    import os

    outside = tmp_path / "secret.txt"
    outside.write_text("root:x:0:0")
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "a.md").write_text("# A\n\nInside.")
    (folder / "inner.md").symlink_to(folder / "a.md")
    (folder / "passwd.txt").symlink_to(outside)
    (folder / "gone.txt").symlink_to(tmp_path / "never-there.txt")
    (folder / "sub").symlink_to(tmp_path, target_is_directory=True)
    os.mkfifo(folder / "pipe.txt")
    out = list(iter_sources([folder]))
    # The inner link is read too (as the file it points to: the same document id).
    assert sorted(Path(i.source).name for i in items(out)) == ["a.md", "a.md"]
    reasons = {Path(f.source).name: f.reason for f in failures(out)}
    assert reasons["passwd.txt"].startswith(f"skipped: symlink to {outside}, outside {folder}")
    assert "--follow-symlinks" in reasons["passwd.txt"]
    assert reasons["gone.txt"].startswith("skipped: dangling symlink")
    assert reasons["sub"].startswith("skipped: symlink to a folder")
    assert reasons["pipe.txt"] == "skipped: a FIFO, not a regular file"
    allowed = list(iter_sources([folder], follow_symlinks=True))
    assert "secret.txt" in {Path(i.source).name for i in items(allowed)}
    assert "passwd.txt" not in {Path(f.source).name for f in failures(allowed)}


def test_a_fifo_given_as_an_argument_is_named(tmp_path: Path) -> None:
    import os

    os.mkfifo(tmp_path / "pipe")
    assert [f.reason for f in failures(list(iter_sources([tmp_path / "pipe"])))] == [
        "a FIFO, not a regular file or folder"
    ]

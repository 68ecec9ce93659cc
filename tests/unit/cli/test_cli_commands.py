"""The command registry, `--version`, and one-line errors for bad settings (exit 2)."""

from __future__ import annotations

import subprocess
import sys
from importlib.metadata import version
from pathlib import Path

import pytest

from evidence.cli import COMMANDS, build_parser, main

#: Every subcommand of docs/contracts.md#cli.
CONTRACT = {
    "index",
    "query",
    "list",
    "delete",
    "eval",
    "demo",
    "serve",
    "invoke",
    "assess",
    "plan",
    "coach",
    "migrate",
}


def test_every_contract_command_is_registered_once() -> None:
    names = [c.name for c in COMMANDS]
    assert sorted(names) == sorted(CONTRACT)
    help_text = build_parser().format_help()
    assert all(name in help_text for name in names)


def test_every_command_takes_store(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`--store DIR` on every subcommand, `migrate` included (its source store; `--from-store`,
    the older spelling, still parses)."""
    parser = build_parser()
    for command in COMMANDS:
        with pytest.raises(SystemExit):
            parser.parse_args([command.name, "--help"])
        assert "--store DIR" in capsys.readouterr().out, command.name
    assert parser.parse_args(["list", "--store", str(tmp_path)]).store == tmp_path
    args = parser.parse_args(["migrate", "--store", str(tmp_path), "--index", "i"])
    assert (args.store, args.from_store) == (tmp_path, None)
    assert parser.parse_args(["migrate", "--from-store", "x", "--index", "i"]).from_store == Path("x")


def test_migrate_reads_the_store_it_is_given(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """`migrate` on a temp store: `--store`, `--from-store` and `EVIDENCE_STORE_DIR` each name
    the store it reads (an index it lacks is a usage error naming that store, before any
    OpenSearch is reached), and two different stores are refused."""
    from evidence.search.embedded import EmbeddedBackend

    store = tmp_path / "store"
    EmbeddedBackend(store).close()
    endpoint = ["--endpoint", "http://127.0.0.1:9"]  # never contacted: every run stops before it
    monkeypatch.delenv("EVIDENCE_STORE_DIR", raising=False)
    for named in (
        ["--store", str(store)],
        ["--from-store", str(store)],
        ["--store", str(store), "--from-store", str(store)],
    ):
        assert main(["migrate", *named, "--index", "nope", *endpoint]) == 2
        assert capsys.readouterr().err.strip() == f"evidence migrate: error: no index 'nope' in store {store}"
    monkeypatch.setenv("EVIDENCE_STORE_DIR", str(store))
    assert main(["migrate", "--index", "nope", *endpoint]) == 2
    assert f"in store {store}" in capsys.readouterr().err
    assert (
        main(["migrate", "--store", str(store), "--from-store", str(tmp_path), "--index", "i", *endpoint])
        == 2
    )
    assert "name two stores" in capsys.readouterr().err


def test_migrate_opens_the_store_under_the_settings_header_rule(tmp_path: Path) -> None:
    """The store `migrate` reads is opened as `index` and `serve` open it (the section header rule,
    docs/ingest.md#section-headers): a BM25 document rebuilt while it is read gets the header a
    fresh index under that rule gives, as the OpenSearch copy does. It was opened without one."""
    from evidence.cli.migrate import embedded_source
    from evidence.config import BackendKind, Settings
    from evidence.search.headers import OFF, SectionHeaders

    store = tmp_path / "store"
    for rule in ({}, {"section_header": "path", "section_header_legs": "lexical"}):
        settings = Settings(backend=BackendKind.OPENSEARCH, opensearch_endpoint="http://127.0.0.1:9", **rule)  # type: ignore[arg-type]
        source = embedded_source(settings, store)
        try:
            assert source.store_dir == store
            assert source.headers == SectionHeaders.from_settings(settings)
            assert (source.headers == OFF) is (not rule)
        finally:
            source.close()


def test_eval_refuses_dataset_options_with_qa(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`--mode`, `--limit` and `--spans` are `--dataset` options (docs/contracts.md#cli): with
    `--qa` they are refused (exit 2) before any store is opened, not ignored."""
    qa = tmp_path / "qa.jsonl"
    qa.write_text('{"question": "q", "answers": []}\n', encoding="utf-8")
    store = tmp_path / "s"
    for extra in (["--limit", "3"], ["--spans"], ["--mode", "bm25"]):
        assert main(["eval", "--qa", str(qa), "--index", "i", "--store", str(store), *extra]) == 2
        assert f"{extra[0]}: --dataset options" in capsys.readouterr().err
    assert not store.exists()
    assert build_parser().parse_args(["eval", "--dataset", "d"]).mode is None  # hybrid, when run


def test_a_setting_that_cannot_work_exits_2(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A `ConfigurationError` found when a part is built (an OpenSearch backend without its
    endpoint) is bad input, exit 2, as a misspelt variable is (docs/contracts.md#cli-conventions);
    it was exit 1, a failure."""
    monkeypatch.setenv("EVIDENCE_BACKEND", "opensearch")
    monkeypatch.delenv("EVIDENCE_OPENSEARCH_ENDPOINT", raising=False)
    assert main(["list", "--store", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("evidence list: error: ") and "EVIDENCE_OPENSEARCH_ENDPOINT" in err


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["--version"])
    assert exit_.value.code == 0
    assert capsys.readouterr().out.strip() == f"evidence {version('evidence')}"


def test_python_dash_m_runs_the_same_cli() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "evidence.cli", "--version"], capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == f"evidence {version('evidence')}"


@pytest.mark.parametrize(
    ("variable", "value", "expected"),
    [
        ("EVIDENCE_RERANKER", "cohre", "EVIDENCE_RERANKER='cohre': should be 'none', 'cohere' or 'bedrock'"),
        ("EVIDENCE_PASSAGE_TOKENS", "8", "EVIDENCE_PASSAGE_TOKENS='8': should be greater than or equal"),
        ("EVIDENCE_RERANKR", "cohere", "EVIDENCE_RERANKR is not a setting (did you mean EVIDENCE_RERANKER?)"),
    ],
)
def test_a_bad_setting_is_one_error_line_and_exit_2(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    *,
    variable: str,
    value: str,
    expected: str,
) -> None:
    monkeypatch.setenv(variable, value)
    assert main(["list", "--store", str(tmp_path)]) == 2
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("evidence list: error: "), captured.err
    assert expected in lines[0]
    assert captured.out == ""


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["query", "x", "--index", "i", "--top-k", "0"], "evidence query: error: top_k: Input should be"),
        (["plan", ""], "evidence plan: error: query: String should have at least 1 character"),
    ],
)
def test_a_refused_request_field_is_one_error_line_and_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], *, argv: list[str], expected: str
) -> None:
    assert main([*argv, "--store", str(tmp_path)]) == 2
    captured = capsys.readouterr()
    assert captured.err.strip().splitlines() == [captured.err.strip()], captured.err
    assert captured.err.startswith(expected), captured.err
    assert captured.out == ""


def test_a_bad_setting_in_a_fresh_process_prints_no_traceback(tmp_path: Path) -> None:
    env = {"PATH": "/usr/bin:/bin", "EVIDENCE_BACKEND": "elastic", "HOME": str(tmp_path)}
    out = subprocess.run(
        [sys.executable, "-m", "evidence.cli", "query", "x", "--index", "t", "--store", str(tmp_path)],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    assert out.returncode == 2
    assert out.stderr.strip() == (
        "evidence query: error: EVIDENCE_BACKEND='elastic': should be 'embedded' or 'opensearch'"
    )


def test_the_demo_stops_at_the_first_sample_that_did_not_index(capsys: pytest.CaptureFixture[str]) -> None:
    from evidence.cli.demo import _stopped_by

    assert not _stopped_by([])
    assert _stopped_by([("a.pdf", "encrypted"), ("b.pdf", "empty")])
    assert capsys.readouterr().out == "error: a.pdf: encrypted\n"


def _demo_documents(store: Path, index: str, capsys: pytest.CaptureFixture[str]) -> list[str]:
    import json

    from evidence.cli import main

    capsys.readouterr()
    assert main(["list", "--index", index, "--store", str(store), "--json"]) == 0
    return sorted(d["document_id"] for d in json.loads(capsys.readouterr().out)["documents"])


def test_the_demo_indexes_its_own_indexes_again_under_another_header_rule(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """`evidence demo` under other indexing settings than its store's indexes record: it deletes
    its own indexes and indexes them again, saying so on stderr (exit 0, not the store's refusal);
    an index holding a document the demo did not write is kept, and the demo exits 2."""
    from evidence.cli import main
    from evidence.demo import INDEX

    store = tmp_path / "store"
    assert main(["demo", "--store", str(store)]) == 0
    before = _demo_documents(store, INDEX, capsys)
    monkeypatch.setenv("EVIDENCE_SECTION_HEADER", "heading")
    assert main(["demo", "--store", str(store)]) == 0
    err = capsys.readouterr().err
    for index in (INDEX, "label", "tutor"):
        assert f"index {index!r} was written with section_header='off', but this run has " in err
    assert err.count("deleting the demo's index and indexing its samples again") == 3
    assert _demo_documents(store, INDEX, capsys) == before
    assert main(["demo", "--store", str(store)]) == 0  # now recorded under the header rule: reused
    assert "deleting" not in capsys.readouterr().err
    # A document of the user's in the demo's index: never deleted by the demo.
    mine = tmp_path / "mine.md"
    mine.write_text("# Mine\n\nA document of the user's own.\n")
    assert main(["index", str(mine), "--index", INDEX, "--store", str(store)]) == 0
    monkeypatch.delenv("EVIDENCE_SECTION_HEADER")
    capsys.readouterr()
    assert main(["demo", "--store", str(store)]) == 2
    err = capsys.readouterr().err
    assert f"holds documents the demo did not write ({mine}): keeping it" in err
    assert str(mine) in _demo_documents(store, INDEX, capsys)


def test_eval_runs_with_one_blas_thread_as_serve_does(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`evidence eval` limits BLAS to one thread (`server.limit_blas_threads`) before it asks
    anything: OpenBLAS's pool, woken by the span MMR's small products, cost a third of the process
    CPU and saved nothing (docs/verbatim.md#span-mmr)."""
    from evidence import server

    calls: list[tuple[object, ...]] = []

    def limit(*args: object) -> bool:
        calls.append(args)
        return True

    monkeypatch.setattr(server, "limit_blas_threads", limit)
    qa = tmp_path / "qa.jsonl"
    qa.write_text('{"question": "q", "answers": []}\n', encoding="utf-8")
    main(["eval", "--qa", str(qa), "--index", "missing", "--store", str(tmp_path / "s")])
    assert calls == [()]

"""`evidence eval --dataset` on one store under two indexing settings (docs/contracts.md#cli):
the second run deletes the dataset's index, says so on stderr and indexes it afresh under its
settings (since session 49 the store refuses to write into an index recorded under others, and
before that the run scored the old vectors); a third run under the same settings reuses it.

A tiny BEIR dataset is written in each test; the service embeds with the hashing embedder keyed as
MiniLM is (`embed.base.document_key`: its window is in the key under `mean`, and under `first`,
the default, only when it is not the default window, so a fingerprint changes with it; the span
vectors and the header rule are in no key, and only the index's record tells)."""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest

from evidence.cli import common, main
from evidence.config import Settings
from evidence.embed.minilm import MiniLMEmbedder
from evidence.search.factory import get_backend
from evidence.service import EvidenceService
from evidence.testing import HashingEmbedder

CORPUS = [
    {"_id": "d1", "title": "Storage", "text": "The widget must be stored between 5 and 30 degrees Celsius."},
    {"_id": "d2", "title": "Cleaning", "text": "Wipe the casing with a damp cloth once a week."},
    {"_id": "d3", "title": "Warranty", "text": "The warranty lasts two years from the date of purchase."},
]
QUERIES = [
    {"_id": "q1", "text": "storage temperature of the widget"},
    {"_id": "q2", "text": "warranty length"},
]


class _Keyed(HashingEmbedder):
    """The hashing embedder with MiniLM's document key for the run's settings; it counts the
    document texts it embeds (`passages`)."""

    passages: list[int] = []

    def __init__(self, settings: Settings) -> None:
        super().__init__()
        self.document_rule = MiniLMEmbedder(
            max_tokens=settings.embed_max_tokens, long_text=settings.embed_long_text
        ).document_rule

    def embed_documents(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        _Keyed.passages.append(len(texts))
        return super().embed_documents(texts)


@pytest.fixture
def dataset(tmp_path: Path) -> Path:
    folder = tmp_path / "tiny"
    folder.mkdir()
    (folder / "corpus.jsonl").write_text("".join(json.dumps(d) + "\n" for d in CORPUS))
    (folder / "queries.jsonl").write_text("".join(json.dumps(q) + "\n" for q in QUERIES))
    (folder / "qrels-test.tsv").write_text("query-id\tcorpus-id\tscore\nq1\td1\t1\nq2\td3\t1\n")
    return folder


@pytest.fixture(autouse=True)
def keyed_service(monkeypatch: pytest.MonkeyPatch) -> None:
    def service(args: argparse.Namespace) -> EvidenceService:
        settings = common.settings_from_args(args)
        return EvidenceService(settings, embedder=_Keyed(settings))

    monkeypatch.setattr(common, "service_from_args", service)
    _Keyed.passages.clear()


def _eval(
    dataset: Path, store: Path, mode: str, capsys: pytest.CaptureFixture[str]
) -> tuple[dict[str, Any], str, int]:
    """(the JSON result, stderr, document texts embedded) of one `evidence eval --dataset`."""
    capsys.readouterr()
    _Keyed.passages.clear()
    assert main(["eval", "--dataset", str(dataset), "--mode", mode, "--json", "--store", str(store)]) == 0
    out = capsys.readouterr()
    return json.loads(out.out.strip().splitlines()[-1]), out.err, sum(_Keyed.passages)


def _recorded(store: Path, index: str) -> dict[str, str]:
    backend = get_backend(Settings(store_dir=store))
    try:
        return dict(backend.get_index(index).extra["written_with"])
    finally:
        backend.close()


@pytest.mark.parametrize(
    ("first", "second", "setting"),
    [
        # The window under `first` (the default): not in the vectors' key nor the fingerprint.
        ({}, {"EVIDENCE_EMBED_MAX_TOKENS": "128"}, "embed_max_tokens"),
        # The window under `mean`: in the key, so in the fingerprint too.
        (
            {"EVIDENCE_EMBED_LONG_TEXT": "mean"},
            {"EVIDENCE_EMBED_LONG_TEXT": "mean", "EVIDENCE_EMBED_MAX_TOKENS": "128"},
            "embed_max_tokens",
        ),
        ({}, {"EVIDENCE_SECTION_HEADER": "heading"}, "section_header"),
        ({}, {"EVIDENCE_EMBED_SPANS_AT_INDEX": "off"}, "embed_spans_at_index"),
    ],
)
def test_a_run_under_other_settings_indexes_the_dataset_afresh(  # noqa: PLR0917
    dataset: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    first: dict[str, str],
    second: dict[str, str],
    setting: str,
) -> None:
    store = tmp_path / "store"
    for name, value in first.items():
        monkeypatch.setenv(name, value)
    result, err, embedded = _eval(dataset, store, "hybrid", capsys)
    assert result["index_seconds"] > 0 and embedded == len(CORPUS) and "deleting" not in err
    before = _recorded(store, "eval-tiny")[setting]
    ndcg = result["ndcg_at_10"]

    for name in first:
        monkeypatch.delenv(name)
    for name, value in second.items():
        monkeypatch.setenv(name, value)
    result, err, embedded = _eval(dataset, store, "hybrid", capsys)
    after = _recorded(store, "eval-tiny")[setting]
    assert before != after
    assert f"index 'eval-tiny' was written with {setting}={before!r}" in err
    assert f"this run has {setting}={after!r}: deleting it and indexing again" in err
    assert result["index_seconds"] > 0 and embedded == len(CORPUS)  # every passage embedded again
    assert result["ndcg_at_10"] == ndcg  # the hashing embedder reads no window: same figures

    result, err, embedded = _eval(dataset, store, "hybrid", capsys)
    assert result["index_seconds"] == 0 and embedded == 0 and "deleting" not in err
    assert _recorded(store, "eval-tiny")[setting] == after


def test_a_lexical_only_index_is_kept_under_another_window(
    dataset: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """`--mode bm25` on the embedded store indexes without vectors (`eval-<dataset>-bm25`): the
    settings that shape only vectors do not make it stale (`search.written.VECTOR_KEYS`)."""
    store = tmp_path / "store"
    result, err, embedded = _eval(dataset, store, "bm25", capsys)
    assert result["index_seconds"] > 0 and embedded == 0
    monkeypatch.setenv("EVIDENCE_EMBED_MAX_TOKENS", "128")
    result, err, embedded = _eval(dataset, store, "bm25", capsys)
    assert result["index_seconds"] == 0 and "deleting" not in err
    monkeypatch.setenv("EVIDENCE_SECTION_HEADER", "heading")
    result, err, _ = _eval(dataset, store, "bm25", capsys)
    assert "section_header='off'" in err and result["index_seconds"] > 0


def test_the_qa_suite_indexes_a_family_afresh_the_same_way(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`evidence eval --qa DIR` goes through the same function (`evaluation.indexes`): its
    `qa-<family>` index is judged by its record as well as its fingerprint."""
    from evidence.evaluation import ensure_qa_index, find_qa_families

    family = tmp_path / "suite" / "widget"
    (family / "documents").mkdir(parents=True)
    (family / "documents" / "manual.md").write_text(
        "# Storage\n\nKeep the widget between 5 and 30 degrees.\n"
    )
    (family / "questions.jsonl").write_text('{"question": "storage temperature?", "answers": ["5 and 30"]}\n')
    (found,) = find_qa_families(tmp_path / "suite")
    seconds = []
    for window in (256, 128, 128):
        settings = Settings(store_dir=tmp_path / "store", embed_max_tokens=window)
        service = EvidenceService(settings, embedder=_Keyed(settings))
        try:
            capsys.readouterr()
            seconds.append(ensure_qa_index(service, found)[1])
            err = capsys.readouterr().err
        finally:
            service.close()
        if len(seconds) == 2:
            assert "index 'qa-widget' was written with embed_max_tokens='256'" in err
        else:
            assert "deleting" not in err
    assert seconds[0] > 0 and seconds[1] > 0 and seconds[2] == 0


@pytest.mark.parametrize("unreadable", [False, True])
def test_only_a_missing_index_is_taken_as_absent(tmp_path: Path, unreadable: bool) -> None:
    """`why_stale` reads a missing index as "index it" (''), and any other error of the store
    (unreadable, unreachable) as itself: an index that cannot be read is not written over."""
    from types import SimpleNamespace

    from evidence.errors import BackendError, IndexNotFoundError
    from evidence.evaluation.indexes import why_stale

    def get_index(index: str) -> object:
        if unreadable:
            raise BackendError(f"index {index!r} store is unreadable: file is not a database")
        raise IndexNotFoundError(index)

    service: Any = SimpleNamespace(backend=SimpleNamespace(get_index=get_index))
    if unreadable:
        with pytest.raises(BackendError, match="unreadable"):
            why_stale(service, "eval-x", "fp")
    else:
        assert why_stale(service, "eval-x", "fp") == ""

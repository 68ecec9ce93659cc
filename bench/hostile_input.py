"""Issue 26's hostile uploads, measured end to end in-process (RELIABILITY.md, "Hostile input").

Each document is indexed through `EvidenceService.index_document` (parse, chunk, embed with the
configured embedder, write) into a fresh store; the figure is the minimum of `--runs` runs. The
pathological documents are compared with an ordinary document of the same size. The alias bomb
and the filter attacks go through the API handler, as a caller's request would.

    .venv/bin/python bench/hostile_input.py [--runs 3] [--embedder hashing|minilm]
"""

from __future__ import annotations

import argparse
import gzip
import json
import sys
import tempfile
import time
from collections.abc import Callable
from copy import deepcopy
from functools import partial
from pathlib import Path
from typing import Any

from evidence.api import runtime
from evidence.config import Settings
from evidence.errors import EvidenceError
from evidence.model import IndexDocumentRequest
from evidence.service import EvidenceService
from evidence.testing import HashingEmbedder, lambda_context, load_event

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repo root: functions/
from functions.retriever.handler import handler

_PROSE = (
    "The patients were given 25 mg of the drug daily for twelve weeks. Results improved in most "
    "of them (p < 0.05), and no serious adverse events were seen. See Table 2 for details.\n\n"
)


_ABSTRACTS: list[str] = []
_DRAWN = [0]


def ordinary(size: int, html: bool = False) -> str:
    """`size` characters of SciFact abstracts, never the same ones twice (the embedding cache would
    otherwise make the ordinary side free); the built-in prose when the dataset is not there."""
    if not _ABSTRACTS:
        corpus = Path(__file__).resolve().parents[1] / "../shared/datasets/scifact/corpus.jsonl.gz"
        if corpus.exists():
            with gzip.open(corpus, "rt", encoding="utf-8") as fh:
                _ABSTRACTS.extend(json.loads(line)["text"] for line in fh)
        else:
            _ABSTRACTS.append(_PROSE)
    parts: list[str] = []
    total = 0
    while total < size:
        text = _ABSTRACTS[_DRAWN[0] % len(_ABSTRACTS)]
        _DRAWN[0] += 1
        part = f"<p>{text}</p>\n" if html else text + "\n\n"
        parts.append(part)
        total += len(part)
    return "".join(parts)[:size]


def nested_lists(size: int, depth: int = 1_000) -> str:
    head = "<ul><li>x" * depth
    return (head + "<li>word " * (size // 9 + 1))[:size]


def timed(run: Callable[[], object], runs: int) -> tuple[float, str]:
    best, outcome = float("inf"), ""
    for _ in range(runs):
        start = time.perf_counter()
        try:
            got = run()
            outcome = f"indexed, {getattr(got, 'chunks', '?')} passages"
        except EvidenceError as exc:
            outcome = f"{exc.status} {exc.message[:110]}"
        best = min(best, time.perf_counter() - start)
    return best, outcome


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--embedder", choices=("hashing", "minilm"), default="minilm")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        settings = Settings(store_dir=Path(tmp) / "store")
        service = EvidenceService(
            settings, embedder=HashingEmbedder() if args.embedder == "hashing" else None
        )
        runtime.configure(service=service, settings=settings)
        n = [0]

        def index(text: str | Callable[[], str], filename: str) -> Callable[[], object]:
            def run() -> object:
                n[0] += 1
                body = text() if callable(text) else text
                request = IndexDocumentRequest(document_id=f"d{n[0]}", filename=filename, text=body)
                return service.index_document("bench", request)

            return run

        cases: list[tuple[str, str | Callable[[], str], str]] = [
            ("ordinary 60 KB (txt)", lambda: ordinary(60_000), "a.txt"),
            ("60 KB of spaces + a word", " " * 60_000 + "word", "a.txt"),
            ("ordinary 32 KB (txt)", lambda: ordinary(32_001), "a.txt"),
            ("32,000 dots", "a" + "." * 32_000, "a.txt"),
        ]
        for kb in (20, 40, 320):
            cases.append((f"ordinary {kb} KB (html)", partial(ordinary, kb * 1000, html=True), "a.html"))
            cases.append((f"nested lists, depth 1,000, {kb} KB", nested_lists(kb * 1000), "a.html"))
            cases.append((f"nested lists, depth 100, {kb} KB", nested_lists(kb * 1000, 100), "a.html"))
        index(ordinary(2_000), "warm.txt")()  # load the model once, outside the figures
        for label, text, filename in cases:
            seconds, outcome = timed(index(text, filename), args.runs)
            print(f"{label:38s} {seconds:8.3f} s  {outcome}", flush=True)

        bomb = "a0: &a0 [" + ",".join(['"lol"'] * 9) + "]\n"
        for i in range(1, 9):
            bomb += f"a{i}: &a{i} [" + ",".join([f"*a{i - 1}"] * 9) + "]\n"
        bomb += "nodes: *a8\n"
        context = lambda_context("bench")
        for label, path, payload in [
            ("YAML alias bomb", "/v1/indexes/bench/documents",
             {"filename": "g.yaml", "text": bomb, "metadata": {"kind": "graph"}}),
            ("1,000 filter keys", "/v1/indexes/bench/retrieve",
             {"query": "drug", "filters": {f"k{i}": "x" for i in range(1_000)}}),
            ("250,001 filter values", "/v1/indexes/bench/retrieve",
             {"query": "drug", "filters": {"document_id": ["x"] * 250_001}}),
        ]:  # fmt: skip
            event: dict[str, Any] = deepcopy(load_event("apigw/retrieve"))
            body = json.dumps(payload)
            event.update(httpMethod="POST", path=path, resource="/{proxy+}", body=body)
            start = time.perf_counter()
            response = handler(event, context)
            seconds = time.perf_counter() - start
            print(
                f"{label:38s} {seconds:8.3f} s  request {len(body):,} B -> {response['statusCode']}, "
                f"{len(response['body']):,} B: {json.loads(response['body'])['error']['message'][:90]}"
            )
        runtime.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""CPU time of one upload, and where it goes (issue 23, the mixed load's index requests).

N SciFact abstracts are indexed one by one through `EvidenceService.index_document`, the path of
`POST /v1/indexes/{index}/documents`, with the real int8 MiniLM embedder in this process (the
server runs the same `embed_documents` in its embedding worker). Each text is new content, as in
`bench/load.py` ("Note <id>. <title> <abstract>"), so nothing comes from the embedding cache.

Reported per upload: process CPU ms (every thread, onnxruntime's included), split into the
model's forward passes, the rest of embedding (tokenising, pooling, the cache) and everything
else (parsing, chunking, sections, the backend's write); and what the model read: texts,
forward passes, word pieces read vs padded (the padding's share of the model's input).

    nice -n 10 .venv/bin/python bench/upload_cpu.py [--docs 200] [--skip 2000] [--json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from load import ROOT, _find, read_jsonl

from evidence.config import Settings
from evidence.model import IndexDocumentRequest
from evidence.service import EvidenceService


class RunMeter:
    """Wraps an onnxruntime session: the CPU and the input shapes of every forward pass."""

    def __init__(self, session: Any) -> None:
        self.session = session
        self.cpu = 0.0
        self.runs = 0
        self.rows = 0
        self.real = 0  # word pieces read ([CLS]/[SEP] included)
        self.padded = 0  # model input cells (rows x width)

    def run(self, names: Any, feeds: dict[str, Any]) -> Any:
        mask = feeds["attention_mask"]
        self.runs += 1
        self.rows += int(mask.shape[0])
        self.real += int(mask.sum())
        self.padded += int(mask.size)
        started = time.process_time()
        out = self.session.run(names, feeds)
        self.cpu += time.process_time() - started
        return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--dataset", default=str(ROOT.parent / "shared" / "datasets" / "scifact"))
    parser.add_argument("--docs", type=int, default=200)
    parser.add_argument("--skip", type=int, default=0, help="corpus documents skipped first")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    corpus = read_jsonl(
        _find(Path(args.dataset), "corpus.jsonl.gz", "corpus.jsonl"), limit=args.skip + args.docs
    )
    texts = [f"{d.get('title', '')} {d['text']}".strip() for d in corpus[args.skip :] if d.get("text")]
    with tempfile.TemporaryDirectory(prefix="evidence-upload-") as tmp:
        service = EvidenceService(Settings(store_dir=Path(tmp)))
        embedder: Any = service.embedder
        inner = getattr(embedder, "inner", embedder)
        inner.embed_query("warm up the model")
        meter = RunMeter(inner._get_session())
        inner._session = meter
        calls: list[int] = []
        embed_cpu = 0.0
        original = inner.embed_documents

        def embed_documents(batch: Any) -> Any:
            nonlocal embed_cpu
            calls.append(len(batch))
            started = time.process_time()
            out = original(batch)
            embed_cpu += time.process_time() - started
            return out

        inner.embed_documents = embed_documents
        # Warm-up upload (first write: index creation, the backend's files), not counted.
        service.index_document(
            "u", IndexDocumentRequest(document_id="warm", filename="warm.txt", text=texts[0])
        )
        meter.cpu = embed_cpu = 0.0
        meter.runs = meter.rows = meter.real = meter.padded = 0
        calls.clear()
        per: list[float] = []
        wall_started = time.perf_counter()
        cpu_started = time.process_time()
        for i, text in enumerate(texts):
            doc_id = f"load-0-{i}"
            request = IndexDocumentRequest(
                document_id=doc_id, filename=f"{doc_id}.txt", text=f"Note {doc_id}. {text}"
            )
            started = time.process_time()
            response = service.index_document("u", request)
            per.append((time.process_time() - started) * 1000)
            assert response.status == "created", response
        cpu = time.process_time() - cpu_started
        wall = time.perf_counter() - wall_started
        service.close()
    n = len(texts)
    report = {
        "uploads": n,
        "threads": inner.threads,
        "batch_size": inner.batch_size,
        "cpu_ms_per_upload": round(cpu * 1000 / n, 1),
        "cpu_ms_p50_p95": [round(statistics.median(per), 1), round(sorted(per)[int(0.95 * (n - 1))], 1)],
        "wall_ms_per_upload": round(wall * 1000 / n, 1),
        "model_cpu_ms_per_upload": round(meter.cpu * 1000 / n, 1),
        "embed_other_cpu_ms_per_upload": round((embed_cpu - meter.cpu) * 1000 / n, 1),
        "rest_cpu_ms_per_upload": round((cpu - embed_cpu) * 1000 / n, 1),
        "texts_embedded_per_upload": round(sum(calls) / n, 2),
        "forward_passes_per_upload": round(meter.runs / n, 2),
        "model_rows_per_upload": round(meter.rows / n, 2),
        "word_pieces_per_upload": round(meter.real / n, 1),
        "padded_cells_per_upload": round(meter.padded / n, 1),
        "padding_share": round(1 - meter.real / max(meter.padded, 1), 3),
        "model_cpu_us_per_cell": round(meter.cpu * 1e6 / max(meter.padded, 1), 1),
    }
    print(json.dumps(report) if args.json else json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())

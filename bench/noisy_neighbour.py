"""One tenant uploads a large document; another tenant's retrieve latency, idle and meanwhile.

Issue 26's acceptance: while tenant A uploads a 750 KB document (distinct text, so every passage
is embedded), tenant B's retrieve p95 stays within 5x its idle p95. `evidence serve` runs in a
subprocess with the real MiniLM embedder on a fresh store:

1. tenant B's index gets `--b-docs` SciFact abstracts; `--queries` retrieves measure B idle;
2. tenant A posts `--upload-kb` KB of other SciFact abstracts (202 + status URL past
   EVIDENCE_ASYNC_UPLOAD_BYTES; on a server without the background path the POST itself
   blocks) while B keeps retrieving for `--window` seconds (or until the upload finishes);
3. reported: B's p50/p95 idle and during the upload, their ratio, and the upload's state.

    python bench/noisy_neighbour.py [--dataset ../shared/datasets/scifact] [--window 30] [--json]

The server is stopped at the end of the window (the upload need not finish: what is measured is
B's latency while A's embedding runs).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from load import ROOT, _find, cli, percentiles, read_jsonl, request


def serve(store: Path, code: Path, workers: str = "1") -> tuple[subprocess.Popen[str], str]:
    # The worker count through the environment, not `--workers`: the code compared may predate it.
    env = {**os.environ, "PYTHONPATH": str(code), "EVIDENCE_SERVE_WORKERS": workers}
    proc = subprocess.Popen(
        cli("serve", "--port", "0", "--store", str(store)),
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env=env,
    )
    assert proc.stdout is not None
    line = proc.stdout.readline()
    if not line:
        raise SystemExit("noisy_neighbour: evidence serve did not start")
    return proc, str(json.loads(line)["listening"])


def retrieve_times(
    url: str, queries: list[str], *, until: float | None = None, count: int | None = None
) -> list[float]:
    out: list[float] = []
    i = 0
    while (count is None or len(out) < count) and (until is None or time.monotonic() < until):
        started = time.perf_counter()
        status, body = request(
            f"{url}/v1/indexes/tenant-b/retrieve", "POST", {"query": queries[i % len(queries)]}
        )
        if status != 200:
            raise SystemExit(f"noisy_neighbour: retrieve failed: {status} {body}")
        out.append((time.perf_counter() - started) * 1000)
        i += 1
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--dataset", default=str(ROOT.parent / "shared" / "datasets" / "scifact"))
    parser.add_argument(
        "--code", default=str(ROOT / "shared"), help="the shared/ folder whose evidence to serve"
    )
    parser.add_argument("--b-docs", type=int, default=40)
    parser.add_argument("--queries", type=int, default=60)
    parser.add_argument("--upload-kb", type=int, default=750)
    parser.add_argument("--window", type=float, default=30.0, help="seconds of B's traffic during the upload")
    parser.add_argument(
        "--workers",
        default="1",
        help="EVIDENCE_SERVE_WORKERS (1: as RELIABILITY.md's figures; auto: serve's default)",
    )
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    dataset = Path(args.dataset)
    corpus = read_jsonl(_find(dataset, "corpus.jsonl.gz", "corpus.jsonl"), limit=4000)
    queries = [q["text"] for q in read_jsonl(_find(dataset, "queries.jsonl.gz", "queries.jsonl"))]
    texts = [f"{d.get('title', '')}. {d['text']}" for d in corpus if d.get("text")]
    upload, used = [], 0
    for t in texts[args.b_docs :]:
        if used >= args.upload_kb * 1024:
            break
        upload.append(t)
        used += len(t.encode()) + 2
    big = "\n\n".join(upload)
    with tempfile.TemporaryDirectory(prefix="evidence-noisy-") as tmp:
        proc, url = serve(Path(tmp) / "store", Path(args.code), args.workers)
        try:
            for i, text in enumerate(texts[: args.b_docs]):
                status, body = request(
                    f"{url}/v1/indexes/tenant-b/documents",
                    "POST",
                    {"document_id": f"b{i}", "filename": f"b{i}.txt", "text": text},
                    timeout=300,
                )
                assert status == 200, body
            retrieve_times(url, queries, count=5)  # warm-up
            idle = retrieve_times(url, queries, count=args.queries)
            posted: dict[str, Any] = {}

            def post() -> None:
                started = time.perf_counter()
                status, body = request(
                    f"{url}/v1/indexes/tenant-a/documents",
                    "POST",
                    {"document_id": "big", "filename": "big.txt", "text": big},
                    timeout=3600,
                )
                posted.update(status=status, body=body, seconds=round(time.perf_counter() - started, 2))

            thread = threading.Thread(target=post, daemon=True)
            thread.start()
            time.sleep(0.5)  # the upload's parsing and embedding are under way
            busy = retrieve_times(url, queries, until=time.monotonic() + args.window)
            state: Any = None
            if posted.get("status") == 202:
                state = request(url + posted["body"]["status_url"], "GET")[1]
        finally:
            proc.terminate()
            proc.wait(timeout=60)
    idle_p, busy_p = percentiles(idle), percentiles(busy)
    report = {
        "upload_bytes": len(big.encode()),
        "upload_answer": {k: v for k, v in posted.items() if k != "body"}
        or "still running at the window's end",
        "upload_state_at_end": state.get("status") if isinstance(state, dict) else None,
        "b_idle_ms": {"requests": len(idle), **idle_p},
        "b_during_upload_ms": {"requests": len(busy), **busy_p},
        "p95_ratio": round(busy_p["p95"] / idle_p["p95"], 2) if idle_p["p95"] else None,
    }
    print(json.dumps(report) if args.json else json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())

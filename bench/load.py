"""Bounded load on loopback against `evidence serve` (RELIABILITY.md, "Load").

A SciFact-sized index (the 5,183-document corpus, the real MiniLM embedder) is served by
`evidence serve` in a subprocess; `--clients` threads send mixed traffic for `--duration`
seconds: retrieve (SciFact test queries), index (a new document each time) and delete (one of
that client's own documents). Meanwhile, with `--writers`, two `evidence index` processes
write other documents into the same index on the same store. Reported: requests, throughput,
latency p50/p95/p99 per operation, errors (anything but the expected status), the server's RSS
over time (and its document-embedding worker's), documents expected vs present at the end
(nothing lost, nothing twice), and where a retrieve's time went (`retrieve_stages_ms`: each
stage and first-stage leg from the response's telemetry, the time outside the stages, and the
time outside the server: queueing, HTTP, the resolver).

    python bench/load.py --dataset ../shared/datasets/scifact [--duration 120] [--clients 8]
        [--writers] [--workers N] [--base-store build/load-base] [--json]

Without `--workers` the server runs its default (one worker per core, as many as fit in memory);
the report's `workers` and `workers_why` say what it chose.

The base store is built once (`evidence index corpus.jsonl.gz`, minutes on 2 cores; seed it with
`--embedding-cache FILE` to reuse cached MiniLM vectors) and copied for each run: a run never
changes it. Exit 1 if any request failed, a document is missing or duplicated, or the store is
inconsistent.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import random
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote

ROOT = Path(__file__).resolve().parents[1]
INDEX = "scifact"
#: Operation mix (weights): mostly reads, as in production, with steady writes and deletes.
MIX = {"retrieve": 0.7, "index": 0.2, "delete": 0.1}


def _open(path: Path) -> Any:
    return gzip.open(path, "rt", encoding="utf-8") if path.suffix == ".gz" else path.open(encoding="utf-8")


def _find(dataset: Path, *names: str) -> Path:
    for name in names:
        if (dataset / name).exists():
            return dataset / name
    raise SystemExit(f"load: none of {names} in {dataset}")


def read_jsonl(path: Path, limit: int | None = None) -> list[dict[str, Any]]:
    out = []
    with _open(path) as fh:
        for line in fh:
            if line.strip():
                out.append(json.loads(line))
                if limit and len(out) >= limit:
                    break
    return out


def cli(*args: str) -> list[str]:
    return [sys.executable, "-m", "evidence.cli", *args]


def env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(ROOT / "shared")}


def build_base(base: Path, dataset: Path, cache: Path | None) -> None:
    """The SciFact index, once: reused while the corpus is unchanged."""
    corpus = _find(dataset, "corpus.jsonl.gz", "corpus.jsonl")
    marker = base / "load-base.json"
    stamp = {"corpus": str(corpus.resolve()), "size": corpus.stat().st_size}
    if marker.exists() and json.loads(marker.read_text()) == stamp:
        return
    base.mkdir(parents=True, exist_ok=True)
    if cache is not None and cache.exists() and not (base / "embeddings.sqlite3").exists():
        with (
            sqlite3.connect(f"file:{cache}?mode=ro", uri=True) as src,
            sqlite3.connect(base / "embeddings.sqlite3") as dst,
        ):
            src.backup(dst)
        with sqlite3.connect(base / "embeddings.sqlite3") as db:
            # A cache written before the cache was scoped by index (one `embeddings` table for
            # every index): its vectors become this index's, which is what they were built for.
            if db.execute("SELECT 1 FROM sqlite_master WHERE name = 'embeddings'").fetchone():
                db.execute(
                    "CREATE TABLE IF NOT EXISTS scoped_embeddings"
                    " (scope TEXT, model TEXT, hash TEXT, vector BLOB, PRIMARY KEY(scope, model, hash))"
                )
                db.execute(
                    "INSERT OR IGNORE INTO scoped_embeddings SELECT ?, model, hash, vector FROM embeddings",
                    (f"index:{INDEX}",),
                )
    started = time.perf_counter()
    subprocess.run(cli("index", str(corpus), "--index", INDEX, "--store", str(base)), check=True, env=env())
    print(f"load: base index built in {time.perf_counter() - started:.0f} s", file=sys.stderr)
    marker.write_text(json.dumps(stamp))


def documents(store: Path) -> dict[str, int]:
    """document id → passages stored at a position another passage of it also holds (0 = no
    duplicate); read-only, while nothing writes."""
    with sqlite3.connect(f"file:{store / 'indexes' / INDEX / 'records.sqlite3'}?mode=ro", uri=True) as db:
        rows = db.execute(
            "SELECT d.document_id, COUNT(c.chunk_id) - COUNT(DISTINCT c.sequence) FROM documents d"
            " LEFT JOIN chunks c ON c.document_id = d.document_id AND c.kind = 'passage'"
            " GROUP BY d.document_id"
        )
        return {str(d): int(n) for d, n in rows}


def generation(store: Path) -> int:
    """The index's write generation: one more per commit, however many writes it holds (group
    commit: concurrent writes share one)."""
    with sqlite3.connect(f"file:{store / 'indexes' / INDEX / 'records.sqlite3'}?mode=ro", uri=True) as db:
        row = db.execute("SELECT value FROM info WHERE key = 'generation'").fetchone()
        return int(row[0]) if row else 0


def consistent(store: Path) -> str | None:
    """Records, inverted index and journal agree (after a writer's replay); None when they do."""
    sys.path.insert(0, str(ROOT / "shared"))
    from evidence.records import ChunkKind
    from evidence.search.embedded import EmbeddedBackend

    backend = EmbeddedBackend(store)
    try:
        backend.sync(INDEX)
        idx = backend.index_store(INDEX)
        for kind in ChunkKind:
            rows = idx._db.execute("SELECT COUNT(*) FROM chunks WHERE kind = ?", (kind.value,)).fetchone()[0]
            lexical = idx._open_lexical(kind).searcher().num_docs
            if lexical != rows:
                return f"{kind.value}: {lexical} in the inverted index, {rows} records"
        if idx._db.execute("SELECT COUNT(*) FROM lexical_pending").fetchone()[0]:
            return "journal not empty"
        return None
    finally:
        backend.close()


def rss_kb(pid: int) -> tuple[int, int, int]:
    """(VmRSS, RssAnon, RssFile) in kB: mapped index files count in RSS but are page cache the
    kernel can drop, so growth is judged on the anonymous part."""
    fields = {"VmRSS:": 0, "RssAnon:": 0, "RssFile:": 0}
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            key = line.split(maxsplit=1)[0] if line else ""
            if key in fields:
                fields[key] = int(line.split()[1])
    except OSError:
        pass
    return fields["VmRSS:"], fields["RssAnon:"], fields["RssFile:"]


def children(pid: int) -> list[int]:
    try:
        return [int(kid) for kid in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except OSError:
        return []


def forked(pid: int) -> bool:
    """A `serve --workers N` worker (forked: the supervisor's command line), not a spawned
    helper (the shared embedding process, multiprocessing's resource tracker)."""
    try:
        return b"multiprocessing" not in Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False


def server_pids(pid: int, workers: int) -> list[int]:
    """The processes that serve: `evidence serve` itself, and its workers with `--workers N`."""
    return [pid] if workers == 1 else [pid, *(kid for kid in children(pid) if forked(kid))]


def helper_pids(pid: int, workers: int) -> list[int]:
    """The processes that embed documents: one server's worker, or the one `--workers N` shares."""
    if workers == 1:
        return children(pid)
    return [kid for p in server_pids(pid, workers) for kid in children(p) if p != pid or not forked(kid)]


def server_rss_kb(pid: int, workers: int) -> tuple[int, int, int]:
    """`rss_kb` summed over the serving processes (the supervisor and every worker)."""
    rows = [rss_kb(p) for p in server_pids(pid, workers)]
    return sum(r[0] for r in rows), sum(r[1] for r in rows), sum(r[2] for r in rows)


def cpu_s(pids: list[int]) -> float:
    """User + system CPU seconds used so far by `pids` (threads included)."""
    total = 0
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += int(fields[11]) + int(fields[12])  # utime, stime (fields 14, 15)
    return total / os.sysconf("SC_CLK_TCK")


def helpers_rss_kb(pid: int, workers: int) -> int:
    """VmRSS of the document-embedding processes (`helper_pids`) and their children, in kB."""

    def tree(p: int) -> int:
        return rss_kb(p)[0] + sum(tree(kid) for kid in children(p))

    return sum(tree(p) for p in helper_pids(pid, workers))


@dataclass
class Stats:
    latencies: dict[str, list[float]] = field(default_factory=lambda: defaultdict(list))
    errors: list[str] = field(default_factory=list)
    live: set[str] = field(default_factory=set)  # load documents indexed and not deleted
    deleted: set[str] = field(default_factory=set)
    #: A retrieve's own telemetry: stage name → ms, and "server" (total_ms). Its latency at the
    #: client minus "server" is the time spent queued, in HTTP and in the resolver.
    stages: dict[str, list[float]] = field(default_factory=lambda: defaultdict(list))
    lock: threading.Lock = field(default_factory=threading.Lock)


def request(url: str, method: str, payload: Any = None, timeout: float = 60) -> tuple[int, Any]:
    status, _, body = answered(url, method, payload, timeout)
    return status, body


def answered(url: str, method: str, payload: Any = None, timeout: float = 60) -> tuple[int, int | None, Any]:
    """(status, the answering worker's pid with `serve --workers N`, body)."""
    data = json.dumps(payload).encode() if payload is not None else None
    req = urllib.request.Request(url, data=data, method=method, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            worker = resp.headers.get("X-Evidence-Worker")
            return resp.status, int(worker) if worker else None, json.loads(resp.read())
    except urllib.error.HTTPError as err:
        return err.code, None, json.loads(err.read() or b"{}")


def client(
    n: int,
    *,
    url: str,
    deadline: float,
    queries: list[str],
    texts: list[str],
    stats: Stats,
    mix: dict[str, float],
) -> None:
    rng = random.Random(n)
    mine: list[str] = []
    made = 0
    ops, weights = zip(*mix.items(), strict=True)
    while time.monotonic() < deadline:
        op = rng.choices(ops, weights)[0]
        if op == "delete" and not mine:
            op = "index"
        try:
            started = time.perf_counter()
            if op == "retrieve":
                status, body = request(
                    f"{url}/v1/indexes/{INDEX}/retrieve", "POST", {"query": rng.choice(queries), "top_k": 10}
                )
                ok = status == 200 and bool(body.get("hits"))
                telemetry = (body.get("telemetry") or {}) if ok else {}
                with stats.lock:
                    staged = 0.0
                    for stage in telemetry.get("stages") or []:
                        if stage["ms"]:
                            stats.stages[str(stage["name"])].append(float(stage["ms"]))
                        staged += float(stage["ms"])
                        for key, value in (stage.get("detail") or {}).items():
                            if key.endswith("_ms"):  # the first stage's legs
                                stats.stages[f"{stage['name']}.{key}"].append(float(value))
                    if "total_ms" in telemetry:
                        stats.stages["server"].append(float(telemetry["total_ms"]))
                        # Outside the stages: the query's embedding, the plan, the response.
                        stats.stages["server.outside_stages"].append(float(telemetry["total_ms"]) - staged)
                        stats.stages["client.outside_server"].append(
                            (time.perf_counter() - started) * 1000 - float(telemetry["total_ms"])
                        )
            elif op == "index":
                doc_id = f"load-{n}-{made}"
                made += 1
                text = f"Note {doc_id}. {rng.choice(texts)}"  # new content: embedded, not a cache hit
                payload = {"document_id": doc_id, "filename": f"{doc_id}.txt", "text": text}
                status, body = request(f"{url}/v1/indexes/{INDEX}/documents", "POST", payload)
                ok = status == 200 and body.get("status") == "created"
                if ok:
                    mine.append(doc_id)
                    with stats.lock:
                        stats.live.add(doc_id)
            else:
                doc_id = mine.pop(rng.randrange(len(mine)))
                status, body = request(
                    f"{url}/v1/indexes/{INDEX}/documents/{quote(doc_id, safe='')}", "DELETE"
                )
                ok = status == 200 and body.get("deleted_chunks", 0) >= 1
                if ok:
                    with stats.lock:
                        stats.live.discard(doc_id)
                        stats.deleted.add(doc_id)
            elapsed = (time.perf_counter() - started) * 1000
        except Exception as exc:  # a failed request is a measured error, not a crash of the run
            status, body, ok, elapsed = -1, {"error": repr(exc)}, False, 0.0
        with stats.lock:
            stats.latencies[op].append(elapsed)
            if not ok:
                stats.errors.append(f"{op} {status} {json.dumps(body)[:200]}")


def guarded(n: int, **kwargs: Any) -> None:
    """A client thread that dies is an error of the run, not a silent drop in throughput."""
    try:
        client(n, **kwargs)
    except BaseException as exc:
        stats: Stats = kwargs["stats"]
        with stats.lock:
            stats.errors.append(f"client {n} died: {exc!r}")


def parse_mix(text: str) -> dict[str, float]:
    mix = {k.strip(): float(v) for k, v in (part.split("=") for part in text.split(",") if part.strip())}
    if not mix or set(mix) - set(MIX) or sum(mix.values()) <= 0:
        raise SystemExit(
            f"load: --mix takes weights of {', '.join(MIX)}, e.g. retrieve=0.7,index=0.2,delete=0.1"
        )
    return mix


def percentiles(values: list[float]) -> dict[str, float]:
    if not values:
        return {"p50": 0.0, "p95": 0.0, "p99": 0.0}
    ordered = sorted(values)

    def at(q: float) -> float:
        return round(ordered[min(len(ordered) - 1, int(q * len(ordered)))], 1)

    return {"p50": at(0.50), "p95": at(0.95), "p99": at(0.99)}


def writer_corpus(path: Path, prefix: str, texts: list[str], n: int) -> set[str]:
    ids = {f"{prefix}-{i}" for i in range(n)}
    with path.open("w", encoding="utf-8") as fh:
        for i in range(n):
            # New text (not a cached embedding): the writer really embeds while the server serves.
            text = f"{prefix} note {i}. {texts[i % len(texts)]}"
            fh.write(json.dumps({"id": f"{prefix}-{i}", "text": text}) + "\n")
    return ids


def serve(store: Path, workers: int | None = None) -> tuple[subprocess.Popen[str], dict[str, Any]]:
    """`evidence serve` on `store` with `--workers workers` (None: its default, which it plans
    from the cores and the memory); its `listening` line: the URL, the worker count it chose and why."""
    proc = subprocess.Popen(
        cli(
            "serve",
            "--port",
            "0",
            "--store",
            str(store),
            *([] if workers is None else ["--workers", str(workers)]),
        ),
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env=env(),
    )
    assert proc.stdout is not None
    line = proc.stdout.readline()
    if not line:
        raise SystemExit("load: evidence serve did not start")
    started = json.loads(line)
    started.setdefault("workers", workers or 1)  # a server from before the count was printed
    return proc, started


def run(args: argparse.Namespace) -> dict[str, Any]:
    dataset = Path(args.dataset)
    mix = parse_mix(args.mix)
    build_base(Path(args.base_store), dataset, Path(args.embedding_cache) if args.embedding_cache else None)
    queries = [q["text"] for q in read_jsonl(_find(dataset, "queries.jsonl.gz", "queries.jsonl"))]
    corpus = read_jsonl(_find(dataset, "corpus.jsonl.gz", "corpus.jsonl"), limit=2000)
    texts = [f"{d.get('title', '')} {d['text']}".strip() for d in corpus if d.get("text")]
    with tempfile.TemporaryDirectory(prefix="evidence-load-") as tmp:
        store = Path(tmp) / "store"
        shutil.copytree(args.base_store, store)
        base_docs = documents(store)
        proc, started = serve(store, args.workers)
        url, workers = str(started["listening"]), int(started["workers"])
        stats = Stats()
        rss: list[tuple[float, tuple[int, int, int]]] = []
        worker_rss: list[int] = []
        try:
            # Warm-up: the model loads on the first query; RSS "start" is after it. Every worker
            # of `--workers N` answers one (a connection goes to one worker; tries are bounded).
            warmed: set[int | None] = set()
            for _ in range(8 * workers):
                warmed.add(
                    answered(f"{url}/v1/indexes/{INDEX}/retrieve", "POST", {"query": queries[0]}, 300)[1]
                )
                if len(warmed) >= workers:
                    break
            if mix.get("index"):
                # The document-embedding worker starts with the first upload (seconds, once):
                # started here, outside the measured window, as it was when it started with the
                # server. A read-only mix never starts it. The document is gone again before t0.
                warmed = set()
                for _ in range(8 * workers):
                    doc = {
                        "document_id": "load-warm-up",
                        "filename": "warm.txt",
                        "text": f"Warm-up. {texts[0]}",
                    }
                    warmed.add(answered(f"{url}/v1/indexes/{INDEX}/documents", "POST", doc, 300)[1])
                    request(f"{url}/v1/indexes/{INDEX}/documents/load-warm-up", "DELETE", timeout=300)
                    if len(warmed) >= workers:
                        break
            base_generation = generation(store)  # the commits counted are the run's (WAL: a reader is fine)
            cpu_before = (
                cpu_s(server_pids(proc.pid, workers)),
                cpu_s(helper_pids(proc.pid, workers)),
            )
            t0 = time.monotonic()
            deadline = t0 + args.duration
            stop = threading.Event()

            def sample() -> None:
                while not stop.is_set():
                    rss.append((round(time.monotonic() - t0, 1), server_rss_kb(proc.pid, workers)))
                    worker_rss.append(helpers_rss_kb(proc.pid, workers))
                    stop.wait(1.0)

            sampler = threading.Thread(target=sample, daemon=True)
            sampler.start()
            writers: list[tuple[subprocess.Popen[bytes], set[str]]] = []
            if args.writers:
                for w in range(2):
                    path = Path(tmp) / f"writer{w}.jsonl"
                    ids = writer_corpus(path, f"writer{w}", texts[w * 500 :], args.writer_docs)
                    cmd = cli("index", str(path), "--index", INDEX, "--store", str(store))
                    proc_w = subprocess.Popen(
                        cmd, env=env(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
                    )
                    writers.append((proc_w, ids))
            threads = [
                threading.Thread(
                    target=guarded,
                    args=(n,),
                    kwargs={
                        "url": url,
                        "deadline": deadline,
                        "queries": queries,
                        "texts": texts,
                        "stats": stats,
                        "mix": mix,
                    },
                )
                for n in range(args.clients)
            ]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            elapsed = time.monotonic() - t0
            # CPU of the run: the serving processes, and the document-embedding process(es).
            cpu_used = (
                cpu_s(server_pids(proc.pid, workers)) - cpu_before[0],
                cpu_s(helper_pids(proc.pid, workers)) - cpu_before[1],
            )
            writer_results = []
            for p, _ in writers:
                _, err = p.communicate(timeout=600)
                writer_results.append(
                    {"exit": p.returncode, "stderr": err.decode()[-300:] if p.returncode else ""}
                )
            stop.set()
            sampler.join()
        finally:
            proc.terminate()
            proc.wait(timeout=30)
        present = documents(store)
        commits = generation(store) - base_generation
        problem = consistent(store)
    expected = set(base_docs) | stats.live
    for _, ids in writers:
        expected |= ids
    missing = sorted(expected - set(present))
    unexpected = sorted(set(present) - expected)
    total = sum(len(v) for v in stats.latencies.values())
    all_latencies = [x for v in stats.latencies.values() for x in v]
    warm = [kb for t, kb in rss if t >= min(10.0, args.duration / 4)] or [kb for _, kb in rss]

    def mb(kb: int) -> float:
        return round(kb / 1024, 1)

    return {
        "duration_s": round(elapsed, 1),
        "clients": args.clients,
        # The worker count the server ran (`--workers`, else the one its default chose) and why.
        "workers": workers,
        "workers_why": started.get("why"),
        "mix": args.mix,
        "requests": total,
        "throughput_rps": round(total / elapsed, 1) if elapsed else 0.0,
        "by_operation": {
            op: {"requests": len(v), **percentiles(v)} for op, v in sorted(stats.latencies.items())
        },
        "latency_ms": percentiles(all_latencies),
        "retrieve_stages_ms": {name: percentiles(v) for name, v in sorted(stats.stages.items())},
        "mean_ms": round(statistics.fmean(all_latencies), 1) if all_latencies else 0.0,
        "errors": len(stats.errors),
        "error_samples": stats.errors[:5],
        # Start = after warm-up (the model loaded, 10 s of traffic); series: (s, total, anon, file).
        "rss_mb": {
            "start": mb(warm[0][0]) if warm else 0.0,
            "end": mb(warm[-1][0]) if warm else 0.0,
            "max": mb(max(kb[0] for kb in warm)) if warm else 0.0,
            "anon_start": mb(warm[0][1]) if warm else 0.0,
            "anon_end": mb(warm[-1][1]) if warm else 0.0,
            "file_start": mb(warm[0][2]) if warm else 0.0,
            "file_end": mb(warm[-1][2]) if warm else 0.0,
            "series": [(t, *map(mb, kb)) for t, kb in rss[:: max(1, len(rss) // 24)]],
            # The document-embedding processes (write_nice > 0): one server's, or the one shared
            # by the workers of `--workers N` (with multiprocessing's resource tracker).
            "children_end": mb(worker_rss[-1]) if worker_rss else 0.0,
            "children_max": mb(max(worker_rss)) if worker_rss else 0.0,
        },
        "writers": writer_results,
        "documents": {
            "base": len(base_docs),
            "expected": len(expected),
            "present": len(present),
            "missing": missing[:10],
            "unexpected": unexpected[:10],
            "duplicated": sorted(d for d, extra in present.items() if extra)[:10],
            "deleted_by_clients": len(stats.deleted),
        },
        # Commits of the index during the run (the writer processes' batches included): fewer
        # than the writes that changed it when concurrent writes were committed together.
        "commits": commits,
        # CPU ms per request during the traffic (a worker replaced meanwhile is not counted).
        "cpu_ms_per_request": {
            "servers": round(1000 * cpu_used[0] / total, 1) if total else 0.0,
            "embedding": round(1000 * cpu_used[1] / total, 1) if total else 0.0,
        },
        "store_consistent": problem is None,
        "store_problem": problem,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--dataset", default=str(ROOT.parent / "shared" / "datasets" / "scifact"))
    parser.add_argument("--duration", type=float, default=120.0, help="seconds of traffic (default 120)")
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument(
        "--workers",
        type=int,
        default=None,
        help="`evidence serve --workers N` (default: the server's own default, reported as `workers`)",
    )
    parser.add_argument(
        "--mix",
        default=",".join(f"{k}={v}" for k, v in MIX.items()),
        help="operation weights (default %(default)s)",
    )
    parser.add_argument("--writers", action="store_true", help="two `evidence index` processes write too")
    parser.add_argument("--writer-docs", type=int, default=200, help="documents per writer process")
    parser.add_argument("--base-store", default=str(ROOT / "build" / "load-base"))
    parser.add_argument("--embedding-cache", default=None, help="seed the base store's embedding cache")
    parser.add_argument("--json", action="store_true", help="print the report as one JSON line")
    args = parser.parse_args(argv)
    report = run(args)
    if args.json:
        print(json.dumps(report))
    else:
        print(json.dumps(report, indent=2))
    docs = report["documents"]
    failed = (
        report["errors"]
        or not report["requests"]
        or docs["missing"]
        or docs["unexpected"]
        or docs["duplicated"]
        or not report["store_consistent"]
        or any(w["exit"] for w in report["writers"])
    )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

"""How many worker processes `evidence serve` starts by default (`EVIDENCE_SERVE_WORKERS=auto`).

One per core, as many as fit in memory. A retrieve is mostly Python under the GIL, so one process
uses about one core (read-only, 8 clients on 2 cores: one process reached 48-59 % of cores ÷ one
query's latency, two workers 90-95 %); but each worker holds its own query model, caches and dense
matrix or ANN index, so memory grows with the count (RELIABILITY.md, "Worker processes").

`plan_workers` is the rule, a pure function; `worker_footprint` estimates one worker's resident
size from the store's files and the settings; `available_memory` reads what the machine (or its
container) has free. `EVIDENCE_SERVE_MEMORY_MB` replaces the last with a figure of the user's.
"""

from __future__ import annotations

import contextlib
import math
import sqlite3
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from evidence.config import Settings

MB = 1024 * 1024
#: A worker's interpreter and libraries before its model and indexes: 113 MB measured (Python
#: with serve's imports: numpy, tantivy, faiss, the tokenizer, onnxruntime's library), rounded
#: up for the request threads' stacks and malloc arenas.
PROCESS_BYTES = 130 * MB
#: The MiniLM query model's onnxruntime session, loaded and after a query: +150 MB measured.
#: A remote embedder (Titan) loads none.
QUERY_MODEL_BYTES = 150 * MB
#: The one document-embedding process every worker shares (MiniLM with EVIDENCE_WRITE_NICE > 0;
#: `embed.background.embeds_apart`): 402-443 MB under the mixed load of `make reliability`.
#: Counted once, whatever the worker count (one process also has one).
EMBEDDING_PROCESS_BYTES = 450 * MB
#: What N > 1 workers add besides themselves: the supervisor (56 MB measured) and
#: multiprocessing's resource tracker (12 MB).
SUPERVISOR_BYTES = 70 * MB
#: A decoded chunk in an index's chunk cache (at most `store_records.CHUNK_CACHE_SIZE` per index).
CACHED_CHUNK_BYTES = 1536
#: Bytes an ANN vector costs in memory when the index file is not written yet: its 8-bit code
#: (one byte a dimension, `search/ann.py`) plus its rowid and CRC.
ANN_OVERHEAD_BYTES = 16
#: Share of the available memory the plan leaves alone: the page cache of the store's files
#: (SQLite pages, tantivy's mapped segments, counted in a worker's RSS when read), a worker's
#: growth under writes (+5-10 % in `make reliability`), the estimate's error (at 1M passages it
#: undercounts the measured 875 MB by ~10 %), and everything else running on the machine.
HEADROOM = 0.25
#: `EVIDENCE_SERVE_WORKERS`'s upper bound.
MAX_WORKERS = 64


@dataclass(frozen=True)
class Footprint:
    """One worker's estimated resident size by part, and what all workers share (bytes)."""

    process: int
    model: int
    #: Every index of the store: its dense matrix or ANN index, tantivy's files, its chunk cache.
    indexes: int
    #: The document-embedding process, one for every worker (0 when documents embed in the worker).
    shared: int = 0
    #: The supervisor of N > 1 workers (one process has none).
    supervisor: int = SUPERVISOR_BYTES

    @property
    def worker(self) -> int:
        return self.process + self.model + self.indexes


@dataclass(frozen=True)
class WorkerPlan:
    workers: int
    #: Why this count, for the startup log ("2 workers: 2 cores, 320 MB per worker fits in ...").
    reason: str


def plan_workers(
    cores: int, footprint: Footprint, available: int | None, headroom: float = HEADROOM
) -> WorkerPlan:
    """One worker per core, as many as fit: N workers need N times `footprint.worker`, plus
    `footprint.shared`, plus `footprint.supervisor` when N > 1, within (1 - `headroom`) of
    `available` bytes; at least one, at most `MAX_WORKERS`. Memory unknown (`available` None):
    one per core."""
    cores = max(1, min(cores, MAX_WORKERS))
    shared = footprint.shared + (footprint.supervisor if cores > 1 else 0)
    per = f"{_size(footprint.worker)} per worker" + (f" (+ {_size(shared)} shared)" if shared else "")
    if available is None:
        return WorkerPlan(cores, f"{_count(cores)}: {_count(cores, 'core')}, {per}, memory available unknown")
    budget = max(0, int(available * (1 - headroom)))
    within = f"{_size(budget)} ({100 - round(100 * headroom)} % of {_size(available)} available)"

    def needed(n: int) -> int:
        return n * footprint.worker + footprint.shared + (footprint.supervisor if n > 1 else 0)

    n = cores
    while n > 1 and needed(n) > budget:
        n -= 1
    if n == cores and needed(n) <= budget:
        return WorkerPlan(n, f"{_count(n)}: {_count(cores, 'core')}, {per} fits in {within}")
    if needed(n) <= budget:
        return WorkerPlan(n, f"{_count(n)}: {_count(cores, 'core')}, but {per} fits {n} in {within}")
    return WorkerPlan(1, f"1 worker: {_count(cores, 'core')}, but {per} exceeds {within}; serving with one")


def _count(n: int, what: str = "worker") -> str:
    return f"{n} {what}{'' if n == 1 else 's'}"


def _size(n: int) -> str:
    return f"{n / 1024**3:.1f} GB" if n >= 1024**3 else f"{math.ceil(n / MB)} MB"


def plan_serve_workers(settings: Settings, workers: int | str | None = None) -> WorkerPlan:
    """`evidence serve`'s worker count: `workers` (its `--workers`), else `serve_workers`; a number
    is taken as it is, `auto` is planned from the cores, the store and the memory available
    (`EVIDENCE_SERVE_MEMORY_MB` when set)."""
    chosen = settings.serve_workers if workers is None else workers
    if chosen != "auto":
        source = "--workers" if workers is not None else "EVIDENCE_SERVE_WORKERS"
        return WorkerPlan(int(chosen), f"{_count(int(chosen))} ({source}={chosen})")
    from evidence.config import available_cores

    available = settings.serve_memory_mb * MB if settings.serve_memory_mb else available_memory()
    return plan_workers(available_cores(), worker_footprint(settings), available)


def worker_footprint(settings: Settings) -> Footprint:
    """One worker's resident size estimated from the settings and the store's files."""
    from evidence.config import BackendKind, EmbedderKind
    from evidence.embed.background import embeds_apart

    local_model = settings.embedder is EmbedderKind.MINILM
    indexes = 0
    if settings.backend is BackendKind.EMBEDDED:
        root = settings.store_dir / "indexes"
        with contextlib.suppress(OSError):
            for index in sorted(p for p in root.iterdir() if p.is_dir()):
                indexes += index_bytes(index, settings.ann_min_vectors)
    return Footprint(
        process=PROCESS_BYTES,
        model=QUERY_MODEL_BYTES if local_model else 0,
        indexes=indexes,
        shared=EMBEDDING_PROCESS_BYTES if embeds_apart(settings) else 0,
    )


def index_bytes(root: Path, ann_min_vectors: int) -> int:
    """What one index of the embedded store costs a worker that serves it: the dense leg (the
    float32 matrix of exact search, or past `ann_min_vectors` vectors the ANN index: `ann.npz`'s
    size, or its codes' when not written yet), tantivy's files (mapped, resident once read) and
    the chunk cache. An index whose records cannot be read counts its records file whole."""
    from evidence.search.ann import available as ann_available
    from evidence.search.store_records import CHUNK_CACHE_SIZE

    lexical = tree_bytes(root / "lexical")
    records = root / "records.sqlite3"
    try:
        passages, chunks, dim = _counts(records)
    except sqlite3.Error:
        return lexical + _file_bytes(records)
    ann = root / "ann.npz"
    if passages >= ann_min_vectors and ann_available():
        dense = _file_bytes(ann) or passages * (dim + ANN_OVERHEAD_BYTES)
    else:
        dense = passages * dim * 4
    return dense + lexical + min(chunks, CHUNK_CACHE_SIZE) * CACHED_CHUNK_BYTES


#: The dimension assumed for an index that recorded none (MiniLM's).
DEFAULT_DIMENSION = 384


def _counts(records: Path) -> tuple[int, int, int]:
    """(passages, chunks, dimension) from the documents table: the passages are the vectors
    (spans are not embedded), and a sum over documents is far cheaper than a count of chunks."""
    if not records.is_file():
        raise sqlite3.OperationalError(f"{records} does not exist")
    db = sqlite3.connect(f"{records.as_uri()}?mode=ro", uri=True, timeout=5.0)
    try:
        passages, spans = db.execute(
            "SELECT COALESCE(SUM(passages), 0), COALESCE(SUM(spans), 0) FROM documents"
        ).fetchone()
        row = db.execute("SELECT value FROM info WHERE key = 'dimension'").fetchone()
    finally:
        db.close()
    dim = int(row[0]) if row and str(row[0]).isdigit() else DEFAULT_DIMENSION
    return int(passages), int(passages) + int(spans), dim


def _file_bytes(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


def tree_bytes(root: Path) -> int:
    """The bytes of every file under `root` (0 when it cannot be read, or is not there)."""
    try:
        return sum(p.stat().st_size for p in root.rglob("*") if p.is_file())
    except OSError:
        return 0


def available_memory(proc: Path = Path("/proc"), cgroup: Path = Path("/sys/fs/cgroup")) -> int | None:
    """Bytes this process may still take: the kernel's MemAvailable, within its cgroup's memory
    limit less what the cgroup uses (page cache it may drop not counted), cgroup v2 or v1; None
    when neither can be read (not Linux). `proc` and `cgroup` are the roots they are read under."""
    figures = [x for x in (_meminfo_available(proc), _cgroup_available(proc, cgroup)) if x is not None]
    return min(figures) if figures else None


def _meminfo_available(proc: Path) -> int | None:
    try:
        for line in (proc / "meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


#: A cgroup v1 "limit" at or past this is no limit (the kernel writes ~2^63 rounded to a page).
_NO_LIMIT = 1 << 60


def _cgroup_available(proc: Path, cgroup: Path) -> int | None:
    """limit - (usage - inactive file pages) of this process's memory cgroup, when it has a limit."""
    v2, v1 = "", ""
    with contextlib.suppress(OSError):
        for line in (proc / "self" / "cgroup").read_text().splitlines():
            number, controllers, path = [*line.split(":", 2), "", ""][:3]
            if number == "0" and not controllers:
                v2 = path.lstrip("/")
            elif "memory" in controllers.split(","):
                v1 = path.lstrip("/")
    # In a container the cgroup's own directory is usually the mount's root, not the path the
    # host's hierarchy gives: both are tried, the deeper first.
    for base, limit_name, usage_name, inactive_key in (
        (cgroup, "memory.max", "memory.current", "inactive_file"),
        (cgroup / "memory", "memory.limit_in_bytes", "memory.usage_in_bytes", "total_inactive_file"),
    ):
        rel = v2 if limit_name == "memory.max" else v1
        for directory in dict.fromkeys([base / rel, base]):
            figure = _cgroup_figure(directory, limit_name, usage_name, inactive_key)
            if figure is not None:
                return figure
    return None


def _cgroup_figure(directory: Path, limit_name: str, usage_name: str, inactive_key: str) -> int | None:
    try:
        limit_text = (directory / limit_name).read_text().strip()
        if limit_text == "max" or int(limit_text) >= _NO_LIMIT:
            return None
        usage = int((directory / usage_name).read_text().strip())
    except (OSError, ValueError):
        return None
    inactive = 0
    with contextlib.suppress(OSError, ValueError):
        for line in (directory / "memory.stat").read_text().splitlines():
            key, _, value = line.partition(" ")
            if key == inactive_key:
                inactive = int(value)
                break
    return max(0, int(limit_text) - max(0, usage - inactive))

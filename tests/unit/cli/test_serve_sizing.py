"""`evidence serve`'s default worker count (cli/serve_sizing.py): one per core, as many as fit in
memory. The rule on measured figures, the footprint read from a real store, and the memory read
from /proc- and cgroup-shaped files."""

from __future__ import annotations

from pathlib import Path

import pytest

from evidence.cli.serve_sizing import (
    CACHED_CHUNK_BYTES,
    EMBEDDING_PROCESS_BYTES,
    MB,
    PROCESS_BYTES,
    QUERY_MODEL_BYTES,
    Footprint,
    available_memory,
    index_bytes,
    plan_serve_workers,
    plan_workers,
    tree_bytes,
    worker_footprint,
)
from evidence.config import Settings
from evidence.search.embedded import EmbeddedBackend
from evidence.search.store_records import CHUNK_CACHE_SIZE
from tests.unit.search.storekit import DIM, doc, vectors

GB = 1024 * MB
#: RELIABILITY.md's figures: a SciFact worker 300-356 MB, the shared embedding process 402-442 MB;
#: at 1M passages a worker is 875 MB (docs/scale.md).
SCIFACT = Footprint(process=130 * MB, model=150 * MB, indexes=86 * MB, shared=450 * MB)
MILLION = Footprint(process=130 * MB, model=150 * MB, indexes=600 * MB, shared=450 * MB)


def test_every_core_when_memory_allows() -> None:
    plan = plan_workers(2, SCIFACT, 22 * GB)
    assert plan.workers == 2
    assert plan.reason == (
        "2 workers: 2 cores, 366 MB per worker (+ 520 MB shared) fits in 16.5 GB (75 % of 22.0 GB available)"
    )


def test_as_many_as_fit_when_memory_is_short() -> None:
    # 75 % of 4 GB = 3 GB; less 450 MB of embedding process and 70 MB of supervisor: 2.48 GB
    # holds two 880 MB workers, not three.
    plan = plan_workers(8, MILLION, 4 * GB)
    assert plan.workers == 2
    assert plan.reason.startswith("2 workers: 8 cores, but 880 MB per worker")


def test_one_when_not_even_one_fits() -> None:
    plan = plan_workers(2, MILLION, 1 * GB)
    assert plan.workers == 1
    assert "exceeds 768 MB (75 % of 1.0 GB available); serving with one" in plan.reason


def test_the_headroom_is_kept() -> None:
    # Two SciFact workers, the embedding process and the supervisor are 1,252 MB: they fit in
    # 1,700 MB at 25 % headroom (1,275 MB), not at 30 % (1,190 MB).
    assert plan_workers(2, SCIFACT, 1700 * MB).workers == 2
    assert plan_workers(2, SCIFACT, 1700 * MB, headroom=0.30).workers == 1


def test_the_supervisor_counts_only_beside_workers() -> None:
    small = Footprint(process=100 * MB, model=0, indexes=0, shared=0, supervisor=70 * MB)
    # 75 % of 340 MB = 255 MB: two workers (200 MB) would fit but not with their supervisor;
    # one process has none.
    assert plan_workers(2, small, 340 * MB).workers == 1
    assert plan_workers(2, small, 360 * MB).workers == 2  # 270 MB
    assert "fits 1 in" in plan_workers(2, small, 340 * MB).reason


def test_unknown_memory_takes_every_core_and_64_at_most() -> None:
    assert plan_workers(4, SCIFACT, None).workers == 4
    assert "memory available unknown" in plan_workers(4, SCIFACT, None).reason
    assert plan_workers(200, SCIFACT, 1024 * GB).workers == 64
    assert plan_workers(0, SCIFACT, None).workers == 1


def test_an_explicit_number_always_wins(tmp_path: Path) -> None:
    settings = Settings(store_dir=tmp_path, serve_memory_mb=1)
    assert plan_serve_workers(settings, 3).workers == 3
    assert plan_serve_workers(settings, 3).reason == "3 workers (--workers=3)"
    pinned = Settings(store_dir=tmp_path, serve_workers=2, serve_memory_mb=1)
    assert plan_serve_workers(pinned).reason == "2 workers (EVIDENCE_SERVE_WORKERS=2)"
    # auto, from either, is planned: 1 MB fits no worker.
    assert plan_serve_workers(settings).workers == 1
    assert plan_serve_workers(pinned, "auto").workers == 1


def test_the_default_is_auto() -> None:
    assert Settings.model_fields["serve_workers"].default == "auto"


def _store(root: Path, documents: int) -> EmbeddedBackend:
    backend = EmbeddedBackend(root)
    backend.create_index("idx", embedder_id="test/e", dimension=DIM)
    for i in range(documents):
        written = doc(f"d{i}", f"# Doc {i}\n\nKeys rotate every {i} years. Access is logged.\n\nIt is.\n")
        backend.upsert("idx", [written], [vectors(written)])
    return backend


def test_an_index_costs_its_matrix_its_lexical_files_and_its_chunk_cache(tmp_path: Path) -> None:
    backend = _store(tmp_path, 3)
    try:
        rows = backend.index_store("idx")._db.execute("SELECT COUNT(vector), COUNT(*) FROM chunks").fetchone()
    finally:
        backend.close()
    root = tmp_path / "indexes" / "idx"
    lexical = sum(p.stat().st_size for p in (root / "lexical").rglob("*") if p.is_file())
    passages, chunks = rows
    assert passages >= 3 and chunks > passages  # spans too, without vectors
    exact = passages * DIM * 4 + lexical + chunks * CACHED_CHUNK_BYTES
    assert index_bytes(root, ann_min_vectors=100_000) == exact
    # Past the ANN threshold without an index file yet: the 8-bit codes' estimate, not float32.
    assert (
        index_bytes(root, ann_min_vectors=1) == passages * (DIM + 16) + lexical + chunks * CACHED_CHUNK_BYTES
    )
    # With the file written, its size.
    (root / "ann.npz").write_bytes(b"x" * 12_345)
    assert index_bytes(root, ann_min_vectors=1) == 12_345 + lexical + chunks * CACHED_CHUNK_BYTES


def test_an_unreadable_index_counts_its_records_file(tmp_path: Path) -> None:
    root = tmp_path / "indexes" / "broken"
    root.mkdir(parents=True)
    (root / "records.sqlite3").write_bytes(b"not a database" * 1000)
    assert index_bytes(root, ann_min_vectors=100_000) == 14_000


def test_a_tree_is_the_bytes_of_every_file_under_it(tmp_path: Path) -> None:
    (tmp_path / "a" / "b").mkdir(parents=True)
    (tmp_path / "top").write_bytes(b"x" * 3)
    (tmp_path / "a" / "b" / "deep").write_bytes(b"x" * 5)
    assert tree_bytes(tmp_path) == 8
    assert tree_bytes(tmp_path / "a") == 5
    assert tree_bytes(tmp_path / "absent") == 0


def test_a_worker_is_the_process_the_model_and_every_index(tmp_path: Path) -> None:
    _store(tmp_path, 2).close()
    settings = Settings(store_dir=tmp_path)
    footprint = worker_footprint(settings)
    assert footprint.process == PROCESS_BYTES and footprint.model == QUERY_MODEL_BYTES
    assert footprint.indexes == index_bytes(tmp_path / "indexes" / "idx", settings.ann_min_vectors) > 0
    assert footprint.shared == EMBEDDING_PROCESS_BYTES
    # Documents embedded in each worker (write_nice 0): no shared process.
    assert worker_footprint(Settings(store_dir=tmp_path, write_nice=0)).shared == 0
    empty = worker_footprint(Settings(store_dir=tmp_path / "nothing-yet"))
    assert empty.indexes == 0 and empty.worker == PROCESS_BYTES + QUERY_MODEL_BYTES


def test_the_chunk_cache_bound_is_the_stores() -> None:
    assert CHUNK_CACHE_SIZE == 50_000  # the per-index bound `index_bytes` counts


MEMINFO = "MemTotal:       24684084 kB\nMemFree:        18826816 kB\nMemAvailable:   24068064 kB\n"


def _proc(tmp_path: Path, cgroup_line: str) -> Path:
    proc = tmp_path / "proc"
    (proc / "self").mkdir(parents=True)
    (proc / "meminfo").write_text(MEMINFO)
    (proc / "self" / "cgroup").write_text(cgroup_line)
    return proc


def test_memory_available_from_the_kernel(tmp_path: Path) -> None:
    proc = _proc(tmp_path, "0::/\n")
    assert available_memory(proc, tmp_path / "no-cgroup") == 24068064 * 1024


def test_a_cgroup_v2_limit_caps_it(tmp_path: Path) -> None:
    proc = _proc(tmp_path, "0::/box\n")
    box = tmp_path / "cg" / "box"
    box.mkdir(parents=True)
    (box / "memory.max").write_text(f"{4 * GB}\n")
    (box / "memory.current").write_text(f"{3 * GB}\n")
    # 1 GB of the usage is page cache the kernel may drop: 4 - (3 - 1) = 2 GB left.
    (box / "memory.stat").write_text(f"anon 1000\nfile {GB}\ninactive_file {GB}\nactive_file 0\n")
    assert available_memory(proc, tmp_path / "cg") == 2 * GB
    (box / "memory.max").write_text("max\n")
    assert available_memory(proc, tmp_path / "cg") == 24068064 * 1024


def test_a_cgroup_v1_limit_caps_it_and_a_huge_one_is_none(tmp_path: Path) -> None:
    proc = _proc(tmp_path, "4:memory:/process_api/abc\n0::/\n")
    # A container sees its own cgroup at the mount's root, not at the host's path.
    memory = tmp_path / "cg" / "memory"
    memory.mkdir(parents=True)
    (memory / "memory.limit_in_bytes").write_text(f"{2 * GB}\n")
    (memory / "memory.usage_in_bytes").write_text(f"{GB}\n")
    (memory / "memory.stat").write_text("cache 0\ntotal_inactive_file 0\n")
    assert available_memory(proc, tmp_path / "cg") == GB
    (memory / "memory.limit_in_bytes").write_text("9223372036854771712\n")
    assert available_memory(proc, tmp_path / "cg") == 24068064 * 1024


def test_no_figure_at_all_is_unknown(tmp_path: Path) -> None:
    assert available_memory(tmp_path / "none", tmp_path / "none") is None


@pytest.mark.skipif(not Path("/proc/meminfo").exists(), reason="Linux")
def test_this_machine_reports_some_memory() -> None:
    available = available_memory()
    assert available is not None and available > 0

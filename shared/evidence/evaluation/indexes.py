"""The indexes `evidence eval` writes for itself: `eval-<dataset>` (`--dataset`, `beir`) and
`qa-<family>` (`--qa DIR`, `suite`). One is reused only when nothing that shapes it changed since
it was written: its fingerprint (`<store>/eval/<index>.fingerprint`: the inputs, the chunking and
embedding settings, the ingestion code) is the run's, and its recorded indexing settings
(`search.written`) agree with the run's, compared as the store's own write check compares them.
Otherwise it is deleted (its cached vectors with it) and indexed afresh, and stderr says why: a
run under another window, long-text rule, header rule or span-vector setting scores vectors of its
own settings, neither stale ones nor a refused write (docs/ingest.md#indexing-settings-of-an-index).
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from evidence.config import Settings
from evidence.progress import ProgressFn
from evidence.search.headers import SectionHeaders
from evidence.service import EvidenceService, IndexProgress

#: What a failed input becomes: (failures, first source, its reason) -> the error raised.
Failure = Callable[[int, str, str], Exception]


def header_tag(settings: Settings) -> bytes:
    """What a fingerprint adds for the section header rule: nothing when it is off, so the
    fingerprints of the stores indexed without one stand; its parameters under one."""
    headers = SectionHeaders.from_settings(settings).params()
    return b"" if headers is None else json.dumps(headers, sort_keys=True).encode()


def _say(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def why_stale(service: EvidenceService, index: str, fingerprint: str) -> str | None:
    """Why `index` cannot be reused for a run of `fingerprint`: '' when it does not exist (it is
    simply indexed), a sentence when it exists but was written from other inputs or code (another
    fingerprint, or none) or under other indexing settings than the running ones; None when it is
    current."""
    from evidence.errors import IndexNotFoundError
    from evidence.search.written import other_than

    try:
        info = service.backend.get_index(index)
    except IndexNotFoundError:
        # Only a missing index is indexed afresh: an unreachable or unreadable store (any other
        # error) is reported as itself, not taken as "absent" and written over.
        return ""
    # The record first: it names the setting (the fingerprint only tells that something changed).
    differs = other_than(info, service.settings)
    if differs is not None:
        setting, recorded, running = differs
        return (
            f"index {index!r} was written with {setting}={recorded!r}, but this run has {setting}={running!r}"
        )
    marker = _marker(service, index)
    if not marker.exists():
        return f"index {index!r} has no fingerprint of an `evidence eval` run ({marker.name})"
    if marker.read_text() != fingerprint:
        return (
            f"index {index!r} was indexed from other inputs, chunking or embedding settings or "
            "ingestion code than this run's"
        )
    return None


def ensure_eval_index(
    service: EvidenceService,
    index: str,
    fingerprint: str,
    sources: Sequence[Path],
    *,
    unit: str,
    failure: Failure,
    embed: bool = True,
    progress: ProgressFn | None = None,
    notice: Callable[[str], None] = _say,
) -> float:
    """Index `sources` as `index` unless it is current (`why_stale`); an existing stale one is
    deleted first (so no document or vector of the old run stays) and `notice` (stderr) says why.
    `progress(documents, None, unit)` during indexing; a failed input raises `failure(...)` and
    leaves no fingerprint. Returns the seconds spent indexing (0.0 when reused)."""
    stale = why_stale(service, index, fingerprint)
    if stale is None:
        return 0.0
    if stale:
        notice(f"{stale}: deleting it and indexing again")
        service.delete_index(index)
    start = time.perf_counter()

    def written(p: IndexProgress) -> None:
        if progress:
            progress(p.documents, None, unit)

    report = service.index_paths(index, list(sources), progress=written, embed=embed)
    if report.failed:
        source, reason = report.failed[0]
        raise failure(len(report.failed), source, reason)
    marker = _marker(service, index)
    marker.parent.mkdir(parents=True, exist_ok=True)
    marker.write_text(fingerprint)
    return time.perf_counter() - start


def _marker(service: EvidenceService, index: str) -> Path:
    return service.settings.store_dir / "eval" / f"{index}.fingerprint"

"""What an index's documents were written with: the indexing settings that shape what is stored
(the passage vectors' model and window, the section header rule in the lexical field and the
vectors' inputs, which late span vectors exist) or where it is cached (the embedding cache
scope), recorded by the stores so that a write into an index (`evidence index`, a document post,
the indexer) and a copy (`evidence migrate`) can refuse to mix two
(docs/ingest.md#indexing-settings-of-an-index, docs/opensearch.md#migrating-an-embedded-index).

The record is a flat mapping of setting names (`Settings` field names, so a message can name the
variable `EVIDENCE_<NAME>`) to strings. The embedded store records it at its first write that
changes a document (index `info`, `written_with`); OpenSearch keeps the one the index was created
with (`_meta.written_with`), without the cache scope (it has no cache). Both refuse a write under
another record (`refuse_difference`: `EmbeddedBackend` and `IndexAdmin`), and so does migrate.
Only the keys two records share are compared, so a record with fewer keys (an older one) is
compared on what it has, an index without vectors is compared without the keys that shape
only vectors (`VECTOR_KEYS`), and (since session 51) the embedded store compares an index none of
whose chunks has a section without the header rule's keys (`HEADER_KEYS`); OpenSearch compares
them only for a batch (or, at `create_index`, an index) holding a sectioned chunk, and migrate as
they do (`refuse_difference` returns the header difference it let through).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from evidence.errors import IndexSettingsMismatchError

if TYPE_CHECKING:
    from evidence.config import Settings
    from evidence.search.base import IndexInfo

#: The key of the embedding cache scope: a property of the embedded store only.
CACHE_SCOPE = "embedding_cache_scope"
#: Where an index's record stands in its `IndexInfo.extra`.
EXTRA_KEY = "written_with"
#: The settings that shape only an index's vectors or where they are cached: the model, its window
#: and long-text rule, the late span vectors, the cache scope. An index without vectors (a
#: lexical-only one, dimension 0: nothing is embedded for it) is compared without them, so a BM25
#: writer is not refused for another `EVIDENCE_EMBEDDER`. The header rule's keys stay: the header
#: shapes the BM25 field and the documents' content hash.
VECTOR_KEYS = frozenset(
    {"embedder", "embed_max_tokens", "embed_long_text", "embed_spans_at_index", CACHE_SCOPE}
)
#: The section header rule's settings. A chunk without a section has the empty header under every
#: rule (`SectionHeaders.header`, and `hashed` keeps its document's hash), so they shape nothing an
#: index holds while none of its chunks has a section: such an index (BEIR/JSONL records) may be
#: written under another rule, which it then records (`refuse_difference`, `has_sections`).
HEADER_KEYS = frozenset({"section_header", "section_header_legs", "section_header_spans"})


def written_with(settings: Settings) -> dict[str, str]:
    """The record of `settings`: what a write under them stores. The section header's legs and
    spans are recorded only under a header rule (off, they change nothing)."""
    out = {
        "embedder": settings.embedder.value,
        "embed_max_tokens": str(settings.embed_max_tokens),
        "embed_long_text": settings.embed_long_text.value,
        "section_header": settings.section_header.value,
        "embed_spans_at_index": settings.embed_spans_at_index.value,
        CACHE_SCOPE: settings.embedding_cache_scope.value,
    }
    if settings.section_header.value != "off":
        out["section_header_legs"] = settings.section_header_legs.value
        out["section_header_spans"] = str(settings.section_header_spans).lower()
    return out


def without_cache(record: Mapping[str, str]) -> dict[str, str]:
    """`record` as an index with no embedding cache (OpenSearch) keeps it."""
    return {k: v for k, v in record.items() if k != CACHE_SCOPE}


def for_index(record: Mapping[str, str] | None, dimension: int) -> dict[str, str] | None:
    """`record` as an index of `dimension` is compared on: without `VECTOR_KEYS` when it holds
    no vectors (dimension 0), whole otherwise; None stays None."""
    if record is None:
        return None
    if dimension > 0:
        return dict(record)
    return {k: v for k, v in record.items() if k not in VECTOR_KEYS}


def first_difference(
    recorded: Mapping[str, str] | None, other: Mapping[str, str] | None
) -> tuple[str, str, str] | None:
    """(setting, recorded value, other value) of the first setting both records hold with
    different values (in `recorded`'s order); None when they agree or either is missing. A key
    one record lacks (written before it was recorded, or under no header rule) compares as the
    value it had then: `section_header_legs`/`_spans` are only told apart under a header rule,
    and `section_header` itself is always recorded."""
    if not recorded or not other:
        return None
    for key, value in recorded.items():
        if key in other and str(other[key]) != str(value):
            return key, str(value), str(other[key])
    return None


def parse(value: object) -> dict[str, str] | None:
    """A stored record (a mapping, or its JSON text) as a record; None when absent or unreadable."""
    import json

    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            return None
    if not isinstance(value, Mapping):
        return None
    return {str(k): str(v) for k, v in value.items()}


def as_extra(value: object) -> dict[str, Any]:
    """An index's `IndexInfo.extra` entry for its stored record (`parse`): {} when it has none
    (written before records were kept) or it cannot be read."""
    record = parse(value) if value else None
    return {EXTRA_KEY: record} if record else {}


def difference(
    recorded: Mapping[str, str] | None, other: Mapping[str, str] | None, *, dimension: int
) -> tuple[str, str, str] | None:
    """`first_difference` of the two records as an index of `dimension` compares them
    (`for_index`: a lexical-only index without the vector keys): what a write check refuses on,
    and what `evidence eval` re-indexes its own index for (`evaluation.indexes`)."""
    return first_difference(for_index(recorded, dimension), for_index(other, dimension))


def other_than(info: IndexInfo, settings: Settings) -> tuple[str, str, str] | None:
    """(setting, recorded value, value under `settings`) of the first indexing setting the index
    of `info` records another value of (`difference`, as its stores' write checks compare); None
    when they agree or it has no record. What `evidence eval` deletes its own index and indexes it
    afresh for (`evaluation.indexes`), where another writer is refused."""
    return difference(info.extra.get(EXTRA_KEY), written_with(settings), dimension=info.dimension)


def refuse_difference(
    recorded: Mapping[str, str] | None,
    other: Mapping[str, str] | None,
    explain: Callable[[str, str, str], str],
    *,
    dimension: int,
    has_sections: Callable[[], bool] | None = None,
) -> tuple[str, str, str] | None:
    """IndexSettingsMismatchError (`field`: the setting) at the first difference of the two
    records as an index of `dimension` compares them (`difference`); `explain(setting, recorded
    value, other value)` is its message, which says where each value comes from and the fix.
    `has_sections` (asked only when the records differ on a header key): whether the index holds
    a chunk with a section; when it holds none, the header keys are not compared (`HEADER_KEYS`).
    None: taken as holding one (refused). Returns the first header difference so let through
    (the records agree on every other key), else None: they agree, or either is missing."""
    differs = difference(recorded, other, dimension=dimension)
    let_through = None
    if differs is not None and differs[0] in HEADER_KEYS and has_sections is not None and not has_sections():
        let_through = differs
        differs = difference(_without_header(recorded), _without_header(other), dimension=dimension)
    if differs is not None:
        raise IndexSettingsMismatchError(explain(*differs), field=differs[0])
    return let_through


def _without_header(record: Mapping[str, str] | None) -> dict[str, str] | None:
    return None if record is None else {k: v for k, v in record.items() if k not in HEADER_KEYS}

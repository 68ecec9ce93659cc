"""No write creates an evidence index implicitly (docs/opensearch.md#no-implicit-index-creation).

A backend reads an index once (`_infos`) and then writes into it; if another process deletes the
index in between, the bulk goes to a missing index, which a cluster with the default
`action.auto_create_index` re-creates with dynamic mappings and no `_meta` (no embedder, no
settings record). With the setting the deploy step puts (`bodies.AUTO_CREATE_INDEX`), the cluster
refuses those actions (`index_not_found_exception`), the adapter raises IndexNotFoundError (404)
and forgets what it had cached about the index. Over real HTTP: the fault proxy (which models the
setting, osmem ignores it) in front of osmem-server.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from opensearchpy import OpenSearch

from evidence.config import Settings
from evidence.errors import IndexNotFoundError, IndexSettingsMismatchError
from evidence.search.opensearch import OpenSearchBackend
from tests.contract.corpus import DIM, EMBEDDER, corpus, vectors_for
from tests.contract.fault_proxy import FaultProxy
from tests.unit.search.opensearch.spec_cache import validate_sent
from tests.unit.search.opensearch.spec_validator import parse_version

INDEX = "deleted-under"


@pytest.fixture
def proxy(osmem_clone: Any, request: pytest.FixtureRequest) -> Iterator[FaultProxy]:
    fp = FaultProxy(osmem_clone.url)
    yield fp
    fp.close()
    version = parse_version(request.getfixturevalue("osmem_server").version)
    validate_sent([(r.method, r.path, r.body) for r in fp.log if r.body], version=version, made=bool(fp.log))


def _backend(proxy: FaultProxy, **settings: Any) -> OpenSearchBackend:
    return OpenSearchBackend(
        Settings(backend="opensearch", opensearch_endpoint=proxy.url, **settings), max_retries=0
    )


def _deleted_after_the_reads(writer: OpenSearchBackend, other: OpenSearchBackend) -> None:
    """Another process deletes the index once `writer` has read it and its markers: the bulk
    that follows is the write's first request after the deletion (the race's window)."""
    read = writer._markers

    def then_deleted(index: str, document_ids: Any) -> Any:
        markers = read(index, document_ids)
        other.delete_index(INDEX)
        return markers

    writer._markers = then_deleted  # type: ignore[method-assign]


def test_the_double_creates_a_missing_index_by_default(proxy: FaultProxy, osmem_clone: Any) -> None:
    """What the race does on a cluster left at its default: the write re-creates the index
    without our mappings (so the test below proves the setting, not the double)."""
    writer, other = _backend(proxy), _backend(proxy)
    writer.create_index(INDEX, embedder_id=EMBEDDER, dimension=DIM)
    docs = corpus()
    _deleted_after_the_reads(writer, other)
    writer.upsert(INDEX, docs[:1], vectors_for(docs[:1]))
    raw = OpenSearch(hosts=[osmem_clone.url], max_retries=0)
    assert raw.indices.exists(index=INDEX)
    assert "_meta" not in raw.indices.get(index=INDEX)[INDEX]["mappings"]


def test_a_write_into_an_index_deleted_under_it_is_refused_and_creates_nothing(
    proxy: FaultProxy, osmem_clone: Any
) -> None:
    _backend(proxy).refuse_implicit_index_creation()  # the deploy step (Custom::EvidenceSearchSetup)
    writer, other = _backend(proxy), _backend(proxy)
    docs = corpus()
    writer.create_index(INDEX, embedder_id=EMBEDDER, dimension=DIM)
    writer.upsert(INDEX, docs[:1], vectors_for(docs[:1]))  # the index's info is now cached
    _deleted_after_the_reads(writer, other)
    with pytest.raises(IndexNotFoundError) as err:
        writer.upsert(INDEX, docs[1:], vectors_for(docs[1:]))
    assert err.value.status == 404 and err.value.code == "index_not_found"
    assert "was deleted while this write was under way" in err.value.message
    assert "index_not_found_exception" in err.value.message
    raw = OpenSearch(hosts=[osmem_clone.url], max_retries=0)
    assert not raw.indices.exists(index=INDEX), "the write created the index implicitly"

    # Another process creates the index again, under other indexing settings: the writer reads
    # the new record (nothing cached outlived the deletion) and is refused before writing.
    del writer._markers
    headed = _backend(proxy, section_header="heading")
    headed.create_index(INDEX, embedder_id=EMBEDDER, dimension=DIM)
    with pytest.raises(IndexSettingsMismatchError):
        writer.upsert(INDEX, docs[1:], vectors_for(docs[1:]))
    assert headed.get_index(INDEX).chunks == 0
    for backend in (writer, other, headed):
        backend.close()


def test_an_index_created_explicitly_is_still_written(proxy: FaultProxy) -> None:
    """The setting refuses implicit creation only: `create_index` and the writes after it work."""
    _backend(proxy).refuse_implicit_index_creation()
    writer = _backend(proxy)
    docs = corpus()
    writer.create_index(INDEX, embedder_id=EMBEDDER, dimension=DIM)
    results = writer.upsert(INDEX, docs, vectors_for(docs))
    assert [r.status for r in results] == ["created"] * len(docs)
    assert writer.get_index(INDEX).documents == len(docs)
    writer.close()


def test_serverless_has_no_cluster_setting_to_put(proxy: FaultProxy) -> None:
    from evidence.errors import ConfigurationError

    serverless = _backend(proxy, opensearch_service="aoss")
    with pytest.raises(ConfigurationError, match="no cluster settings"):
        serverless.refuse_implicit_index_creation()

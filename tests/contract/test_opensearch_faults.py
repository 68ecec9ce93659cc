"""The OpenSearch adapter under 429s, 503s, cut connections, slow replies and Serverless, over real
HTTP: adapter -> opensearch-py (client + helpers.streaming_bulk) -> fault proxy -> osmem-server.

Every scenario runs the faulty write, checks that no marker vouches for an incomplete
document, then converges (runs the same write again with the faults gone, after the
Serverless visibility delay) and checks what osmem really holds (read directly, not through
the proxy): every document present once, chunk counts exact, nothing stale, no duplicate. Every
body the adapter sent through the proxy is validated against the spec afterwards.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import pytest
from opensearchpy import OpenSearch

from evidence.config import Settings
from evidence.errors import BackendError, ServiceUnavailableError
from evidence.records import DocumentChunks
from evidence.search.opensearch import OpenSearchBackend
from evidence.search.opensearch_bodies import MIN_VERSION
from tests.contract.corpus import DIM, EMBEDDER, corpus, edited, vectors_for
from tests.contract.fault_proxy import Census, Fault, FaultProxy, Serverless
from tests.unit.search.opensearch.spec_cache import validate_sent
from tests.unit.search.opensearch.spec_validator import parse_version

INDEX = "faults"
VISIBILITY_S = 0.8
#: Outcome lines, printed with -s (the closing note quotes them).
OUTCOMES: list[str] = []


@dataclass(frozen=True)
class Outcome:
    expected: int
    present: int
    duplicated: int
    missing_chunks: int
    stale_rows: int
    bad_markers: int

    @property
    def converged(self) -> bool:
        return (self.present, self.duplicated, self.missing_chunks, self.stale_rows, self.bad_markers) == (
            self.expected,
            0,
            0,
            0,
            0,
        )


def check(
    rows: list[dict[str, Any]], docs: list[DocumentChunks], versions: Sequence[DocumentChunks] = ()
) -> Outcome:
    """`docs`: what should be there; `versions`: older versions a marker may still vouch for."""
    by_hash = {(d.document_id, d.content_hash): d for d in [*versions, *docs]}
    by_doc: dict[str, list[dict[str, Any]]] = {}
    for row in rows:
        by_doc.setdefault(str(row["document_id"]), []).append(row)
    present = duplicated = missing = stale = 0
    for doc in docs:
        doc_rows = by_doc.get(doc.document_id, [])
        markers = [r for r in doc_rows if r["kind"] == "document"]
        chunks = Counter(r["chunk_id"] for r in doc_rows if r["kind"] != "document")
        expected = {c.chunk_id for c in doc.chunks}
        dup = len(markers) > 1 or any(n > 1 for n in chunks.values())
        duplicated += dup
        missing += len(expected - set(chunks))
        stale += sum(
            1
            for r in doc_rows
            if r["kind"] != "document"
            and (r["chunk_id"] not in expected or r["document_hash"] != doc.content_hash)
        )
        complete = set(chunks) == expected and all(
            r["document_hash"] == doc.content_hash for r in doc_rows if r["kind"] != "document"
        )
        present += complete and not dup and [m["document_hash"] for m in markers] == [doc.content_hash]
    bad = 0
    for doc_id, doc_rows in by_doc.items():
        for marker in (r for r in doc_rows if r["kind"] == "document"):
            version = by_hash.get((doc_id, marker["document_hash"]))
            generation = marker.get("generation")
            mine = [
                r
                for r in doc_rows
                if r["kind"] != "document" and (generation is None or r.get("generation") == generation)
            ]
            if version is None or {r["chunk_id"] for r in mine} != {c.chunk_id for c in version.chunks}:
                bad += 1  # a marker vouching for a document that is not all there
            elif (marker.get("passages"), marker.get("spans")) != _counts(version):
                bad += 1
    return Outcome(len(docs), present, duplicated, missing, stale, bad)


def _counts(doc: DocumentChunks) -> tuple[int, int]:
    passages = sum(1 for c in doc.chunks if c.kind.value == "passage")
    return passages, len(doc.chunks) - passages


def report(name: str, outcome: Outcome) -> None:
    line = (
        f"{name}: documents expected {outcome.expected} / present {outcome.present} / duplicated "
        f"{outcome.duplicated} (missing chunks {outcome.missing_chunks}, stale rows {outcome.stale_rows}, "
        f"markers for incomplete documents {outcome.bad_markers})"
    )
    OUTCOMES.append(line)
    print(line)


@pytest.fixture
def proxy(osmem_clone: Any, request: pytest.FixtureRequest) -> Iterator[FaultProxy]:
    marker = request.node.get_closest_marker("serverless")
    visibility = marker.kwargs.get("visibility_s", VISIBILITY_S) if marker else 0.0
    fp = FaultProxy(osmem_clone.url, serverless=Serverless(visibility_s=visibility) if marker else None)
    yield fp
    fp.close()
    # Every body the adapter sent, against the spec at the version it was built for (Serverless
    # gets what the oldest supported version accepts).
    version = MIN_VERSION if marker else parse_version(request.getfixturevalue("osmem_server").version)
    validate_sent([(r.method, r.path, r.body) for r in fp.log if r.body], version=version, made=bool(fp.log))


def backend(proxy: FaultProxy, *, serverless: bool = False, **kw: Any) -> OpenSearchBackend:
    settings = Settings(
        backend="opensearch",
        opensearch_endpoint=proxy.url,
        opensearch_service="aoss" if serverless else "es",
        opensearch_timeout_s=kw.pop("timeout_s", 2.0),
        request_deadline_s=kw.pop("deadline_s", 20.0),
    )
    kw.setdefault("max_retries", 2)
    kw.setdefault("backoff_s", 0.01)
    kw.setdefault("bulk_docs", 3)
    # The client build_client makes, minus SigV4 (loopback has no AWS credentials to sign with).
    client = OpenSearch(
        hosts=[proxy.url],
        timeout=settings.opensearch_timeout_s,
        max_retries=0,
        retry_on_timeout=False,
        http_compress=True,
    )
    return OpenSearchBackend(settings, client=client, **kw)


def truth(osmem: Any, proxy: FaultProxy, *, settle: bool = True) -> list[dict[str, Any]]:
    """What osmem holds; after the visibility delay unless `settle=False` (the state right now)."""
    if settle:
        proxy.settle()
    return Census.take(osmem.url, INDEX).rows


def converge(osb: OpenSearchBackend, proxy: FaultProxy, docs: list[DocumentChunks], runs: int = 2) -> None:
    """The redelivery / re-run: the same write again, faults gone, after the visibility delay."""
    proxy.clear()
    for _ in range(runs):
        proxy.settle()
        osb.upsert(INDEX, docs, vectors_for(docs))


def chunk_of(doc_id: str, n: int) -> str:
    doc = next(d for d in corpus() if d.document_id == doc_id)
    return doc.chunks[n].chunk_id


def refuse(chunk_id: str) -> Any:
    return lambda _meta, source: source is not None and source.get("chunk_id") == chunk_id


# --- managed domain (caller ids) ------------------------------------------------------------------


def test_item_429s_beyond_retries_never_leave_a_marker_on_an_incomplete_document(
    proxy: FaultProxy, osmem_clone: Any
) -> None:
    """Defect 1: streaming_bulk reorders retried 429 items; results must be attributed by action."""
    osb = backend(proxy)
    osb.create_index(INDEX, embedder_id=EMBEDDER, dimension=DIM)
    docs = corpus()
    proxy.add(Fault("item_429", items=refuse(chunk_of("incident", 1)), times=0))
    with pytest.raises(ServiceUnavailableError, match="incident"):
        osb.upsert(INDEX, docs, vectors_for(docs))
    during = check(truth(osmem_clone, proxy), docs)
    assert during.bad_markers == 0 and during.present == len(docs) - 1
    assert osb.document_hash(INDEX, "incident") is None  # redone by the next upsert
    converge(osb, proxy, docs, runs=1)
    outcome = check(truth(osmem_clone, proxy), docs)
    report("managed, per-item 429 beyond retries", outcome)
    assert outcome.converged, outcome


def test_transient_item_429_resends_only_that_item(proxy: FaultProxy, osmem_clone: Any) -> None:
    osb = backend(proxy)
    osb.create_index(INDEX, embedder_id=EMBEDDER, dimension=DIM)
    docs = corpus()
    proxy.add(Fault("item_429", items=refuse(chunk_of("policy", 2)), times=1))
    results = osb.upsert(INDEX, docs, vectors_for(docs))
    assert [r.status for r in results] == ["created"] * len(docs)
    chunks = sum(len(d.chunks) for d in docs)
    assert proxy.forwarded_bulk_actions == chunks + len(docs)  # chunks and markers, nothing twice
    outcome = check(truth(osmem_clone, proxy), docs)
    report("managed, transient per-item 429", outcome)
    assert outcome.converged, outcome


def test_503_on_a_bulk_request_is_retried(proxy: FaultProxy, osmem_clone: Any) -> None:
    osb = backend(proxy)
    osb.create_index(INDEX, embedder_id=EMBEDDER, dimension=DIM)
    docs = corpus()
    proxy.add(Fault("status", status=503, first=2))
    osb.upsert(INDEX, docs, vectors_for(docs))
    assert [r.status for r in proxy.requests("/_bulk$")][:3] == [200, 503, 200]
    outcome = check(truth(osmem_clone, proxy), docs)
    report("managed, 503 on a bulk request", outcome)
    assert outcome.converged, outcome


def test_a_cut_connection_resends_only_the_request_in_flight(proxy: FaultProxy, osmem_clone: Any) -> None:
    """Defect 2: a failure used to restart the whole stream from the first action."""
    osb = backend(proxy)
    osb.create_index(INDEX, embedder_id=EMBEDDER, dimension=DIM)
    docs = corpus()
    proxy.add(Fault("cut", first=2))  # applied, then the answer is lost halfway
    osb.upsert(INDEX, docs, vectors_for(docs))
    chunks = sum(len(d.chunks) for d in docs)
    resent = proxy.forwarded_bulk_actions - chunks - len(docs)
    assert resent == 3, proxy.forwarded_bulk_actions  # the cut request (bulk_docs=3), nothing else
    outcome = check(truth(osmem_clone, proxy), docs)
    report("managed, connection cut mid-answer", outcome)
    assert outcome.converged, outcome


def test_a_bulk_answer_past_the_timeout_is_resent_by_id(proxy: FaultProxy, osmem_clone: Any) -> None:
    # The other requests must finish inside the timeout even on a loaded runner: 1 s, not 0.3.
    osb = backend(proxy, timeout_s=1.0)
    osb.create_index(INDEX, embedder_id=EMBEDDER, dimension=DIM)
    docs = corpus()
    proxy.add(Fault("slow", delay_s=2.5, first=1))
    osb.upsert(INDEX, docs, vectors_for(docs))
    outcome = check(truth(osmem_clone, proxy), docs)
    report("managed, bulk answer past the timeout", outcome)
    assert outcome.converged, outcome


def test_replacing_many_documents_stays_under_max_terms_count(osmem_clone: Any) -> None:
    """Defect 4: the keep-list held one term per chunk id; now one per generation."""
    fp = FaultProxy(osmem_clone.url, terms_limit=40)
    try:
        osb = backend(fp, bulk_docs=50)
        osb.create_index(INDEX, embedder_id=EMBEDDER, dimension=DIM)
        base = corpus()[0]
        docs = [
            _renamed(edited(base, [f"Passage {j} of document {i}." for j in range(6)]), f"doc-{i}")
            for i in range(20)
        ]
        osb.upsert(INDEX, docs, [None] * len(docs))
        new = [
            _renamed(edited(d, [f"Passage {j}, second version." for j in range(5)]), d.document_id)
            for d in docs
        ]
        results = osb.upsert(INDEX, new, [None] * len(new))
        assert {r.status for r in results} == {"updated"}
        outcome = check(truth(osmem_clone, fp), new, versions=docs)
        report("managed, 20 documents x 5 chunks replaced, max_terms_count 40", outcome)
        assert outcome.converged, outcome
    finally:
        fp.close()


def _renamed(doc: DocumentChunks, document_id: str) -> DocumentChunks:
    from dataclasses import replace

    from evidence.ids import chunk_id

    chunks = tuple(
        replace(c, document_id=document_id, chunk_id=chunk_id(document_id, c.kind.value, c.sequence))
        for c in doc.chunks
    )
    return replace(doc, document_id=document_id, chunks=chunks)


def test_a_slow_query_is_not_retried_and_fails_fast_as_unavailable(proxy: FaultProxy) -> None:
    """Defect 5: a read timeout on a query was retried 4 times (~45 s with backoff)."""
    osb = backend(proxy, timeout_s=1.0, max_retries=3, backoff_s=0.2)
    osb.create_index(INDEX, embedder_id=EMBEDDER, dimension=DIM)
    proxy.add(Fault("slow", path=r"/_search$", delay_s=8.0, times=0))
    t0 = time.monotonic()
    with pytest.raises(ServiceUnavailableError) as err:
        osb.lexical(INDEX, "encryption", k=3)
    elapsed = time.monotonic() - t0
    assert len(proxy.requests("/_search$")) == 1, "a read timeout is not retried"
    # Waiting for the reply would take >= 8 s; the count above is what rules a retry out.
    assert elapsed < 6.0, elapsed
    assert err.value.status == 503 and err.value.retry_after_s >= 1


def test_retries_stop_at_the_requests_deadline(proxy: FaultProxy) -> None:
    """503s for ever: the adapter gives up before the deadline, not after its attempts."""
    from evidence.retry import deadline_scope

    osb = backend(proxy, max_retries=50, backoff_s=0.1)
    osb.create_index(INDEX, embedder_id=EMBEDDER, dimension=DIM)
    proxy.add(Fault("status", path=r"/_search$", status=503, times=0))
    t0 = time.monotonic()
    with deadline_scope(1.0), pytest.raises(ServiceUnavailableError, match="deadline"):
        osb.lexical(INDEX, "encryption", k=3)
    assert time.monotonic() - t0 < 2.0  # the deadline plus at most one quick attempt


def test_version_behind_override_main_response_version(osmem_clone: Any, osmem_server: Any) -> None:
    """Defect 7: a domain with override_main_response_version says 7.10.2 on GET /."""
    fp = FaultProxy(osmem_clone.url, main_version="7.10.2")
    try:
        osb = backend(fp)
        assert osb.cluster_version() == tuple(int(x) for x in osmem_server.version.split("."))
        assert [r.path for r in fp.requests()] == ["/", "/_nodes/_local"]
    finally:
        fp.close()


# --- Serverless -----------------------------------------------------------------------------------


@pytest.mark.serverless
def test_serverless_replace_converges_to_one_copy(proxy: FaultProxy, osmem_clone: Any) -> None:
    """Defect 3: replace without _delete_by_query (Serverless has none) and without caller ids."""
    osb = backend(proxy, serverless=True)
    osb.create_index(INDEX, embedder_id=EMBEDDER, dimension=DIM)
    docs = corpus()
    osb.upsert(INDEX, docs, vectors_for(docs))
    proxy.settle()
    new = [edited(docs[0], ["Only one passage now."]), *docs[1:]]
    osb.upsert(INDEX, new, vectors_for(new))
    converge(osb, proxy, new)
    outcome = check(truth(osmem_clone, proxy), new, versions=docs)
    report("Serverless, replace a document", outcome)
    assert outcome.converged, outcome
    assert not proxy.requests("_delete_by_query") and all("refresh" not in r.query for r in proxy.log)


@pytest.mark.serverless(
    visibility_s=3.0
)  # long enough for the redelivery to land inside it on a busy machine
def test_serverless_cut_then_redelivery_inside_the_window(proxy: FaultProxy, osmem_clone: Any) -> None:
    """A cut bulk answer (applied, not acknowledged), then the SQS redelivery arrives before the
    first write is even visible: duplicates for a while, one copy after the next write."""
    osb = backend(proxy, serverless=True)
    osb.create_index(INDEX, embedder_id=EMBEDDER, dimension=DIM)
    docs = corpus()
    proxy.add(Fault("cut", first=2))
    with pytest.raises(ServiceUnavailableError):
        osb.upsert(INDEX, docs, vectors_for(docs))
    during = check(truth(osmem_clone, proxy, settle=False), docs)
    assert during.bad_markers == 0
    proxy.clear()
    osb.upsert(INDEX, docs, vectors_for(docs))  # redelivered at once: inside the window
    window = check(truth(osmem_clone, proxy), docs)
    assert window.duplicated > 0  # the first attempt's rows were invisible to the redelivery ...
    converge(osb, proxy, docs)  # ... and the next write of the document removes them
    outcome = check(truth(osmem_clone, proxy), docs)
    report("Serverless, cut answer + redelivery inside the visibility window", outcome)
    assert outcome.converged, outcome


@pytest.mark.serverless
def test_serverless_item_429_is_resent(proxy: FaultProxy, osmem_clone: Any) -> None:
    osb = backend(proxy, serverless=True)
    osb.create_index(INDEX, embedder_id=EMBEDDER, dimension=DIM)
    docs = corpus()
    proxy.add(Fault("item_429", items=refuse(chunk_of("incident", 0)), times=1))
    osb.upsert(INDEX, docs, vectors_for(docs))
    converge(osb, proxy, docs, runs=1)
    outcome = check(truth(osmem_clone, proxy), docs)
    report("Serverless, per-item 429", outcome)
    assert outcome.converged, outcome


@pytest.mark.serverless
def test_serverless_slow_bulk_is_not_resent_blindly(proxy: FaultProxy, osmem_clone: Any) -> None:
    """A timed-out bulk may have been applied; without ids a resend would duplicate it."""
    osb = backend(proxy, serverless=True, timeout_s=1.0)
    osb.create_index(INDEX, embedder_id=EMBEDDER, dimension=DIM)
    docs = corpus()
    proxy.add(Fault("slow", delay_s=2.5, first=1))
    with pytest.raises(ServiceUnavailableError, match="outcome unknown"):
        osb.upsert(INDEX, docs, vectors_for(docs))
    converge(osb, proxy, docs)
    outcome = check(truth(osmem_clone, proxy), docs)
    report("Serverless, bulk answer past the timeout", outcome)
    assert outcome.converged, outcome


@pytest.mark.serverless
def test_serverless_delete_document(proxy: FaultProxy, osmem_clone: Any) -> None:
    osb = backend(proxy, serverless=True)
    osb.create_index(INDEX, embedder_id=EMBEDDER, dimension=DIM)
    docs = corpus()
    osb.upsert(INDEX, docs, vectors_for(docs))
    proxy.settle()
    assert osb.delete_document(INDEX, "incident") == 2
    rest = [d for d in docs if d.document_id != "incident"]
    rows = truth(osmem_clone, proxy)
    assert not [r for r in rows if r["document_id"] == "incident"]
    outcome = check(rows, rest)
    report("Serverless, delete a document", outcome)
    assert outcome.converged, outcome


@pytest.mark.serverless
def test_serverless_migrate_rerun_converges(proxy: FaultProxy, osmem_clone: Any, tmp_path: Any) -> None:
    """`evidence migrate` killed by a cut connection, then simply run again (twice)."""
    from evidence.migrate import migrate
    from evidence.search.embedded import EmbeddedBackend

    source = EmbeddedBackend(tmp_path / "store")
    source.create_index(INDEX, embedder_id=EMBEDDER, dimension=DIM)
    docs = corpus()
    source.upsert(INDEX, docs, vectors_for(docs))
    osb = backend(proxy, serverless=True)
    proxy.add(Fault("cut", first=1))
    first = migrate(source, osb, INDEX, batch_size=2)
    assert first.failed
    proxy.clear()
    migrate(source, osb, INDEX, batch_size=2)
    proxy.settle()
    again = migrate(source, osb, INDEX, batch_size=2)
    assert not again.failed
    source.close()
    outcome = check(truth(osmem_clone, proxy), docs)
    report("Serverless, migrate cut then re-run", outcome)
    assert outcome.converged, outcome


@pytest.mark.serverless
def test_serverless_refuses_what_serverless_refuses(proxy: FaultProxy) -> None:
    """The proxy's Serverless mode is strict enough to catch the old sequencing."""
    import json
    import urllib.error
    import urllib.request

    def call(method: str, path: str, body: Any = None) -> int:
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(
            proxy.url + path, data=data, method=method, headers={"Content-Type": "application/json"}
        )
        try:
            with urllib.request.urlopen(req, timeout=5) as resp:
                return int(resp.status)
        except urllib.error.HTTPError as exc:
            return exc.code

    assert call("PUT", f"/{INDEX}", {}) == 200
    assert call("POST", f"/{INDEX}/_delete_by_query", {"query": {"match_all": {}}}) == 404
    assert call("POST", f"/{INDEX}/_doc?refresh=true", {"a": 1}) == 400
    assert call("GET", "/") == 404
    with pytest.raises(BackendError):
        backend(proxy).cluster_version()  # GET / is not a Serverless operation


def test_the_api_answers_503_with_retry_after_before_the_lambda_times_out(
    proxy: FaultProxy, osmem_clone: Any
) -> None:
    """Defect 5 end to end: retriever handler -> resolver -> service -> adapter -> slow cluster.
    The Lambda has 2.5 s left: the request's deadline is 1.5 s, the answer a typed 503."""
    import json

    from evidence.api import runtime
    from evidence.service import EvidenceService
    from evidence.testing import HashingEmbedder, lambda_context, load_event
    from functions.retriever.handler import handler

    osb = backend(proxy, timeout_s=10.0, max_retries=3)
    settings = Settings(backend="opensearch", opensearch_endpoint=proxy.url, opensearch_hybrid_mode="client")
    service = EvidenceService(settings, backend=osb, embedder=HashingEmbedder())
    runtime.configure(service=service, settings=settings)
    try:
        context = lambda_context("evidence-test")
        assert handler(load_event("apigw/index_document"), context)["statusCode"] == 200
        proxy.add(Fault("slow", path=r"/_search$", delay_s=4.0, times=0))
        context.timeout_ms = 2_500
        t0 = time.monotonic()
        response = handler(load_event("apigw/retrieve"), context)
        elapsed = time.monotonic() - t0
    finally:
        runtime.close()
    assert response["statusCode"] == 503, response
    headers = {
        **(response.get("headers") or {}),
        **{k: v[0] for k, v in (response.get("multiValueHeaders") or {}).items()},
    }
    assert int(headers["Retry-After"]) >= 1
    assert json.loads(response["body"])["error"]["code"] == "service_unavailable"
    assert elapsed < 2.5, elapsed  # within the Lambda's time, not API Gateway's 504


@pytest.mark.serverless(visibility_s=2.0)
def test_serverless_indexer_redelivery_through_the_service(proxy: FaultProxy, osmem_clone: Any) -> None:
    """The indexer's path: the service skips documents whose hash matches before they reach
    `upsert`, so on Serverless a document with leftovers of an interrupted write must not look
    unchanged (document_hash is None until they are gone)."""
    from evidence.service import EvidenceService
    from evidence.testing import HashingEmbedder

    osb = backend(proxy, serverless=True)
    settings = Settings(backend="opensearch", opensearch_endpoint=proxy.url, opensearch_service="aoss")
    service = EvidenceService(settings, backend=osb, embedder=HashingEmbedder())
    docs = corpus()
    proxy.add(Fault("cut", first=2))
    with pytest.raises(ServiceUnavailableError):
        service.write_documents(INDEX, docs)
    proxy.clear()
    service.write_documents(INDEX, docs)  # the SQS redelivery, inside the visibility window
    assert check(truth(osmem_clone, proxy), docs).duplicated > 0
    statuses = {r.status for r in service.write_documents(INDEX, docs)}  # the next delivery
    assert statuses == {"unchanged"}
    outcome = check(truth(osmem_clone, proxy), docs)
    report("Serverless, indexer redelivery through the service", outcome)
    assert outcome.converged, outcome

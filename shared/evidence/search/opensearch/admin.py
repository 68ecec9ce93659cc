"""Index administration: index metadata and counts, the cluster's version and capabilities,
create / template / list / delete, and the hybrid search pipeline.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from evidence.config import HybridMode
from evidence.errors import (
    BackendError,
    ConfigurationError,
    EmbedderMismatchError,
    RequestValidationError,
)
from evidence.search import opensearch_bodies as bodies
from evidence.search import opensearch_responses as responses
from evidence.search.base import IndexInfo, Vector
from evidence.search.opensearch.transport import Transport
from evidence.search.written import (
    EXTRA_KEY,
    as_extra,
    refuse_difference,
    without_cache,
    written_with,
)

logger = logging.getLogger(__name__)

_MAX_RESULT_WINDOW = bodies.MAX_RESULT_WINDOW
_LOOKUP_PAGE = 1_000


def _version_tuple(number: str) -> tuple[int, ...]:
    return responses.parse_version(number)


class IndexAdmin(Transport):
    """Indexes, versions and search pipelines."""

    def _info(self, index: str) -> IndexInfo:
        info = self._infos.get(index)
        if info is None:
            info = self._read_info(index, with_counts=False)
            self._infos[index] = info
        return info

    def _read_info(self, index: str, *, with_counts: bool) -> IndexInfo:
        name = self._index_name(index)
        response = self._call(
            "get index", lambda t: self.client.indices.get(index=name, request_timeout=t), index=name
        )
        meta = responses.index_meta(response, name)
        if "embedder_id" not in meta:
            raise BackendError(
                f"index {name!r} exists but was not created by evidence (no embedder in its _meta)"
            )
        documents = chunks = 0
        if with_counts:
            documents = self._count(name, bodies.MARKER_KIND)
            chunks = self._count(name, bodies.CHUNK_KINDS)
        return IndexInfo(
            name=name,
            embedder_id=str(meta["embedder_id"]),
            dimension=int(meta.get("dimension") or 0),
            documents=documents,
            chunks=chunks,
            extra={
                "backend": "opensearch",
                "schema": meta.get("evidence_schema"),
                "engine": meta.get("engine") or "faiss",
                "has_generation": bool(meta.get("has_generation")),
                "has_anchor_vectors": bool(meta.get("has_anchor_vectors")),
                **as_extra(meta.get(EXTRA_KEY)),
            },
        )

    def _count(self, index: str, kind: str | Sequence[str]) -> int:
        return self._count_matching(index, bodies.count_body(kind))

    def _count_matching(self, index: str, body: dict[str, Any]) -> int:
        response = self._call(
            "count",
            lambda t: self.client.count(index=index, body=body, request_timeout=t),
            index=index,
            retry_timeouts=False,
        )
        return int(response.get("count", 0))

    # --- versions ---------------------------------------------------------------------------

    def capabilities(self) -> bodies.Capabilities:
        """What the cluster accepts; refuses clusters older than `bodies.MIN_VERSION`."""
        if self._caps is None:
            if self.serverless:
                caps = bodies.Capabilities.serverless_collection()
            else:
                caps = bodies.Capabilities(version=self._detect_version())
                if caps.version < bodies.MIN_VERSION:
                    found = ".".join(map(str, caps.version))
                    oldest = ".".join(map(str, bodies.MIN_VERSION))
                    raise ConfigurationError(
                        f"OpenSearch {found} is older than the oldest supported version ({oldest}: the "
                        "hybrid query and the normalization-processor); upgrade the domain"
                    )
            self._caps = caps
        return self._caps

    def _detect_version(self) -> tuple[int, ...]:
        if self.settings.opensearch_version:
            return _version_tuple(self.settings.opensearch_version)
        info = self._call("info", lambda t: self.client.info(request_timeout=t))
        version = info.get("version") or {}
        number = str(version.get("number") or "0")
        if not number.startswith("7."):
            return _version_tuple(number)
        # `compatibility.override_main_response_version` makes GET / claim Elasticsearch 7.10.2;
        # the nodes API still tells the truth.
        nodes = self._call(
            "nodes info",
            lambda t: self.client.nodes.info(
                node_id="_local", filter_path="nodes.*.version", request_timeout=t
            ),
        )
        versions = [str(n.get("version")) for n in (nodes.get("nodes") or {}).values() if n.get("version")]
        if not versions:
            raise ConfigurationError(
                f"cannot tell the OpenSearch version (GET / says {number!r}, the nodes API says nothing); "
                "set EVIDENCE_OPENSEARCH_VERSION"
            )
        return min(_version_tuple(v) for v in versions)

    def cluster_version(self) -> tuple[int, ...]:
        """(0,) on Serverless, which reports none."""
        caps = self.capabilities()
        return (0,) if caps.serverless else caps.version

    # --- index lifecycle --------------------------------------------------------------------

    def create_index(self, index: str, *, embedder_id: str, dimension: int) -> IndexInfo:
        from opensearchpy import exceptions as os_exc

        name = self._index_name(index)
        if dimension < 0:
            raise RequestValidationError("dimension must be >= 0", field="dimension")
        exists = self._call(
            "index exists", lambda t: self.client.indices.exists(index=name, request_timeout=t), index=name
        )
        if not exists:
            body = bodies.create_index_body(
                embedder_id,
                dimension,
                self.capabilities(),
                k1=self.settings.bm25_k1,
                b=self.settings.bm25_b,
                written_with=without_cache(written_with(self.settings)),
            )
            try:
                self._call(
                    "create index",
                    lambda t: self.client.indices.create(index=name, body=body, request_timeout=t),
                    index=name,
                )
            except BackendError as exc:
                # Another writer created it between our check and create: verify it below.
                if not isinstance(exc.__cause__, os_exc.RequestError) or "already_exists" not in str(
                    exc.__cause__.error
                ):
                    raise
        if not exists and dimension > 0 and self.settings.opensearch_hybrid_mode is HybridMode.SERVER:
            try:
                self.ensure_search_pipeline()
            except (BackendError, ConfigurationError) as exc:
                # Not fatal: lexical and k-NN work without it, and hybrid retries the put.
                logger.warning("could not put the hybrid search pipeline: %s", exc.message)
        info = self._read_info(name, with_counts=False)
        if info.embedder_id != embedder_id or info.dimension != dimension:
            raise EmbedderMismatchError(
                f"index {name!r} was built with embedder {info.embedder_id!r} ({info.dimension} dims); "
                f"refusing {embedder_id!r} ({dimension} dims). Re-index into a new index to switch "
                "embedders",
                field="index",
            )
        # An index another writer created (before us, or racing us): refused here, before the
        # caller embeds its documents (`Indexing._ensure_index`). One we created agrees. The
        # documents are not known yet: a header rule alone is refused when the index holds a
        # sectioned chunk; else the upsert decides per batch.
        self._refuse_other_settings(name, info, lambda: self.has_sections(name))
        info = self._with_generation(name, info)
        self._infos[name] = info
        return info

    def has_sections(self, index: str) -> bool:
        """`search.base.SectionsProbe`: whether the index holds a passage or span with a section
        (one `_count`, near-real-time: what `create_index` asks before a header rule alone)."""
        name = self._index_name(index)
        return self._count_matching(name, bodies.sectioned_body()) > 0

    def _refuse_other_settings(self, name: str, info: IndexInfo, sectioned: Callable[[], bool]) -> None:
        """IndexSettingsMismatchError (`field`: the setting) when the index records other indexing
        settings (`_meta.written_with`) than this process writes with (`search.written`): its
        documents would not match the index's others. Compared on the settings both records hold,
        a lexical-only index (dimension 0) without the vector keys (`written.VECTOR_KEYS`: a BM25
        writer with another `EVIDENCE_EMBEDDER` writes the same documents); an index without a
        record (created before session 48) is not compared. Once per index per
        backend instance: `info` is the cached read (`_info`), no request is made here.

        A header rule alone (`written.HEADER_KEYS`) is refused only when `sectioned()` (asked
        only then): what is written holds a chunk with a section (the batch, at `upsert`), or,
        where it is not known yet (`create_index`), the index does. A chunk without a section is
        the same under every rule, so such a batch is written as it is; the record is never
        rewritten (OpenSearch has no conditional update of `_meta`, and another backend may hold
        its read of it: a record changed under a writer would let it write sectioned chunks under
        the old rule), so a sectioned batch under another rule is refused even into an index that
        holds none (docs/opensearch.md#indexing-settings-of-an-index). Such an agreement is not
        remembered: the next batch is compared again."""
        if name in self._settings_checked:
            return
        let_through = refuse_difference(
            info.extra.get(EXTRA_KEY),
            without_cache(written_with(self.settings)),
            lambda setting, stored, ours: (
                f"index {name!r} was written with {setting}={stored!r}, but this process has "
                f"{setting}={ours!r}: set EVIDENCE_{setting.upper()}={stored} (the index's setting) "
                "to write into it, or index into a new index name. Nothing was written"
            ),
            dimension=info.dimension,
            has_sections=sectioned,
        )
        if let_through is None:
            self._settings_checked.add(name)

    def _with_generation(self, name: str, info: IndexInfo) -> IndexInfo:
        """A schema-1 index gets `generation` mapped before anything filters on it (dynamic
        mapping would make it `text`, and stale rows would never match the keep term)."""
        return self._with_mapping(name, info, "has_generation", bodies.generation_mapping())

    def _with_anchor_vectors(self, name: str, info: IndexInfo) -> IndexInfo:
        """An index from before schema 3 gets `anchor_vectors` mapped (`enabled: false`) before
        the first write that keeps them (dynamic mapping would index the vectors as text)."""
        return self._with_mapping(name, info, "has_anchor_vectors", bodies.anchor_vectors_mapping())

    def _with_mapping(self, name: str, info: IndexInfo, flag: str, body: dict[str, Any]) -> IndexInfo:
        """`body` put into an older index's mapping once (`flag` in its info says it is there)."""
        if info.extra.get(flag):
            return info
        self._call(
            "put mapping",
            lambda t: self.client.indices.put_mapping(index=name, body=body, request_timeout=t),
            index=name,
        )
        return replace(info, extra={**info.extra, flag: True})

    def put_index_template(
        self, name: str, patterns: Sequence[str], *, embedder_id: str, dimension: int
    ) -> None:
        """Optional: a composable template so indexes created by other writers get our mappings."""
        body = bodies.index_template_body(
            patterns,
            embedder_id,
            dimension,
            self.capabilities(),
            k1=self.settings.bm25_k1,
            b=self.settings.bm25_b,
        )
        self._call(
            "put index template",
            lambda t: self.client.indices.put_index_template(name=name, body=body, request_timeout=t),
        )

    def refuse_implicit_index_creation(self, value: str = bodies.AUTO_CREATE_INDEX) -> None:
        """Set the cluster's `action.auto_create_index` so that no write creates an evidence index
        implicitly (docs/opensearch.md#no-implicit-index-creation): a bulk into a deleted index is
        then refused item by item (`index_not_found_exception`, raised as IndexNotFoundError)
        instead of re-creating it without our mappings. Needs the cluster-settings permission:
        the deploy step (`Custom::EvidenceSearchSetup`, the domain's master user) calls it, not
        the functions. Serverless has no cluster settings."""
        if self.serverless:
            raise ConfigurationError(
                "OpenSearch Serverless has no cluster settings (action.auto_create_index)"
            )
        body = bodies.auto_create_index_body(value)
        self._call(
            "put cluster settings",
            lambda t: self.client.cluster.put_settings(body=body, request_timeout=t),
        )

    def get_index(self, index: str) -> IndexInfo:
        info = self._read_info(index, with_counts=True)
        self._infos[info.name] = replace(info, documents=0, chunks=0)
        return info

    def list_indexes(self) -> list[IndexInfo]:
        response = self._call("list indexes", lambda t: self.client.indices.get(index="*", request_timeout=t))
        out = []
        for name in sorted(response):
            meta = responses.index_meta(response, name)
            if name.startswith(".") or "embedder_id" not in meta:
                continue
            out.append(
                IndexInfo(
                    name=name,
                    embedder_id=str(meta["embedder_id"]),
                    dimension=int(meta.get("dimension") or 0),
                    documents=self._count(name, bodies.MARKER_KIND),
                    chunks=self._count(name, bodies.CHUNK_KINDS),
                    extra={"backend": "opensearch", "schema": meta.get("evidence_schema")},
                )
            )
        return out

    def delete_index(self, index: str) -> None:
        name = self._index_name(index)
        self._infos.pop(name, None)
        self._settings_checked.discard(name)
        self._call(
            "delete index", lambda t: self.client.indices.delete(index=name, request_timeout=t), index=name
        )

    # --- documents --------------------------------------------------------------------------

    def _pipeline_choice(self) -> tuple[str, str, dict[str, Any]]:
        """(pipeline name, fusion, body): RRF via score-ranker-processor where the cluster has it
        (>= 2.19), else min-max normalisation + arithmetic mean."""
        caps = self.capabilities()
        fusion = self._fusion
        if fusion is None:
            fusion = "rrf" if caps.rrf else "normalization"
        if fusion == "rrf":
            if not caps.rrf:
                raise ConfigurationError(
                    "RRF needs OpenSearch >= 2.19 (score-ranker-processor); use "
                    "EVIDENCE_OPENSEARCH_HYBRID_MODE=client on Serverless or older clusters"
                )
            return bodies.RRF_PIPELINE, fusion, bodies.rrf_pipeline_body()
        return bodies.MINMAX_PIPELINE, fusion, bodies.normalization_pipeline_body()

    def ensure_search_pipeline(self) -> tuple[str, str]:
        """Put the pipeline hybrid queries run through (idempotent; once per process).

        Called by `create_index` (indexing roles may manage pipelines) and, should a query find
        it missing, once by `hybrid` itself; queries never put it routinely.
        """
        pipeline, fusion, body = self._pipeline_choice()
        if pipeline not in self._pipelines_ready:
            self._call(
                "put search pipeline",
                lambda t: self.client.search_pipeline.put(id=pipeline, body=body, request_timeout=t),
            )
            self._pipelines_ready.add(pipeline)
        return pipeline, fusion


def _as_list(vector: Vector) -> list[float]:
    return [float(x) for x in np.asarray(vector, dtype=np.float32).ravel()]


def _no_direction(vector: Vector) -> bool:
    arr = np.asarray(vector, dtype=np.float32)
    return not np.isfinite(arr).all() or not arr.any()

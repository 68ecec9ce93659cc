"""Validate request and response bodies against OpenSearch's official API spec.

The spec (opensearch-project/opensearch-api-specification) is OpenAPI 3.1 YAML split over
`spec/namespaces/*.yaml` (paths, request bodies, responses) and `spec/schemas/*.yaml`
(components), linked by relative cross-file `$ref`s such as
`../schemas/_common.query_dsl.yaml#/components/schemas/QueryContainer`. Every file is loaded
into a `referencing.Registry` under its own `file://` URI, so those refs resolve as written.

Version awareness: `validate_request(..., version=(2, 18, 0))` fails a body that uses anything
the spec marks `x-version-added` later than the target (or `x-version-removed` by then). Where
the published spec has no such mark for something we send, `VERSION_OVERLAY` adds it, each with
its source, and `VALUE_RULES` covers what depends on a value rather than a field (an engine
that gained a space in a given version).

Two transformations when `strict=True` (the default):
- Discriminated unions (`discriminator.propertyName` + `oneOf` of refs, e.g. mapping
  `Property` by `type`) are checked the way OpenAPI defines them: the discriminator value picks
  the one schema to apply (`if`/`then` per value), instead of trying all ~40 alternatives for
  every field (which made a mapping take seconds to validate and gave useless messages).
- The spec's variant containers (QueryContainer and friends:
`minProperties: 1, maxProperties: 1` plus named `properties`) do not forbid unknown keys, so a
misspelt query type (`"hybird"`) would pass. `strict=True` closes such containers
(`additionalProperties: false`). Nothing else in the spec is changed.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from jsonschema import Draft202012Validator, validators
from jsonschema.exceptions import ValidationError
from referencing import Registry, Resource
from referencing.jsonschema import DRAFT202012


class SpecValidationError(AssertionError):
    pass


Version = tuple[int, ...]

#: (schema file, JSON pointer, version added, source): marks the published spec lacks.
VERSION_OVERLAY: list[tuple[str, str, str, str]] = [
    (
        "_common.query_dsl.yaml",
        "/components/schemas/QueryContainer/properties/hybrid",
        "2.10",
        "neural-search 2.10.0 release notes (hybrid search, score normalization and combination)",
    ),
    (
        "_common.query_dsl.yaml",
        "/components/schemas/HybridQuery/allOf/1/properties/pagination_depth",
        "2.19",
        "docs.opensearch.org vector-search/ai-search/hybrid-search/pagination: 'Introduced 2.19'",
    ),
    (
        "search_pipeline._common.yaml",
        "/components/schemas/PhaseResultsProcessor/oneOf/0/properties/normalization-processor",
        "2.10",
        "neural-search 2.10.0 release notes; docs: normalization processor 'Introduced 2.10'",
    ),
    (
        "search_pipeline._common.yaml",
        "/components/schemas/PhaseResultsProcessor/oneOf/1/properties/score-ranker-processor",
        "2.19",
        "docs: score ranker processor 'Introduced 2.19' (RRF in hybrid search)",
    ),
]


def parse_version(value: Any) -> Version:
    parts = []
    for piece in str(value).split("-", maxsplit=1)[0].split("."):
        parts.append(int(piece) if piece.isdigit() else 0)
    while len(parts) < 3:
        parts.append(0)
    return tuple(parts)


def _knn_engine_rule(body: Any, target: Version) -> list[str]:
    """faiss has `cosinesimil` from 2.19 (k-NN #2376); before, only l2/innerproduct."""
    problems: list[str] = []

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            method = node.get("method") if node.get("type") == "knn_vector" else None
            if isinstance(method, dict):
                engine, space = method.get("engine"), method.get("space_type")
                if engine == "faiss" and space == "cosinesimil" and target < (2, 19, 0):
                    problems.append("knn_vector: faiss with cosinesimil needs OpenSearch 2.19 (k-NN #2376)")
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(body)
    return problems


VALUE_RULES = [_knn_engine_rule]


def _version_validator(target: Version) -> type[Draft202012Validator]:
    def added(validator: Any, value: Any, instance: Any, schema: Any) -> Iterator[ValidationError]:
        if parse_version(value) > target:
            yield ValidationError(f"added in OpenSearch {value}; the target is {'.'.join(map(str, target))}")

    def removed(validator: Any, value: Any, instance: Any, schema: Any) -> Iterator[ValidationError]:
        if parse_version(value) <= target:
            yield ValidationError(
                f"removed in OpenSearch {value}; the target is {'.'.join(map(str, target))}"
            )

    cls: type[Draft202012Validator] = validators.extend(
        Draft202012Validator, {"x-version-added": added, "x-version-removed": removed}
    )
    return cls


_VERSIONED: dict[Version, type[Draft202012Validator]] = {}


def _validator_class(target: Version | None) -> type[Draft202012Validator]:
    if target is None:
        latest: type[Draft202012Validator] = Draft202012Validator
        return latest
    if target not in _VERSIONED:
        _VERSIONED[target] = _version_validator(target)
    return _VERSIONED[target]


def _close_containers(node: Any) -> None:
    if isinstance(node, dict):
        if (
            node.get("minProperties") == 1
            and node.get("maxProperties") == 1
            and isinstance(node.get("properties"), dict)
            and "additionalProperties" not in node
            and "patternProperties" not in node
        ):
            node["additionalProperties"] = False
        for value in node.values():
            _close_containers(value)
    elif isinstance(node, list):
        for value in node:
            _close_containers(value)


def _local(doc: dict[str, Any], ref: str) -> Any:
    node: Any = doc
    for part in ref.removeprefix("#/").split("/"):
        key = part.replace("~1", "/").replace("~0", "~")
        node = node[int(key)] if isinstance(node, list) else node[key]
    return node


def _discriminator_values(doc: dict[str, Any], node: Any, prop: str, depth: int = 0) -> list[Any] | None:
    """The values of `prop` a (local) schema admits, following local refs and allOf."""
    if depth > 8 or not isinstance(node, dict):
        return None
    if "$ref" in node:
        ref = node["$ref"]
        return _discriminator_values(doc, _local(doc, ref), prop, depth + 1) if ref.startswith("#/") else None
    spec = (node.get("properties") or {}).get(prop)
    if isinstance(spec, dict):
        if "enum" in spec:
            return list(spec["enum"])
        if "const" in spec:
            return [spec["const"]]
    for part in node.get("allOf") or []:
        found = _discriminator_values(doc, part, prop, depth + 1)
        if found:
            return found
    return None


def _dispatch_discriminators(doc: dict[str, Any], node: Any) -> None:
    if isinstance(node, dict):
        disc = node.get("discriminator")
        alts = node.get("oneOf")
        if isinstance(disc, dict) and isinstance(alts, list) and all("$ref" in a for a in alts):
            prop = disc["propertyName"]
            branches: list[tuple[Any, str]] = []
            for alt in alts:
                values = _discriminator_values(doc, alt, prop)
                if not values:
                    branches = []
                    break
                branches.extend((v, alt["$ref"]) for v in values)
            if branches:
                default = disc.get("x-default")
                rules: list[Any] = [{"properties": {prop: {"enum": [v for v, _ in branches]}}}]
                rules += [
                    {"if": {"properties": {prop: {"const": v}}, "required": [prop]}, "then": {"$ref": ref}}
                    for v, ref in branches
                ]
                default_ref = next((ref for v, ref in branches if v == default), None)
                if default_ref is not None:
                    rules.append({"if": {"not": {"required": [prop]}}, "then": {"$ref": default_ref}})
                del node["oneOf"]
                node["allOf"] = [*node.get("allOf", []), *rules]
        for value in node.values():
            _dispatch_discriminators(doc, value)
    elif isinstance(node, list):
        for value in node:
            _dispatch_discriminators(doc, value)


@dataclass
class OpenSearchSpec:
    root: Path
    documents: dict[str, dict[str, Any]]  # uri -> parsed yaml
    registry: Registry[Any]

    @classmethod
    def load(cls, root: Path, *, strict: bool = True) -> OpenSearchSpec:
        spec_dir = root / "spec"
        documents: dict[str, dict[str, Any]] = {}
        for path in sorted([*spec_dir.glob("namespaces/*.yaml"), *spec_dir.glob("schemas/*.yaml")]):
            # CSafeLoader when available: the spec is ~10 MB of YAML.
            loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
            with path.open(encoding="utf-8") as fh:
                doc = yaml.load(fh, Loader=loader)
            if strict:
                _close_containers(doc)
                _dispatch_discriminators(doc, doc)
            for file, pointer, added, _source in VERSION_OVERLAY:
                if path.name == file:
                    node = _local(doc, "#" + pointer)
                    node.setdefault("x-version-added", added)
            documents[path.resolve().as_uri()] = doc
        registry: Registry[Any] = Registry().with_resources(
            (uri, Resource.from_contents(doc, default_specification=DRAFT202012))
            for uri, doc in documents.items()
        )
        return cls(root=root, documents=documents, registry=registry)

    def _namespace_docs(self) -> Iterator[tuple[str, dict[str, Any]]]:
        for uri, doc in self.documents.items():
            if "/spec/namespaces/" in uri:
                yield uri, doc

    def _operation(self, method: str, path: str) -> tuple[str, dict[str, Any]]:
        for uri, doc in self._namespace_docs():
            op = (doc.get("paths") or {}).get(path, {}).get(method.lower())
            if op is not None:
                return uri, op
        raise KeyError(f"no {method.upper()} {path} in the spec")

    def _validator_for(self, base_uri: str, ref: str, version: Version | None = None) -> Draft202012Validator:
        # An absolute ref: fragment refs in the spec are relative to the file that holds them.
        return _validator_class(version)({"$ref": f"{base_uri}{ref}"}, registry=self.registry)

    def request_schema_ref(self, method: str, path: str) -> tuple[str, str, str]:
        uri, op = self._operation(method, path)
        body = op.get("requestBody")
        if body is None:
            raise KeyError(f"{method.upper()} {path} takes no body")
        ref = body["$ref"]  # e.g. '#/components/requestBodies/search'
        resolved = self.registry.resolver(base_uri=uri).lookup(ref).contents
        content = resolved["content"]
        media = "application/json" if "application/json" in content else next(iter(content))
        return uri, f"{ref}/content/{media.replace('/', '~1')}/schema", media

    def validate_request(self, method: str, path: str, body: Any, *, version: Any = None) -> None:
        """`version` (a tuple or "2.18.0"): also fail what that version would not accept."""
        target = (
            None
            if version is None
            else parse_version(".".join(map(str, version)) if isinstance(version, tuple) else version)
        )
        uri, ref, _media = self.request_schema_ref(method, path)
        what = f"{method.upper()} {path}" + ("" if target is None else f" @ {'.'.join(map(str, target))}")
        self._validate(self._validator_for(uri, ref, target), body, what)
        if target is not None:
            problems = [p for rule in VALUE_RULES for p in rule(body, target)]
            if problems:
                raise SpecValidationError(f"{what}: {'; '.join(problems)}")

    def validate_response(self, method: str, path: str, status: int, body: Any) -> None:
        uri, op = self._operation(method, path)
        ref = op["responses"][str(status)]["$ref"]
        full = f"{ref}/content/application~1json/schema"
        self._validate(self._validator_for(uri, full), body, f"{method.upper()} {path} -> {status}")

    def validate_schema(self, schema_file: str, name: str, instance: Any) -> None:
        uri = (self.root / "spec" / "schemas" / schema_file).resolve().as_uri()
        ref = f"{uri}#/components/schemas/{name}"
        self._validate(Draft202012Validator({"$ref": ref}, registry=self.registry), instance, name)

    @staticmethod
    def _validate(validator: Draft202012Validator, body: Any, what: str) -> None:
        errors = sorted(validator.iter_errors(body), key=lambda e: len(list(e.absolute_path)))
        if errors:
            best = _deepest(errors)
            raise SpecValidationError(
                f"{what}: body violates the OpenSearch spec at "
                f"/{'/'.join(map(str, best.absolute_path))}: {best.message[:500]}\n"
                f"body: {json.dumps(body)[:1000]}"
            )


def _deepest(errors: list[ValidationError]) -> ValidationError:
    """The most specific cause, for a readable message (oneOf/anyOf nest their reasons)."""
    best = errors[0]
    stack = list(errors)
    while stack:
        err = stack.pop()
        if len(list(err.absolute_path)) > len(list(best.absolute_path)):
            best = err
        stack.extend(err.context or [])
    return best


def find_spec_root(start: Path) -> Path | None:
    """`../shared/opensearch-api-spec` relative to the repo, wherever the checkout is."""
    for parent in [start, *start.parents]:
        for candidate in (parent / "shared" / "opensearch-api-spec", parent / "opensearch-api-spec"):
            if (candidate / "spec" / "namespaces" / "_core.yaml").exists():
                return candidate
    return None


def ndjson_lines(body: Any) -> list[Mapping[str, Any]]:
    """A bulk body as opensearch-py sends it (str/bytes NDJSON or a list) -> list of objects."""
    if isinstance(body, bytes):
        body = body.decode("utf-8")
    if isinstance(body, str):
        return [json.loads(line) for line in body.splitlines() if line.strip()]
    return [copy.deepcopy(line) for line in body]


def validate_msearch(spec: OpenSearchSpec, lines: Sequence[Any], *, version: Any = None) -> None:
    """An `_msearch` body, line by line: the spec's `RequestItem` is a oneOf of header and body
    that an empty header `{}` satisfies twice, so each line is checked by its position: headers
    against `MultisearchHeader`, bodies against `MultisearchBody` and as a `_search` body (which
    also checks them against `version`)."""
    if len(lines) % 2:
        raise SpecValidationError(f"_msearch: {len(lines)} lines, not header/body pairs")
    for header, body in zip(lines[::2], lines[1::2], strict=True):
        spec.validate_schema("_core.msearch.yaml", "MultisearchHeader", header)
        spec.validate_schema("_core.msearch.yaml", "MultisearchBody", body)
        spec.validate_request("post", "/{index}/_search", body, version=version)

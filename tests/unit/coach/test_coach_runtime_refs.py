"""What the coach's runtime holds: its service weakly (the service owns it), and a profile is handed
its `coach` alone, never the runtime, whose service holds the unfiltered backend."""

from __future__ import annotations

import gc
import types
import weakref
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from evidence.coach.contract import CoachRequest
from evidence.coach.service import CoachRuntime
from evidence.config import Settings
from evidence.model import IndexDocumentRequest
from evidence.search.base import SearchBackend
from evidence.service import EvidenceService
from evidence.testing import HashingEmbedder

INDEX = "notes"
TEXT = "A closure captures the variables of the scope it was made in. " * 10


@pytest.fixture
def service(tmp_path: Path) -> Iterator[EvidenceService]:
    svc = EvidenceService(Settings(store_dir=tmp_path / "store"), embedder=HashingEmbedder())
    svc.index_document(INDEX, IndexDocumentRequest(document_id="n", filename="n.txt", text=TEXT))
    yield svc
    svc.close()


def attributes(obj: Any) -> list[Any]:
    """What `obj` holds by attribute (instance dict, slots, a bound method's `__self__`, the items
    of a container); not a function's closure cells or globals (Python is no sandbox)."""
    if isinstance(obj, types.MethodType):
        return [obj.__self__]
    if isinstance(obj, list | tuple | set | frozenset):
        return list(obj)
    if isinstance(obj, dict):
        return list(obj.values())
    if isinstance(obj, type | types.ModuleType | types.FunctionType | types.BuiltinFunctionType):
        return []
    held = list(getattr(obj, "__dict__", {}).values())
    for cls in type(obj).__mro__:
        for name in cls.__dict__.get("__slots__", ()):
            if name not in ("__dict__", "__weakref__") and hasattr(obj, name):
                held.append(getattr(obj, name))
    return held


def reachable(root: Any, depth: int = 5) -> list[Any]:
    seen: dict[int, Any] = {}
    frontier = [root]
    for _ in range(depth):
        frontier = [o for o in frontier if id(o) not in seen]
        seen.update((id(o), o) for o in frontier)
        frontier = [child for o in frontier for child in attributes(o)]
    return list(seen.values())


def test_a_profile_reaches_neither_the_service_nor_its_backend_through_the_coach(
    service: EvidenceService,
) -> None:
    env = service._env(INDEX, {"tenant": "a"})
    assert env.services is not None
    answering = env.services.coach_runtime()
    held = reachable(env.services) + reachable(answering)
    assert not [o for o in held if isinstance(o, EvidenceService | CoachRuntime | SearchBackend)]
    # and it still answers, through the view it is handed
    assert isinstance(
        service.coach(INDEX, CoachRequest(query="what does a closure capture?")).can_answer, bool
    )


def test_a_dropped_service_goes_with_its_last_reference_after_a_coach_request(tmp_path: Path) -> None:
    # The runtime held its service strongly: service -> runtime -> service, a cycle that only the
    # cyclic collector frees (with the backend's files and the embedder's model).
    svc = EvidenceService(Settings(store_dir=tmp_path / "store"), embedder=HashingEmbedder())
    svc.index_document(INDEX, IndexDocumentRequest(document_id="n", filename="n.txt", text=TEXT))
    svc.coach(INDEX, CoachRequest(query="what does a closure capture?"))
    runtime = svc.coach_runtime
    gone = weakref.ref(svc)
    svc.close()
    gc.collect()
    gc.disable()
    try:
        del svc
        assert gone() is None
    finally:
        gc.enable()
    with pytest.raises(ReferenceError):
        runtime.delete_graph(INDEX, "g")

"""Small knowledge graphs for the graph and coach tests, plus the bundled sample graph.

Imported by name (`from graphkit import ...`) in this folder, as `tests.unit.graph.graphkit` elsewhere.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

from evidence.graph import KnowledgeGraph, graph_from_obj

SAMPLE = Path(__file__).resolve().parents[3] / "shared/evidence/demo/data/coach/algebra-calculus.yaml"


def lo(node_id: str, title: str, text: str, **extra: Any) -> dict[str, Any]:
    return {"id": node_id, "type": "LO", "title": title, "text": text, "subject": "algebra", **extra}


def item(node_id: str, kind: str, title: str, text: str, difficulty: str = "intro") -> dict[str, Any]:
    return {
        "id": node_id,
        "type": kind,
        "title": title,
        "text": text,
        "subject": "algebra",
        "difficulty": difficulty,
    }


def edge(
    source: str, target: str, kind: str = "PREREQUISITE_OF", strength: float | None = None
) -> dict[str, Any]:
    out: dict[str, Any] = {"source": source, "target": target, "type": kind}
    if strength is not None:
        out["strength"] = strength
    return out


#: A -> B -> C and A -> D -> C (D's edges weaker); C and B have content.
SMALL: dict[str, Any] = {
    "nodes": [
        lo("LO-A", "Add numbers", "Addition combines two numbers into their sum. The sum of 2 and 3 is 5."),
        lo(
            "LO-B",
            "Multiply numbers",
            "Multiplication is repeated addition. Three times four means 4 + 4 + 4.",
        ),
        lo(
            "LO-C",
            "Solve linear equations",
            "A linear equation has the form ax + b = c. Subtract b and divide by a.",
        ),
        lo("LO-D", "Use inverse operations", "Subtraction undoes addition. Division undoes multiplication."),
        item(
            "EX-C1", "Example", "Solving 2x + 3 = 11", "Subtract 3 to get 2x = 8. Divide by 2 to get x = 4."
        ),
        item("EXR-C1", "Exercise", "Solve 3x - 1 = 8", "Solve 3x - 1 = 8. Answer: x = 3.", "core"),
        item(
            "EXR-C2",
            "Exercise",
            "Solve 5x + 2 = 3x + 10",
            "Solve 5x + 2 = 3x + 10. Answer: x = 4.",
            "advanced",
        ),
        item(
            "EX-B1",
            "Example",
            "Three rows of four",
            "Three rows of four chairs hold 12 chairs. That is 3 times 4.",
        ),
    ],
    "edges": [
        edge("LO-A", "LO-B", strength=0.9),
        edge("LO-B", "LO-C", strength=0.8),
        edge("LO-A", "LO-D", strength=0.5),
        edge("LO-D", "LO-C", strength=0.4),
        edge("LO-C", "EX-C1", "ASSESSED_BY", 0.9),
        edge("LO-C", "EXR-C1", "ASSESSED_BY", 0.8),
        edge("LO-C", "EXR-C2", "ASSESSED_BY", 0.7),
        edge("LO-B", "EX-B1", "ASSESSED_BY"),
    ],
}


def small_obj() -> dict[str, Any]:
    return copy.deepcopy(SMALL)


def small_graph() -> KnowledgeGraph:
    return graph_from_obj(small_obj())


def small_bytes() -> bytes:
    return json.dumps(SMALL).encode()


def sample_bytes() -> bytes:
    return SAMPLE.read_bytes()

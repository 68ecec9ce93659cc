"""`evidence index` as a new user runs it: same-named files in two folders, one file reached twice.

Before: ids were paths relative to the folder argument (or the bare file name), so
`evidence index corpus/cdk/aws-kinesis corpus/cdk/aws-ecr` reported "0 new, 2 updated" and the
Kinesis README was gone, and indexing `corpus/cdk` after `corpus` stored second copies.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow


def _evidence(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    code = "import sys; from evidence.cli import main; sys.exit(main(sys.argv[1:]))"
    return subprocess.run(
        [sys.executable, "-c", code, *args], cwd=cwd, capture_output=True, text=True, timeout=300, check=False
    )


@pytest.fixture
def corpus(tmp_path: Path) -> Path:
    for name, text in {
        "cdk/aws-kinesis/README.md": "# Kinesis\n\nKinesis data streams shard the records by partition key.",
        "cdk/aws-ecr/README.md": "# ECR\n\nECR repositories store container images with lifecycle rules.",
        "intro.md": "# Intro\n\nThis corpus holds construct library READMEs.",
    }.items():
        path = tmp_path / "corpus" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return tmp_path


def test_same_named_files_are_two_documents_and_reindexing_through_a_parent_adds_none(corpus: Path) -> None:
    first = _evidence(corpus, "index", "corpus/cdk/aws-kinesis", "corpus/cdk/aws-ecr", "--index", "dup")
    assert first.returncode == 0, first.stderr
    assert "2 new, 0 updated" in first.stdout
    again = _evidence(corpus, "index", "corpus", "--index", "dup")
    assert again.returncode == 0, again.stderr
    assert "1 new, 0 updated, 2 unchanged" in again.stdout  # intro.md is new; the READMEs are the same
    query = _evidence(corpus, "query", "container image lifecycle", "--index", "dup", "--format", "json")
    hits = json.loads(query.stdout)["hits"]
    sources = {h["source"] for h in hits}
    # the LLM sees which README each hit is from
    assert "corpus/cdk/aws-ecr/README.md" in sources and "corpus/cdk/aws-kinesis/README.md" in sources
    xml = _evidence(corpus, "query", "container image lifecycle", "--index", "dup", "--format", "xml").stdout
    assert "<source>corpus/cdk/aws-ecr/README.md</source>" in xml

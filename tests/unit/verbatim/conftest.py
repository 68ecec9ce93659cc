"""A lexical-only store holding the demo label (and a second, small label) for the verbatim tests."""

from __future__ import annotations

from pathlib import Path

import pytest

from evidence.config import Settings
from evidence.demo import DATA
from evidence.service import EvidenceService

LABEL = DATA / "label" / "lipravex.md"
QA = DATA / "label" / "lipravex-qa.jsonl"
INDEX = "label"

ZORVEX = """# ZORVEX (talmopril maleate) tablets

## 4 CONTRAINDICATIONS

- History of angioedema related to previous treatment with an ACE inhibitor.

## 12 CLINICAL PHARMACOLOGY

### 12.3 Pharmacokinetics

The elimination half-life of talmopril is approximately 11 hours.
"""


@pytest.fixture(scope="package")
def label_service(tmp_path_factory: pytest.TempPathFactory) -> EvidenceService:
    root = tmp_path_factory.mktemp("verbatim")
    (root / "zorvex.md").write_text(ZORVEX)
    service = EvidenceService(Settings(store_dir=root / "store"))
    report = service.index_paths(INDEX, [LABEL, root / "zorvex.md"], embed=False)
    assert not report.failed
    return service


@pytest.fixture(scope="package")
def label_only_service(tmp_path_factory: pytest.TempPathFactory) -> EvidenceService:
    service = EvidenceService(Settings(store_dir=tmp_path_factory.mktemp("verbatim1") / "store"))
    assert not service.index_paths(INDEX, [LABEL], embed=False).failed
    return service


@pytest.fixture
def label_path() -> Path:
    return LABEL

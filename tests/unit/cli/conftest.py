"""The CLI with the hashing embedder instead of MiniLM: these tests are about the command line
(arguments, outputs, exit codes), not about ranking quality."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from evidence.cli import common
from evidence.service import EvidenceService
from evidence.testing import HashingEmbedder


@pytest.fixture(autouse=True)
def fast_service(monkeypatch: pytest.MonkeyPatch) -> None:
    def service(args: argparse.Namespace) -> EvidenceService:
        return EvidenceService(common.settings_from_args(args), embedder=HashingEmbedder())

    monkeypatch.setattr(common, "service_from_args", service)


@pytest.fixture
def docs(tmp_path: Path) -> Path:
    folder = tmp_path / "docs"
    (folder / "acme").mkdir(parents=True)
    (folder / "acme" / "policy.md").write_text("# Encryption\n\nData at rest is encrypted, AES-256.\n")
    (folder / "acme" / "retention.txt").write_text("Customer data is deleted 30 days after the end.\n")
    (folder / "globex").mkdir()
    (folder / "globex" / "policy.md").write_text("# Access\n\nProduction access requires MFA.\n")
    return folder

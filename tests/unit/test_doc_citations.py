"""Code cites only documents the repository holds, and every cited anchor exists.

The user specs and the design notes live outside the repository; what the code relies on is
restated in docs/ (seeds.md, contracts.md, architecture.md, …). A citation of a file that is not
here, a `docs/X.md#anchor` whose page or anchor is gone, or a "seed 00N" without its section in
docs/seeds.md fails this test, so docs and code cannot drift apart silently.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from functools import cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SOURCES = ("shared/evidence", "infra", "functions", "bench", "tests")
DOC_LINK = re.compile(r"(?<![\w/\"'.-])docs/([a-z_]+\.md)(?:#([a-z0-9-]+))?")
SEED = re.compile(r"\b[Ss]eed (\d{3})\b")
OUTSIDE = ("DESIGN.md", "shared/seeds/")


def _files() -> Iterator[Path]:
    for top in SOURCES:
        for path in sorted((ROOT / top).rglob("*.py")):
            if path.resolve() != Path(__file__).resolve() and "cdk.out" not in path.parts:
                yield path


def _slug(heading: str) -> str:
    """GitHub's anchor for a Markdown heading."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


@cache
def _anchors(page: str) -> frozenset[str]:
    text = (ROOT / "docs" / page).read_text(encoding="utf-8")
    explicit = set(re.findall(r'<a id="([^"]+)"', text))
    headings = {_slug(m) for m in re.findall(r"^#{1,6} (.+)$", text, re.M)}
    return frozenset(explicit | headings)


def _citations() -> Iterator[tuple[str, str]]:
    for path in _files():
        rel = path.relative_to(ROOT).as_posix()
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            yield f"{rel}:{n}", line


def test_code_cites_no_document_outside_the_repository() -> None:
    bad = [where for where, line in _citations() if any(name in line for name in OUTSIDE)]
    assert not bad, f"cite docs/ instead of files the repository does not hold: {bad}"


def test_every_cited_docs_page_and_anchor_exists() -> None:
    bad = []
    for where, line in _citations():
        for page, anchor in DOC_LINK.findall(line):
            if not (ROOT / "docs" / page).is_file():
                bad.append(f"{where}: docs/{page} does not exist")
            elif anchor and anchor not in _anchors(page):
                bad.append(f"{where}: docs/{page}#{anchor} has no such anchor")
    assert not bad, "\n".join(bad)


def test_every_seed_cited_has_its_section_in_docs_seeds() -> None:
    cited = {n for _, line in _citations() for n in SEED.findall(line)}
    assert cited, "the code cites the seeds; if it no longer does, delete this test"
    missing = sorted(n for n in cited if f"seed-{n}" not in _anchors("seeds.md"))
    assert not missing, f"docs/seeds.md has no section for seed(s) {missing}"


@pytest.mark.parametrize(
    ("line", "problem"),
    [
        ("see DESIGN.md §3", "outside"),
        ("see docs/nowhere.md", "page"),
        ("see docs/contracts.md#no-such-anchor", "anchor"),
    ],
)
def test_the_checks_catch_what_they_are_for(line: str, problem: str) -> None:
    if problem == "outside":
        assert any(name in line for name in OUTSIDE)
        return
    ((page, anchor),) = DOC_LINK.findall(line)
    if problem == "page":
        assert not (ROOT / "docs" / page).is_file()
    else:
        assert anchor not in _anchors(page)

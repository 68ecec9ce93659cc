"""Scoping a question to the document it names ("my Apache licence", "the MPL", "Lipitor").

At indexing time every document records the terms it may be called by (`NAME_TERMS_KEY`, in its
metadata: the lower-cased words of its title, subject names, first headings and file name,
and its title's acronyms; `ingest.sections.document_name_terms`), the words of its own name in
order (`NAME_TITLE_KEY`) and the versions that name carries (`NAME_VERSIONS_KEY`: "Version 2" under
the title, "GPL-2.0.txt"). Nothing here is a hand list of names: a question term names a document
when the index says so, and only when it is *distinctive*:

- it is in the names of at most a third of the documents the request reads (the index within
  its filters, `SearchReader.document_count`; one, in an index of two to five), so "license"
  in a folder of licences, or "sqlite" in a folder of SQLite pages, names none of them;
- it is not a common word of the documents' text: more than `NAME_TEXT_SHARE` (70 %) of the
  passages that hold it (the best 50 by BM25) belong to the documents it names ("software" is in
  the name of one licence and the text of all of them: not a name; a drug's name fills its own
  label and appears in an interaction table or two of others: a name; "closure" in the titles of
  two pages of a manual and in the text of a third is a topic: 6 of its 9 passages are theirs).

Documents whose names share words are told apart before that count (`closest`):

- a version the question gives ("v2", "version 2", "GPL-2.0", "MPL 2.0") must agree with the
  version of a name that has one: "2" is "2.0" exactly and "2.1" only loosely, so the exact one
  wins; a name without a version is neither;
- then the name whose every word is accounted for by the question (a word of it, or a run of
  words whose initials the question gives: "GPL" for "General Public License"), apart from the
  words all the candidates share, wins over one with a word the question never said ("Lesser"),
  provided the question accounts for at least half of its words.

Several naming terms narrow to the documents all of them name ("GNU" and "GPL"), else any of
them. No term, or an index of one document: no scope (None).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from evidence.ingest.sections import (
    NAME_TERMS_KEY,
    NAME_TITLE_KEY,
    NAME_VERSIONS_KEY,
    VERSION_PHRASE,
    name_words,
    normal_version,
)
from evidence.records import ChunkKind
from evidence.verbatim.scoring import spelling_variant

if TYPE_CHECKING:
    from evidence.search.base import SearchReader

#: Term lookups per question (each one indexed term query).
MAX_TERMS = 12
#: Passages one term lookup reads to count the documents it names; reaching it: not distinctive.
MAX_PASSAGES = 2000

_NUMBER = r"(\d+(?:\.\d+)*)"
#: A version after a word, which counts when that word names a document: "GPLv2", "GPL3", "GPL-2.0",
#: "MPL 2.0", "GPL 3:" (an integer after a space only before punctuation or the end, so that
#: "Lipitor 10 mg" gives no version).
_NAMED_VERSION = (
    re.compile(rf"\b([a-z]{{3,}}?)v?{_NUMBER}\b", re.IGNORECASE),
    re.compile(rf"\b([a-z]{{3,}})-{_NUMBER}\b", re.IGNORECASE),
    re.compile(r"\b([a-z]{3,})\s(\d+\.\d+(?:\.\d+)*)\b", re.IGNORECASE),
    re.compile(r"\b([a-z]{3,})\s(\d+)(?=\s*(?:[:;,?!)]|$))", re.IGNORECASE),
)


def question_versions(question: str) -> tuple[list[str], list[tuple[str, str]]]:
    """The versions a question gives: those standing on their own, and (word, version) pairs."""
    free = [normal_version(m.group(1)) for m in VERSION_PHRASE.finditer(question)]
    pairs = [
        (w, normal_version(m.group(2)))
        for rx in _NAMED_VERSION
        for m in rx.finditer(question)
        for w in name_words(m.group(1))[:1]
    ]
    return free, pairs


def version_agreement(asked: Iterable[str], named: Sequence[str]) -> int | None:
    """2: a version asked is the name's ("2" and "2.0"); 1: only loosely ("2" and "2.1"); 0: they
    disagree; None: the name has no version."""
    if not named:
        return None
    best = 0
    for a in asked:
        for n in named:
            if a == n:
                return 2
            if n.startswith(a + "."):
                best = 1
    return best


def accounted_words(title: Sequence[str], words: Sequence[str]) -> set[str]:
    """The words of a name the question's words account for: said ("lesser"; "licence" for
    "license"), or a run of two or more whose initials the question gives ("gpl")."""
    said = {t for t in title if any(t == w or spelling_variant(t, w) for w in words)}
    asked = set(words)
    for i in range(len(title)):
        for j in range(i + 2, len(title) + 1):
            if "".join(t[0] for t in title[i:j]) in asked:
                said.update(title[i:j])
    return said


def _listed(meta: Mapping[str, Any], key: str) -> list[str]:
    value = meta.get(key)
    return [str(v) for v in value] if isinstance(value, list) else []


def closest(
    docs: Mapping[str, Mapping[str, Any]], words: Sequence[str], versions: Sequence[str]
) -> list[str]:
    """Of the documents one question term names (id → metadata), those the question names best:
    versions that agree, then names with every telling word accounted for (module docstring)."""
    ids = sorted(docs)
    if versions:
        agree = {d: version_agreement(versions, _listed(docs[d], NAME_VERSIONS_KEY)) for d in ids}
        ids = [d for d in ids if agree[d] != 0]
        top = max((agree[d] or 1 for d in ids), default=0)
        ids = [d for d in ids if (agree[d] or 1) == top]
    if len(ids) < 2:
        return ids
    titles = {d: _listed(docs[d], NAME_TITLE_KEY) for d in ids}
    if not all(titles.values()):
        return ids
    shared = set.intersection(*(set(t) for t in titles.values()))
    full = []
    for d in ids:
        said = accounted_words(titles[d], words)
        if not set(titles[d]) - said - shared and 2 * len(said) >= len(set(titles[d])):
            full.append(d)
    return full if full and len(full) < len(ids) else ids


def _question_words(question: str) -> list[str]:
    words: list[str] = []
    for w in name_words(question):
        words.append(w)
        # "GPL3" is the name "gpl" with a version: its letters are a term too.
        if m := re.fullmatch(r"([a-z]{3,}?)v?\d+", w):
            words.append(m.group(1))
    return list(dict.fromkeys(words))[:MAX_TERMS]


#: A word names documents only when more than this share of the passages holding it (BM25's best
#: 50) are theirs: a word common in the texts is not a name. At 0.5, a manual's page-title words and
#: a spec's subject word (0.52-0.67 of their passages) scoped questions away from their answers;
#: chosen on the QA suite among 0.5-0.9 (docs/verbatim.md, "Answers nowhere in the evidence").
NAME_TEXT_SHARE = 0.7


def named_documents(backend: SearchReader, index: str, question: str) -> list[str] | None:
    """Ids of the documents the question names, or None when it names none distinctively.
    Only documents `backend` reads can be named: on a request, the index seen through its filters
    (`search.scoped`), so another tenant's document never is, and the third of "the index" is a
    third of the documents it reads (`document_count`): how many another tenant holds moves nothing."""
    total = backend.document_count(index)
    if total < 2:
        return None
    limit = max(1, total // 3)
    terms = _question_words(question)
    free, pairs = question_versions(question)
    found: dict[str, tuple[dict[str, Mapping[str, Any]], int]] = {}
    for term in terms:
        hits = backend.lookup(index, {NAME_TERMS_KEY: term}, limit=MAX_PASSAGES, kind=ChunkKind.PASSAGE)
        docs: dict[str, Mapping[str, Any]] = {}
        for h in hits:
            docs.setdefault(h.chunk.document_id, h.chunk.metadata)
        found[term] = (docs, len(hits))
    # A version after a word counts when that word names some document ("GPL-2.0", not "ICD-10").
    versions = list(dict.fromkeys([*free, *(v for w, v in pairs if found.get(w, ({}, 0))[0])]))
    named: list[set[str]] = []
    for term in terms:
        docs, count = found[term]
        if not docs or count >= MAX_PASSAGES:
            continue
        ids = closest(docs, terms, versions)
        if not ids or len(ids) > limit:
            continue
        text_hits = backend.lexical(index, term, k=50, kind=ChunkKind.PASSAGE)
        if text_hits and sum(h.chunk.document_id in docs for h in text_hits) <= NAME_TEXT_SHARE * len(
            text_hits
        ):
            continue
        named.append(set(ids))
    if not named:
        return None
    both = set.intersection(*named)
    return sorted(both or set.union(*named))

"""Scoping a question to the document it names ("my Apache licence", "the MPL", "Lipitor").

At indexing time every document records the terms it may be called by (`NAME_TERMS_KEY`, in its
metadata: the lower-cased words of its title, subject names, first headings and file name,
and its title's acronyms; `ingest.sections.document_name_terms`). Nothing here is a hand list
of names: a question term names a document when the index says so, and only when it is
*distinctive*:

- it is in the names of at most a third of the index's documents (one, in an index of two to
  five), so "license" in a folder of licences, or "sqlite" in a folder of SQLite pages, names
  none of them;
- it is not a common word of the documents' text: more than half of the passages that hold it
  (the best 50 by BM25) belong to the documents it names ("software" is in the name of one licence
  and the text of all of them: not a name; a drug's name fills its own label and appears in an
  interaction table or two of others: a name).

Several naming terms narrow to the documents all of them name ("GNU" and "GPL"), else any of
them. No term, or an index of one document: no scope (None).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from evidence.ingest.sections import NAME_TERMS_KEY, name_words
from evidence.records import ChunkKind

if TYPE_CHECKING:
    from evidence.search.base import SearchBackend

#: Term lookups per question (each one indexed term query).
MAX_TERMS = 12
#: Passages one term lookup reads to count the documents it names; reaching it: not distinctive.
MAX_PASSAGES = 2000


def named_documents(backend: SearchBackend, index: str, question: str) -> list[str] | None:
    """Ids of the documents the question names, or None when it names none distinctively."""
    total = backend.get_index(index).documents
    if total < 2:
        return None
    limit = max(1, total // 3)
    terms = list(dict.fromkeys(name_words(question)))[:MAX_TERMS]
    named: list[set[str]] = []
    for term in terms:
        hits = backend.lookup(index, {NAME_TERMS_KEY: term}, limit=MAX_PASSAGES, kind=ChunkKind.PASSAGE)
        docs = {h.chunk.document_id for h in hits}
        if not docs or len(docs) > limit or len(hits) >= MAX_PASSAGES:
            continue
        text_hits = backend.lexical(index, term, k=50, kind=ChunkKind.PASSAGE)
        if text_hits and sum(h.chunk.document_id in docs for h in text_hits) * 2 <= len(text_hits):
            continue
        named.append(docs)
    if not named:
        return None
    both = set.intersection(*named)
    return sorted(both or set.union(*named))

"""`POST /retrieve`'s `conversation`: a follow-up question is retrieved with what it refers back to.

A query refers back to the conversation when it has a reference only the conversation resolves
("it", "that step", "the same one": the coach's detector, `has_reference`, shared with it) or
when it is a follow-up that names no subject of its own: it opens with "what/how about", "and",
"also", or uses a possessive ("its dose", "their side effects"). Then the content words of the
last user turn before it (cue and filler words removed, as the coach removes them) join the
query, and the query so extended is the one planned, embedded and ranked. When the last user
turn refers back too, the turn before it joins as well (at most `MAX_TURNS`). Assistant and
system turns never join: an answer's words would steer retrieval to what was already found.

The effective query is the response's `plan.query` (`plan.normalized_query` as any query's):
the caller sees what was searched. A query that does not refer back, or a conversation with no
earlier user turn, leaves the request unchanged.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from evidence.model import ConversationTurn, RetrieveRequest
from evidence.names import MAX_QUERY_CHARS

#: User turns that may join one query (a chain of follow-ups: "and its dose?" after "what about
#: its side effects?" after the question that named the drug).
MAX_TURNS = 3

#: A reference to something said earlier: only resolvable with the conversation.
_ANAPHORA = re.compile(
    r"\b(it|this|that|these|those|them|again|the (last|previous|next|same|other|first|second|above) "
    r"(one|step|part|example|problem|question|exercise|answer|bit|thing)s?|another one|the one|"
    r"next step|last step|that step)\b"
)

_WORD = re.compile(r"[a-z0-9][a-z0-9'^/]*")
_STOP = frozenset(
    """a an the and or but if then than so of to in on at by for with about from into over under as is are
    was were be been being am do does did doing have has had having i me my we our you your he she it its
    they them their this that these those there here what whats what's which who whom whose when where why
    how can could should would will shall may might must not no yes please just also very really some any
    more most much many one ones again another same other next last previous first second above let lets
    let's i'm im i've ive don't dont doesn't doesnt isn't isnt can't cant""".split()
)
#: Cue and filler words: they say what the student wants, not what about.
_GENERIC = frozenset(
    """explain explained explaining explanation show tell teach taught help helps walk understand
    understanding learn learning know want need give get got make work works working use uses using used
    mean means meaning define definition question questions thing things stuff step steps way ways
    practice practise problem problems exercise exercises quiz test drill worksheet example examples
    difference differences compare comparison versus vs better keep keeps failing fail fails failed
    wrong confused stuck lost mistake mistakes error errors like something anything everything math maths
    getting answer answers right correct doing going trying try tried keep kept always still""".split()
)


def content_words(text: str) -> list[str]:
    """The query's topic words in order, de-duplicated (lower case; cue and filler words removed)."""
    seen: dict[str, None] = {}
    for m in _WORD.finditer(text.lower()):
        w = m.group().strip("'")
        if len(w) < 2 and not w.isdigit():
            continue
        if w in _STOP or w in _GENERIC:
            continue
        seen.setdefault(w, None)
    return list(seen)


def has_reference(text: str) -> bool:
    return _ANAPHORA.search(text.lower()) is not None


#: A follow-up that leans on the previous question for its subject.
_FOLLOW_UP = re.compile(r"^\s*(what|how)\s+about\b|^\s*(and|also)\b|\b(its|their|theirs)\b")


def refers_back(query: str) -> bool:
    """Whether the query needs the conversation to say what it is about."""
    return has_reference(query) or _FOLLOW_UP.search(query.lower()) is not None


def earlier_user_turns(query: str, conversation: Sequence[ConversationTurn]) -> list[str]:
    """The user turns the query leans on, oldest first: the last one before it, and the ones before
    that while each of them refers back as well. A last turn equal to the query is the query
    itself (clients often send the current message as the conversation's last turn)."""
    turns = [t.content for t in conversation if t.role == "user" and t.content.strip()]
    if turns and turns[-1].strip() == query.strip():
        turns = turns[:-1]
    out: list[str] = []
    for content in reversed(turns):
        out.append(content)
        if len(out) >= MAX_TURNS or not refers_back(content):
            break
    return out[::-1]


def effective_query(query: str, conversation: Sequence[ConversationTurn] | None) -> str:
    """The query, extended with the earlier turns' content words when it refers back to them."""
    if not conversation or not refers_back(query):
        return query
    have = set(content_words(query))
    out = query
    for content in earlier_user_turns(query, conversation):
        for word in content_words(content):
            # Within the query cap, as every query is (the plan request validates it again).
            if word not in have and len(out) + 1 + len(word) <= MAX_QUERY_CHARS:
                have.add(word)
                out = f"{out} {word}"
    return out


def with_conversation(request: RetrieveRequest) -> RetrieveRequest:
    """The request to retrieve with: its query extended by the conversation when it refers back."""
    query = effective_query(request.query, request.conversation)
    return request if query == request.query else request.model_copy(update={"query": query})

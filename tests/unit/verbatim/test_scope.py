"""The named-document scope among documents whose names share words (issue 22 item 4): a version
the question gives must agree with the name's, and the name whose every telling word the question
accounts for wins over one with a word it never said ("Lesser"). Made-up licences only."""

from __future__ import annotations

from pathlib import Path

import pytest

from evidence.ingest.parsers import parse_text
from evidence.ingest.sections import document_name_title, document_name_versions, name_words
from evidence.model import RetrieveRequest
from evidence.service import EvidenceService
from evidence.verbatim.scope import (
    accounted_words,
    closest,
    named_documents,
    question_versions,
    version_agreement,
)
from tests.unit.verbatim.verbatimkit import text_service

BODY = """
1. Definitions. "Program" means any work distributed under this License.
2. Patents. Each contributor grants you a patent licence for the Program.
3. Termination. Your rights end if you breach this License; they are restored when you cure
the breach within thirty days.
"""

# File names without versions: the versions come from the title block, as in a licence's text.
WIDGETS = {
    "widget-a.txt": "WIDGET PUBLIC LICENSE\n    Version 2, June 1991\n\n" + BODY,
    "widget-b.txt": (
        "LESSER WIDGET PUBLIC LICENSE\n    Version 2.1, February 1999\n\n"
        "[This is the first released version of the Lesser WPL. It also counts as the successor\n"
        "of the Widget Public License, version 2, hence the version number 2.1.]\n"
        + BODY
        + "\nThe Lesser WPL permits linking; the ordinary Widget Public License (WPL) does not.\n"
    ),
    "widget-c.txt": "Widget Public License Version 3\n\n" + BODY,
    "gadget.txt": "Gadget Font License\n\n1. Scope. This License covers fonts and glyphs.\n",
    "sprocket.txt": "Sprocket Data Agreement\n\n1. Scope. This Agreement covers data sets.\n",
}


@pytest.fixture(scope="module")
def widgets(tmp_path_factory: pytest.TempPathFactory) -> EvidenceService:
    return text_service(tmp_path_factory, "w", WIDGETS)


def names(service: EvidenceService, question: str) -> list[str] | None:
    found = named_documents(service.backend, "w", question)
    return None if found is None else [Path(d).name for d in found]


def test_the_name_and_its_versions_are_learned_from_the_title_block_and_file_name() -> None:
    doc = parse_text(WIDGETS["widget-b.txt"], filename="widget-b.txt")
    assert document_name_title("widget-b.txt", doc) == ["lesser", "widget", "public", "license"]
    # "version 2" in the bracketed note is the text, not the title block.
    assert document_name_versions("widget-b.txt", doc, []) == ["2.1"]
    plain = parse_text("Some Manual\n\nText.\n", filename="Some-Manual-4.6.2.0.txt")
    assert document_name_versions("Some-Manual-4.6.2.0.txt", plain, []) == ["4.6.2"]
    numbered = parse_text("2.3.3 Size and Alignment\n\nText.\n", filename="size.txt")
    assert document_name_versions("size.txt", numbered, ["2.3.3 Size and Alignment"]) == []


def test_question_versions_stand_alone_or_follow_a_name() -> None:
    assert question_versions("What does version 2 of the WPL say?") == (["2"], [])
    assert question_versions("Under WPL v2.0, may I sell copies?")[0] == ["2"]
    assert ("wpl", "3") in question_versions("WPLv3: is there a warranty?")[1]
    assert ("wpl", "2.1") in question_versions("Does WPL 2.1 allow linking?")[1]
    assert ("wpl", "2") in question_versions("WPL-2.0 and patents")[1]
    assert question_versions("Take Lipravex 10 mg daily") == ([], [])
    assert name_words("WPLv3") == ["wpl"]


def test_versions_agree_exactly_loosely_or_not_at_all() -> None:
    assert version_agreement(["2"], ["2"]) == 2
    assert version_agreement(["2"], ["2.1"]) == 1
    assert version_agreement(["2"], ["3"]) == 0
    assert version_agreement(["2.1"], ["2"]) == 0
    assert version_agreement(["2"], []) is None


def test_initials_account_for_a_run_of_the_name_s_words() -> None:
    title = ["lesser", "widget", "public", "license"]
    assert accounted_words(title, ["wpl"]) == {"widget", "public", "license"}
    assert accounted_words(title, ["lwpl"]) == set(title)
    assert accounted_words(title, ["licence"]) == {"license"}


def test_closest_prefers_the_name_with_every_telling_word_accounted_for() -> None:
    docs = {
        "plain": {"name_title": ["widget", "public", "license"]},
        "lesser": {"name_title": ["lesser", "widget", "public", "license"]},
    }
    assert closest(docs, ["wpl"], []) == ["plain"]
    assert closest(docs, ["lesser", "wpl"], []) == ["lesser", "plain"]  # both fully said
    # One generic word accounts for too little of either name to choose.
    other = {"a": {"name_title": ["gadget", "font", "license"]}, "b": {"name_title": ["font", "data"]}}
    assert closest(other, ["font"], []) == ["a", "b"]
    # A word every candidate shares leaves nothing of "plain" unsaid, but one word of its three is
    # less than half its name: that chooses neither.
    assert closest(docs, ["widget"], []) == ["lesser", "plain"]


@pytest.mark.parametrize(
    ("question", "expected"),
    [
        ("Under the WPL v2, when do my rights end?", ["widget-a.txt"]),
        ("What does version 2 of the WPL say about patents?", ["widget-a.txt"]),
        ("WPLv3: when are my rights restored?", ["widget-c.txt"]),
        ("Is there a patent licence in Widget Public License 3?", ["widget-c.txt"]),
        ("Does the Lesser WPL let me link a program?", ["widget-b.txt"]),
        ("Does WPL 2.1 allow linking?", ["widget-b.txt"]),
        ("What does the LWPL say about termination?", ["widget-b.txt"]),
    ],
)
def test_the_version_and_the_closest_name_choose_among_names_that_share_words(
    widgets: EvidenceService, question: str, expected: list[str]
) -> None:
    assert names(widgets, question) == expected


def test_a_name_two_versions_share_names_neither_without_a_version(widgets: EvidenceService) -> None:
    # "WPL" is the whole name of two of them (versions 2 and 3), the Lesser one less closely:
    # two of five documents is not one named document.
    assert names(widgets, "What does the WPL say about patents?") is None
    # A version no document carries names none of those that share the name.
    assert names(widgets, "What does WPL v5 say about patents?") is None


@pytest.mark.parametrize("profile", ["verbatim", "default"])
def test_every_profile_answers_from_the_version_named(widgets: EvidenceService, profile: str) -> None:
    resp = widgets.retrieve(
        "w", RetrieveRequest(query="Under the WPL v2, when do my rights end?", profile=profile)
    )
    assert resp.plan.filters.get("document_id")
    assert resp.hits and {Path(h.document_id).name for h in resp.hits} == {"widget-a.txt"}


def test_a_name_run_into_its_version_is_the_name(widgets: EvidenceService) -> None:
    assert names(widgets, "Under WPL3, when are my rights restored?") == ["widget-c.txt"]


# A manual split into pages: "closure" is in two page titles, and the untitled "Memory Usage" page
# mentions it as often, so a third of the passages holding it are another page's: a topic, not a
# name. "Sprocket" is in no text but its own document's: a name.
PAGES = {
    "closure-api.txt": "The Closure API\n\nA closure is prepared with ffi_prep_closure_loc.\n",
    "closure-example.txt": "Closure Example\n\nThis closure binds puts to a callback.\n",
    "memory-usage.txt": "Memory Usage\n\nClosure memory is mapped from a temporary file, not the heap.\n",
    "types.txt": "Primitive Types\n\nThe integer types have fixed sizes.\n",
    "structures.txt": "Structures\n\nA struct descriptor lists its elements.\n",
    "sprocket.txt": "Sprocket Data Agreement\n\n1. Scope. This Agreement covers data sets.\n",
}


@pytest.fixture(scope="module")
def pages(tmp_path_factory: pytest.TempPathFactory) -> EvidenceService:
    return text_service(tmp_path_factory, "p", PAGES)


@pytest.mark.parametrize(("share", "closure_named"), [(0.5, True), (0.7, False)])
def test_a_title_word_common_in_other_pages_text_names_nothing(
    pages: EvidenceService, monkeypatch: pytest.MonkeyPatch, share: float, closure_named: bool
) -> None:
    from evidence.verbatim import scope

    monkeypatch.setattr(scope, "NAME_TEXT_SHARE", share)
    found = named_documents(pages.backend, "p", "Where is a closure's storage mapped from?")
    named = None if found is None else sorted(Path(d).name for d in found)
    assert named == (["closure-api.txt", "closure-example.txt"] if closure_named else None)
    # a name no other text uses is named at either share
    sprocket = named_documents(pages.backend, "p", "What does the Sprocket agreement cover?")
    assert sprocket is not None and [Path(d).name for d in sprocket] == ["sprocket.txt"]

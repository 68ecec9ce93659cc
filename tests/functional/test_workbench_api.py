"""The workbench's page and its `/v1` routes over HTTP (`evidence serve`, the hashing embedder).

The page in a real browser: tests/functional/test_workbench_browser.py.
"""

from __future__ import annotations

import json
import re
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest

from evidence.access import AccessPolicy, Authorizer
from evidence.api import runtime
from evidence.evaluation import run_qa
from evidence.model import IndexDocumentRequest
from evidence.server import ApiServer, make_server
from evidence.service import EvidenceService
from evidence.workbench.page import CONTENT_SECURITY_POLICY, STATIC, serve_page

HOSTILE = (
    "# Hostile notes\n\nThe key </evidence> rotates <script>alert('x')</script> yearly & more.\n\n"
    "## Retention\n\nBackups are kept for </index_1> 35 days <b>bold</b>.\n"
)
QA = [
    {"question": "How long are backups kept?", "answers": ["35 days"]},
    {"question": "How often does the key rotate?", "answers": ["yearly"]},
    {"question": "What is the price of a licence?", "answers": []},
]


def call(
    url: str, method: str = "GET", payload: Any = None, token: str | None = None
) -> tuple[int, dict[str, str], Any]:
    data = json.dumps(payload).encode() if payload is not None else None
    headers = {"Content-Type": "application/json"}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    req = urllib.request.Request(url, data=data, method=method, headers=headers)
    try:
        with urllib.request.urlopen(req, timeout=60) as resp:
            raw = resp.read()
            kind = resp.headers.get("Content-Type", "")
            return resp.status, dict(resp.headers), json.loads(raw) if "json" in kind else raw
    except urllib.error.HTTPError as err:
        return err.code, dict(err.headers), json.loads(err.read())


@pytest.fixture
def server(service: EvidenceService) -> Iterator[ApiServer]:
    service.index_document(
        "notes", IndexDocumentRequest(document_id="hostile", filename="h.md", text=HOSTILE)
    )
    service.index_document(
        "secret", IndexDocumentRequest(document_id="s", filename="s.txt", text="Only admins read this.")
    )
    policy = {
        "principals": {"admin": {"read": ["*"], "write": ["*"]}, "reader": {"read": ["notes"]}},
        "tokens": {"tok-admin-0123456789": "admin", "tok-reader-0123456789": "reader"},
    }
    runtime.configure(
        service=service, settings=service.settings, authorizer=Authorizer(AccessPolicy.model_validate(policy))
    )
    srv = make_server("127.0.0.1", 0, max_body_bytes=service.settings.max_body_bytes, pages=serve_page)
    thread = threading.Thread(target=srv.serve_forever, daemon=True)
    thread.start()
    yield srv
    srv.shutdown()
    srv.server_close()


ADMIN, READER = "tok-admin-0123456789", "tok-reader-0123456789"


def test_the_page_is_served_at_the_root_with_a_strict_policy(server: ApiServer) -> None:
    status, headers, body = call(server.url + "/")
    assert status == 200 and headers["Content-Type"].startswith("text/html")
    assert headers["Content-Security-Policy"] == CONTENT_SECURITY_POLICY
    assert "script-src 'self'" in CONTENT_SECURITY_POLICY and "unsafe" not in CONTENT_SECURITY_POLICY
    assert headers["X-Content-Type-Options"] == "nosniff"
    html = body.decode()
    # Nothing inline for the policy to forbid, and every URL relative (a stage prefix keeps working).
    assert re.findall(r"<script\b[^>]*>", html) == ['<script src="static/app.js" defer>']
    assert not re.search(r"\son[a-z]+=|\sstyle=", html)
    assert not re.search(r'(?:src|href)="/', html) and "http" not in html
    for path, kind in (("/static/app.js", "text/javascript"), ("/static/app.css", "text/css")):
        status, headers, _ = call(server.url + path)
        assert status == 200 and headers["Content-Type"].startswith(kind)
    js = (STATIC / "app.js").read_text()
    assert not re.search(r"\.(innerHTML|outerHTML)\s*=|insertAdjacentHTML|document\.write|\beval\(", js)
    assert 'fetch("/' not in js and 'open("POST", "/' not in js


@pytest.mark.parametrize("path", ["/nope", "/static/../server.py", "/static/", "/v1"])
def test_other_paths_are_the_api_s_404(server: ApiServer, path: str) -> None:
    status, _, body = call(server.url + path)
    assert status == 404 and body["error"]["code"] == "not_found"


def test_document_text_puts_every_citation_at_its_offsets(
    server: ApiServer, service: EvidenceService
) -> None:
    base = server.url
    status, _, listing = call(f"{base}/v1/indexes/notes/documents", token=ADMIN)
    assert status == 200 and [d["document_id"] for d in listing["documents"]] == ["hostile"]
    status, _, doc = call(f"{base}/v1/indexes/notes/documents/hostile", token=ADMIN)
    assert status == 200
    assert "<script>alert('x')</script>" in doc["text"] and "</evidence>" in doc["text"]
    for profile in ("default", "verbatim"):
        _, _, got = call(
            f"{base}/v1/indexes/notes/retrieve", "POST", {"query": "backups kept", "profile": profile}, ADMIN
        )
        assert got["hits"]
        for hit in got["hits"]:
            c = hit["citation"]
            assert doc["text"][c["char_start"] : c["char_end"]] == hit["text"]
    for gap in doc["gaps"]:
        assert set(doc["text"][gap["start"] : gap["end"]]) == {"\n"}


def test_document_routes_apply_the_access_policy(server: ApiServer) -> None:
    base = server.url
    for path in ("documents", "documents/s", "eval-sets"):
        status, _, body = call(f"{base}/v1/indexes/secret/{path}", token=READER)
        assert status == 403 and body["error"]["code"] == "forbidden", path
        assert call(f"{base}/v1/indexes/secret/{path}")[0] == 403  # no token: nothing
    assert call(f"{base}/v1/indexes/secret/documents/s", token=ADMIN)[0] == 200
    status, _, body = call(f"{base}/v1/indexes/notes/documents/{quote('no/such', safe='')}", token=READER)
    assert status == 404 and body["error"]["code"] == "document_not_found"
    status, _, body = call(
        f"{base}/v1/indexes/secret/evaluate", "POST", {"jsonl": "x", "settings": [{}]}, token=READER
    )
    assert status == 403


def test_evaluate_is_evidence_eval_s_computation(
    server: ApiServer, service: EvidenceService, tmp_path: Path
) -> None:
    base = server.url
    folder = Path(service.settings.store_dir) / "eval" / "notes"
    folder.mkdir(parents=True)
    qa_file = folder / "notes-qa.jsonl"
    qa_file.write_text("".join(json.dumps(q) + "\n" for q in QA))
    status, _, sets = call(f"{base}/v1/indexes/notes/eval-sets", token=READER)
    assert status == 200 and sets["sets"] == [{"name": "notes-qa.jsonl", "kind": "qa", "questions": 3}]

    settings = [{"profile": "verbatim"}, {"profile": "default", "max_chars": 20}]
    status, _, got = call(
        f"{base}/v1/indexes/notes/evaluate", "POST", {"set": "notes-qa.jsonl", "settings": settings}, READER
    )
    assert status == 200, got
    direct = [
        run_qa(service, qa_file, index="notes", profile="verbatim"),
        run_qa(service, qa_file, index="notes", profile="default", overrides={"max_chars": 20}),
    ]
    for run, expected in zip(got["runs"], direct, strict=True):
        for key in ("answer_recall", "no_result_precision", "no_result_recall", "paths", "misses"):
            assert run[key] == expected[key], key
    missed = [{m["question"] for m in d["misses"]} for d in direct]
    for q in got["per_question"]:
        assert q["scores"] == [float(q["question"] not in m) for m in missed]
    verdicts = [q["verdict"] for q in got["per_question"]]
    assert (got["wins"], got["losses"], got["ties"]) == tuple(
        verdicts.count(v) for v in ("win", "loss", "tie")
    )

    # The same set uploaded as text answers the same.
    status, _, uploaded = call(
        f"{base}/v1/indexes/notes/evaluate",
        "POST",
        {"jsonl": qa_file.read_text(), "settings": settings},
        READER,
    )
    assert status == 200 and uploaded["per_question"] == got["per_question"]


def test_evaluate_qrels_scores_documents_per_query(server: ApiServer) -> None:
    qrels = "\n".join(
        json.dumps(r)
        for r in (
            {"query": "backups kept days", "relevant": {"hostile": 1}},
            {"query": "unrelated astronomy", "relevant": {"other-doc": 2}},
        )
    )
    status, _, got = call(
        f"{server.url}/v1/indexes/notes/evaluate", "POST", {"jsonl": qrels, "settings": [{}]}, ADMIN
    )
    assert status == 200 and got["kind"] == "qrels"
    assert [q["scores"] for q in got["per_question"]] == [[1.0], [0.0]]
    assert got["runs"][0]["ndcg_at_10"] == 0.5 and got["per_question"][0]["verdict"] is None


@pytest.mark.parametrize(
    ("payload", "status", "field"),
    [
        ({"settings": [{}]}, 422, "set"),
        ({"set": "a.jsonl", "jsonl": "x", "settings": [{}]}, 422, "set"),
        ({"set": "absent.jsonl", "settings": [{}]}, 404, "set"),
        ({"set": "../x.jsonl", "settings": [{}]}, 422, "set"),
        ({"jsonl": '{"nope": 1}', "settings": [{}]}, 422, "jsonl"),
        ({"jsonl": '{"question": "q", "answers": [1]}', "settings": [{}]}, 422, "qa"),
        ({"jsonl": '{"query": "q", "relevant": {"d": 1}}\nnot json', "settings": [{}]}, 422, "qrels"),
        ({"jsonl": '{"query": "q", "relevant": {"d": 1}}', "settings": [{"profile": "nope"}]}, 422, None),
        ({"jsonl": '{"query": "q", "relevant": {"d": 1}}', "settings": [{}, {}, {}]}, 422, "settings"),
    ],
)
def test_evaluate_refuses_bad_input_naming_the_field(
    server: ApiServer, payload: dict[str, Any], status: int, field: str | None
) -> None:
    got_status, _, body = call(f"{server.url}/v1/indexes/notes/evaluate", "POST", payload, ADMIN)
    assert got_status == status, body
    if field:
        assert body["error"]["field"] == field, body
    else:
        assert "profile" in body["error"]["field"]


def _luminance(hex_colour: str) -> float:
    r, g, b = (int(hex_colour.lstrip("#")[i : i + 2], 16) / 255 for i in (0, 2, 4))

    def channel(c: float) -> float:
        return c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4

    return 0.2126 * channel(r) + 0.7152 * channel(g) + 0.0722 * channel(b)


def test_text_colours_are_readable() -> None:
    """WCAG AA (4.5:1) for every text colour of app.css against the backgrounds it is drawn on."""
    css = (STATIC / "app.css").read_text()
    var = dict(re.findall(r"--([a-z-]+):\s*(#[0-9a-f]{6})", css))
    pairs = [
        (var["fg"], var["bg"]),
        (var["muted"], var["bg"]),
        (var["muted"], var["panel"]),
        (var["accent"], var["bg"]),
        (var["accent"], var["panel"]),
        (var["bad"], var["bg"]),
        (var["bad"], "#fdecea"),
        (var["good"], var["bg"]),
        (var["good"], "#dff3e4"),
        ("#0b4a8a", "#e1ecf8"),
        ("#7a3d00", "#f6e9dc"),
        ("#ffffff", var["accent"]),
        ("#d7dde6", "#14283f"),
        ("#000000", var["mark"]),
        (var["fg"], var["followup-bg"]),
    ]
    for fg, bg in pairs:
        hi, lo = sorted((_luminance(fg), _luminance(bg)), reverse=True)
        assert (hi + 0.05) / (lo + 0.05) >= 4.5, (fg, bg)
        assert bg in css and fg in css, (fg, bg)


def test_the_demo_names_the_workbench_and_make_serves_it_there(capsys: pytest.CaptureFixture[str]) -> None:
    from evidence.cli.demo import WORKBENCH_URL, print_workbench
    from evidence.demo import CRITERION

    print_workbench(Path(".evidence"))
    out = capsys.readouterr().out
    assert WORKBENCH_URL in out and CRITERION in out and "make workbench" in out
    makefile = (Path(__file__).resolve().parents[2] / "Makefile").read_text()
    port = WORKBENCH_URL.rstrip("/").rsplit(":", 1)[1]
    assert f"evidence serve --port {port}" in makefile

"""The workbench in a real browser: Debian's Chromium, headless, driven by Playwright.

Everything runs through a proxy that serves the API under `/prod/` and strips the prefix, as API
Gateway's stage does, so every URL the page uses must be relative. The store holds the demo's
vendor sample (the real MiniLM embedder, as `make demo`), a hostile document and a QA set in the
store's eval folder; an access policy gives an admin token and a read-only token.

Screenshots of each view go to build/screenshots/ (printed, for CI logs and review). If Chromium
cannot start, every test fails with one line saying why: never a silent skip.
"""

from __future__ import annotations

import http.client
import json
import os
import shutil
import threading
import urllib.request
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from evidence.access import AccessPolicy, Authorizer
from evidence.api import runtime
from evidence.config import Settings
from evidence.model import IndexDocumentRequest
from evidence.server import ApiServer, make_server
from evidence.service import EvidenceService
from evidence.workbench.page import serve_page

# One worker: the store, the model and the browser are set up once for the module.
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("workbench-browser")]

ROOT = Path(__file__).resolve().parents[2]
SHOTS = ROOT / "build" / "screenshots"
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-background-networking",
    "--disable-gpu",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
ADMIN, READER = "tok-admin-7f3a9c2e51", "tok-reader-0b6d4e8a73"
#: Markup and the evidence's own closing tags inside a document: all of it must stay text.
HOSTILE = (
    "# Hostile vendor notes\n\n"
    "Encryption keys rotate yearly.</evidence><script>window.__pwned = 1</script>\n"
    '<img src="x" onerror="window.__pwned = 2"> </index_1> & <b>bold</b> claims.\n'
)
QA = [
    {"question": "How often are encryption keys rotated?", "answers": ["rotated every 365 days"]},
    {"question": "Which TLS versions protect data in transit?", "answers": ["TLS 1.2 or higher"]},
    {"question": "How many days do customers get before a new subprocessor?", "answers": ["30 days"]},
    {"question": "How long are encrypted backups retained?", "answers": ["35 days"]},
    {"question": "What does a month of the service cost?", "answers": []},
]


# --- the stage-prefix proxy -----------------------------------------------------------------------


class _StageProxy(BaseHTTPRequestHandler):
    """`/prod/...` → the API's `/...`, as API Gateway's stage does; anything else is its 403."""

    upstream: tuple[str, int]
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def _forward(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        if not self.path.startswith("/prod/"):
            payload = b'{"message":"Missing Authentication Token"}'
            self.send_response(403)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)
            return
        conn = http.client.HTTPConnection(*self.upstream, timeout=120)
        headers = {k: v for k, v in self.headers.items() if k.lower() not in {"host", "connection"}}
        conn.request(self.command, self.path[len("/prod") :], body=body or None, headers=headers)
        resp = conn.getresponse()
        data = resp.read()
        self.send_response(resp.status)
        for name, value in resp.getheaders():
            if name.lower() not in {"connection", "transfer-encoding", "content-length", "server", "date"}:
                self.send_header(name, value)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)
        conn.close()

    do_GET = do_POST = do_DELETE = do_HEAD = _forward


# --- fixtures -------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    from evidence.demo import VENDOR_STEPS

    store = tmp_path_factory.mktemp("workbench") / "store"
    settings = Settings(store_dir=store)
    service = EvidenceService(settings)  # the default embedder, as `make demo`
    for paths, doc_type in VENDOR_STEPS:
        assert not service.index_paths("demo", list(paths), doc_type=doc_type).failed
    service.index_document(
        "notes", IndexDocumentRequest(document_id="hostile", filename="h.md", text=HOSTILE)
    )
    (store / "eval" / "demo").mkdir(parents=True)
    (store / "eval" / "demo" / "vendor-qa.jsonl").write_text("".join(json.dumps(q) + "\n" for q in QA))
    policy = {
        "principals": {"admin": {"read": ["*"], "write": ["*"]}, "reader": {"read": ["demo", "notes"]}},
        "tokens": {ADMIN: "admin", READER: "reader"},
    }
    runtime.configure(
        service=service, settings=settings, authorizer=Authorizer(AccessPolicy.model_validate(policy))
    )
    api: ApiServer = make_server("127.0.0.1", 0, max_body_bytes=settings.max_body_bytes, pages=serve_page)
    handler = type("Proxy", (_StageProxy,), {"upstream": api.server_address[:2]})
    proxy = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    proxy.daemon_threads = True
    threads = [threading.Thread(target=s.serve_forever, daemon=True) for s in (api, proxy)]
    for t in threads:
        t.start()
    host, port = proxy.server_address[:2]
    yield {"api": api.url, "prod": f"http://{host!s}:{port}/prod/", "service": service}
    for s in (proxy, api):
        s.shutdown()
        s.server_close()
    runtime.close()


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    executable = os.environ.get("CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"
    try:
        from playwright.sync_api import sync_playwright

        pw = sync_playwright().start()
    except Exception as exc:
        pytest.fail(f"Playwright cannot start: {str(exc).splitlines()[0]}", pytrace=False)
    try:
        chromium = pw.chromium.launch(executable_path=executable, headless=True, args=CHROMIUM_ARGS)
    except Exception as exc:
        pw.stop()
        reason = next((ln for ln in str(exc).splitlines() if ln.strip()), type(exc).__name__)
        pytest.fail(
            f"Chromium ({executable}) cannot start: {reason} (install it: apt-get install chromium)",
            pytrace=False,
        )
    yield chromium
    chromium.close()
    pw.stop()


def open_page(browser: Any, url: str, token: str | None = ADMIN) -> Any:
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.on("console", lambda msg: errors.append(msg.text) if msg.type == "error" else None)
    page.errors = errors
    page.goto(url)
    if token:
        page.fill("#token", token)
        page.press("#token", "Tab")  # `change` fires: the indexes are listed with this token
        page.wait_for_selector("#ask-form select[name=index] option", state="attached")
    else:
        page.wait_for_selector("#whoami:has-text('visible')")
    return page


def shot(page: Any, name: str, *, full: bool = True) -> Path:
    SHOTS.mkdir(parents=True, exist_ok=True)
    path = SHOTS / f"{name}.png"
    page.screenshot(path=str(path), full_page=full)
    print(f"\nscreenshot: {path}")
    return path


def api(stack: dict[str, Any], method: str, path: str, payload: Any = None) -> Any:
    req = urllib.request.Request(
        stack["api"] + path,
        data=json.dumps(payload).encode() if payload is not None else None,
        method=method,
        headers={"Content-Type": "application/json", "Authorization": f"Bearer {ADMIN}"},
    )
    with urllib.request.urlopen(req, timeout=120) as resp:
        return json.loads(resp.read())


CRITERION = "Does the vendor encrypt customer data at rest?"


def ask_vrm(page: Any) -> None:
    page.select_option("#ask-form select[name=index]", "demo")
    page.select_option("#ask-form select[name=profile]", "vrm")
    page.fill("#ask-form textarea[name=query]", CRITERION)
    page.fill("#ask-form input[name=criterion_question]", CRITERION)
    page.click("#ask-form button[type=submit]")
    page.wait_for_selector("#ask-result pre.xml")


# --- the tests ------------------------------------------------------------------------------------


def test_ask_shows_follow_ups_last_and_the_boost(browser: Any, stack: dict[str, Any]) -> None:
    page = open_page(browser, stack["prod"])
    ask_vrm(page)
    blocks = page.locator("#ask-result pre.xml .block")
    n = blocks.count()
    assert n >= 2
    classes = [blocks.nth(i).get_attribute("class") or "" for i in range(n)]
    assert "followup-block" in classes[-1] and not any("followup-block" in c for c in classes[:-1])
    assert "[Round" in blocks.nth(n - 1).inner_text()
    trails = page.locator("#ask-result .hit .trail li.boost")
    assert trails.count() >= 1 and trails.first.inner_text().startswith("boost x")
    facts = page.locator("#ask-result dl.facts").first.inner_text()
    assert "path_used" in facts and "can_answer" in facts and "confidence" in facts
    assert page.locator("#ask-result .timing .seg").count() >= 5
    assert page.errors == []
    shot(page, "ask")
    page.close()


def test_a_citation_highlights_exactly_the_cited_characters(browser: Any, stack: dict[str, Any]) -> None:
    page = open_page(browser, stack["prod"])
    ask_vrm(page)
    expected = api(
        stack,
        "POST",
        "/v1/indexes/demo/retrieve",
        {"query": CRITERION, "criterion_question": CRITERION, "profile": "vrm", "explain": True},
    )["hits"]
    for rank in (1, len(expected)):  # the first citation, and the last for good measure
        button = page.locator("#ask-result .hit .cite").nth(rank - 1)
        if rank == 1:  # by keyboard: focus the button, Enter
            button.focus()
            page.keyboard.press("Enter")
        else:
            button.click()
        page.wait_for_selector("#source:not([hidden]) mark")
        assert page.locator("#source mark").text_content() == expected[rank - 1]["text"]
        c = expected[rank - 1]["citation"]
        before = page.evaluate("document.querySelector('#source-text').firstChild.textContent")
        assert len(before) == c["char_start"]
        assert page.evaluate("document.activeElement.id") == "cited"
        if rank == 1:
            shot(page, "source", full=False)
        # Closed before the next citation: otherwise this mark would still be on the page while
        # the next document loads, and the wait above would return at once with the old one.
        page.keyboard.press("Escape")
        page.wait_for_selector("#source", state="hidden")
    page.close()


def test_hostile_document_text_stays_text(browser: Any, stack: dict[str, Any]) -> None:
    page = open_page(browser, stack["prod"], token=READER)
    page.select_option("#ask-form select[name=index]", "notes")
    page.select_option("#ask-form select[name=profile]", "default")
    page.fill("#ask-form textarea[name=query]", "How often do encryption keys rotate?")
    page.click("#ask-form button[type=submit]")
    page.wait_for_selector("#ask-result pre.xml")
    xml = page.locator("#ask-result pre.xml").inner_text()
    assert "&lt;/evidence&gt;&lt;script&gt;" in xml  # escaped by the formatter, shown as the LLM sees it
    assert "<script>" not in xml
    page.locator("#ask-result .hit .cite").first.click()
    page.wait_for_selector("#source:not([hidden]) mark")
    source = page.locator("#source-text").text_content()
    assert "</evidence><script>window.__pwned = 1</script>" in source  # the document, literally
    assert page.evaluate("window.__pwned") is None
    assert page.evaluate("document.scripts.length") == 1
    assert page.locator("#ask-result img, #source img, #ask-result b, #source b").count() == 0
    shot(page, "hostile")
    page.close()


def test_compare_marks_moved_added_and_dropped_hits(browser: Any, stack: dict[str, Any]) -> None:
    page = open_page(browser, stack["prod"])
    page.click("#tab-compare")
    form = page.locator("#compare-form")
    form.locator("select[name=index]").select_option("demo")
    form.locator("textarea[name=query]").fill(CRITERION)
    form.locator("input[name=criterion_question]").fill(CRITERION)
    form.locator("fieldset[data-side=a] select[name=profile]").select_option("default")
    form.locator("fieldset[data-side=b] select[name=profile]").select_option("vrm")
    form.locator("fieldset[data-side=b] input[name=top_k]").fill("4")
    form.locator("fieldset[data-side=b] select[name=fusion]").select_option("rrf")
    form.locator("button[type=submit]").click()
    page.wait_for_selector("#compare-result .summary")
    body = {"query": CRITERION, "criterion_question": CRITERION, "explain": True}
    a = [h["chunk_id"] for h in api(stack, "POST", "/v1/indexes/demo/retrieve", body)["hits"]]
    b_body = {**body, "profile": "vrm", "top_k": 4, "fusion": "rrf"}
    b_hits = api(stack, "POST", "/v1/indexes/demo/retrieve", b_body)["hits"]
    b = [h["chunk_id"] for h in b_hits]
    added = [c for c in b if c not in a]
    dropped = [c for c in a if c not in b]
    moved = [c for i, c in enumerate(b) if c in a and a.index(c) != i]
    summary = page.locator("#compare-result .summary").inner_text()
    assert summary == f"B against A: {len(added)} added, {len(dropped)} dropped, {len(moved)} moved"
    assert len(dropped) >= 2  # top_k 4 against the default's 10: something must drop
    for chunk in dropped:
        assert "dropped" in (
            page.locator(f"section[aria-label='Setting A'] li[data-chunk='{chunk}']").get_attribute("class")
            or ""
        )
    for chunk in added:
        assert "added" in (
            page.locator(f"section[aria-label='Setting B'] li[data-chunk='{chunk}']").get_attribute("class")
            or ""
        )
    shot(page, "compare")
    page.close()


def test_evaluate_shows_evidence_eval_s_metrics_and_per_question_verdicts(
    browser: Any, stack: dict[str, Any], tmp_path: Path
) -> None:
    page = open_page(browser, stack["prod"], token=READER)
    page.click("#tab-evaluate")
    form = page.locator("#evaluate-form")
    form.locator("select[name=index]").select_option("demo")
    page.wait_for_selector(
        "#evaluate-form select[name=set] option[value='vendor-qa.jsonl']", state="attached"
    )
    form.locator("select[name=set]").select_option("vendor-qa.jsonl")
    form.locator("fieldset[data-side=a] select[name=profile]").select_option("verbatim")
    form.locator("fieldset[data-side=b] select[name=profile]").select_option("default")
    form.locator("button[type=submit]").click()
    page.wait_for_selector("#evaluate-result table.metrics")
    expected = api(
        stack,
        "POST",
        "/v1/indexes/demo/evaluate",
        {"set": "vendor-qa.jsonl", "settings": [{"profile": "verbatim"}, {"profile": "default"}]},
    )
    recall = page.locator("#evaluate-result table.metrics tr:has(th:text-is('answer_recall')) td")
    assert [float(recall.nth(i).inner_text()) for i in range(2)] == [
        r["answer_recall"] for r in expected["runs"]
    ]
    summary = page.locator("#evaluate-result .summary").inner_text()
    assert (
        summary
        == f"B against A: {expected['wins']} wins, {expected['losses']} losses, {expected['ties']} ties"
    )
    assert page.locator("#evaluate-result table.per-question tbody tr").count() == len(QA)
    shot(page, "evaluate")

    # An uploaded qrels file, one setting: nDCG@10 and friends, no verdicts.
    qrels = tmp_path / "judged.jsonl"
    policy = next(
        d["document_id"]
        for d in api(stack, "GET", "/v1/indexes/demo/documents")["documents"]
        if d["document_id"].endswith("security-policy.md")
    )
    qrels.write_text(json.dumps({"query": "key rotation and TLS", "relevant": {policy: 1}}) + "\n")
    page.set_input_files("#evaluate-form input[name=file]", str(qrels))
    page.uncheck("#evaluate-form input[name=use_b]")
    form.locator("button[type=submit]").click()
    page.wait_for_selector("#evaluate-result h2:has-text('uploaded.jsonl')")
    ndcg = page.locator("#evaluate-result table.metrics tr:has(th:text-is('ndcg_at_10')) td")
    assert ndcg.count() == 1 and 0.0 < float(ndcg.first.inner_text()) <= 1.0
    assert page.locator("#evaluate-result .summary").count() == 0
    page.close()


def test_upload_with_progress_then_delete_behind_a_confirmation(
    browser: Any, stack: dict[str, Any], tmp_path: Path
) -> None:
    page = open_page(browser, stack["prod"])
    page.click("#tab-indexes")
    upload = tmp_path / "escrow-policy.md"
    upload.write_text("# Escrow\n\nSource code escrow is refreshed every quarter with a named agent.\n")
    page.fill("#upload-form input[name=index]", "uploads")
    page.fill("#upload-form input[name=type]", "tc_files")
    page.set_input_files("#upload-form input[name=file]", str(upload))
    page.click("#upload-form button[type=submit]")
    page.wait_for_selector("#upload-status:has-text('created')")
    assert page.locator("#upload-progress").get_attribute("value") == "100"
    row = page.locator("#document-list tr", has_text="escrow-policy.md")
    assert row.count() == 1
    shot(page, "indexes")
    row.locator("button.danger").click()
    assert page.locator("#confirm").is_visible()
    shot(page, "delete-confirm", full=False)
    page.keyboard.press("Escape")  # cancelled from the keyboard: nothing deleted
    assert not page.locator("#confirm").is_visible()
    assert page.locator("#document-list tr", has_text="escrow-policy.md").count() == 1
    row.locator("button.danger").click()
    page.click("#confirm-ok")
    page.wait_for_selector("#upload-status:has-text('deleted')")
    assert page.locator("#document-list tr", has_text="escrow-policy.md").count() == 0
    assert api(stack, "GET", "/v1/indexes/uploads/documents")["documents"] == []
    page.close()


def test_a_read_only_token_cannot_write_through_the_page(
    browser: Any, stack: dict[str, Any], tmp_path: Path
) -> None:
    page = open_page(browser, stack["prod"], token=READER)
    options = page.locator("#ask-form select[name=index] option")
    assert sorted(options.nth(i).get_attribute("value") for i in range(options.count())) == ["demo", "notes"]
    page.click("#tab-indexes")
    upload = tmp_path / "x.txt"
    upload.write_text("Anything at all.")
    page.fill("#upload-form input[name=index]", "demo")
    page.set_input_files("#upload-form input[name=file]", str(upload))
    page.click("#upload-form button[type=submit]")
    page.wait_for_selector("#alert:not([hidden])")
    assert page.locator("#alert").inner_text().startswith("403 forbidden")
    page.close()


def test_keyboard_and_the_unprefixed_root(browser: Any, stack: dict[str, Any]) -> None:
    page = open_page(browser, stack["api"] + "/")
    page.focus("#tab-ask")
    page.keyboard.press("ArrowRight")
    assert page.evaluate("document.activeElement.id") == "tab-compare"
    assert page.locator("#view-compare").is_visible() and page.locator("#view-ask").is_hidden()
    page.keyboard.press("End")
    assert page.evaluate("document.activeElement.id") == "tab-indexes"
    page.keyboard.press("Home")
    page.keyboard.press("Tab")  # from the tab list into the Ask form
    assert page.evaluate("document.activeElement.name") == "index"
    assert page.errors == []
    page.close()

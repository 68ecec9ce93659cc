// The evidence workbench (docs/workbench.md). Plain JavaScript, no dependencies.
//
// Two rules hold everywhere below:
// * every piece of text from the API (document text, questions, sources, ids) reaches the page
//   through textContent or a text node, never innerHTML, so no document can inject markup;
// * every URL is relative ("v1/..."), so the page works under a path prefix such as API
//   Gateway's stage ("/prod/").
"use strict";

(() => {
  const $ = (sel, root = document) => root.querySelector(sel);
  const $$ = (sel, root = document) => [...root.querySelectorAll(sel)];

  function el(tag, attrs, ...children) {
    const node = document.createElement(tag);
    for (const [key, value] of Object.entries(attrs || {})) {
      if (value === null || value === undefined || value === false) continue;
      if (key === "class") node.className = value;
      else if (key === "text") node.textContent = String(value);
      else if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
      else node.setAttribute(key, value === true ? "" : String(value));
    }
    for (const child of children.flat(Infinity)) {
      if (child === null || child === undefined || child === false) continue;
      node.append(child instanceof Node ? child : document.createTextNode(String(child)));
    }
    return node;
  }

  const fmt = (x, digits = 4) => (typeof x === "number" ? String(Number(x.toFixed(digits))) : String(x));

  // --- the API ---------------------------------------------------------------------------------

  const state = { token: "", profiles: [], indexes: [], listing: 0 };

  class ApiError extends Error {}

  function headers(json) {
    const h = { Accept: "application/json" };
    if (state.token) h.Authorization = `Bearer ${state.token}`;
    if (json) h["Content-Type"] = "application/json";
    return h;
  }

  function errorText(status, data) {
    const e = data && data.error;
    if (!e) return `HTTP ${status}`;
    return `${status} ${e.code}: ${e.message}${e.field ? ` (field: ${e.field})` : ""}`;
  }

  async function api(method, path, body) {
    const resp = await fetch(path, {
      method,
      headers: headers(body !== undefined),
      body: body === undefined ? undefined : JSON.stringify(body),
      credentials: "omit",
      cache: "no-store",
    });
    let data = null;
    try {
      data = await resp.json();
    } catch (_) {
      data = null;
    }
    if (!resp.ok) throw new ApiError(errorText(resp.status, data));
    return data;
  }

  const indexPath = (index, rest) => `v1/indexes/${encodeURIComponent(index)}/${rest}`;

  // --- alerts and busy state -------------------------------------------------------------------

  function showError(err) {
    const box = $("#alert");
    box.textContent = err instanceof Error ? err.message : String(err);
    box.hidden = false;
  }

  function clearError() {
    $("#alert").hidden = true;
    $("#alert").textContent = "";
  }

  async function busy(form, work) {
    clearError();
    const button = $("button[type=submit]", form);
    if (button) button.disabled = true;
    form.setAttribute("aria-busy", "true");
    try {
      await work();
    } catch (err) {
      showError(err);
    } finally {
      if (button) button.disabled = false;
      form.removeAttribute("aria-busy");
    }
  }

  // --- tabs ------------------------------------------------------------------------------------

  function selectTab(tab, focus) {
    for (const t of $$("[role=tab]")) {
      const on = t === tab;
      t.setAttribute("aria-selected", String(on));
      t.tabIndex = on ? 0 : -1;
      $(`#${t.getAttribute("aria-controls")}`).hidden = !on;
    }
    if (focus) tab.focus();
    if (tab.id === "tab-indexes") loadIndexList().catch(showError);
  }

  function setupTabs() {
    const tabs = $$("[role=tab]");
    for (const tab of tabs) {
      tab.addEventListener("click", () => selectTab(tab, false));
      tab.addEventListener("keydown", (ev) => {
        const i = tabs.indexOf(tab);
        const next = { ArrowRight: i + 1, ArrowLeft: i - 1, Home: 0, End: tabs.length - 1 }[ev.key];
        if (next === undefined) return;
        ev.preventDefault();
        selectTab(tabs[(next + tabs.length) % tabs.length], true);
      });
    }
  }

  // --- shared form pieces ----------------------------------------------------------------------

  const KNOBS = [
    { name: "top_k", label: "top_k", step: "1", min: "1", max: "200", int: true },
    { name: "min_similarity", label: "min_similarity", step: "0.01", min: "0", max: "1" },
    { name: "max_chars", label: "max_chars", step: "100", min: "0", int: true },
    { name: "followup_boost", label: "follow-up boost", step: "0.05", min: "1", max: "10" },
    { name: "mmr_lambda", label: "mmr_lambda", step: "0.05", min: "0", max: "1" },
    { name: "rerank_cutoff", label: "rerank_cutoff", step: "0.01", min: "0", max: "1" },
    { name: "fusion", label: "fusion", choices: ["zscore", "minmax", "rrf"] },
  ];

  function knobInput(k) {
    if (!k.choices) {
      return el("input", { type: "number", name: k.name, step: k.step, min: k.min, max: k.max, placeholder: "profile default" });
    }
    return el("select", { name: k.name },
      el("option", { value: "", text: "profile default" }),
      ...k.choices.map((c) => el("option", { value: c, text: c })));
  }

  function fillKnobs() {
    for (const row of $$(".knob-row")) {
      row.replaceChildren(
        ...KNOBS.map((k) => el("label", { class: "knob" }, k.label, knobInput(k))),
      );
    }
  }

  function knobValues(root) {
    const out = {};
    for (const k of KNOBS) {
      const input = $(`[name=${k.name}]`, root);
      if (!input || input.value.trim() === "") continue;
      out[k.name] = k.choices ? input.value : k.int ? parseInt(input.value, 10) : parseFloat(input.value);
    }
    return out;
  }

  function fillSelect(select, values, keep) {
    const previous = keep ? select.value : "";
    select.replaceChildren(...values.map((v) => el("option", { value: v.value, text: v.label })));
    if (previous && values.some((v) => v.value === previous)) select.value = previous;
  }

  async function loadProfiles() {
    const doc = await api("GET", "v1/openapi.json");
    const schemas = doc.components.schemas;
    const retrieve = Object.keys(schemas).find((n) => n.startsWith("RetrieveRequest"));
    state.profiles = schemas[retrieve].properties.profile.enum || ["default"];
    for (const select of $$(".profile-select")) {
      const names = select.classList.contains("no-coach") ? state.profiles.filter((p) => p !== "coach") : state.profiles;
      fillSelect(select, names.map((p) => ({ value: p, label: p })), true);
    }
    const b = $("#compare-form fieldset[data-side=b] .profile-select");
    if (state.profiles.includes("vrm")) b.value = "vrm";
    syncAskFields();
  }

  async function loadIndexes() {
    const ticket = ++state.listing;
    const data = await api("GET", "v1/indexes");
    if (ticket !== state.listing) return; // a newer listing (another token) is on its way
    state.indexes = data.indexes;
    const options = data.indexes.map((i) => ({ value: i.name, label: `${i.name} (${i.documents} documents)` }));
    for (const select of $$(".index-select")) fillSelect(select, options, true);
    $("#index-names").replaceChildren(...data.indexes.map((i) => el("option", { value: i.name })));
    $("#whoami").textContent = `${data.indexes.length} index${data.indexes.length === 1 ? "" : "es"} visible`;
    await loadEvalSets().catch(showError);
  }

  // --- Ask -------------------------------------------------------------------------------------

  function syncAskFields() {
    const form = $("#ask-form");
    const profile = form.elements.profile.value;
    for (const node of $$(".only-vrm", form)) node.hidden = profile !== "vrm";
    for (const node of $$(".only-coach", form)) node.hidden = profile !== "coach";
    for (const node of $$(".not-coach", form)) node.hidden = profile === "coach";
    $(".q-label", form).textContent = profile === "coach" ? "Student message" : profile === "vrm" ? "Question (the criterion, or a sharper wording of it)" : "Question";
  }

  function retrieveBody(form, side) {
    const body = { query: form.elements.query.value, profile: $("select[name=profile]", side || form).value, explain: true };
    const criterion = form.elements.criterion_question;
    if (criterion && criterion.value.trim() && (side || body.profile === "vrm")) body.criterion_question = criterion.value;
    return Object.assign(body, knobValues(side || $(".knobs", form)));
  }

  async function ask(form) {
    const index = form.elements.index.value;
    const out = $("#ask-result");
    if (form.elements.profile.value === "coach") {
      const body = { query: form.elements.query.value, seek_clarification: form.elements.seek_clarification.checked };
      if (form.elements.conversation_snippet.value.trim()) body.conversation_snippet = form.elements.conversation_snippet.value;
      const resp = await api("POST", indexPath(index, "coach"), body);
      out.replaceChildren(renderCoach(resp));
      return;
    }
    const resp = await api("POST", indexPath(index, "retrieve"), retrieveBody(form));
    out.replaceChildren(renderRetrieve(resp, index));
  }

  function verdictList(pairs) {
    return el("dl", { class: "facts" }, pairs.map(([k, v]) => [el("dt", { text: k }), el("dd", { text: v })]));
  }

  function renderRetrieve(resp, index) {
    const t = resp.telemetry;
    const answer = t.answer || {};
    const plan = resp.plan;
    const planFacts = [
      ["planner", plan.planner], ["query mode", plan.query_mode], ["profile", plan.profile],
      ["entity", plan.entity || "—"], ["attribute", plan.attribute || "—"],
      ["candidate sections", (plan.candidate_sections || []).join(", ") || "—"],
      ["search phrases", (plan.search_phrases || []).join(" | ") || "—"],
      ["criterion hash", plan.criterion_hash ? `${plan.criterion_hash.slice(0, 12)}…` : "—"],
    ];
    return el("div", { class: "result" },
      el("div", { class: "overview" },
        el("section", { "aria-label": "Answer" }, el("h2", { text: "Answer" }),
          verdictList([
            ["can_answer", String(resp.can_answer)], ["confidence", fmt(resp.confidence)],
            ["needs_clarification", String(resp.needs_clarification)], ["path_used", t.path_used],
            ["basis", answer.basis || "—"], ["total", `${fmt(t.total_ms, 1)} ms`],
            ["degraded", (t.degraded || []).join(", ") || "none"],
            ["answer features", Object.entries(answer.features || {}).map(([k, v]) => `${k} ${fmt(v)}`).join(" · ") || "—"],
          ])),
        el("section", { "aria-label": "Plan" }, el("h2", { text: "Plan" }), verdictList(planFacts)),
        el("section", { "aria-label": "Timing" }, el("h2", { text: "Timing" }),
          timingBar(t.stages.map((s) => ({ name: s.name, ms: s.ms, note: `${s.candidates_in} → ${s.candidates_out}` })), t.total_ms),
          el("details", {}, el("summary", { text: "What each stage dropped, boosted or merged" }),
            el("pre", { class: "chunk", text: JSON.stringify(t.stages.filter((s) => s.detail).map((s) => ({ stage: s.name, ...s.detail })), null, 1) })))),
      el("div", { class: "split" },
        el("section", { "aria-label": "Hits" },
          el("h2", { text: `Hits (${resp.hits.length})` }),
          el("ol", { class: "hits" }, resp.hits.map((h) => renderHit(h, index))),
          resp.followups.length ? el("h2", { text: `Follow-up responses (${resp.followups.length})` }) : null,
          resp.followups.length ? el("ol", { class: "followups" }, resp.followups.map(renderFollowup)) : null),
        el("section", { "aria-label": "Evidence" },
          el("h2", { text: "Evidence as the LLM receives it" }),
          el("p", { class: "muted", text: `valid indexes: ${resp.valid_indexes.join(", ") || "none"}` }),
          renderEvidence(resp.evidence_xml, resp.hits.length))),
    );
  }

  function renderHit(hit, index) {
    const c = hit.citation;
    const scores = hit.scores ? Object.entries(hit.scores).map(([k, v]) => `${k} ${fmt(v)}`).join(" · ") : "";
    return el("li", { class: "hit", "data-chunk": hit.chunk_id },
      el("div", { class: "hit-head" },
        el("span", { class: "rank", text: `#${hit.rank}` }),
        el("span", { class: "score", text: `score ${fmt(hit.score)}` }),
        el("span", { class: "src", text: hit.source }),
      ),
      verdictList([
        ["section", c.section || "—"], ["page", c.page === null || c.page === undefined ? "—" : String(c.page)],
        ["characters", `${c.char_start}–${c.char_end}`], ["scores", scores || "—"],
        ["type", hit.metadata && hit.metadata.type ? String(hit.metadata.type) : "—"],
      ]),
      el("button", {
        type: "button", class: "cite",
        "aria-label": `Open the source of hit ${hit.rank} at characters ${c.char_start} to ${c.char_end}`,
        onclick: () => openSource(index, c).catch(showError),
      }, `[${c.index}] open source`),
      el("div", { class: "explain" }, el("span", { class: "muted", text: "explain: " }),
        el("ul", { class: "trail" }, (hit.explain || ["(none)"]).map((e) => el("li", { class: /boost/.test(e) ? "boost" : null, text: e })))),
      el("details", {}, el("summary", { text: "text" }), el("pre", { class: "chunk", text: hit.text })),
    );
  }

  function renderFollowup(f) {
    return el("li", { class: "followup" },
      el("div", { class: "hit-head" },
        el("span", { class: "badge", text: f.round_number ? `round ${f.round_number}` : "follow-up" }),
        el("span", { class: "src", text: f.source })),
      el("pre", { class: "chunk", text: f.text }));
  }

  // Evidence XML: one block per <index_N>; blocks past the hits are the follow-ups, placed last.
  function renderEvidence(xml, hitCount) {
    const pre = el("pre", { class: "xml", tabindex: "0", "aria-label": "Evidence XML" });
    const re = /<index_(\d+)>[\s\S]*?<\/index_\1>\n?/g;
    let last = 0;
    let m;
    while ((m = re.exec(xml)) !== null) {
      if (m.index > last) pre.append(document.createTextNode(xml.slice(last, m.index)));
      const followup = Number(m[1]) > hitCount;
      const block = el("span", { class: followup ? "block followup-block" : "block", "data-index": m[1] });
      if (followup) block.append(el("span", { class: "badge", text: "follow-ups (last)" }), "\n");
      block.append(document.createTextNode(m[0]));
      pre.append(block);
      last = m.index + m[0].length;
    }
    if (last < xml.length) pre.append(document.createTextNode(xml.slice(last)));
    if (!xml) pre.textContent = "(no evidence)";
    return pre;
  }

  function timingBar(stages, total) {
    const sum = stages.reduce((a, s) => a + s.ms, 0);
    const all = total > sum ? [...stages, { name: "other (not timed by a stage: planning, query embedding, formatting)", ms: total - sum, note: "" }] : stages;
    const whole = Math.max(total, sum) || 1;
    const bar = el("div", { class: "timing", "aria-hidden": "true" });
    all.forEach((s, i) => {
      const seg = el("span", { class: `seg c${i % 8}`, title: `${s.name}: ${fmt(s.ms, 2)} ms` });
      seg.style.width = `${Math.max((s.ms / whole) * 100, 0.4)}%`;
      bar.append(seg);
    });
    const table = el("table", { class: "timing-table" },
      el("caption", { class: "muted", text: `${fmt(whole, 1)} ms in all` }),
      el("thead", {}, el("tr", {}, el("th", { text: "stage" }), el("th", { text: "candidates" }), el("th", { text: "ms" }))),
      el("tbody", {}, all.map((s, i) => el("tr", {},
        el("td", {}, el("span", { class: `swatch c${i % 8}` }), s.name),
        el("td", { text: s.note }), el("td", { class: "num", text: fmt(s.ms, 2) })))));
    return el("div", {}, bar, table);
  }

  const listOrNone = (items) => (items.length ? el("ul", {}, items) : el("p", { class: "muted", text: "none" }));

  function renderCoach(resp) {
    const t = resp.telemetry || {};
    const stages = Object.entries(t.stages || {}).map(([name, ms]) => ({ name, ms, note: "" }));
    return el("div", { class: "result" },
      el("h2", { text: "Coach" }),
      verdictList([
        ["can_answer", String(resp.can_answer)], ["needs_clarification", String(resp.needs_clarification)],
        ["confidence", fmt(resp.confidence)], ["intent", resp.intent || "—"],
        ["clarifying question", resp.clarification_question || "—"], ["tokens", String(t.tokens ?? "—")],
      ]),
      el("h2", { text: "Timing" }), timingBar(stages, t.total_ms || 0),
      el("details", {}, el("summary", { text: "Why: the calibration features and filters" }),
        el("pre", { class: "chunk", text: JSON.stringify({ detail: t.detail, applied_filters: t.applied_filters, degraded: t.degraded, intent_source: t.intent_source }, null, 1) })),
      el("h2", { text: "Matched learning objectives" }),
      listOrNone((resp.matched_los || []).map((lo) => el("li", { text: `${lo.id} ${lo.title} (${lo.reason}, ${fmt(lo.score)})` }))),
      el("h2", { text: "Supporting learning objectives" }),
      listOrNone((resp.supporting_los || []).map((lo) => el("li", { text: `${lo.id} ${lo.title} via ${lo.edge} (${(lo.path || []).join(" → ")})` }))),
      el("h2", { text: "Content" }),
      listOrNone((resp.content_items || []).map((c) => el("li", { text: `${c.id} [${c.type}] ${c.title}: ${c.snippet || ""}` }))),
      el("h2", { text: "Minimal context, as the LLM receives it" }),
      el("ol", { class: "context" }, (resp.minimal_context || []).map((s, i) =>
        el("li", {}, s, el("span", { class: "muted", text: ` — ${(resp.minimal_context_sources || [])[i] || ""}` })))),
    );
  }

  // --- Source view -----------------------------------------------------------------------------

  async function openSource(index, citation) {
    const doc = await api("GET", indexPath(index, `documents/${encodeURIComponent(citation.document_id)}`));
    const text = doc.text;
    const mark = el("mark", { id: "cited", tabindex: "-1" }, text.slice(citation.char_start, citation.char_end));
    $("#source-text").replaceChildren(text.slice(0, citation.char_start), mark, text.slice(citation.char_end));
    $("#source-title").textContent = `Source: ${doc.source}`;
    const gaps = doc.gaps.length ? `; ${doc.gaps.length} stretch(es) no chunk covers shown as newlines` : "";
    $("#source-meta").textContent =
      `${citation.document_id} · section ${citation.section || "—"} · page ${citation.page ?? "—"} · ` +
      `characters ${citation.char_start}–${citation.char_end} of ${text.length}${gaps}`;
    const panel = $("#source");
    panel.hidden = false;
    mark.scrollIntoView({ block: "center" });
    mark.focus({ preventScroll: true });
  }

  // --- Compare ---------------------------------------------------------------------------------

  async function compare(form) {
    const index = form.elements.index.value;
    const [sa, sb] = $$("fieldset", form);
    const a = await api("POST", indexPath(index, "retrieve"), retrieveBody(form, sa));
    const b = await api("POST", indexPath(index, "retrieve"), retrieveBody(form, sb));
    // A passage is compared by its best rank: focus may return two slices of the first hit's
    // passage (docs/ranking.md#focus-second-run), and a Map built naively would keep the later.
    const firstRanks = (hits) => {
      const m = new Map();
      for (const h of hits) if (!m.has(h.chunk_id)) m.set(h.chunk_id, h.rank);
      return m;
    };
    const rankA = firstRanks(a.hits);
    const rankB = firstRanks(b.hits);
    const followupsB = new Set(b.followups.map((f) => f.chunk_id));
    const markA = (h) => {
      if (rankB.has(h.chunk_id)) return null;
      return { cls: "dropped", text: followupsB.has(h.chunk_id) ? "dropped in B (a follow-up there, placed last)" : "dropped in B" };
    };
    const markB = (h) => {
      if (!rankA.has(h.chunk_id)) return { cls: "added", text: "added" };
      const d = rankA.get(h.chunk_id) - h.rank;
      if (d > 0) return { cls: "moved-up", text: `moved up ${d} (was #${rankA.get(h.chunk_id)})` };
      if (d < 0) return { cls: "moved-down", text: `moved down ${-d} (was #${rankA.get(h.chunk_id)})` };
      return { cls: "same", text: "same rank" };
    };
    const dropped = a.hits.filter((h) => !rankB.has(h.chunk_id)).length;
    const added = b.hits.filter((h) => !rankA.has(h.chunk_id)).length;
    const moved = b.hits.filter((h) => rankA.has(h.chunk_id) && rankA.get(h.chunk_id) !== h.rank).length;
    $("#compare-result").replaceChildren(
      el("p", { class: "summary", text: `B against A: ${added} added, ${dropped} dropped, ${moved} moved` }),
      el("div", { class: "columns" },
        compareColumn("A", sa, a, index, markA), compareColumn("B", sb, b, index, markB)));
  }

  function compareColumn(label, side, resp, index, mark) {
    const setting = { profile: $("select[name=profile]", side).value, ...knobValues(side) };
    const chars = resp.hits.reduce((n, h) => n + h.text.length, 0);
    return el("section", { class: "column", "aria-label": `Setting ${label}` },
      el("h2", { text: `${label}: ${JSON.stringify(setting)}` }),
      verdictList([
        ["can_answer", String(resp.can_answer)], ["confidence", fmt(resp.confidence)],
        ["path_used", resp.telemetry.path_used], ["hits", String(resp.hits.length)],
        ["follow-ups", String(resp.followups.length)], ["evidence characters", String(chars)],
        ["total", `${fmt(resp.telemetry.total_ms, 1)} ms`],
      ]),
      el("ol", { class: "hits compact" }, resp.hits.map((h) => {
        const m = mark(h);
        return el("li", { class: `hit ${m ? m.cls : ""}`, "data-chunk": h.chunk_id },
          el("div", { class: "hit-head" },
            el("span", { class: "rank", text: `#${h.rank}` }),
            m ? el("span", { class: `badge ${m.cls}`, text: m.text }) : null,
            el("span", { class: "score", text: `score ${fmt(h.score)}` })),
          el("div", { class: "src", text: `${h.source} · ${h.citation.section || "—"}` }),
          el("ul", { class: "trail" }, (h.explain || []).map((e) => el("li", { class: /boost/.test(e) ? "boost" : null, text: e }))),
          el("button", { type: "button", class: "cite", onclick: () => openSource(index, h.citation).catch(showError) }, `[${h.citation.index}] open source`),
          el("details", {}, el("summary", { text: "text" }), el("pre", { class: "chunk", text: h.text })));
      })),
    );
  }

  // --- Evaluate --------------------------------------------------------------------------------

  async function loadEvalSets() {
    const form = $("#evaluate-form");
    const index = form.elements.index.value;
    if (!index) return;
    const data = await api("GET", indexPath(index, "eval-sets"));
    fillSelect(form.elements.set, [{ value: "", label: data.sets.length ? "— choose —" : "(none in the store's eval folder)" },
      ...data.sets.map((s) => ({ value: s.name, label: `${s.name} (${s.kind || "unknown"}, ${s.questions})` }))], true);
  }

  const readText = (file) => new Promise((resolve, reject) => {
    const r = new FileReader();
    r.onload = () => resolve(String(r.result));
    r.onerror = () => reject(new Error(`cannot read ${file.name}`));
    r.readAsText(file);
  });

  async function evaluate(form) {
    const index = form.elements.index.value;
    const [sa, sb] = $$("fieldset", form);
    const settings = [{ profile: $("select", sa).value, ...knobValues(sa) }];
    if (form.elements.use_b.checked) settings.push({ profile: $("select", sb).value, ...knobValues(sb) });
    const body = { settings };
    const file = form.elements.file.files[0];
    if (file) body.jsonl = await readText(file);
    else if (form.elements.set.value) body.set = form.elements.set.value;
    else throw new Error("choose a set from the store's eval folder, or upload a JSONL file");
    $("#evaluate-result").replaceChildren(el("p", { class: "muted", text: "evaluating…" }));
    const resp = await api("POST", indexPath(index, "evaluate"), body);
    $("#evaluate-result").replaceChildren(renderEvaluation(resp));
  }

  const QA_METRICS = ["answer_recall", "no_result_precision", "no_result_recall", "answerable", "unanswerable", "evidence_chars"];
  const QRELS_METRICS = ["ndcg_at_10", "recall_at_100", "mrr_at_10"];

  function renderEvaluation(resp) {
    const runs = resp.runs;
    const metrics = resp.kind === "qa" ? QA_METRICS : QRELS_METRICS;
    const head = el("tr", {}, el("th", { text: "metric" }), runs.map((r, i) => el("th", { text: `${"AB"[i]}: ${JSON.stringify(r.setting)}` })));
    const rows = metrics.map((m) => el("tr", {}, el("th", { scope: "row", text: m }), runs.map((r) => el("td", { class: "num", text: fmt(r[m]) }))));
    rows.push(el("tr", {}, el("th", { scope: "row", text: "latency p50 / p95 ms" }),
      runs.map((r) => el("td", { class: "num", text: `${fmt(r.latency_ms.p50, 1)} / ${fmt(r.latency_ms.p95, 1)}` }))));
    if (resp.kind === "qa") {
      rows.push(el("tr", {}, el("th", { scope: "row", text: "paths" }),
        runs.map((r) => el("td", { text: Object.entries(r.paths).map(([k, v]) => `${k} ${v}`).join(", ") }))));
    }
    const score = resp.kind === "qa" ? (s) => (s ? "found" : "missed") : (s) => fmt(s);
    const order = { win: 0, loss: 1, tie: 2 };
    const perQ = [...resp.per_question].sort((x, y) => (order[x.verdict] ?? 3) - (order[y.verdict] ?? 3));
    return el("div", { class: "result" },
      el("h2", { text: `${resp.set}: ${resp.questions} ${resp.kind === "qa" ? "questions (QA)" : "queries (qrels)"}` }),
      el("table", { class: "metrics" }, el("thead", {}, head), el("tbody", {}, rows)),
      runs.length === 2 ? el("p", { class: "summary", text: `B against A: ${resp.wins} wins, ${resp.losses} losses, ${resp.ties} ties` }) : null,
      el("h2", { text: "Per question" }),
      el("table", { class: "per-question" },
        el("thead", {}, el("tr", {}, el("th", { text: "question" }), runs.map((_, i) => el("th", { text: "AB"[i] })), runs.length === 2 ? el("th", { text: "B vs A" }) : null)),
        el("tbody", {}, perQ.map((q) => el("tr", { class: q.verdict || "" },
          el("td", { text: q.question }), q.scores.map((s) => el("td", { class: "num", text: score(s) })),
          runs.length === 2 ? el("td", { class: `verdict ${q.verdict}`, text: q.verdict }) : null)))),
    );
  }

  // --- Indexes ---------------------------------------------------------------------------------

  async function loadIndexList() {
    await loadIndexes();
    const rows = state.indexes.map((i) => el("tr", {},
      el("td", { text: i.name }), el("td", { class: "num", text: String(i.documents) }), el("td", { class: "num", text: String(i.chunks) }),
      el("td", {}, el("button", { type: "button", "aria-label": `Show the documents of ${i.name}`, onclick: () => showDocuments(i.name).catch(showError) }, "Documents"))));
    $("#index-list").replaceChildren(state.indexes.length
      ? el("table", {}, el("thead", {}, el("tr", {}, ["index", "documents", "chunks", ""].map((h) => el("th", { text: h })))), el("tbody", {}, rows))
      : el("p", { class: "muted", text: "No index visible with this token." }));
  }

  async function showDocuments(index) {
    const data = await api("GET", indexPath(index, "documents"));
    const rows = data.documents.map((d) => el("tr", {},
      el("td", { class: "docid", text: d.document_id }), el("td", { text: d.source }),
      el("td", { class: "num", text: String(d.passages) }), el("td", { class: "num", text: String(d.spans) }),
      el("td", {}, el("button", { type: "button", class: "danger", "aria-label": `Delete ${d.document_id}`, onclick: () => deleteDocument(index, d.document_id).catch(showError) }, "Delete"))));
    $("#document-list").replaceChildren(
      el("h2", { text: `Documents of ${index} (${data.documents.length})` }),
      el("table", {}, el("thead", {}, el("tr", {}, ["document id", "source", "passages", "spans", ""].map((h) => el("th", { text: h })))), el("tbody", {}, rows)));
  }

  function confirmDialog(message) {
    const dialog = $("#confirm");
    $("#confirm-text").textContent = message;
    return new Promise((resolve) => {
      const done = (ok) => {
        $("#confirm-ok").onclick = null;
        $("#confirm-cancel").onclick = null;
        dialog.onclose = null;
        if (dialog.open) dialog.close();
        resolve(ok);
      };
      $("#confirm-ok").onclick = () => done(true);
      $("#confirm-cancel").onclick = () => done(false);
      dialog.onclose = () => done(false);
      dialog.showModal();
    });
  }

  async function deleteDocument(index, documentId) {
    clearError();
    if (!(await confirmDialog(`Delete ${documentId} from ${index}? Its passages and spans are removed; this cannot be undone.`))) return;
    const resp = await api("DELETE", indexPath(index, `documents/${encodeURIComponent(documentId)}`));
    await loadIndexList();
    await showDocuments(index).catch(() => $("#document-list").replaceChildren());
    $("#upload-status").textContent = `deleted ${resp.document_id}: ${resp.deleted_chunks} chunks`;
  }

  const readBase64 = (file) => new Promise((resolve, reject) => {
    const r = new FileReader();
    r.onload = () => resolve(String(r.result).replace(/^data:[^,]*,/, ""));
    r.onerror = () => reject(new Error(`cannot read ${file.name}`));
    r.readAsDataURL(file);
  });

  async function upload(form) {
    const file = form.elements.file.files[0];
    const index = form.elements.index.value;
    const body = { filename: file.name, content_base64: await readBase64(file), metadata: {} };
    if (form.elements.type.value.trim()) body.metadata.type = form.elements.type.value.trim();
    const bar = $("#upload-progress");
    const status = $("#upload-status");
    bar.hidden = false;
    bar.value = 0;
    status.textContent = `uploading ${file.name}…`;
    const resp = await new Promise((resolve, reject) => {
      const xhr = new XMLHttpRequest();
      xhr.open("POST", indexPath(index, "documents"));
      for (const [k, v] of Object.entries(headers(true))) xhr.setRequestHeader(k, v);
      xhr.upload.onprogress = (ev) => {
        if (ev.lengthComputable) bar.value = Math.round((ev.loaded / ev.total) * 100);
      };
      xhr.upload.onload = () => {
        bar.value = 100;
        status.textContent = `uploaded ${file.name}; indexing (parsing, chunking, embedding)…`;
      };
      xhr.onload = () => {
        let data = null;
        try {
          data = JSON.parse(xhr.responseText);
        } catch (_) {
          data = null;
        }
        if (xhr.status >= 200 && xhr.status < 300) resolve(data);
        else reject(new ApiError(errorText(xhr.status, data)));
      };
      xhr.onerror = () => reject(new Error("the upload failed (network)"));
      xhr.send(JSON.stringify(body));
    });
    form.elements.file.value = "";
    await loadIndexList();
    await showDocuments(index);
    status.textContent = `${resp.status}: ${resp.document_id} in ${resp.index}, ${resp.chunks} passages, ${resp.spans} spans`;
  }

  // --- wiring ----------------------------------------------------------------------------------

  function start() {
    setupTabs();
    fillKnobs();
    const onSubmit = (id, work) => $(id).addEventListener("submit", (ev) => {
      ev.preventDefault();
      busy(ev.currentTarget, () => work(ev.currentTarget));
    });
    onSubmit("#ask-form", ask);
    onSubmit("#compare-form", compare);
    onSubmit("#evaluate-form", evaluate);
    onSubmit("#upload-form", upload);
    $("#token-form").addEventListener("submit", (ev) => ev.preventDefault());
    $("#ask-form").elements.profile.addEventListener("change", syncAskFields);
    $("#evaluate-form").elements.index.addEventListener("change", () => loadEvalSets().catch(showError));
    $("#token").addEventListener("change", (ev) => {
      state.token = ev.target.value.trim();
      clearError();
      loadIndexes().catch(showError);
    });
    $("#source-close").addEventListener("click", () => {
      $("#source").hidden = true;
    });
    document.addEventListener("keydown", (ev) => {
      if (ev.key === "Escape" && !$("#source").hidden && !$("#confirm").open) $("#source").hidden = true;
    });
    loadProfiles().catch(showError);
    loadIndexes().catch(showError);
  }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
  else start();
})();

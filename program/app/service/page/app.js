// The page: POST /ask/stream, read its server-sent events, draw each step as it arrives.
"use strict";

const $ = (id) => document.getElementById(id);
const el = (tag, attrs = {}, ...children) => {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (k === "class") node.className = v; else node.setAttribute(k, v);
  }
  for (const c of children) node.append(c instanceof Node ? c : document.createTextNode(String(c)));
  return node;
};
const fmt = (x) => (x === undefined || x === null || x < 0 ? "–" : Number(x).toFixed(2));
let thresholds = { lower: 0.2, upper: 0.6 };

const WHY = {
  correct: () => "the draft holds up: it is the answer",
  incorrect: () => "nothing holds up: the question was rewritten and searched again (knowledge base and web)",
  ambiguous: () => "part holds: the draft's passages and the correction, merged",
};

function reset() {
  for (const id of ["steps", "strips", "dropped", "claims", "correction", "answer", "citations", "flags", "action", "action-why", "set-aside"]) $(id).replaceChildren();
  $("passages").tBodies[0].replaceChildren();
  $("dropped-count").textContent = "0";
  $("set-aside-count").textContent = "0";
  $("verdict").hidden = true;
  $("status").className = "";
  writing = "";
}

function bar(score) {
  const b = el("div", { class: "bar", title: `relevance ${fmt(score)}; lower ${thresholds.lower}, upper ${thresholds.upper}` });
  const fill = el("span");
  fill.style.width = `${Math.max(0, score) * 100}%`;
  const lower = el("i", { class: "lower" });
  lower.style.left = `${thresholds.lower * 100}%`;
  const upper = el("i", { class: "upper" });
  upper.style.left = `${thresholds.upper * 100}%`;
  b.append(fill, lower, upper);
  return b;
}

const passages = new Map();

function onRetrieved(e) {
  for (const p of e.passages) passages.set(p.id, p);
}

function onGraded(e) {
  thresholds = { lower: e.lower, upper: e.upper };
  $("thresholds").textContent = `lower ${e.lower} · upper ${e.upper}`;
  const body = $("passages").tBodies[0];
  for (const g of e.grades) {
    const p = passages.get(g.passage_id) || {};
    const title = el("td", { class: "title" }, p.title || g.passage_id,
      el("small", {}, `${e.stage === "corrected" ? "found by the correction · " : ""}${g.passage_id}`),
      el("small", {}, (p.text || "").slice(0, 180)));
    body.append(el("tr", { id: `passage-${g.passage_id}` }, title, el("td", {}, fmt(p.score)),
      el("td", {}, bar(g.score), fmt(g.score)),
      el("td", {}, el("span", { class: `badge ${g.reason}` }, g.reason), el("small", {}, " ", g.explanation || ""))));
  }
}

function onAction(e) {
  $("verdict").hidden = false;
  $("action").replaceChildren(el("span", { class: `badge ${e.action}` }, e.action));
  $("action-why").textContent = `draft confidence ${fmt(e.confidence)} (accept ${fmt(e.accept)}): ${WHY[e.action](e)}; ${(e.reasons || []).join("; ")}.`;
}

function stripItem(s, attrs = {}) {
  const where = s.page ? `${s.source_id} · p. ${s.page}` : s.source_id;
  return el("li", attrs, s.text, el("small", {}, ` — ${where} · relevance ${fmt(s.relevance)}`));
}

function onStrips(e) {
  for (const s of e.dropped) $("dropped").append(stripItem(s));
  $("dropped-count").textContent = $("dropped").children.length;
  if (!$("strips").children.length || e.stage === "corrected") {
    $("strips").replaceChildren(...e.kept.map((s) => stripItem(s)));
  }
}

function answerWithLinks(text) {
  const nodes = [];
  let last = 0;
  for (const m of text.matchAll(/\[(\d+)\]/g)) {
    nodes.push(text.slice(last, m.index), el("a", { href: `#strip-${m[1]}` }, m[0]));
    last = m.index + m[0].length;
  }
  nodes.push(text.slice(last));
  return nodes;
}

// Each citation: its marker, linked to its strip, then the source's title, id (file and page) and link.
function citationItem(c) {
  const name = c.label || c.source_id;
  const source = c.url && /^https?:/.test(c.url) ? el("a", { href: c.url }, name) : name;
  return el("li", { id: `citation-${c.number}`, value: c.number },
    el("a", { href: `#strip-${c.number}` }, `[${c.number}]`), " ", c.title ? `${c.title} — ` : "", source);
}

function showCited(answer, citations, sentences) {
  $("answer").replaceChildren(...answerWithLinks(answer));
  $("citations").replaceChildren(...(citations || []).map(citationItem));
  const unsupported = (sentences || []).filter((s) => !s.supported).map((s) => s.text);
  return unsupported.length ? [`no strip supports: ${unsupported.join(" ")}`] : [];
}

// how the question ended (program.types.Outcome), one phrase; none for a baseline's answer
function outcomeLine(o) {
  if (o.ending === "declined") return [o.declined ? `declined (${o.reason}): the best answer written was "${o.declined}"` : `nothing reliable remained: the honest fallback (${o.reason})`];
  if (o.ending === "stopped") return [`${o.reason}: the honest fallback`];
  if (o.ending === "no-documents") return [o.reason];
  const who = { draft: "the draft", corrected: "the corrected answer" }[o.ending];
  return who ? [`answered by ${o.strict ? "the stricter retry of " : ""}${who}: ${o.reason}`] : [];
}

// the documents the question could read (program.retrieval.filters.DocumentFilter.to_dict)
function filterLine(f) {
  const parts = (f.paths || []).map((g) => `path ${g.join(" or ")}`);
  if (f.types) parts.push(`type ${f.types.join(" or ")}`);
  if (f.pages) parts.push(`pages ${f.pages}`);
  if (f.modified_since || f.modified_until) parts.push(`modified ${f.modified_since || ""}..${f.modified_until || ""}`);
  return f.nothing ? "nothing (the filters do not overlap)" : parts.join("; ");
}

function onResult(r) {
  $("verdict").hidden = false;
  writing = ""; $("answer").className = "";  // the verdict: the answer shown is the one given
  if (r.retrieval_skipped) $("action").replaceChildren(el("span", { class: "badge ungraded" }, "no retrieval"));
  const unsupported = showCited(r.answer, r.citations, r.sentences);
  $("strips").replaceChildren(...r.strips.map((s, i) => stripItem(s, { id: `strip-${i + 1}` })));
  const flags = [];
  flags.push(`confidence ${fmt(r.confidence)}`);
  flags.push(...outcomeLine(r.outcome));
  if (r.filter && Object.keys(r.filter).length) flags.push(`read only: ${filterLine(r.filter)}`);
  if (r.retried) flags.push("an unsupported claim triggered the stricter retry");
  if (r.retrieval_skipped) flags.push("the question needs no sources: answered without retrieval");
  flags.push(...unsupported);
  $("flags").textContent = flags.join("; ");
  $("claims").replaceChildren(...r.claims.map((c) => el("li", {},
    el("span", { class: `badge ${c.support}` }, c.support), " ",
    el("span", { class: c.kept ? "" : "dropped-claim" }, c.text),
    el("small", {}, c.cited.length ? ` cites [${c.cited.join("], [")}]` : " cites nothing", c.kept ? "" : " · dropped"))));
  if (!r.claims.length) $("claims").append(el("li", {}, r.mode === "self-crag" ? "no claims to check" : "claims not checked"));
  $("status").textContent = `answered in ${r.trace.seconds.toFixed(1)} s with ${r.trace.lm_calls} LM calls`;
}

const SUMMARY = {
  question: (e) => e.question,
  "decide-retrieval": (e) => (e.needs_retrieval ? "needs sources" : "needs no sources"),
  retrieved: (e) => `${e.passages.length} passages (${e.stage})`,
  graded: (e) => e.grades.map((g) => `${fmt(g.score)} ${g.reason}`).join(", "),
  action: (e) => e.action,
  rewrite: (e) => `query: ${e.query}`,
  web: (e) => e.error || `${e.backend}: ${e.hits.length} hits, ${e.fetched.length} fetched`,
  "set-aside": (e) => `${e.sentences.length} sentence(s) addressing the model set aside`,
  strips: (e) => `${e.stage}: kept ${e.kept.length}, dropped ${e.dropped.length} (threshold ${e.threshold})`,
  answer: (e) => (e.strict ? "stricter retry: " : e.cited ? `cited (${e.citations.length} strips): ` : "") + e.answer,
  claims: (e) => e.claims.map((c) => c.support).join(", ") || "none",
  usefulness: (e) => `usefulness ${fmt(e.score)}`,
  filter: (e) => `${filterLine(e.filter)}${e.files === null ? "" : ` (${e.files} file(s))`}; the web is not filtered`,
  result: (e) => e.result.answer,
  error: (e) => `${e.status}: ${e.detail}`,
};

let writing = "";  // the stage whose words the answer shows as they come (draft, corrected)

function onWords(e) {
  // the reader's words as written, shown at once; the verdict (and the answer shown) comes after
  $("verdict").hidden = false;
  if (writing !== e.stage) { $("answer").textContent = ""; writing = e.stage; $("answer").className = "writing"; }
  $("answer").textContent += e.text;
}

function onEvent(name, e) {
  if (name === "done") return;
  if (name === "words") return onWords(e);  // one step line per piece would drown the steps
  $("steps").append(el("li", {}, el("time", {}, `${(e.t ?? 0).toFixed(2)} s`), el("b", {}, name), " ", (SUMMARY[name] || (() => ""))(e)));
  ({ retrieved: onRetrieved, graded: onGraded, action: onAction, strips: onStrips,
     rewrite: (x) => $("correction").append(el("p", {}, "rewritten query: ", el("q", {}, x.query))),
     "set-aside": (x) => {
       for (const s of x.sentences) $("set-aside").append(el("li", {}, el("code", {}, s.source_id), " ", s.text));
       $("set-aside-count").textContent = $("set-aside").children.length;
     },
     web: (x) => $("correction").append(el("p", {}, `web (${x.backend}): `, x.error || x.hits.map((h) => h.url).join(", "))),
     answer: (x) => {
       $("verdict").hidden = false;
       writing = ""; $("answer").className = "";
       if (x.cited) showCited(x.answer, x.citations, x.sentences); else $("answer").textContent = x.answer;
     },
     result: (x) => onResult(x.result),
     error: (x) => { $("status").textContent = `error ${x.status}: ${x.detail}`; $("status").className = "error"; },
  }[name] || (() => {}))(e);
}

function post(body) {
  const headers = { "Content-Type": "application/json" };
  const key = sessionStorage.getItem("crag-api-key");
  if (key) headers.Authorization = `Bearer ${key}`;
  return fetch("/ask/stream", { method: "POST", headers, body: JSON.stringify(body) });
}

async function ask(event) {
  event.preventDefault();
  reset();
  passages.clear();
  const body = { question: $("question").value };
  if ($("k").value) body.k = Number($("k").value);
  if ($("web").value) body.web = $("web").value;
  body.self_check = $("self_check").checked;
  if ($("decide_retrieval").checked) body.decide_retrieval = true;
  const paths = $("paths").value.split(",").map((p) => p.trim()).filter(Boolean);
  if (paths.length) body.filter = { paths };
  $("submit").disabled = true;
  $("status").textContent = "asking…";
  try {
    let response = await post(body);
    if (response.status === 401) {
      // a server started with a key: ask for it once, keep it for this tab only
      const key = window.prompt("This server needs its API key:");
      if (key) sessionStorage.setItem("crag-api-key", key.trim());
      response = await post(body);
    }
    if (!response.ok) {
      const error = await response.json().catch(() => ({ detail: response.statusText }));
      onEvent("error", { status: response.status, detail: error.detail });
      return;
    }
    const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
    let buffer = "";
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      buffer += value.replaceAll("\r\n", "\n");
      let cut;
      while ((cut = buffer.indexOf("\n\n")) >= 0) {
        const block = buffer.slice(0, cut);
        buffer = buffer.slice(cut + 2);
        let name = "message", data = "";
        for (const line of block.split("\n")) {
          if (line.startsWith("event:")) name = line.slice(6).trim();
          else if (line.startsWith("data:")) data += line.slice(5).trim();
        }
        if (data) onEvent(name, JSON.parse(data));
      }
    }
  } catch (err) {
    onEvent("error", { status: "network", detail: String(err) });
  } finally {
    $("submit").disabled = false;
  }
}

document.addEventListener("DOMContentLoaded", () => $("ask").addEventListener("submit", ask));

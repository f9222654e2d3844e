// rspstar dashboard: registered queries, their status, latest results and a live chart.
// Plain JavaScript against the engine's own API (no libraries, nothing from a CDN).
"use strict";

const NUMERIC = /^"([^"]*)"\^\^<http:\/\/www\.w3\.org\/2001\/XMLSchema#(double|float|decimal|integer|int|long|short|byte|nonNegativeInteger|positiveInteger|negativeInteger|nonPositiveInteger|unsignedInt|unsignedLong|unsignedShort|unsignedByte)>$/;
const DISTRIBUTION = /^"N\(\s*([^,]+),[^)]*\)"\^\^<http:\/\/w3id\.org\/rsp\/rspu#distribution>$/;
const MAX_POINTS = 2000;
// ?refresh=poll polls for new results instead of holding a server-sent events connection
// (for proxies that buffer event streams, and for headless browsers on a time budget).
const POLL = new URLSearchParams(location.search).get("refresh") === "poll";

const state = { selected: null, records: [], source: null, variable: null, poller: null };

function $(selector) { return document.querySelector(selector); }

function el(tag, text, attrs) {
  const node = document.createElement(tag);
  if (text !== undefined && text !== null) node.textContent = String(text);
  for (const [k, v] of Object.entries(attrs || {})) node.setAttribute(k, v);
  return node;
}

// A number from an N-Triples term: numeric literals, and the mean of a normal distribution.
function numberOf(term) {
  if (typeof term !== "string") return null;
  let m = NUMERIC.exec(term);
  if (m) return Number(m[1]);
  m = DISTRIBUTION.exec(term);
  return m ? Number(m[1]) : null;
}

function shortTerm(term) {
  const m = NUMERIC.exec(term);
  if (m) return m[1];
  return term.replace(/^<(.*)>$/, "$1");
}

async function getJSON(url) {
  const response = await fetch(url, { headers: { Accept: "application/json" } });
  if (!response.ok) throw new Error(url + ": HTTP " + response.status);
  return response.json();
}

async function refreshHealth() {
  try {
    const health = await getJSON("/health");
    $("#health").textContent = `${health.status} · ${health.queries} queries · ${health.streams} streams` +
      (health.failed_queries.length ? ` · failed: ${health.failed_queries.join(", ")}` : "");
  } catch (e) {
    $("#health").textContent = "unreachable";
  }
}

async function refreshQueries() {
  let queries;
  try { queries = (await getJSON("/queries")).queries; } catch (e) { return; }
  const body = $("#queries tbody");
  body.replaceChildren();
  for (const q of queries) {
    const s = q.status;
    const row = el("tr", null, { class: "selectable" + (q.id === state.selected ? " selected" : ""), "data-id": q.id });
    row.append(el("td", q.id), el("td", q.form + (q.r2s !== "RSTREAM" ? " " + q.r2s : "")),
      el("td", q.windows.map(w => `${w.range}/${w.step} on ${w.stream.split("/").slice(-2).join("/")}`).join(", ")),
      el("td", s.state, { class: s.state === "failed" ? "failed" : "", title: s.last_error || "" }),
      el("td", s.evaluations), el("td", s.results_emitted), el("td", s.last_evaluation || "–"),
      el("td", s.next_close || "–"), el("td", s.evaluation_ms ? s.evaluation_ms.p50 : "–"));
    row.addEventListener("click", () => select(q.id));
    body.append(row);
  }
  if (!state.selected && queries.length) {
    const withResults = queries.find(q => q.status.results_emitted > 0);
    select((withResults || queries[0]).id);
  }
}

async function select(id) {
  if (state.source) state.source.close();
  if (state.poller) clearInterval(state.poller);
  state.selected = id;
  state.records = [];
  state.variable = null;
  $("#detail").hidden = false;
  $("#detail-id").textContent = id;
  for (const row of document.querySelectorAll("#queries tbody tr")) {
    row.classList.toggle("selected", row.dataset.id === id);
  }
  const text = await (await fetch(`/queries/${encodeURIComponent(id)}/results?limit=1000`)).text();
  state.records = text.split("\n").filter(Boolean).map(line => JSON.parse(line)).slice(-500);
  render();
  const add = record => {
    state.records.push(record);
    if (state.records.length > 500) state.records.shift();
  };
  if (POLL) {
    $("#live").textContent = "polling";
    state.poller = setInterval(async () => {
      const last = state.records.length ? state.records[state.records.length - 1].time : "";
      const url = `/queries/${encodeURIComponent(id)}/results` + (last ? `?since=${encodeURIComponent(last)}` : "");
      const lines = (await (await fetch(url)).text()).split("\n").filter(Boolean);
      lines.forEach(line => add(JSON.parse(line)));
      if (lines.length) render();
    }, 2000);
    return;
  }
  state.source = new EventSource(`/queries/${encodeURIComponent(id)}/events`);
  state.source.addEventListener("result", event => { add(JSON.parse(event.data)); render(); });
  state.source.onopen = () => { $("#live").textContent = "live"; };
  state.source.onerror = () => { $("#live").textContent = "reconnecting…"; };
}

function numericVariables() {
  const names = new Set();
  for (const record of state.records) {
    for (const row of record.bindings || []) {
      for (const [name, term] of Object.entries(row)) if (numberOf(term) !== null) names.add(name);
    }
  }
  return [...names].sort();
}

function render() {
  const variables = numericVariables();
  const picker = $("#variable");
  if (!state.variable || !variables.includes(state.variable)) state.variable = variables[0] || null;
  picker.replaceChildren(...variables.map(v => el("option", v, v === state.variable ? { selected: "" } : {})));
  picker.onchange = () => { state.variable = picker.value; drawChart(); };
  drawChart();
  renderLatest();
}

function renderLatest() {
  const latest = [...state.records].reverse().find(r => (r.bindings || r.triples || []).length) ||
    state.records[state.records.length - 1];
  const head = $("#results thead"), body = $("#results tbody");
  head.replaceChildren();
  body.replaceChildren();
  $("#latest-time").textContent = latest ? `at ${latest.time} (${latest.trigger || ""})` : "none yet";
  if (!latest) return;
  if (latest.triples) {
    head.append(el("tr")).firstChild.append(el("th", "triple"));
    for (const t of latest.triples) body.append(el("tr")).lastChild.append(el("td", t));
    return;
  }
  if (latest.boolean !== undefined) {
    body.append(el("tr")).lastChild.append(el("td", String(latest.boolean)));
    return;
  }
  const names = [...new Set((latest.bindings || []).flatMap(Object.keys))].sort();
  const headRow = el("tr");
  names.forEach(n => headRow.append(el("th", "?" + n)));
  head.append(headRow);
  for (const row of latest.bindings.slice(0, 50)) {
    const tr = el("tr", null, { class: "result" });
    names.forEach(n => tr.append(el("td", row[n] === undefined ? "" : shortTerm(row[n]))));
    body.append(tr);
  }
}

function drawChart() {
  const svg = $("#chart");
  svg.replaceChildren();
  const points = [];
  for (const record of state.records) {
    const t = Date.parse(record.time);
    for (const row of record.bindings || []) {
      const v = numberOf(row[state.variable]);
      if (v !== null && Number.isFinite(v)) points.push([t, v]);
    }
  }
  points.splice(0, Math.max(0, points.length - MAX_POINTS));
  svg.setAttribute("data-points", String(points.length));
  const ns = "http://www.w3.org/2000/svg";
  const W = 800, H = 240, pad = 36;
  const axis = document.createElementNS(ns, "path");
  axis.setAttribute("class", "axis");
  axis.setAttribute("d", `M${pad} ${H - pad} H${W - 8} M${pad} 8 V${H - pad}`);
  svg.append(axis);
  if (!points.length) return;
  const ts = points.map(p => p[0]), vs = points.map(p => p[1]);
  const t0 = Math.min(...ts), t1 = Math.max(...ts), v0 = Math.min(...vs), v1 = Math.max(...vs);
  const x = t => pad + (t1 === t0 ? 0.5 : (t - t0) / (t1 - t0)) * (W - pad - 8);
  const y = v => H - pad - (v1 === v0 ? 0.5 : (v - v0) / (v1 - v0)) * (H - pad - 8);
  // The line follows each evaluation's mean; every value is a dot.
  const byTime = new Map();
  for (const [t, v] of points) byTime.set(t, (byTime.get(t) || []).concat([v]));
  const means = [...byTime.entries()].map(([t, vals]) => [t, vals.reduce((a, b) => a + b, 0) / vals.length]);
  const line = document.createElementNS(ns, "polyline");
  line.setAttribute("class", "line");
  line.setAttribute("points", means.map(p => `${x(p[0]).toFixed(1)},${y(p[1]).toFixed(1)}`).join(" "));
  svg.append(line);
  for (const p of points.slice(-200)) {
    const dot = document.createElementNS(ns, "circle");
    dot.setAttribute("class", "dot");
    dot.setAttribute("cx", x(p[0]).toFixed(1));
    dot.setAttribute("cy", y(p[1]).toFixed(1));
    dot.setAttribute("r", "2");
    svg.append(dot);
  }
  const label = (text, lx, ly, anchor) => {
    const node = document.createElementNS(ns, "text");
    node.textContent = text;
    node.setAttribute("x", lx); node.setAttribute("y", ly);
    if (anchor) node.setAttribute("text-anchor", anchor);
    svg.append(node);
  };
  label(v1.toPrecision(4), 2, 14);
  label(v0.toPrecision(4), 2, H - pad);
  label(new Date(t0).toISOString().slice(11, 19), pad, H - 18);
  label(new Date(t1).toISOString().slice(11, 19), W - 8, H - 18, "end");
  label("?" + state.variable, W / 2, 16, "middle");
}

$("#register").addEventListener("submit", async event => {
  event.preventDefault();
  const form = event.target;
  const headers = { "Content-Type": "application/json" };
  if (form.token.value) headers.Authorization = "Bearer " + form.token.value;
  const body = { query: form.query.value };
  if (form.id.value) body.id = form.id.value;
  const response = await fetch("/queries", { method: "POST", headers, body: JSON.stringify(body) });
  const result = await response.json();
  const out = $("#register-result");
  if (response.ok) {
    out.textContent = `registered ${result.id}`;
    form.query.value = "";
    await refreshQueries();
    select(result.id);
  } else {
    const where = result.line ? ` (line ${result.line}, column ${result.column})` : "";
    out.textContent = `${result.message}${where}`;
  }
});

refreshHealth();
refreshQueries();
setInterval(refreshHealth, 5000);
setInterval(refreshQueries, 3000);

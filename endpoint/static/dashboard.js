// rspstar dashboard: registered queries, their status, sources, latest results and charts.
// Plain JavaScript against the engine's own API; charts by plotly.js, served by the engine
// from the plotly package (nothing from a CDN).
"use strict";

const NUMERIC = /^"([^"]*)"\^\^<http:\/\/www\.w3\.org\/2001\/XMLSchema#(double|float|decimal|integer|int|long|short|byte|nonNegativeInteger|positiveInteger|negativeInteger|nonPositiveInteger|unsignedInt|unsignedLong|unsignedShort|unsignedByte)>$/;
const DISTRIBUTION = /^"([A-Z]+)\(([^)]*)\)"\^\^<http:\/\/w3id\.org\/rsp\/rspu#distribution>$/;
const MAX_POINTS = 2000;
// The latest evaluation's rows shown in the table; the rest are counted (the API has them all).
const LATEST_ROWS = 20;
const TRIPLE = /^(\S+) (<[^>]*>) (.*) \.$/;
// ?refresh=poll polls for new results instead of holding a server-sent events connection
// (for proxies that buffer event streams, and for headless browsers on a time budget).
const PARAMS = new URLSearchParams(location.search);
const POLL = PARAMS.get("refresh") === "poll";
// ?query=<id> opens that query's detail (a link to one query), else the first with results.
const WANTED = PARAMS.get("query");
const PLOT_CONFIG = { displaylogo: false, responsive: true, displayModeBar: false };

// variables: each query's SELECT variables in the clause's order (null: SELECT *, or not a SELECT).
const state = { selected: null, records: [], source: null, variable: null, poller: null, variables: {} };

function $(selector) { return document.querySelector(selector); }

function el(tag, text, attrs) {
  const node = document.createElement(tag);
  if (text !== undefined && text !== null) node.textContent = String(text);
  for (const [k, v] of Object.entries(attrs || {})) node.setAttribute(k, v);
  return node;
}

function short(x) { return Number(x.toPrecision(4)).toString(); }

// An rspu:distribution literal (N, U, or NU: a normal plus uniforms) as a person reads it,
// with its mean and a band: ±2 standard deviations, or a uniform's range.
function distributionOf(term) {
  const m = typeof term === "string" && DISTRIBUTION.exec(term);
  if (!m) return null;
  const p = m[2].split(",").map(Number);
  if (p.some(x => !Number.isFinite(x))) return null;
  if (m[1] === "U" && p.length === 2) {
    return { mean: (p[0] + p[1]) / 2, low: p[0], high: p[1], label: `U(${short(p[0])}, ${short(p[1])})` };
  }
  if ((m[1] === "N" && p.length === 2) || (m[1] === "NU" && p.length >= 2 && p.length % 2 === 0)) {
    let mean = p[0], variance = p[1];
    const parts = m[1] === "N" || p[1] > 0 ? [`N(μ=${short(p[0])}, σ²=${short(p[1])})`] : (p[0] ? [short(p[0])] : []);
    for (let k = 2; k < p.length; k += 2) {
      mean += (p[k] + p[k + 1]) / 2;
      variance += (p[k + 1] - p[k]) ** 2 / 12;
      parts.push(`U(${short(p[k])}, ${short(p[k + 1])})`);
    }
    const sd = Math.sqrt(variance);
    return { mean, low: mean - 2 * sd, high: mean + 2 * sd, label: parts.join(" + ") };
  }
  return null;
}

// A value to chart from an N-Triples term: a number, or a distribution's mean and band.
function valueOf(term) {
  if (typeof term !== "string") return null;
  const m = NUMERIC.exec(term);
  if (m) return { mean: Number(m[1]) };
  return distributionOf(term);
}

function shortTerm(term) {
  const m = NUMERIC.exec(term);
  if (m) return m[1];
  const d = distributionOf(term);
  if (d) return d.label;
  return term.replace(/^<(.*)>$/, "$1");
}

async function getJSON(url) {
  const response = await fetch(url, { headers: { Accept: "application/json" } });
  if (!response.ok) throw new Error(url + ": HTTP " + response.status);
  return response.json();
}

async function refreshHealth() {
  try {
    const health = await (await fetch("/health", { headers: { Accept: "application/json" } })).json();
    const sources = health.sources === undefined ? "" : `${health.sources} sources feeding `;
    $("#health").textContent = `${health.status} · ${health.queries} queries · ${sources}${health.streams} streams` +
      (health.failed_queries.length ? ` · failed: ${health.failed_queries.join(", ")}` : "") +
      (health.sources_down && health.sources_down.length ? ` · sources down: ${health.sources_down.join(", ")}` : "") +
      Object.entries(health.background_failing || {}).map(([graph, error]) =>
        ` · background <${graph}> not reloaded: ${error}`).join("");
  } catch (e) {
    $("#health").textContent = "unreachable";
  }
}

async function refreshSources() {
  let sources;
  try { sources = (await getJSON("/streams")).sources; } catch (e) { return; }
  const body = $("#sources tbody");
  body.replaceChildren();
  const names = Object.keys(sources).sort();
  $("#sources-section").hidden = !names.length;
  for (const name of names) {
    const s = sources[name];
    const quarantined = Object.values(s.quarantined || {}).reduce((a, b) => a + b, 0);
    body.append(el("tr"));
    // An MQTT source is down while its broker is: it says so, and why, on hover.
    const state = s.active ? "running" : s.mqtt && !s.mqtt.connected ? "broker unreachable" : "down";
    body.lastChild.append(el("td", name, { title: s.mqtt ? `${s.mqtt.broker} ${s.mqtt.topics.join(" ")}` : "" }),
      el("td", state, { class: s.active ? "" : "down", title: s.last_error || "" }),
      el("td", s.last_batch ?? "–", { class: "num" }), el("td", quarantined, { class: "num" }));
  }
}

// A window as the query declares it: count windows by their elements, windows in the past
// with where they end.
function windowShape(w) {
  const short = iri => iri.split(/[/#]/).pop();
  if (w.kind === "partitioned") return `last ${w.elements} per ${w.partition_by.map(short).join(", ")}`;
  if (w.kind === "landmark") return `since ${w.start}/${w.step}`;
  if (w.kind === "facts") return `facts ${w.facts.join(" . ")}/${w.step || "on change"}`;
  if (w.elements !== undefined) return `${w.elements} elements/${w.step}`;
  return `${w.range}${w.to ? " to " + w.to : ""}/${w.step}`;
}

// A stream by the last segment of its IRI (the whole IRI goes in the cell's title).
function streamName(iri) {
  return iri.replace(/[#/]+$/, "").split(/[#/]/).pop() || iri;
}

// An instant as a clock shows it (UTC): "2026-03-01T08:00:10.5Z" as "08:00:10.5"; the cell's
// title keeps the whole instant.
function clockTime(instant) {
  const m = /T(\d\d:\d\d:\d\d(?:\.\d+)?)Z$/.exec(instant || "");
  return m ? m[1] : (instant || "–");
}

function timeCell(instant) {
  return el("td", clockTime(instant), { class: "time", title: instant || "" });
}

// One window a line, each as declared, on the stream it reads.
function windowsCell(windows) {
  const cell = el("td", null, { class: "windows", title: [...new Set(windows.map(w => w.stream))].join(" ") });
  for (const w of windows) {
    const line = el("div");
    line.append(el("span", windowShape(w), { class: "part" }), " ", el("span", `on ${streamName(w.stream)}`, { class: "part" }));
    cell.append(line);
  }
  return cell;
}

// Evaluations and results, and the elements late for the query (on a line of their own when
// the column is narrow; only when there are some).
function countsCell(s) {
  const cell = el("td", `${s.evaluations}, ${s.results_emitted}`, { class: "num" + (s.late_elements ? " late" : "") });
  if (s.late_elements) {
    cell.append(" ", el("span", `(${s.late_elements} late)`, { class: "part behind",
      title: "elements that came after the query had evaluated their instant (not evaluated again)" }));
  }
  return cell;
}

// Seconds behind, and the instants a query that skips has passed over (on a line of its own
// when the column is narrow).
function behindCell(s) {
  const cell = el("td", (s.behind_ms / 1000).toFixed(1), { class: "num" + (s.behind_ms > 0 ? " behind" : "") +
    (s.skipped_instants ? " skips" : "") });
  if (s.skipped_instants) cell.append(" ", el("span", `(${s.skipped_instants} skipped)`, { class: "part" }));
  return cell;
}

// The query's state, and what its sinks' outboxes dropped to stay within their bound (on a line of
// its own when the column is narrow; only when they dropped some): never silent.
function stateCell(s, outboxes) {
  const cell = el("td", s.state, { class: "state" + (s.state === "failed" ? " failed" : ""), title: s.last_error || "" });
  const dropping = outboxes.filter(o => o.dropped);
  if (dropping.length) {
    const dropped = dropping.reduce((n, o) => n + o.dropped, 0);
    cell.append(" ", el("span", `(${dropped} sink records dropped)`, { class: "part dropped",
      title: dropping.map(o => `${o.url}: ${o.dropped} dropped, the latest ${o.last_dropped}; ${o.pending} waiting` +
        (o.last_error ? ` (${o.last_error})` : "")).join("\n") }));
  }
  return cell;
}

async function refreshQueries() {
  let queries;
  try { queries = (await getJSON("/queries")).queries; } catch (e) { return; }
  const body = $("#queries tbody");
  body.replaceChildren();
  for (const q of queries) {
    const s = q.status;
    const row = el("tr", null, { class: "selectable" + (q.id === state.selected ? " selected" : ""), "data-id": q.id });
    const latency = s.close_to_result_ms ? `${s.close_to_result_ms.p50} / ${s.close_to_result_ms.p99}` : "–";
    const caughtUp = s.caught_up ? `; ${s.caught_up} evaluations caught up after a restart, not counted` : "";
    row.append(el("td", q.id, { class: "id" }), el("td", q.form + (q.r2s !== "RSTREAM" ? " " + q.r2s : "")),
      windowsCell(q.windows),
      stateCell(s, q.sink_outboxes || []),
      countsCell(s),
      el("td", s.missed_runs, { class: "num", title: "scheduler polls folded into the next run (no evaluation is skipped)" }),
      behindCell(s),
      timeCell(s.last_evaluation), timeCell(s.next_close),
      el("td", s.evaluation_ms ? s.evaluation_ms.p50 : "–", { class: "num" }),
      el("td", latency, { class: "num", title: "p50 / p99" + caughtUp }),
      el("td", s.cpu_ms_per_evaluation === null ? "–" : `${(100 * s.core_share).toFixed(1)}%`,
        { class: "num", title: s.cpu_ms_per_evaluation === null ? "" : `${s.cpu_ms_per_evaluation} ms of CPU per evaluation` }));
    row.addEventListener("click", () => select(q.id));
    body.append(row);
    state.variables[q.id] = q.variables;
  }
  if (!state.selected && queries.length) {
    const wanted = queries.find(q => q.id === WANTED);
    const withResults = queries.find(q => q.status.results_emitted > 0);
    select((wanted || withResults || queries[0]).id);
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
  // The compact shape: terms as N-Triples text, which the tables and charts read.
  const text = await (await fetch(`/queries/${encodeURIComponent(id)}/results?limit=1000&format=compact`)).text();
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
      const url = `/queries/${encodeURIComponent(id)}/results?format=compact` +
        (last ? `&since=${encodeURIComponent(last)}` : "");
      const lines = (await (await fetch(url)).text()).split("\n").filter(Boolean);
      lines.forEach(line => add(JSON.parse(line)));
      if (lines.length) render();
    }, 2000);
    return;
  }
  state.source = new EventSource(`/queries/${encodeURIComponent(id)}/events?format=compact`);
  state.source.addEventListener("result", event => { add(JSON.parse(event.data)); render(); });
  state.source.onopen = () => { $("#live").textContent = "live"; };
  state.source.onerror = () => { $("#live").textContent = "reconnecting…"; };
}

// The rows of a record as name -> term: a SELECT's bindings, a CONSTRUCT's triples (each
// object under its predicate's name), an ASK's answer as 1 or 0.
function rowsOf(record) {
  if (record.bindings) return record.bindings;
  if (record.triples) {
    return record.triples.map(line => TRIPLE.exec(line)).filter(Boolean)
      .map(m => ({ [predicateName(m[2])]: m[3] }));
  }
  if (record.boolean !== undefined) {
    return [{ answer: `"${record.boolean ? 1 : 0}"^^<http://www.w3.org/2001/XMLSchema#integer>` }];
  }
  return [];
}

function predicateName(iri) {
  return iri.slice(1, -1).split(/[#/]/).filter(Boolean).pop() || iri;
}

function numericVariables() {
  const names = new Set();
  for (const record of state.records) {
    for (const row of rowsOf(record)) {
      for (const [name, term] of Object.entries(row)) if (valueOf(term) !== null) names.add(name);
    }
  }
  const order = state.variables[state.selected];
  return order ? order.filter(n => names.has(n)).concat([...names].filter(n => !order.includes(n)).sort())
               : [...names].sort();
}

function render() {
  const variables = numericVariables();
  const picker = $("#variable");
  if (!state.variable || !variables.includes(state.variable)) state.variable = variables[0] || null;
  picker.replaceChildren(...variables.map(v => el("option", v, v === state.variable ? { selected: "" } : {})));
  picker.onchange = () => { state.variable = picker.value; drawCharts(); };
  drawCharts();
  renderLatest();
}

function renderLatest() {
  const latest = [...state.records].reverse().find(r => (r.bindings || r.triples || []).length) ||
    state.records[state.records.length - 1];
  const head = $("#results thead"), body = $("#results tbody"), more = $("#results-more");
  head.replaceChildren();
  body.replaceChildren();
  more.hidden = true;
  $("#latest-time").textContent = latest ? `at ${latest.time} (${latest.trigger || ""})` : "none yet";
  if (!latest) return;
  const rows = latest.triples || latest.bindings || [];
  if (rows.length > LATEST_ROWS) {
    more.hidden = false;
    more.textContent = `${LATEST_ROWS} of ${rows.length} rows shown; all of them: ` +
      `GET /queries/${state.selected}/results?since=…`;
  }
  // (Node.append returns nothing: each row is built, then appended.)
  const row = (cells, attrs) => { const tr = el("tr", null, attrs); tr.append(...cells); return tr; };
  if (latest.triples) {
    head.append(row([el("th", "triple")]));
    for (const t of latest.triples.slice(0, LATEST_ROWS)) body.append(row([el("td", t)], { class: "result" }));
    return;
  }
  if (latest.boolean !== undefined) {
    head.append(row([el("th", "answer")]));
    body.append(row([el("td", String(latest.boolean))], { class: "result" }));
    return;
  }
  // The SELECT clause's order; for SELECT *, the variables bound, sorted (as head.vars has them).
  const names = state.variables[state.selected] || [...new Set((latest.bindings || []).flatMap(Object.keys))].sort();
  const headRow = el("tr");
  names.forEach(n => headRow.append(el("th", "?" + n)));
  head.append(headRow);
  for (const row of latest.bindings.slice(0, LATEST_ROWS)) {
    const tr = el("tr", null, { class: "result" });
    names.forEach(n => tr.append(el("td", row[n] === undefined ? "" : shortTerm(row[n]))));
    body.append(tr);
  }
}

function layout(title, yTitle) {
  return { title: { text: title, font: { size: 13 } }, margin: { l: 56, r: 16, t: 32, b: 40 },
           xaxis: { type: "date", title: { text: "evaluation time (UTC)" } }, yaxis: { title: { text: yTitle } },
           showlegend: false, hovermode: "closest" };
}

// A line's points with a break wherever there is no value (null) and wherever evaluations are
// missing (a pause over twice the usual interval between them, as while the engine was
// stopped): with connectgaps false, plotly draws no line across a null.
function withGaps(xs, ys) {
  const times = xs.map(t => Date.parse(t));
  const steps = times.slice(1).map((t, k) => t - times[k]).filter(d => d > 0).sort((a, b) => a - b);
  const usual = steps.length ? steps[Math.floor(steps.length / 2)] : Infinity;
  const x = [], y = [];
  xs.forEach((t, k) => {
    if (k && times[k] - times[k - 1] > 2 * usual) {
      x.push(new Date((times[k] + times[k - 1]) / 2).toISOString());
      y.push(null);
    }
    x.push(t);
    y.push(ys[k]);
  });
  return { x, y };
}

function drawCharts() {
  if (typeof Plotly === "undefined") return;
  const variable = state.variable;
  const points = [];
  for (const record of state.records) {
    for (const row of rowsOf(record)) {
      const v = variable ? valueOf(row[variable]) : null;
      if (v && Number.isFinite(v.mean)) points.push({ time: record.time, ...v, label: shortTerm(row[variable]) });
    }
  }
  points.splice(0, Math.max(0, points.length - MAX_POINTS));
  const banded = points.some(p => p.low !== undefined);
  const values = {
    type: "scatter", mode: "markers", name: "?" + variable, x: points.map(p => p.time), y: points.map(p => p.mean),
    text: points.map(p => p.label), hovertemplate: "%{x}<br>%{text}<extra></extra>", marker: { size: 5, color: "#1a73e8" },
  };
  if (banded) {
    values.error_y = { type: "data", symmetric: false, color: "rgba(26,115,232,0.35)", thickness: 3, width: 0,
                       array: points.map(p => p.high === undefined ? 0 : p.high - p.mean),
                       arrayminus: points.map(p => p.low === undefined ? 0 : p.mean - p.low) };
  }
  const byTime = new Map();
  for (const p of points) byTime.set(p.time, (byTime.get(p.time) || []).concat([p.mean]));
  // The mean at every evaluation since the first point: none (an empty window) breaks the line.
  const first = points.length ? points[0].time : null;
  const evaluated = [...new Set(state.records.map(r => r.time))].filter(t => first !== null && t >= first);
  const meanLine = withGaps(evaluated, evaluated.map(t => byTime.has(t) ?
    byTime.get(t).reduce((a, b) => a + b, 0) / byTime.get(t).length : null));
  const means = { type: "scatter", mode: "lines", name: "mean", ...meanLine, connectgaps: false,
                  line: { color: "#0b3d91", width: 1.5 }, hoverinfo: "skip" };
  const chart = $("#chart-values");
  chart.dataset.points = String(points.length);
  chart.dataset.banded = String(banded);
  Plotly.react(chart, [means, values],
    layout(variable ? `?${variable} per evaluation` + (banded ? " (distributions: mean and ±2σ, or a uniform's range)" : "")
                    : "no numeric variable yet", variable ? "?" + variable : ""), PLOT_CONFIG);

  const times = state.records.map(r => r.time);
  Plotly.react($("#chart-results"), [{ type: "bar", x: times, marker: { color: "#5f8dd3" },
    y: state.records.map(r => r.boolean !== undefined ? Number(r.boolean) : (r.bindings || r.triples || []).length) }],
    layout("results per evaluation", "results"), PLOT_CONFIG);
  const timed = state.records.filter(r => r.latency_ms !== undefined);
  Plotly.react($("#chart-latency"), [{ type: "scatter", mode: "lines+markers", marker: { size: 4 },
    ...withGaps(timed.map(r => r.time), timed.map(r => r.latency_ms)), connectgaps: false,
    line: { color: "#c26401" } }],
    layout("close to result", "ms"), PLOT_CONFIG);
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
refreshSources();
setInterval(refreshHealth, 5000);
setInterval(refreshQueries, 3000);
setInterval(refreshSources, 5000);

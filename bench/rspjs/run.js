// Feeds workload (a) to rsp-js 1.3.5 (installed by bench/rsp_js_compare.py into bench/scratch,
// never committed) and writes one JSON object: events, result count per window close, wall and
// CPU seconds, memory.
// usage: node run.js SENSORS SECONDS QUERY(filter|avg) as-shipped|t0-reset
"use strict";
const path = require("path");
const fs = require("fs");
const scratch = process.env.RSPJS_MODULES;
const { RSPEngine } = require(path.join(scratch, "rsp-js"));
const { DataFactory } = require(path.join(scratch, "n3"));
const { namedNode, literal, quad, defaultGraph } = DataFactory;

const [sensors, seconds, kind, mode] = [Number(process.argv[2]), Number(process.argv[3]), process.argv[4], process.argv[5]];
const EX = "http://example.org/";
// rsp-js reads its query line by line: one clause per line.
const query = kind === "avg"
  ? `PREFIX ex: <${EX}>
PREFIX sosa: <http://www.w3.org/ns/sosa/>
REGISTER RStream <output> AS
SELECT ?sensor (AVG(?v) AS ?avg)
FROM NAMED WINDOW ex:w ON STREAM ex:stream [RANGE 10000 STEP 2000]
WHERE {
WINDOW ex:w { ?o sosa:madeBySensor ?sensor ; sosa:hasSimpleResult ?v . }
} GROUP BY ?sensor`
  : `PREFIX ex: <${EX}>
PREFIX sosa: <http://www.w3.org/ns/sosa/>
REGISTER RStream <output> AS
SELECT ?o ?v
FROM NAMED WINDOW ex:w ON STREAM ex:stream [RANGE 10000 STEP 2000]
WHERE {
WINDOW ex:w { ?o sosa:hasSimpleResult ?v . FILTER(?v < 0.165) }
}`;

const engine = new RSPEngine(query);
const window = engine.windows[0];
const stream = engine.getStream(EX + "stream");

// rsp-js evaluates a closed window asynchronously (Comunica) while the feed goes on; fed in
// one synchronous loop it evicts windows before their queries read them. So the feed waits
// after each STEP until every started evaluation has ended: counted by wrapping the R2R
// operator's execute (observation only; what runs is rsp-js's own code).
let pending = 0;
const execute = engine.r2r.execute.bind(engine.r2r);
engine.r2r.execute = async (data) => {
  pending += 1;
  const bindings = await execute(data);
  bindings.on("end", () => { pending -= 1; });
  bindings.on("error", () => { pending -= 1; });
  return bindings;
};

// The close of the window that fired (rsp-js passes only its content).
let current = null;
const perClose = {};
window.subscribe("RStream", (content) => {
  for (const [instance, container] of window.active_windows) {
    if (container === content) current = instance.close;
  }
  if (current !== null && !(current in perClose)) perClose[current] = 0;
});
const results = engine.register();
results.on("RStream", () => {
  perClose[current] = (perClose[current] || 0) + 1;
  // rsp-js 1.3.5 moves the window origin t0 one STEP forward for every result binding
  // (rsp.js, register()); later windows are then opened at the wrong place and it stops
  // reporting. "t0-reset" puts the origin back so every window closes as declared.
  if (mode === "t0-reset") window.t0 = 0;
});

const values = require(process.env.RSPJS_VALUES);
const total = sensors * seconds;
const DECIMAL = namedNode("http://www.w3.org/2001/XMLSchema#decimal");
const MADE_BY = namedNode("http://www.w3.org/ns/sosa/madeBySensor");
const RESULT = namedNode("http://www.w3.org/ns/sosa/hasSimpleResult");
const sleep = ms => new Promise(resolve => setTimeout(resolve, ms));

async function settle() {
  do { await sleep(1); } while (pending > 0);
}

// The kernel's high-water mark of this process's memory (getrusage's maxRSS would carry the
// parent's peak across fork).
function peakRssMib() {
  const match = /VmHWM:\s+(\d+) kB/.exec(fs.readFileSync("/proc/self/status", "utf8"));
  return match ? Number(match[1]) / 1024 : NaN;
}

async function main() {
  const cpu = process.cpuUsage();
  const started = process.hrtime.bigint();
  for (let i = 0; i < total; i++) {
    const ts = i * 1000 / sensors + 0.5;   // ms; never on a window boundary
    const o = namedNode(EX + "o" + i);
    // rsp-js takes one quad per call (its own tests do so, whatever its typings say).
    stream.add(quad(o, MADE_BY, namedNode(EX + "s" + (i % sensors)), defaultGraph()), ts);
    stream.add(quad(o, RESULT, literal(String(values[i]), DECIMAL), defaultGraph()), ts);
    if ((i + 1) % (2 * sensors) === 0) await settle();
  }
  // One event past the last close so the final window fires.
  stream.add(quad(namedNode(EX + "end"), namedNode(EX + "p"), literal("0"), defaultGraph()), total * 1000 / sensors + 0.5);
  await settle();
  const used = process.cpuUsage(cpu);
  fs.writeFileSync(process.env.RSPJS_OUT, JSON.stringify({
    events: total, per_close: perClose, cpu_seconds: (used.user + used.system) / 1e6,
    wall_seconds: Number(process.hrtime.bigint() - started) / 1e9,
    peak_rss_mib: peakRssMib() }));
  process.exit(0);
}

main();

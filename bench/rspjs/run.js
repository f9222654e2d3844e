// Feeds workload (a) to rsp-js 1.3.5 (installed by bench/rsp_js.py into bench/scratch, never
// committed) and prints one JSON line: events, results, seconds, per-close result counts.
// usage: node run.js SENSORS SECONDS QUERY(filter|avg)
"use strict";
const path = require("path");
const scratch = process.env.RSPJS_MODULES;
const { RSPEngine } = require(path.join(scratch, "rsp-js"));
const { DataFactory } = require(path.join(scratch, "n3"));
const { namedNode, literal, quad, defaultGraph } = DataFactory;


const [sensors, seconds, kind] = [Number(process.argv[2]), Number(process.argv[3]), process.argv[4]];
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
const stream = engine.getStream(EX + "stream");
const results = engine.register();
let count = 0;
results.on("RStream", () => { count += 1; });

// The observations (values written by the Python side, the same as its stream file).
const values = require(process.env.RSPJS_VALUES);
const total = sensors * seconds;
const DECIMAL = namedNode("http://www.w3.org/2001/XMLSchema#decimal");
const sleep = ms => new Promise(resolve => setTimeout(resolve, ms));

// rsp-js evaluates a closed window asynchronously while the feeding continues; fed in one
// synchronous loop it evicts windows before their queries read them and loses results. So the
// feed pauses after each STEP until the results settle, and the rate is measured in CPU time
// (the pauses are idle, not work).
async function settle() {
  let seen = -1;
  while (seen !== count) {
    seen = count;
    await sleep(30);
  }
}

async function main() {
  const cpu = process.cpuUsage();
  const started = process.hrtime.bigint();
  for (let i = 0; i < total; i++) {
    const ts = i * 1000 / sensors + 0.5;   // ms; never on a window boundary
    const o = namedNode(EX + "o" + i);
    // rsp-js takes one quad per call (its own tests do so, whatever its typings say).
    stream.add(quad(o, namedNode("http://www.w3.org/ns/sosa/madeBySensor"), namedNode(EX + "s" + (i % sensors)),
                    defaultGraph()), ts);
    stream.add(quad(o, namedNode("http://www.w3.org/ns/sosa/hasSimpleResult"), literal(String(values[i]), DECIMAL),
                    defaultGraph()), ts);
    if ((i + 1) % (2 * sensors) === 0) await settle();
  }
  // One event past the last close so the final window fires.
  stream.add(quad(namedNode(EX + "end"), namedNode(EX + "p"), literal("0"), defaultGraph()), total * 1000 / sensors + 2000.5);
  await settle();
  const used = process.cpuUsage(cpu);
  // rsp-js prints its own traces on standard output: the figures go to a file.
  require("fs").writeFileSync(process.env.RSPJS_OUT, JSON.stringify({
    events: total, results: count, cpu_seconds: (used.user + used.system) / 1e6,
    wall_seconds: Number(process.hrtime.bigint() - started) / 1e9, rss_mib: process.memoryUsage().rss / 1048576 }));
  process.exit(0);
}

main();

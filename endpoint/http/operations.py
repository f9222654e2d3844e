"""Operations: health, Prometheus metrics and the API's OpenAPI document."""
from __future__ import annotations

import json

from flask import Blueprint, Response

from rspstar.store.disk import DiskGuard

from ..engine.runner import Runner
from .context import services
from .openapi import document

blueprint = Blueprint("operations", __name__)


@blueprint.route("/health", methods=["GET"])
def health():
    # A source that stopped ingesting makes the engine unhealthy (503): its data is lost to
    # every query until it runs again.
    queries = services().engine.queries()
    # While it starts (Spark is not up yet) it answers, and says so: reads work, writes wait.
    sources = services().ingestion_status()
    down = sorted(name for name, source in sources.items() if not source.get("active"))
    starting = not services().readiness.ready
    disk = services().disk.describe() if services().disk is not None else None
    # A background graph whose last reload failed still holds what it held: stale, so degraded.
    # (Its statuses are read under a lock no reload holds while it fetches or reads.)
    refresh = services().engine.background_refresh
    graphs = refresh.statuses() if refresh is not None else []
    stale = {g.graph: g.last_error for g in graphs if g.last_error is not None}
    status = "starting" if starting else "degraded" if down or stale or (disk and not disk["ok"]) else "ok"
    body = {"status": status, "queries": len(queries),
            "failed_queries": [q.id for q in queries if q.status.state == "failed"],
            "sources": len(sources), "sources_down": [] if starting else down,
            "streams": len(services().store.streams()), "event_streams": services().event_streams.count}
    if refresh is not None:
        body["background_graphs"] = len(refresh.graphs)
        body["background_failing"] = stale
        body["background"] = [g.describe() for g in graphs]
    if disk is not None:
        body["disk"] = disk
    response = Response(json.dumps(body), status=200 if status == "ok" else 503, mimetype="application/json")
    if starting:
        response.headers["Retry-After"] = "5"
    return response


@blueprint.route("/metrics", methods=["GET"])
def metrics():
    return Response(prometheus_text(services().engine, services().ingestion_status(), services().disk),
                    mimetype="text/plain; version=0.0.4")


@blueprint.route("/openapi.json", methods=["GET"])
def openapi():
    return Response(json.dumps(document(services().engine.config.allowed_sinks), indent=1),
                    mimetype="application/json")


def _label(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def prometheus_text(engine: Runner, sources: dict, disk: DiskGuard | None = None) -> str:
    lines = []

    def metric(name: str, kind: str, help_text: str, samples: list[tuple[dict, float]]) -> None:
        lines.append("# HELP %s %s" % (name, help_text))
        lines.append("# TYPE %s %s" % (name, kind))
        for labels, value in samples:
            label_text = ",".join('%s="%s"' % (k, _label(v)) for k, v in sorted(labels.items()))
            lines.append("%s{%s} %s" % (name, label_text, repr(float(value))) if label_text
                         else "%s %s" % (name, repr(float(value))))

    streams = engine.store.streams()
    metric("rspstar_ingested_elements_total", "counter", "Stream elements published to the store.",
           [({"stream": s}, st.ingested) for s, st in streams.items()])
    metric("rspstar_late_elements_total", "counter", "Elements that arrived below their stream's watermark.",
           [({"stream": s}, st.late) for s, st in streams.items()])
    metric("rspstar_stored_elements", "gauge", "Elements held in the store now.",
           [({"stream": s}, st.elements) for s, st in streams.items()])
    queries = engine.queries()
    metric("rspstar_evaluations_total", "counter", "Evaluations run.",
           [({"query": q.id}, q.status.evaluations) for q in queries])
    metric("rspstar_evaluation_failures_total", "counter", "Evaluations that raised.",
           [({"query": q.id}, q.status.failures) for q in queries])
    metric("rspstar_query_late_elements_total", "counter", "Elements that came after the query had evaluated the "
           "instant they belong to (not evaluated again; kept for the windows still open).",
           [({"query": q.id}, q.status.late_elements) for q in queries])
    metric("rspstar_query_behind_seconds", "gauge", "How far the query's next due instant is behind the clock.",
           [({"query": q.id}, q.behind() / 1e6) for q in queries])
    metric("rspstar_query_skipped_instants_total", "counter", "Due instants passed over under the option "
           "overrun = skip (none under the default, catch-up).", [({"query": q.id}, q.status.skipped_instants)
                                                                 for q in queries])
    latency = [({"query": q.id, "quantile": str(quantile)}, seconds)
               for q in queries for quantile, seconds in q.status.percentiles().items()]
    metric("rspstar_evaluation_seconds", "summary", "Evaluation time.", latency)
    metric("rspstar_query_cpu_seconds_total", "counter", "CPU its evaluations took since the engine started.",
           [({"query": q.id}, q.status.cpu_seconds) for q in queries])
    metric("rspstar_query_core_share", "gauge", "Share of one core its evaluations take (CPU per evaluation times "
           "evaluations per second).", [({"query": q.id}, q.status.core_share()) for q in queries])
    metric("rspstar_evaluation_load_cores", "gauge", "Cores all queries' evaluations take, as measured (running "
           "ones with their time so far).", [({}, engine.load())])
    budget = engine.load_budget()
    if budget is not None:
        metric("rspstar_evaluation_load_budget_cores", "gauge", "The load beyond which registrations are refused.",
               [({}, budget)])
    sinks = [({"query": q.id, "sink": s.url}, s.describe()) for q in queries for s in q.url_sinks]
    metric("rspstar_sink_backlog", "gauge", "Records waiting in sink outboxes.",
           [(labels, outbox["pending"]) for labels, outbox in sinks])
    metric("rspstar_sink_outbox_bytes", "gauge", "Disk the records waiting in a sink's outbox take (at most "
           "[engine] outbox_bytes).", [(labels, outbox["pending_bytes"]) for labels, outbox in sinks])
    metric("rspstar_sink_delivered_total", "counter", "Records a sink's receiver took since the engine started.",
           [(labels, outbox["delivered"]) for labels, outbox in sinks])
    metric("rspstar_sink_dropped_total", "counter", "Records dropped undelivered, the oldest first, to keep a sink's "
           "outbox within [engine] outbox_bytes.", [(labels, outbox["dropped"]) for labels, outbox in sinks])
    metric("rspstar_source_up", "gauge", "1 while a source's streaming query runs, 0 when it has stopped.",
           [({"source": name}, 1 if source.get("active") else 0) for name, source in sorted(sources.items())])
    refresh = engine.background_refresh
    if refresh is not None:
        graphs = refresh.statuses()
        metric("rspstar_background_reloads_total", "counter", "Successful reloads of a refreshed background graph "
               "(those that found the source unchanged included).", [({"graph": g.graph}, g.reloads) for g in graphs])
        metric("rspstar_background_reloads_unchanged_total", "counter", "Reloads that found the source as it was "
               "and wrote nothing.", [({"graph": g.graph}, g.unchanged) for g in graphs])
        metric("rspstar_background_reloads_skipped_total", "counter", "Reloads not run because the one before "
               "took longer than the graph's refresh.", [({"graph": g.graph}, g.skipped) for g in graphs])
        metric("rspstar_background_reload_seconds", "gauge", "How long the graph's last reload took.",
               [({"graph": g.graph}, g.seconds) for g in graphs if g.seconds is not None])
        metric("rspstar_background_reload_failures_total", "counter", "Reloads that failed (the graph kept what "
               "it held).", [({"graph": g.graph}, g.failures) for g in graphs])
        metric("rspstar_background_reload_failing", "gauge", "1 while a graph's last reload failed, with its error.",
               [({"graph": g.graph, "error": (g.last_error or "")[:200]}, 1 if g.last_error else 0) for g in graphs])
        metric("rspstar_background_graph_triples", "gauge", "Triples the last successful reload loaded.",
               [({"graph": g.graph}, g.triples) for g in graphs if g.triples is not None])
        metric("rspstar_background_loaded_timestamp_seconds", "gauge", "When the graph was last reloaded.",
               [({"graph": g.graph}, g.loaded_at / 1e6) for g in graphs if g.loaded_at is not None])
    if disk is not None:
        metric("rspstar_disk_free_bytes", "gauge", "Free space of the data directory's disk.", [({}, disk.free())])
        metric("rspstar_disk_reserved_bytes", "gauge", "Free space kept for storing what was acknowledged and not "
               "yet stored.", [({}, disk.reserved())])
        metric("rspstar_disk_min_free_bytes", "gauge", "The free space (beyond the reserved) below which writes are "
               "refused.", [({}, disk.min_free)])
    return "\n".join(lines) + "\n"

"""The live scheduler: APScheduler jobs that drive an `Engine` in wall-clock time.

One job per registered query (id `query:<id>`), one for sink delivery and one for retention;
no job overlaps itself (max_instances=1) and firings missed while a run was busy are
coalesced into one and counted in the query's status. A query's job polls (for `max_delay`)
and is also run at once when a watermark it waits for passes its next close. The jobs only
ask the engine to do what is due, so the semantics stay in `Engine` (tested on a virtual
clock) and this layer only decides how often to ask.
"""
from __future__ import annotations

import logging
from datetime import datetime, timezone

from apscheduler.events import EVENT_JOB_MAX_INSTANCES, EVENT_JOB_MISSED, JobExecutionEvent
from apscheduler.jobstores.base import JobLookupError
from apscheduler.schedulers.background import BackgroundScheduler

from rspstar.store.stream_store import WatermarkAdvanced

from .engine import Engine, UnknownQuery

log = logging.getLogger(__name__)

QUERY_JOB_PREFIX = "query:"
DELIVERY_JOB = "sinks:deliver"
RETENTION_JOB = "store:retention"
_NO_OVERLAP = {"max_instances": 1, "coalesce": True, "misfire_grace_time": 30}


class LiveScheduler:
    def __init__(self, engine: Engine, interval: float = 0.1, housekeeping_interval: float = 1.0):
        self.engine = engine
        self.interval = interval
        self.scheduler = BackgroundScheduler()
        self.scheduler.add_listener(self._missed, EVENT_JOB_MISSED | EVENT_JOB_MAX_INSTANCES)
        self.scheduler.add_job(engine.deliver, "interval", seconds=housekeeping_interval / 2, id=DELIVERY_JOB,
                               **_NO_OVERLAP)
        self.scheduler.add_job(engine.evict, "interval", seconds=housekeeping_interval, id=RETENTION_JOB,
                               **_NO_OVERLAP)
        for registered in engine.queries():
            self._add_query_job(registered.id)
        engine.listeners.append(self._on_change)
        engine.store.subscribe(self._on_watermark)

    def _add_query_job(self, query_id: str) -> None:
        self.scheduler.add_job(self._run, "interval", seconds=self.interval, args=[query_id],
                               id=QUERY_JOB_PREFIX + query_id, replace_existing=True, **_NO_OVERLAP)

    def _run(self, query_id: str) -> None:
        # Evaluations of a CONSTRUCT query feed other queries: let those run at once.
        if self.engine.run_query(query_id) and self.engine.get(query_id).query.output_stream:
            for registered in self.engine.queries():
                if registered.id != query_id:
                    self.engine.run_query(registered.id)

    def _on_change(self, event: str, query_id: str) -> None:
        if event == "registered":
            self._add_query_job(query_id)
        elif event == "removed" and self.scheduler.get_job(QUERY_JOB_PREFIX + query_id) is not None:
            self.scheduler.remove_job(QUERY_JOB_PREFIX + query_id)

    def _on_watermark(self, event: WatermarkAdvanced) -> None:
        if not self.scheduler.running:
            return
        stream, watermark = event.stream, event.watermark
        now = datetime.now(timezone.utc)
        for registered in self.engine.queries():
            if stream not in registered.query.streams:
                continue
            due = registered.next_instant()
            if due is not None and registered.evaluator.policy.complete_through(due) <= watermark:
                try:
                    self.scheduler.modify_job(QUERY_JOB_PREFIX + registered.id, next_run_time=now)
                except JobLookupError:
                    pass    # removed meanwhile

    def _missed(self, event: JobExecutionEvent) -> None:
        if event.job_id.startswith(QUERY_JOB_PREFIX):
            try:
                self.engine.get(event.job_id[len(QUERY_JOB_PREFIX):]).status.missed_runs += 1
            except UnknownQuery:
                pass

    def job_ids(self) -> list[str]:
        return sorted(job.id for job in self.scheduler.get_jobs())

    def start(self) -> None:
        self.scheduler.start()

    def shutdown(self) -> None:
        self.engine.listeners.remove(self._on_change)
        self.engine.store.unsubscribe(self._on_watermark)
        if self.scheduler.running:
            self.scheduler.shutdown(wait=True)

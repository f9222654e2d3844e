"""Turning one ingestion micro-batch into stream elements in the store, exactly once.

Every source (files, socket, simulator, Kafka) hands rows of the same shape: the stream IRI,
the payload's format, where it came from, its line there (for line-based sources), the text,
and the ingestion (processing) time. This module has no Spark in it, so it is tested on
plain rows; `ingestion.py` feeds it Spark's micro-batches.

- A batch writes all its elements and a marker `(source, batch id)` in one transaction; a
  batch whose marker is already there (Spark replays the last batch after a crash) is
  skipped, so nothing is stored twice, reifier blank nodes included.
- Input that does not parse goes to the quarantine folder with the reason (origin, line,
  parser message), is counted per stream, and the batch's good elements still land.
- Each stream's watermark follows the greatest event time seen, less the allowed lateness;
  elements below it are late: stored for the windows still open, counted and logged. An
  element stamped further ahead of the engine's clock than `event_time` allows is set aside
  with the reason instead: it would have moved the watermark past every reading to come.
"""
from __future__ import annotations

import functools
import hashlib
import json
import logging
import os
import shutil
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable

import pyoxigraph as ox

from rspstar.config.schema import default
from rspstar.translator.temporal import format_instant
from rspstar.translator.vocabulary import BATCHES_GRAPH, PROV_GENERATED_AT_TIME

from .codec import IGNORED, REJECTED, EventTimeBound, Payload, canonical, decode_all, stored_to_canonical
from .landing import LandedFiles, StreamBound, file_safe, replace_text
from .rdf_input import Element, read_elements
from .staged import StagedElement, Stamps
from .stream_store import StreamStore

log = logging.getLogger(__name__)
# Disk for the quarantined payloads of all sources together (their counts are kept apart):
# input that never parses would otherwise fill the disk at the rate it arrives.
# And this many payloads at most: bad lines are small, and a folder of hundreds of thousands of
# files is slow to list for everyone.
QUARANTINE_MAX_PAYLOADS = 10_000
_COMMITTED = ox.NamedNode("urn:rspstar:committed")


@dataclass
class BatchReport:
    batch_id: int
    skipped: bool = False                                  # already stored (a replayed batch)
    stored: dict[str, int] = field(default_factory=dict)   # per stream
    late: dict[str, int] = field(default_factory=dict)
    quarantined: dict[str, int] = field(default_factory=dict)
    elements: dict[str, list[Element]] = field(default_factory=dict)   # what was stored, per stream
    stored_form: dict[str, bytes] = field(default_factory=dict)        # or that, as codec.stored_form

    def canonical(self) -> dict[str, bytes | list[Element]]:
        """What was stored per stream, for the recordings: elements, or their canonical N-Quads."""
        return {**self.elements, **{s: stored_to_canonical(s, text) for s, text in self.stored_form.items()}}


class EncodedElements:
    """One stream's elements in a micro-batch decoded where it was read: the rows of
    codec.encode joined (one per task)."""

    def __init__(self):
        self.texts: list[bytes] = []
        self.graphs: list[str] = []
        self.instants: list[int] = []
        self.stamps: list[str] = []
        self.stamp_types: list[str] = []
        self.lines: list[int] = []

    def add(self, row: dict) -> None:
        self.texts.append(row["text"])
        self.graphs += row["graphs"]
        self.instants += row["instants"]
        self.stamps += row["stamps"]
        self.stamp_types += row["stamp_types"]
        self.lines += row["lines"]

    @functools.cached_property
    def text(self) -> bytes:
        """The stream's N-Quads, joined once (read after every row is added)."""
        return b"".join(self.texts)

    def staged(self, timestamp_predicate: str) -> list[StagedElement]:
        stamps = Stamps()       # a batch's elements share few timestamps
        return [StagedElement(graph, instant, stamps.of_text(timestamp_predicate, value, kind))
                for graph, instant, value, kind in zip(self.graphs, self.instants, self.stamps, self.stamp_types)]

    def elements(self, stream: str, timestamp_predicate: str) -> list[Element]:
        """The elements read back from their stored form one by one, in input order (for the
        careful path: elements repeating a graph name stay apart, to be set aside)."""
        lines = stored_to_canonical(stream, self.text).split(b"\n")
        elements, at = [], 0
        for count in self.lines:
            text = b"\n".join(lines[at:at + count])
            at += count
            elements += read_elements(text, "encoded batch", ox.RdfFormat.N_QUADS, timestamp_predicate).elements
        return elements


class BatchWriter:
    """Writes micro-batches of one source into a stream store."""

    def __init__(self, store: StreamStore, source: str, quarantine_dir: Path,
                 allowed_lateness: int = 0, timestamp_predicate: str = PROV_GENERATED_AT_TIME,
                 query: str | None = None, quarantine_max_bytes: int = default("quarantine.max_bytes"),
                 acknowledged: LandedFiles | None = None, max_streams: int | None = None,
                 event_time: EventTimeBound | None = None):
        self.store = store
        # Elements stamped further ahead of the engine's clock are set aside (None: no bound).
        self.event_time = event_time
        # Elements of new streams past it are set aside (every source: a file dropped in a
        # landing directory or an MQTT message may name any stream).
        self.streams = StreamBound(max_streams, lambda: store.streams())
        self._known_streams: set[str] = set()
        self.source = source
        # Landing files acknowledged and not yet stored: a batch's are stored once it is.
        self.acknowledged = acknowledged
        # A source sharing its streaming query with others counts batches in that query's
        # numbering: its markers are named by both.
        self._marker_name = file_safe(source) if query is None else "%s/%s" % (file_safe(query), file_safe(source))
        self.quarantine_dir = quarantine_dir
        self.allowed_lateness = allowed_lateness
        self.timestamp_predicate = timestamp_predicate
        self.quarantine_max_bytes = quarantine_max_bytes
        self._quarantined_bytes = 0        # written since the folder was last held to its budget
        self._quarantined_since = 0        # payloads set aside since then
        # Counted in the folder beside what it keeps, so the count outlives restarts and the
        # payloads the budget deletes.
        self._counts = quarantine_dir / ("%s.counts.json" % file_safe(source))
        self.quarantined: dict[str, int] = {}
        try:
            self.quarantined = {str(k): int(v) for k, v in json.loads(self._counts.read_text(encoding="utf-8")).items()}
        except (OSError, ValueError, AttributeError):
            for reason in quarantine_dir.glob("%s-*.reason.json" % file_safe(source)) if quarantine_dir.is_dir() else []:
                try:
                    described = json.loads(reason.read_text(encoding="utf-8"))
                except ValueError:
                    continue
                if described.get("source") == source:
                    stream = described.get("stream")
                    self.quarantined[stream] = self.quarantined.get(stream, 0) + 1
        self._lock = threading.Lock()

    def marker(self, batch_id: int) -> ox.Quad:
        return ox.Quad(ox.NamedNode("urn:rspstar:batch:%s/%d" % (self._marker_name, batch_id)), _COMMITTED,
                       ox.Literal(True), ox.NamedNode(BATCHES_GRAPH))

    def write(self, batch_id: int, payloads: Iterable[Payload]) -> BatchReport:
        """Decode the payloads here and store their elements."""
        payloads = list(payloads)

        def unexpected(payload: Payload) -> None:
            log.exception("%s: unexpected failure reading %s", self.source, payload.origin)

        def decoded(report: BatchReport) -> dict[str, list[Element]]:
            found = decode_all(payloads, self.timestamp_predicate, unexpected)
            self._set_aside_rejects(found.rejected, report)
            self._log_ignored(batch_id, found.ignored_default_triples)
            return found.elements

        return self._stored(self._store(batch_id, decoded), (p.origin for p in payloads))

    def _stored(self, report: BatchReport, origins: Iterable[str]) -> BatchReport:
        """The batch is in the store (or was already): the landing files it read are no longer
        waiting to be stored."""
        if self.acknowledged is not None:
            self.acknowledged.stored(origins)
        return report

    def write_encoded(self, batch_id: int, rows: Iterable[dict]) -> BatchReport:
        """Store a micro-batch decoded where it was read (codec.encode's rows): each stream's
        elements in one Rust call, parsed from N-Quads there, not in Python."""
        rows = list(rows)
        def decoded(report: BatchReport) -> dict[str, list[Element]] | dict[str, EncodedElements]:
            streams: dict[str, EncodedElements] = {}
            for row in rows:
                if row["kind"] == REJECTED:
                    payload = Payload(row["stream"], row["format"], row["origin"], row["text"], row["ingest_time"])
                    self._quarantine(payload, report, row["line"], row["reason"])
                elif row["kind"] == IGNORED:
                    self._log_ignored(batch_id, row["count"])
                else:
                    streams.setdefault(row["stream"], EncodedElements()).add(row)
            if self.store.all_new(g for encoded in streams.values() for g in encoded.graphs):
                return streams
            # Some element is stored already or twice: the careful path sets each aside.
            return {stream: encoded.elements(stream, self.timestamp_predicate) for stream, encoded in streams.items()}

        return self._stored(self._store(batch_id, decoded),
                            (origin for row in rows if row.get("origin") for origin in row["origin"].split("\n")))

    def _store(self, batch_id: int, decoded) -> BatchReport:
        """Store what `decoded(report)` finds in the batch (elements, or encoded elements, per
        stream) with the batch's marker in one transaction, unless the marker is there."""
        report = BatchReport(batch_id)
        marker = self.marker(batch_id)
        with self._lock:
            if marker in self.store.oxigraph:
                report.skipped = True
                log.info("%s: batch %d is already stored; skipped", self.source, batch_id)
                return report
            found = decoded(report)
            encoded = any(isinstance(e, EncodedElements) for e in found.values())
            found = self._hold_to_stream_bound(found, report, encoded)
            found, encoded = self._hold_to_event_time(found, report, encoded)
            if not encoded:
                seen: set[str] = set()
                found = {s: self._drop_taken(s, e, report, seen) for s, e in found.items()}
            instants = {stream: e.instants if encoded else [x.timestamp for x in e] for stream, e in found.items()}
            for stream, times in instants.items():
                if times:
                    # Under the watermark's own assumption (nothing arrives more than the
                    # allowed lateness behind what was seen), windows closing by this batch's
                    # oldest element need none of it: they may run while it is stored.
                    self.store.advance_watermark(stream, min(times) - self.allowed_lateness)
            if encoded:
                staged = self.store.stage_stored_form(
                    {s: (e.text, e.staged(self.timestamp_predicate)) for s, e in found.items()}, [marker])
                report.stored_form = {stream: e.text for stream, e in found.items() if e.graphs}
            else:
                staged = self.store.stage_batch(found, [marker], self.timestamp_predicate)
                report.elements = {stream: elements for stream, elements in found.items() if elements}
            for stream, elements in staged.items():
                late_before = self.store.late_count(stream)
                self.store.publish(stream, elements)
                report.stored[stream] = len(elements)
                late = self.store.late_count(stream) - late_before
                if late:
                    report.late[stream] = late
                    watermark = self.store.watermark(stream)
                    log.warning("%s: %d late element(s) on %s (below its watermark, %s), stored for open windows",
                                self.source, late, stream, "none" if watermark is None else format_instant(watermark))
                if elements:
                    newest = max(e.timestamp for e in elements)
                    self.store.advance_watermark(stream, newest - self.allowed_lateness)
        return report

    def _hold_to_stream_bound(self, found: dict, report: BatchReport, encoded: bool) -> dict:
        """The elements of new streams past the bound on streams, set aside naming it."""
        if self.streams.limit is None or found.keys() <= self._known_streams:
            return found
        beyond = set(self.streams.beyond(found))
        self._known_streams = set(self.store.streams())
        for stream in beyond:
            elements = found.pop(stream)
            text = stored_to_canonical(stream, elements.text) if encoded else canonical(elements)
            self._quarantine(Payload(stream, "nquads", "batch %d" % report.batch_id, text, 0), report, None,
                             self.streams.reason([stream]))
        return found

    def _hold_to_event_time(self, found: dict, report: BatchReport, encoded: bool) -> tuple[dict, bool]:
        """The elements stamped further ahead of the engine's clock than the bound, set aside
        naming it before they move a watermark (a batch decoded where it was read holding one
        takes the careful path, element by element); and whether the rest is still encoded."""
        if self.event_time is None:
            return found, encoded
        limit = self.event_time.limit()
        if encoded:
            if all(max(e.instants, default=limit) <= limit for e in found.values()):
                return found, True
            found = {stream: e.elements(stream, self.timestamp_predicate) for stream, e in found.items()}
        kept: dict[str, list[Element]] = {}
        for stream, elements in found.items():
            kept[stream] = []
            for element in elements:
                if element.timestamp <= limit:
                    kept[stream].append(element)
                else:
                    self._quarantine(Payload(stream, "nquads", element.graph, canonical([element]), 0), report, None,
                                     self.event_time.reason(element, limit))
        return kept, False

    def _set_aside_rejects(self, rejected, report: BatchReport) -> None:
        for r in rejected:
            self._quarantine(r.payload, report, r.line, r.reason)

    def _log_ignored(self, batch_id: int, count: int) -> None:
        if count:
            log.warning("%s: batch %d has %d default-graph triple(s) that are not timestamps; not stored",
                        self.source, batch_id, count)

    def _drop_taken(self, stream: str, elements: list[Element], report: BatchReport, seen: set[str]) -> list[Element]:
        """Elements whose graph name is already stored, or came earlier in this batch, are
        quarantined: merging them would change another element."""
        fresh = []
        for element in elements:
            if element.graph in seen or self.store.is_taken(element.graph):
                # Kept as canonical N-Quads: what was sent, to look at or send again under another name.
                self._quarantine(Payload(stream, "nquads", element.graph, canonical([element]), 0), report, None,
                                 "graph <%s> is already stored or repeated in the batch (sent twice?)" % element.graph)
            else:
                seen.add(element.graph)
                fresh.append(element)
        return fresh

    def quarantine(self, payload: Payload, reason: str, line: int | None = None) -> None:
        """Set aside input found bad outside a micro-batch (an element without its partition
        key, an MQTT message that does not parse); safe beside a batch being written."""
        with self._lock:
            self._quarantine(payload, BatchReport(-1), line, reason)

    def set_aside_file(self, path: Path, stream: str, reason: str) -> None:
        """Set a whole landing file aside (one the pipeline cannot take): moved into the
        quarantine with the reason, an empty file left in its place, so that the micro-batch
        Spark replays with it reads nothing of it. Counted once for its stream; what it held is
        no longer waiting to be stored."""
        with self._lock:
            self.quarantine_dir.mkdir(parents=True, exist_ok=True)
            digest = hashlib.blake2b(str(path).encode(), digest_size=8).hexdigest()
            base = self.quarantine_dir / ("%s-%s" % (file_safe(self.source), digest))
            try:
                os.replace(path, base.with_suffix(".data"))
            except OSError:          # another file system: copied, then removed
                shutil.copyfile(path, base.with_suffix(".data"))
                path.unlink()
            with open(path, "wb") as placeholder:
                os.fsync(placeholder.fileno())
            self.quarantined[stream] = self.quarantined.get(stream, 0) + 1
            base.with_suffix(".reason.json").write_text(json.dumps(
                {"source": self.source, "stream": stream, "origin": str(path), "line": None, "reason": reason},
                indent=2))
            replace_text(self._counts, json.dumps(self.quarantined))
            log.error("%s: set aside %s: %s", self.source, path, reason)
        if self.acknowledged is not None:
            self.acknowledged.stored([str(path)])

    def _quarantine(self, payload: Payload, report: BatchReport, line: int | None, reason: str) -> None:
        self.quarantined[payload.stream] = self.quarantined.get(payload.stream, 0) + 1
        report.quarantined[payload.stream] = report.quarantined.get(payload.stream, 0) + 1
        log.warning("%s: quarantined %s%s: %s", self.source, payload.origin,
                    "" if line is None else ":%d" % line, reason)
        try:
            self._set_aside(payload, line, reason)
        except OSError as e:     # counted and logged: a full disk must not stop the source
            log.error("%s: could not keep quarantined %s in %s: %s", self.source, payload.origin,
                      self.quarantine_dir, e)

    def _set_aside(self, payload: Payload, line: int | None, reason: str) -> None:
        self.quarantine_dir.mkdir(parents=True, exist_ok=True)
        # Kept as it came: bytes that were not UTF-8 stay those bytes.
        data = payload.text if isinstance(payload.text, bytes) else payload.text.encode("utf-8")
        digest = hashlib.blake2b(("%s\x00%s\x00" % (payload.origin, line)).encode() + data,
                                 digest_size=8).hexdigest()
        base = self.quarantine_dir / ("%s-%s" % (file_safe(self.source), digest))
        tmp = base.with_suffix(".tmp")
        tmp.write_bytes(data)
        os.replace(tmp, base.with_suffix(".data"))
        described = json.dumps({"source": self.source, "stream": payload.stream, "origin": payload.origin,
                                "line": line, "reason": reason}, indent=2)
        base.with_suffix(".reason.json").write_text(described)
        replace_text(self._counts, json.dumps(self.quarantined))
        self._quarantined_bytes += len(data) + len(described)
        self._quarantined_since += 1
        if self._quarantined_bytes >= self.quarantine_max_bytes // 16 or \
                self._quarantined_since >= QUARANTINE_MAX_PAYLOADS // 16:
            self._quarantined_bytes = self._quarantined_since = 0
            _hold_to_budget(self.quarantine_dir, self.quarantine_max_bytes, QUARANTINE_MAX_PAYLOADS)


def _hold_to_budget(directory: Path, max_bytes: int, max_payloads: int) -> None:
    """Delete the oldest quarantined payloads (with their reasons), whichever source set them
    aside, while the folder holds more than `max_bytes` of them or more than `max_payloads`."""
    payloads = []
    for data in directory.glob("*.data"):
        try:
            found = data.stat()
        except FileNotFoundError:
            continue          # another source's writer held the folder to the budget meanwhile
        try:
            reason = data.with_suffix(".reason.json").stat().st_size
        except FileNotFoundError:
            reason = 0
        payloads.append((found.st_mtime_ns, data, found.st_size + reason))
    total, count = sum(size for _, _, size in payloads), len(payloads)
    for _, data, size in sorted(payloads):
        if total <= max_bytes and count <= max_payloads:
            break
        data.unlink(missing_ok=True)
        data.with_suffix(".reason.json").unlink(missing_ok=True)
        total, count = total - size, count - 1

"""Partitioned evaluation, the part that runs on Spark's executors (docs/partitioned-queries.md;
the Spark plumbing is in ingestion.py).

Each element is keyed where it is read (`keyed_elements`: the stream's partition key, a
one-step path over its content), and its key falls in one of the plan's key groups. Spark
groups the elements by key group and keeps, per group, the elements that windows still open
can read, and the last instant evaluated. At every micro-batch `PlanRunner.step` evaluates each
group's instants that the watermark has passed with the query's compiled plan (the same
template, the same `rspu:` functions as the single store) over a store holding that group's
elements and the background, and emits the rows; the driver joins the groups' rows per instant
and applies R2S. Every group sees the same watermark in a micro-batch, so an instant's rows all
come out of one micro-batch. A query over partitioned windows (spec 6.9) is evaluated at each
close of a group's windows instead, and the driver takes every group's latest report at each
of the query's instants (AT).

Executors read the windows as the engine's S2R does (endpoint/engine/s2r.py, a layer above this
one), straight from the windows (translator/windows.py: what each holds at an instant, where it
closes, how far back it reads) and the report policy's declared instants: the partition rules
leave a partitioned query only windows read at their closes and no content change.
"""
from __future__ import annotations

import hashlib
import json
import re
import struct
import zlib
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Callable, NamedTuple

import pyoxigraph as ox

from rspstar.config.schema import default
from rspstar.translator.model import QueryForm
from rspstar.translator.partition import PartitionKey
from rspstar.translator.policy import report_policy
from rspstar.translator.rewrite import RewriteOptions, Template, compile_template
from rspstar.translator.uncertainty import FunctionLibrary
from rspstar.translator.validate import compile_query
from rspstar.translator.vocabulary import timestamps_graph

from .codec import Payload, canonical, decode
from .heap import WORKER_HEAP
from .rdf_input import Element
from .staged import StagedElement, Stamps
from .stream_store import StreamStore
from .terms import select_rows, term_to_ntriples, triple_to_ntriples

# What a key group emits: an instant's rows, the watermark it saw at a micro-batch (with how
# many of its new elements came in late), an element without a key (set aside).
ROWS, MARK, KEYLESS = "rows", "mark", "keyless"
# An evaluation that raised, with the error: the driver fails the query, as the single store does.
FAILED = "failed"
# The windows that held elements of a group at an instant (a query with non-empty strategies
# reports there when the groups' windows together satisfy them).
HOLDS = "holds"
# A query over partitioned windows (spec 6.9): what a group's keys give at an instant where the
# group's windows changed (`at_payload`), and where they stand as a micro-batch begins. Its
# windows' content changes only at the group's own elements, so the driver takes, at each of the
# query's instants, every group's latest such record.
AT = "at"


class Emitted(NamedTuple):
    """One row a key group emits: its kind (ROWS, MARK, KEYLESS, FAILED, HOLDS, AT), the instant
    (a MARK's: the latest instant due; KEYLESS: the element's time), the key group (KEYLESS: the
    stream), the payload (rows or windows as JSON, the error, the set-aside element; a MARK's:
    `mark_payload`; an AT's: `at_payload`) and a count (ROWS, AT: elements read; MARK: elements
    that came in late). Spark's rows have these columns (EMITTED_SCHEMA), in this order."""

    kind: str
    instant: int
    key: str
    payload: str
    count: int


def mark_payload(holds: bool, watermark: int | None) -> str:
    """A MARK's payload: whether the group keeps elements after the micro-batch (a group that
    keeps none runs no more until its keys' next element, and reports nothing meanwhile), and
    the watermark it saw (µs, None before the first), which says what made an instant due."""
    return json.dumps({"holds": holds, "watermark": watermark})


def at_payload(rows: list, closed: list[str], windows: dict[str, tuple[int, int]]) -> str:
    """An AT's payload: the rows, the windows that closed at the instant (none: where the windows
    stand as a micro-batch begins) and the interval each window holding elements lists."""
    return json.dumps({"rows": rows, "closed": closed, "windows": windows})


class AtReport(NamedTuple):
    """An AT's payload read (`at_payload`): the rows, the windows that closed at the instant,
    and the interval [oldest, newest] each window holding elements lists."""

    rows: list
    closed: list[str]
    windows: dict[str, list[int]]


def read_at(payload: str) -> AtReport:
    told = json.loads(payload)
    return AtReport(told["rows"], told["closed"], told["windows"])


def read_mark(payload: str) -> tuple[bool, int | None]:
    """(holds, watermark) of a MARK's payload (a MARK written before they were told: a group
    that holds elements, the watermark unknown)."""
    if not payload:
        return True, None
    told = json.loads(payload)
    return bool(told.get("holds", True)), told.get("watermark")


# Before any instant (a key group of partitioned windows that has seen none due yet).
EARLIEST = -(1 << 62)
# Elements without a key are grouped under this one (no key value is empty: keys are terms).
NO_KEY = ""
# Keys are spread over key groups, each one Spark state: evaluating a group's keys together
# gives the union of their results (the query is partition-safe), and costs one store and one
# evaluation per group and instant instead of one per key (a thousand sectors would be a
# thousand stores at every instant). The groups bound how many executor cores can share a
# query's work.


def key_group(key: str, groups: int) -> str:
    """The key group of a key value (stable across processes and restarts)."""
    return NO_KEY if key == NO_KEY else str(zlib.crc32(key.encode("utf-8")) % groups)


@dataclass(frozen=True)
class PartitionPlan:
    """What executors need of one partitioned query: its text and options (compiled once per
    task), the streams' keys, the background as N-Quads."""

    query_id: str
    text: str
    keys: dict[str, PartitionKey]
    background: bytes = b""
    dialect: str | None = None
    start: str | None = None
    report: str | None = None
    rewrite: RewriteOptions = field(default_factory=RewriteOptions)
    rspu_cache: bool = True
    max_delay: int | None = None       # µs: an instant is due this long after it, watermark or not
    key_groups: int = default("engine.key_groups")
    base: str | None = None            # the IRI the query's relative IRIs resolve against

    def streams(self) -> list[str]:
        return sorted(self.keys)


def element_key(element: Element, key: PartitionKey) -> tuple[str | None, str]:
    """(the element's key as an N-Triples term, "") or (None, why it has none)."""
    predicate = ox.NamedNode(key.predicate)
    values = {term_to_ntriples(q.subject if key.inverse else q.object)
              for q in element.quads if q.predicate == predicate}
    if len(values) == 1:
        return values.pop(), ""
    if not values:
        return None, "no partition key: the element has no %s triple" % key.show()
    return None, ("%d partition keys: the element's %s triples give %s (partitioned evaluation keys an element by one "
                  "value; the single store reads it under each, and a partitioned window holds it in each partition)"
                  % (len(values), key.show(), ", ".join(sorted(values))))


class KeyedElement(NamedTuple):
    """An element keyed (a tuple: tens of thousands are made and unpacked per micro-batch)."""

    key: str
    stream: str
    timestamp: int      # µs
    graph: str
    nquads: str         # the element as canonical N-Quads (its timestamp triple first)
    reason: str = ""    # why it has no key


def keyed_elements(payloads: list[Payload], keys: dict[str, PartitionKey]) -> list[KeyedElement]:
    """The elements of these payloads on keyed streams, each with its key (NO_KEY and the
    reason when it has none). Input that does not parse is left to the ingestion of the same
    source, which sets it aside."""
    found = []
    for payload in payloads:
        for stream, elements in decode(payload).elements.items():
            key = keys.get(stream)
            if key is None:
                continue
            for element in elements:
                value, reason = element_key(element, key)
                found.append(KeyedElement(value if value is not None else NO_KEY, stream, element.timestamp,
                                          element.graph, canonical([element]).decode("utf-8"), reason))
    return found


# A state's blob: chunks of elements, each appended by one micro-batch (older states are one
# zlib stream of them all, still read).
_CHUNKED = b"RSP\x02"
_CHUNK_HEAD = struct.Struct(">qqI")      # the chunk's oldest and newest timestamps, its length
# Past this many chunks a state is rewritten as one (what has expired dropped element by element).
MAX_CHUNKS = 32


@dataclass
class PartitionState:
    """A key group's state: the last instant evaluated for it (`after`), and the elements that
    instants after it can still read (`blob`: compressed JSON, in chunks), with their oldest and
    newest timestamps beside it. A micro-batch appends its new elements as a chunk and drops the
    chunks every window has passed, without reading the others (Spark rewrites every group's
    state at every micro-batch: compressed, windows of N-Quads text are many times smaller).
    A dropped chunk's elements are all expired; a kept one may hold some that are,
    which no window reads."""

    after: int
    oldest: int
    newest: int
    blob: bytes

    @classmethod
    def of(cls, after: int, elements: list[tuple[str, int, str]]) -> "PartitionState | None":
        """(stream, timestamp, N-Quads) elements as a state (None when there are none)."""
        return cls(after, 0, 0, _CHUNKED).appended(elements) if elements else None

    def _chunks(self) -> list[tuple[int, int, bytes]]:
        if not self.blob.startswith(_CHUNKED):      # an older state: its blob is one chunk's data
            return [(self.oldest, self.newest, bytes(self.blob))]
        chunks, at = [], len(_CHUNKED)
        while at < len(self.blob):
            oldest, newest, length = _CHUNK_HEAD.unpack_from(self.blob, at)
            at += _CHUNK_HEAD.size
            chunks.append((oldest, newest, bytes(self.blob[at:at + length])))
            at += length
        return chunks

    @classmethod
    def _joined(cls, after: int, chunks: list[tuple[int, int, bytes]]) -> "PartitionState | None":
        if not chunks:
            return None
        return cls(after, min(c[0] for c in chunks), max(c[1] for c in chunks),
                   _CHUNKED + b"".join(_CHUNK_HEAD.pack(o, n, len(data)) + data for o, n, data in chunks))

    def appended(self, elements: list[tuple[str, int, str]]) -> "PartitionState":
        if not elements:
            return self
        chunk = (min(e[1] for e in elements), max(e[1] for e in elements),
                 zlib.compress(json.dumps(elements).encode("utf-8"), 1))
        chunks = self._chunks() + [chunk]
        return PartitionState._joined(self.after, chunks)

    def expired(self, after: int, bounds: dict[str, int]) -> "PartitionState | None":
        """The state at `after`: the chunks holding an element some window after it can read
        (`bounds`: per stream, the earliest such timestamp); past MAX_CHUNKS, one chunk of
        exactly the elements still readable."""
        floor = min(bounds.values()) if bounds else self.oldest
        chunks = [c for c in self._chunks() if c[1] >= floor]
        if len(chunks) > MAX_CHUNKS:
            kept = [e for e in PartitionState._joined(after, chunks).elements() if e[1] >= bounds.get(e[0], e[1])]
            return PartitionState.of(after, kept)
        return PartitionState._joined(after, chunks)

    def elements(self) -> list[tuple[str, int, str]]:
        return [tuple(e) for _, _, data in self._chunks() for e in json.loads(zlib.decompress(data))]

    def _by_digest(self) -> dict[bytes, tuple[int, int, bytes]]:
        # Equal digests, equal chunks: the same elements appended (a chunk's data is its elements,
        # and its oldest and newest timestamps are theirs).
        return {hashlib.blake2b(data, digest_size=16).digest(): (o, n, data) for o, n, data in self._chunks()}

    def lacking(self, held: "PartitionState", bounds: dict[str, int]) -> list[tuple[str, int, str]] | None:
        """What a store left at state `held` lacks to hold this state's elements that windows can
        still read (`bounds`, at this state's `after`): the elements of the chunks appended since
        (elsewhere), or None when that store cannot be brought here: it was evicted past this
        state (it ran ahead, as the first attempt of a retried micro-batch does), or it holds a
        chunk this state no longer has that windows can still read (chunks rewritten as one)."""
        if held.after > self.after:
            return None
        floor = min(bounds.values()) if bounds else None
        mine, theirs = self._by_digest(), held._by_digest()
        if any(floor is None or newest >= floor for digest, (_, newest, _) in theirs.items() if digest not in mine):
            return None
        return [tuple(e) for digest, (_, _, data) in mine.items() if digest not in theirs
                for e in json.loads(zlib.decompress(data)) if e[1] >= bounds.get(e[0], e[1])]

    def row(self) -> tuple:
        return self.after, self.oldest, self.newest, self.blob


class KeptStores:
    """The key groups' stores a Python worker keeps from one micro-batch to the next, each with
    the state row it was left at: Spark reuses its Python workers, so a group's next micro-batch
    here finds its elements already parsed and loaded, and adds only the new ones. Spark's state
    stays the durable copy: a group whose state is not the row its kept store was left at (it
    ran on another worker meanwhile, or after a restart) is rebuilt from the state, as one met
    the first time. At most `limit` stores, the least recently used closed first."""

    def __init__(self, limit: int):
        self.limit = limit
        self._stores: OrderedDict[tuple, tuple[tuple, StreamStore]] = OrderedDict()
        self.hits = 0
        self.caught_up = 0   # left at another state, brought to the one given
        self.stale = 0       # left at another state, closed (rebuilt from the state)

    def take(self, key: tuple, saved: tuple | None,
             lacking: Callable[[tuple], list[tuple[str, int, str]] | None]) -> StreamStore | None:
        """The store kept for `key` brought to state row `saved` (it is no longer kept: give it
        back with `keep`): as it was when left at `saved`; else with the elements `lacking(the
        row it was left at)` gives added, unless that is None."""
        found = self._stores.pop(key, None)
        if found is None:
            return None
        row, store = found
        if saved is not None and row == tuple(saved):
            self.hits += 1
            return store
        missing = lacking(row) if saved is not None else None
        if missing is None:
            self.stale += 1
            store.close()
            return None
        if missing:
            _add(store, missing)
        self.caught_up += 1
        return store

    def keep(self, key: tuple, row: tuple, store: StreamStore) -> None:
        self._stores[key] = (row, store)
        while len(self._stores) > self.limit:
            self._stores.popitem(last=False)[1][1].close()

    def __len__(self) -> int:
        return len(self._stores)


# The stores this Python worker process keeps (the one state that outlives a task in a
# worker; PartitionFunction passes it to the plan's runner). Enough for every key group of a
# few queries at the default number of groups.
WORKER_STORES = KeptStores(4 * default("engine.key_groups"))


class PlanRunner:
    """A plan compiled for one task; evaluates a key's instants over its elements, in the
    group's store kept by `kept` when there is one."""

    def __init__(self, plan: PartitionPlan, kept: KeptStores | None = None):
        self.plan = plan
        self.kept = kept
        self.query = compile_query(plan.text, dialect=plan.dialect, start=plan.start, base=plan.base)
        self.policy = report_policy(self.query, plan.report)
        self.template: Template = compile_template(self.query, plan.rewrite)
        self.functions = FunctionLibrary(cache=plan.rspu_cache)
        # Partitioned windows (the rules allow them only alone): the last n elements of each key
        # stay in them however old, and they change only at their own elements.
        self.keyed = all(w.keyed for w in self.query.windows.values())
        # How long after an element some window can still hold it: a range and a step, and a
        # periodic instant reading a close up to a period later.
        period = self.query.computed_every or 0
        self.reach = None if self.keyed else max(w.range + w.step for w in self.query.windows.values()) + period
        # An instant is complete once the watermark passes it by this much (a window holding the
        # elements at its close instant waits for the stream past it).
        self.lag = self.policy.complete_through(0)
        # A kept store serves the same plan only (another text or background under the same
        # query id is another store).
        self.identity = hashlib.blake2b(repr((plan.query_id, plan.text, plan.keys, plan.dialect, plan.start,
                                              plan.report, plan.rewrite, plan.key_groups, plan.base)).encode()
                                        + plan.background, digest_size=16).digest()

    def due_through(self, watermark: int | None, processing_time: int) -> int | None:
        """The latest instant due: every stream complete through it (the watermark), or
        `max_delay` of processing time past it."""
        late_bound = processing_time - self.plan.max_delay if self.plan.max_delay is not None else None
        candidates = [w for w in (None if watermark is None else watermark - self.lag, late_bound) if w is not None]
        return max(candidates) if candidates else None

    def step(self, group: str, new: list[KeyedElement], saved: tuple | None, watermark: int | None,
             processing_time: int) -> tuple[list[tuple], tuple | None]:
        """One micro-batch of one key group: (what it emits as (kind, instant, group, payload,
        count), the state to keep as a row, or None to drop it)."""
        if group == NO_KEY:
            return [Emitted(KEYLESS, e.timestamp, e.stream, json.dumps({"graph": e.graph, "reason": e.reason,
                                                                        "nquads": e.nquads}), 1) for e in new], None
        state = PartitionState(*saved) if saved is not None else None
        store = None
        if self.kept is not None:
            # Spark gives a group's task to any Python worker of the executor: the store kept
            # here was often left a micro-batch or more behind, by the same state less the
            # chunks appended elsewhere since.
            store = self.kept.take((self.identity, group), saved, lambda row: state.lacking(
                PartitionState(*row), {} if self.keyed else self._retention(state.after, None)))
        if state is None and not new:
            return [Emitted(MARK, -1, group, mark_payload(False, watermark), 0)], None
        late = sum(1 for e in new if watermark is not None and e.timestamp < watermark)
        through = self.due_through(watermark, processing_time)
        arrived = [(e.stream, e.timestamp, e.nquads) for e in new]
        if self.keyed:
            # Each of the windows' closes due since the last batch's, and where they stood
            # before them (late elements included). A late element's own close may come before
            # the last batch's: the group reports from there, which the driver evaluates when
            # after its latest instant, as the single store does. The store is kept at every
            # batch (retention reads it). A new group reports its closes from the first.
            after = state.after if state is not None else EARLIEST
            low = min([after] + [e.timestamp - 1 for e in new if e.timestamp <= after])
            if store is None:
                store = self._store((state.elements() if state is not None else []) + arrived)
            elif arrived:
                _add(store, arrived)
            instants = self._changes(store, low, through) if through is not None else []
        else:
            # No instant up to the earliest element reads it.
            after = state.after if state is not None else min(e.timestamp for e in new)
            newest = max([e.timestamp for e in new] + ([state.newest] if state is not None else []))
            # Past its newest element's reach a group's windows are empty: no rows to find there
            # (a group idle for a day must not walk every instant of it).
            instants = [(instant, None) for instant in self.policy.fixed_instants(
                after, min(through, newest + self.reach))] if through is not None else []
            # A store is built when an instant is due (the state holds the elements until then);
            # a kept one takes the new elements at once.
            if store is None and instants:
                store = self._store((state.elements() if state is not None else []) + arrived)
            elif store is not None and arrived:
                _add(store, arrived)
        emitted: list[Emitted] = []
        for instant, closed in instants:
            try:
                rows, count, holding, shown = self._evaluate(store, instant)
            except Exception as e:  # the driver fails the query; the group keeps what it had
                store.close()
                emitted += [Emitted(FAILED, instant, group, "%s: %s" % (type(e).__name__, e), 0),
                            Emitted(MARK, through, group, mark_payload(True, watermark), late)]
                kept = state if state is not None else PartitionState.of(after, arrived)
                return emitted, kept.row()
            if closed is not None:
                if closed:
                    emitted.append(Emitted(AT, instant, group, at_payload(rows, closed, shown), count))
                elif shown:     # where the windows stand: as of their latest close
                    emitted.append(Emitted(AT, max(newest for _, newest in shown.values()), group,
                                           at_payload(rows, [], shown), count))
                continue
            if rows:
                emitted.append(Emitted(ROWS, instant, group, json.dumps(rows), count))
            if holding and self.policy.non_empty:
                emitted.append(Emitted(HOLDS, instant, group, json.dumps(sorted(holding)), 0))
        if through is not None:
            after = max(after, through)
        bounds = self._retention(after, store if self.keyed else None)
        state = state.appended(arrived) if state is not None else PartitionState.of(after, arrived)
        state = state.expired(after, bounds)
        emitted.append(Emitted(MARK, through if through is not None else -1, group,
                               mark_payload(state is not None, watermark), late))
        if store is None:
            return emitted, (state.row() if state is not None else None)
        if state is None or self.kept is None:
            store.close()
            return emitted, (state.row() if state is not None else None)
        for stream, bound in bounds.items():
            store.evict_before(stream, bound)
        store.maybe_compact()
        self.kept.keep((self.identity, group), state.row(), store)
        return emitted, state.row()

    def _store(self, elements: list[tuple[str, int, str]]) -> StreamStore:
        store = StreamStore()
        if self.plan.background:
            store.background.load(self.plan.background, ox.RdfFormat.N_QUADS, "background")
        _add(store, elements)
        return store

    def _changes(self, store: StreamStore, after: int, through: int) -> list[tuple[int, list[str]]]:
        """A group of partitioned windows: `after` with no window closing (where the windows
        stand then: as of their latest close up to it), then the instants in (after, through]
        where its windows close (an element of theirs is there), each with the windows that do.
        (Where the windows stand goes even when nothing of theirs is due: another group's late
        element may make an instant due before them.)"""
        found = [(after, [])]
        t = after
        while True:
            closes = {w.iri: w.next_close(t, store) for w in self.query.windows.values()}
            t = min((c for c in closes.values() if c is not None), default=None)
            if t is None or t > through:
                return found
            found.append((t, sorted(iri for iri, c in closes.items() if c == t)))

    def _retention(self, after: int, store: StreamStore | None) -> dict[str, int]:
        """Per stream, the earliest timestamp an evaluation after `after` can read: what the
        windows reach at the next instant, or at `after` when the next instant depends on the
        elements (the rules leave a partitioned query no content change)."""
        instant = None if self.policy.arrivals else self.policy.next_fixed_instant(after)
        instant = after if instant is None else instant
        bounds: dict[str, int] = {}
        for w in self.query.windows.values():
            reach = w.earliest_reachable(instant, store)
            bounds[w.stream] = min(reach, bounds.get(w.stream, reach))
        return bounds

    def _evaluate(self, store: StreamStore, instant: int) -> tuple[list, int, set[str], dict[str, tuple[int, int]]]:
        """What the group's keys give at `instant` (SELECT: rows; CONSTRUCT: the triples as
        N-Triples lines; ASK: [true] or nothing), the elements their windows hold, which windows
        hold some, and the interval each lists."""
        contents = {w.iri: c for w in self.query.windows.values() if (c := w.content_at(instant, store)) is not None}
        elements = {w: content.select(self.query.windows[w].stream, store) for w, content in contents.items()}
        count = sum(len(e) for e in elements.values())
        if not count:
            return [], 0, set(), {}
        holding = {w for w, found in elements.items() if found}
        shown = {w: contents[w].shown for w in holding}
        return store.evaluate(self.template, elements, self.functions, _RESULTS[self.query.form]), count, holding, shown


# An element's first line in canonical N-Quads: its timestamp triple (graph, predicate, literal),
# as codec.canonical writes it for a timestamp with nothing to escape.
_STAMP_LINE = re.compile(r'<([^<>"{}|^`\\\s]*)> <([^<>"{}|^`\\\s]*)> "([^"\\\n]*)"\^\^<([^<>"{}|^`\\\s]*)> \.')


def _add(store: StreamStore, elements: list[tuple[str, int, str]]) -> None:
    """Load (stream, timestamp, canonical N-Quads) elements into a key group's store: each
    stream's in one Oxigraph load, the element's name and timestamp read off its first line;
    a stream with an element written otherwise is parsed in Python."""
    by_stream: dict[str, list[tuple[int, str]]] = {}
    for stream, timestamp, text in elements:
        by_stream.setdefault(stream, []).append((timestamp, text))
    for stream, items in by_stream.items():
        loaded = _stored_form(stream, items)
        if loaded is not None:
            store.publish(stream, store.stage_stored_form({stream: loaded})[stream])
            continue
        decoded = decode(Payload(stream, "nquads", "partition", "".join(text for _, text in items), 0))
        for found, elements_of in decoded.elements.items():
            store.add_elements(found, elements_of)


def _stored_form(stream: str, items: list[tuple[int, str]]) -> tuple[bytes, list[StagedElement]] | None:
    """Elements in canonical N-Quads as the store holds them (codec.stored_form) with their
    staged entries, or None when one does not start with a plain timestamp triple."""
    ts_graph = " <%s> ." % timestamps_graph(stream)
    stamps = Stamps()
    staged, parts = [], []
    for timestamp, text in items:
        end = text.find("\n")
        first = _STAMP_LINE.fullmatch(text, 0, end if end >= 0 else len(text))
        if first is None:
            return None
        graph, predicate, value, datatype = first.groups()
        staged.append(StagedElement(graph, timestamp, stamps.of_text(predicate, value, datatype)))
        parts += [text[:first.end() - 2], ts_graph, text[first.end():]]
    return "".join(parts).encode("utf-8"), staged


# A group's results as JSON-ready lists, per query form; the driver unites the groups' lists.
_RESULTS = {QueryForm.SELECT: select_rows,
            QueryForm.CONSTRUCT: lambda triples: sorted({triple_to_ntriples(t) for t in triples}),
            QueryForm.ASK: lambda answer: [True] if bool(answer) else []}


# Spark's side of a partition, as applyInPandasWithState and mapInPandas call it (pandas frames
# in and out; the Spark plumbing itself is in ingestion.py).
KEYED_SCHEMA = "key_group string, elements binary, event_time timestamp"
EMITTED_SCHEMA = "kind string, instant long, key string, payload string, count long"
STATE_SCHEMA = "after long, oldest long, newest long, blob binary"
_EMITTED_COLUMNS = list(Emitted._fields)
# A key group's elements from one frame travel as one row, not a row each: Spark's JVM moves,
# shuffles and hands to Python a row at a cost per row, and pandas builds each row as objects;
# packed, a thousand elements cost what a few rows do. A pack is JSON compressed (N-Quads text
# shrinks several times, and every byte is copied through Arrow and the shuffle); it holds at
# most this many characters of elements before compression (a larger group's elements are
# several rows), well under Arrow's 2 GiB per column.
PACK_CHARS = 8 << 20


def packed(found: list[KeyedElement], groups: int) -> list[tuple[str, bytes, int]]:
    """Keyed elements as (key group, its elements as one compressed JSON text, their newest timestamp)
    rows: one per key group, or a few for a group past PACK_CHARS."""
    rows: list[tuple[str, bytes, int]] = []
    by_group: dict[str, list[KeyedElement]] = {}
    for e in found:
        by_group.setdefault(key_group(e.key, groups), []).append(e)
    for group, elements in by_group.items():
        start, size = 0, 0
        for at, e in enumerate(elements):
            # About what the element takes in the JSON text (escapes aside).
            weight = len(e.nquads) + len(e.graph) + len(e.key) + len(e.stream) + len(e.reason) + 40
            if at > start and size + weight > PACK_CHARS:
                rows.append(_pack(group, elements[start:at]))
                start, size = at, 0
            size += weight
        rows.append(_pack(group, elements[start:]))
    return rows


def _pack(group: str, elements: list[KeyedElement]) -> tuple[str, bytes, int]:
    return (group, zlib.compress(json.dumps(elements).encode("utf-8"), 1),
            max(e.timestamp for e in elements))


def unpacked(pack: bytes) -> list[KeyedElement]:
    """The elements of a pack (`packed`)."""
    return [KeyedElement(*fields) for fields in json.loads(zlib.decompress(pack))]


class KeyedFrames:
    """mapInPandas: a source's rows (stream, origin, text, ingest_time) to keyed elements,
    packed per key group (`packed`); a row's event time is its newest element's, so Spark's
    watermark is what it would be over the elements themselves."""

    def __init__(self, payloads, keys: dict[str, PartitionKey], groups: int):
        self.payloads = payloads     # rows -> payloads, as the source reads them
        self.keys = keys
        self.groups = groups

    def __call__(self, frames):
        import pandas as pd
        WORKER_HEAP.settle()
        for frame in frames:
            rows = packed(keyed_elements(self.payloads(frame.to_dict("records")), self.keys), self.groups)
            out = pd.DataFrame(rows, columns=["key_group", "elements", "newest"])
            out["event_time"] = pd.to_datetime(out.pop("newest").astype("int64"), unit="us", utc=True)
            yield out


class PartitionFunction:
    """applyInPandasWithState: one key group's micro-batch. The plan is compiled once per task."""

    # Every group with state runs at every micro-batch (its timeout is this short), so all
    # groups see an instant's watermark in the same micro-batch.
    TIMEOUT_MS = 1

    def __init__(self, plan: PartitionPlan):
        self.plan = plan
        self._runner: PlanRunner | None = None

    def __getstate__(self):
        return {"plan": self.plan, "_runner": None}

    def __call__(self, key, frames, state):
        import pandas as pd
        if self._runner is None:
            WORKER_HEAP.settle()
            self._runner = PlanRunner(self.plan, WORKER_STORES)
        new = [e for frame in frames for pack in frame["elements"] for e in unpacked(pack)]
        watermark_ms = state.getCurrentWatermarkMs()
        saved = tuple(state.get) if state.exists else None
        emitted, keep = self._runner.step(key[0], new, saved, watermark_ms * 1000 if watermark_ms > 0 else None,
                                          state.getCurrentProcessingTimeMs() * 1000)
        if keep is None:
            state.remove()
        else:
            state.update(keep)
            state.setTimeoutDuration(self.TIMEOUT_MS)
        yield pd.DataFrame(emitted, columns=_EMITTED_COLUMNS)

"""Writing whole RDF documents into the stream store: a TriG or N-Quads document's elements
staged in one write (`Documents.stage`), or, for a store its owner can throw away (a replay's),
scanned and written at once and, when the document is large, written part by part in the
background while the windows over the parts already written are evaluated
(`Documents.stage_optimistically`)."""
from __future__ import annotations

import itertools
import operator
import queue
import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING, Iterable, Iterator

import pyoxigraph as ox

from rspstar.translator.errors import TemporalValueError
from rspstar.translator.vocabulary import PROV_GENERATED_AT_TIME, timestamps_graph

from .document_parts import iter_document_parts
from .errors import DuplicateElementError, RdfInputError, StoreError
from .rdf_input import check_rdf_nesting, instant_of, instants_of, read_elements, scan_document
from .staged import PartWrite, StagedColumns, StagedElement, Stamps

if TYPE_CHECKING:
    from .writers import StoreWriting

# A replay writes a stream file in parts of about this size (stage_optimistically;
# bench/out/NOTES.md#part-bytes).
PART_BYTES = 1 << 20


class OptimisticLoadFailed(StoreError):
    """An optimistic document load met something that needs the careful path; the store may
    hold part of the document and must be rebuilt by its owner."""


@dataclass
class DocumentResult:
    columns: StagedColumns          # the staged elements, in time order
    untimed_graphs: list[str]
    ignored_default_triples: int

    @property
    def staged(self) -> list[StagedElement]:
        """The staged elements, in time order (made from the columns at each call)."""
        return self.columns.elements()


class Documents:
    """The document writes of one stream store."""

    def __init__(self, store: "StoreWriting"):
        self.store = store

    def stage(self, stream: str, data: bytes | str, fmt: ox.RdfFormat, source: str,
                       timestamp_predicate: str = PROV_GENERATED_AT_TIME,
                       processing_time: int | None = None) -> DocumentResult:
        """Write every element of a TriG / N-Quads document; nothing is written if the
        document has a syntax error (RdfInputError with line and column) or reuses a graph
        name. Graphs without a timestamp get `processing_time`, or are reported untimed."""
        scan = scan_document(data, fmt, source, timestamp_predicate)
        if scan.needs_rewriting:
            result = read_elements(data, source, fmt, timestamp_predicate, processing_time)
            staged = self.store.stage_elements(stream, result.elements, timestamp_predicate)
            return DocumentResult(StagedColumns.of(staged), result.untimed_graphs, result.ignored_default_triples)
        staged = _staged_from(scan.stamps, source, timestamp_predicate, keep_stamps=self.store.remove_evicted)
        with self.store.lock:
            self.store.check_new(staged.graphs)
            try:
                self._load_document(stream, data, fmt)
            except SyntaxError as e:  # pragma: no cover - the scan parsed the same bytes
                raise RdfInputError(str(e), source) from None
            self.store.mark_staged(staged.graphs)
        return DocumentResult(staged, [], 0)

    def _load_document(self, stream: str, data: bytes | str, fmt: ox.RdfFormat) -> None:
        """One Rust call parses and writes a whole document; its default graph (the timestamp
        triples, nothing else: checked by the scan) goes to the stream's timestamps graph."""
        self.store.write("load", data, fmt, ox.NamedNode(timestamps_graph(stream)))

    def stage_optimistically(self, stream: str, data: bytes | str, fmt: ox.RdfFormat, source: str,
                                      timestamp_predicate: str = PROV_GENERATED_AT_TIME,
                                      part_bytes: int | None = None) -> DocumentResult:
        """`stage` with the validating scan and Oxigraph's write running at once
        (Oxigraph releases the GIL, so they share the two cores: the scan costs nothing).

        A document of at least two `part_bytes` (PART_BYTES when not given) that can be cut
        (iter_document_parts) is written part by part in the background, each part as soon as
        it is cut: its elements come back once every part is scanned, each naming the part
        that holds it, and publishing one waits for that part. Windows over the first parts
        are evaluated while later ones are written (one Oxigraph load cannot be spread over
        cores, but reads go on beside it).

        Only for a store its owner can throw away (a replay's): if the document turns out to
        need rewriting or reuses a graph name, part of it may already be written, and
        OptimisticLoadFailed tells the owner to rebuild the store with `stage`."""
        if isinstance(data, str):
            data = data.encode()
        parts = iter_document_parts(data, fmt, part_bytes or PART_BYTES)
        first, second = next(parts), next(parts, None)
        if second is not None:
            return self._stage_parts(stream, itertools.chain((first, second), parts), fmt, source,
                                     timestamp_predicate)
        try:
            check_rdf_nesting(data, source, fmt)     # before Oxigraph's parser, which runs below at once
        except RdfInputError as e:
            raise OptimisticLoadFailed(str(e)) from e
        failure: list[BaseException] = []

        def write() -> None:
            try:
                self._load_document(stream, data, fmt)
            except BaseException as e:  # reported below, after the scan
                failure.append(e)

        with self.store.lock:
            writer = threading.Thread(target=write, name="oxigraph-load")
            writer.start()
            try:
                scan = scan_document(data, fmt, source, timestamp_predicate, nesting_checked=True)
                # Reading the timestamps also runs beside the write
                # (bench/out/NOTES.md#timestamps-beside-the-write).
                staged = None if scan.needs_rewriting else _staged_from(
                    scan.stamps, source, timestamp_predicate, keep_stamps=self.store.remove_evicted)
            finally:
                writer.join()
            if failure:
                raise OptimisticLoadFailed("write of %s failed: %s" % (source, failure[0]))
            if staged is None:
                raise OptimisticLoadFailed("%s needs rewriting before it can be stored" % source)
            try:
                self.store.check_new(staged.graphs)
            except DuplicateElementError as e:
                raise OptimisticLoadFailed(str(e)) from e
            self.store.mark_staged(staged.graphs)
        return DocumentResult(staged, [], 0)

    def _stage_parts(self, stream: str, parts: Iterator[bytes], fmt: ox.RdfFormat, source: str,
                     timestamp_predicate: str) -> DocumentResult:
        to_write: queue.SimpleQueue = queue.SimpleQueue()
        abandoned = threading.Event()

        def write_parts() -> None:
            # Without the store's lock, which the runner takes to publish, move watermarks and
            # select windows: it goes on beside the write (Generations keeps writes and
            # rebuilds apart). A part that fails fails every part after it (they may
            # continue its elements).
            error: StoreError | None = None
            for k, (part, write) in enumerate(iter(to_write.get, None)):
                if error is None and abandoned.is_set():
                    error = OptimisticLoadFailed("the staging of %s was abandoned" % source)
                if error is None:
                    try:
                        self._load_document(stream, part, fmt)
                    except BaseException as e:  # reported to whoever publishes from this part
                        error = StoreError("writing part %d of %s failed: %s" % (k + 1, source, e))
                write.finish(error)

        with self.store.lock:
            threading.Thread(target=write_parts, name="oxigraph-load-parts", daemon=True).start()
            read = _PartsScan(fmt, source, timestamp_predicate, keep_stamps=self.store.remove_evicted)
            try:
                for part in parts:
                    # Written as soon as it is cut (and checked: a part starts and ends outside
                    # any nesting), read meanwhile, then let go of here: a part is held until
                    # both are done, not the whole document twice.
                    check_rdf_nesting(part, source, fmt)
                    write = PartWrite()
                    to_write.put((part, write))
                    read.add(part, write)
                staged = read.staged()
                self.store.check_new(staged.graphs)
            except (RdfInputError, DuplicateElementError) as e:
                # The careful path reads the whole document again and reports the error
                # where it is in it, not in a part.
                abandoned.set()
                raise OptimisticLoadFailed(str(e)) from e
            except BaseException:
                abandoned.set()
                raise
            finally:
                to_write.put(None)
            self.store.mark_staged(staged.graphs)
        return DocumentResult(staged, [], 0)


class _PartsScan:
    """The elements of a document cut into parts, read part by part, each with the last part
    it is in (its timestamp and its content may be in different parts).

    Kept by columns, not element by element: an element is taken to be held by the part its
    timestamp is first in, which `later` overrides for the few elements a later part holds
    too (their content continues there, or their timestamp is repeated). A part's graphs
    without their timestamp in that part are all that is looked at one by one
    (bench/out/NOTES.md#replay-readings)."""

    def __init__(self, fmt: ox.RdfFormat, source: str, timestamp_predicate: str, keep_stamps: bool = True):
        self.fmt, self.source, self.timestamp_predicate = fmt, source, timestamp_predicate
        self.keep_stamps = keep_stamps
        self.stamps: dict = {}          # graph -> timestamp literal, in order of first appearance
        self.first: list = []           # (part, how many timestamps it is the first to give)
        self.later: dict = {}           # graph -> the last part holding it, past its first timestamp's
        self.unstamped: set = set()     # graphs with content in a part without their timestamp
        self.other = 0
        self.unnamed = False

    def add(self, part: bytes, write: PartWrite) -> None:
        # Its nesting was checked before it went to the writer (_stage_parts).
        scan = scan_document(part, self.fmt, self.source, self.timestamp_predicate, nesting_checked=True)
        stamps, found = self.stamps, scan.stamps
        repeated = stamps.keys() & found.keys()
        if any(stamps[graph] != found[graph] for graph in repeated):
            raise RdfInputError("a graph has two timestamps", self.source)
        unstamped = scan.graphs.keys() - found.keys()
        if unstamped:
            self.unstamped |= unstamped
            # Content continued here of an element whose timestamp came before.
            self.later.update(dict.fromkeys(unstamped & stamps.keys(), write))
        if repeated:
            self.later.update(dict.fromkeys(repeated, write))
        before = len(stamps)
        stamps.update(found)
        self.first.append((write, len(stamps) - before))
        self.other += scan.other_default_triples
        self.unnamed = self.unnamed or scan.unnamed

    def staged(self) -> StagedColumns:
        if self.other or self.unnamed or not self.unstamped <= self.stamps.keys():
            raise OptimisticLoadFailed("%s needs rewriting before it can be stored" % self.source)
        writes = itertools.chain.from_iterable(itertools.repeat(write, count) for write, count in self.first)
        if self.later:
            writes = map(self.later.get, self.stamps, writes)
        return _staged_from(self.stamps, self.source, self.timestamp_predicate, writes, self.keep_stamps)


def _staged_from(stamps: dict, source: str, timestamp_predicate: str, writes: Iterable | None = None,
                 keep_stamps: bool = True) -> StagedColumns:
    """The elements of a scanned document's timestamps (graph name -> literal), in time order;
    `writes` gives the part being written that holds each, in the order of `stamps`. Without
    `keep_stamps` (a store that never removes evicted elements) an element carries no stamp:
    the index would keep a literal and a tuple per element, each walked by every full
    collection of Python's cycle collector for as long as the element is held
    (bench/out/NOTES.md#replay-collections)."""
    literals = list(stamps.values())
    try:
        instants = instants_of(list(map(_value, literals)))
    except (AttributeError, TemporalValueError):
        # Name the element whose timestamp is wrong.
        instants = [instant_of(literal, ox.NamedNode(graph), source) for graph, literal in stamps.items()]
    if keep_stamps:
        shared = Stamps()
        ts_predicate = ox.NamedNode(timestamp_predicate)
        kept = [shared(ts_predicate, literal) for literal in literals]
    else:
        kept = [None] * len(literals)
    # Whole columns, made in C: a replay stages every element of its files at once.
    return StagedColumns(list(stamps), instants, kept,
                         list(writes) if writes is not None else [None] * len(literals)).in_time_order()


_value = operator.attrgetter("value")

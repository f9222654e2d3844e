"""The `rspstar` command line."""
from __future__ import annotations

import argparse
import collections
import contextlib
import gc
import json
import os
import resource
import sys
from dataclasses import replace
from pathlib import Path

from rspstar.store.errors import StoreError
from rspstar.translator.admission import NEVER_EVALUATED
from rspstar.translator.constants import parameterized
from rspstar.translator.errors import QuerySyntaxError, TemporalValueError, TranslatorError
from rspstar.translator.temporal import parse_instant
from rspstar.translator.admission import admit
from rspstar.translator.options import QueryOptions, command_line_help, r2r_plan
from rspstar.translator.rewrite import compile_template
from rspstar.translator.syntax import check_stream_iri
from rspstar.translator.validate import compile_query
from rspstar.translator.warnings import background_warnings

from .allocator import UNDER_JEMALLOC, use_jemalloc
from rspstar.config import schema

from .config import DEFAULT_CONFIG, load_config
from .engine.errors import EndpointError, UsageError
from .engine.runner import EngineConfig
from .engine.replay import Replay, ReplayInput

EXIT_INPUT_ERROR = 2
_UNLIMITED = EngineConfig(max_range=2**62, max_reports_per_second=float("inf"), max_elements=2**62,
                          federation_allowed=None)
EXIT_QUERY_FAILED = 3
EXIT_INTERRUPTED = 130      # as a shell reports a command ended by Ctrl-C (128 + SIGINT)
_REPLAY_EXIT_STATUS = """exit status:
  0  every query was evaluated at every instant
  2  the input was refused: a query, stream file, option or instant, or the folder the
     results go in refused them (nothing is written)
  3  a query failed during the replay: the error goes to standard error, the results it gave
     before are written, and the other queries run to the end
  130  interrupted (Ctrl-C): no --out or --out-dir file is written"""


def _key_value(text: str, what: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key or not value:
        raise UsageError("%s must be KEY=VALUE, got %r" % (what, text))
    return key, value


def _instant(text: str, what: str) -> int:
    try:
        return parse_instant(text)
    except TemporalValueError as e:
        raise UsageError("%s: %s" % (what, e)) from None


def _create_beside(path: Path) -> tuple[int, Path]:
    """A new file to write `path` in before it is renamed into place, open for writing. Created
    as any new file is, with the mode the umask gives (a temporary file's owner-only mode would
    become the results'), and under a name of its own: one left by an earlier run that was
    killed, or made meanwhile, is never written over. Its name begins as the results' and is
    never much longer: the results' first 48 characters (at most 192 bytes), so a name the
    folder takes for the results it takes for this one too."""
    while True:
        name = path.with_name(".%s.%s.tmp" % (path.name[:48], os.urandom(4).hex()))
        try:
            return os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o666), name
        except FileExistsError:
            continue


def _results_file(path: Path) -> Path:
    """The file results named `path` are renamed into: where a symbolic link of that name
    points (as a shell's `>` writes), the link kept. A folder there could not take them: said
    before the replay runs, not once it has (and, with --out-dir, other queries' results put
    in place)."""
    if path.is_symlink():
        path = Path(os.path.realpath(path))
    if path.is_dir():
        raise UsageError("cannot write the results in %s: %s is a folder" % (path.parent, path.name))
    return path


def _write_atomically(path: Path, lines) -> None:
    """Write all lines or nothing: a failed replay never leaves a half-written --out. A folder
    or disk that refuses the file is a UsageError naming it."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path = _results_file(path)
        fd, tmp = _create_beside(path)
    except OSError as e:
        raise _unwritable(path.parent, e) from None
    out = os.fdopen(fd, "w", encoding="utf-8")
    try:
        for line in lines:          # (the engine's own errors pass as they come)
            try:
                out.write(line)
            except OSError as e:
                raise _unwritable(path.parent, e) from None
        try:
            out.close()
            os.replace(tmp, path)
        except OSError as e:
            raise _unwritable(path.parent, e) from None
    except BaseException:
        with contextlib.suppress(OSError):     # (what it would still write is not wanted)
            out.close()
        os.unlink(tmp)
        raise


def _read_query(path: str) -> str:
    try:
        return Path(path).read_text(encoding="utf-8")
    except OSError as e:
        raise UsageError("cannot read query %s: %s" % (path, e.strerror)) from None


def _file_iri(path: str | Path) -> str:
    """The `file:` IRI a query file was read from: what its relative IRIs resolve against
    before any BASE of its own, unless the option base gives another."""
    return Path(path).resolve().as_uri()


def _file_iris(paths: list[Path]) -> list[str]:
    """_file_iri of each path, each folder resolved once: a file that is no symbolic link
    resolves to its folder's resolution and its name (a thousand query files in one folder
    are not each resolved component by component)."""
    folders: dict[Path, Path] = {}
    iris = []
    for path in paths:
        if path.is_symlink() or path.name in ("", ".", ".."):
            iris.append(_file_iri(path))
            continue
        folder = folders.get(path.parent)
        if folder is None:
            folder = folders[path.parent] = path.parent.resolve()
        iris.append((folder / path.name).as_uri())
    return iris


def _base_described(query, given: str | None) -> dict:
    """The base IRI the query's relative IRIs resolve against and where it came from."""
    body = query.body
    if body.base is None:
        origin = "none: the query has no BASE and was given no base, so a relative IRI is refused"
    elif body.base != query.base:
        origin = "the query's BASE" + ("" if query.base is None else " (resolved against %s, the %s)" % (
            query.base, "option base" if given else "query file's IRI"))
    else:
        origin = "option base" if given else "the query file's IRI (the query has no BASE)"
    return {"base": body.base, "base_from": origin}


# Allocations between two collections of the youngest generation during a replay.
REPLAY_YOUNG_COLLECTION = 20_000


def cmd_replay(args) -> int:
    # The command's modules, and what the replay sets up (its queries, their groups, the store),
    # live to its end: Python's full collections would otherwise scan them again and again as a
    # thousand queries are compiled and while the windows run. Frozen out of the collector's
    # sight (twice: before compiling, and once set up) until the replay ends, then given back
    # (a caller in the same process, a test, has its garbage collected as before). The youngest
    # generation is collected every 20,000 allocations rather than 700: what a query's setup and
    # its closes allocate mostly lives on (its query, its records until written), and each
    # collection walks it again (bench/out/NOTES.md#thousand-files-engine-and-disk).
    # Giving back gives back every frozen object: a caller that froze its own (a server before
    # it forks) keeps them frozen only if the replay freezes nothing, so then it does not.
    thresholds = gc.get_threshold()
    freezing = gc.get_freeze_count() == 0
    if freezing:
        gc.freeze()
    gc.set_threshold(REPLAY_YOUNG_COLLECTION, *thresholds[1:])
    try:
        return _replay(args, freezing)
    except KeyboardInterrupt:
        # Ctrl-C: where the engine was when it came is no concern of the user's; each results
        # file begun was removed on the way out.
        print("rspstar replay: interrupted" + (": no results written" if args.out or args.out_dir else ""),
              file=sys.stderr)
        return EXIT_INTERRUPTED
    finally:
        gc.set_threshold(*thresholds)
        if freezing:
            gc.unfreeze()


def _replay(args, freezing: bool = True) -> int:
    files = [Path(q) for q in args.query]
    names = [f.stem for f in files]     # what each query's results and messages are named after
    for flag, given in (("--out", args.out), ("--out-dir", args.out_dir)):
        if given == "":             # (`--out "$RESULTS"`, the variable unset: not "no --out")
            raise UsageError("%s needs a name, got an empty one" % flag)
    if len(files) > 1 and not args.out_dir:
        raise UsageError("several queries need --out-dir (one <query file stem>.jsonl each)")
    if args.out and args.out_dir:
        raise UsageError("--out and --out-dir exclude each other")
    if len(set(names)) < len(names):
        repeated = next(i for i in names if names.count(i) > 1)
        raise UsageError("two query files are named %s.*: their results would share %s.jsonl" % (repeated, repeated))
    # The engine's id of each query is its place in the command: a file's name (spaces, accents,
    # any length) is its author's, not always an id the engine takes.
    ids = ["q%d" % k for k in range(len(files))]
    name_of = dict(zip(ids, names))
    options = dict(_key_value(o, "--option") for o in args.option)
    parsed = QueryOptions.from_pairs(options)
    streams = []
    for item in args.stream:
        iri, file = _key_value(item, "--stream")
        streams.append((check_stream_iri(iri, "--stream"), Path(file)))
    texts = {query_id: _read_query(str(file)) for query_id, file in zip(ids, files)}
    bases = dict(zip(ids, _file_iris(files)))
    for _, file in streams + ([("", Path(args.background))] if args.background else []):
        if not file.is_file():
            raise UsageError("no such file: %s" % file)
    spec = ReplayInput(texts, streams, _instant(args.start, "--from"), _instant(args.end, "--to"),
                       Path(args.background) if args.background else None, options, bases)
    try:
        # Each query compiled once, by the replay, which registers what it compiled: a thousand
        # query files are not compiled twice (bench/out/NOTES.md#replay-compiled-once).
        replay = Replay(spec)
    except QuerySyntaxError as e:
        file = next((f for query_id, f in zip(ids, files)
                     if _fails(texts[query_id], e, parsed, bases[query_id], streams)), None)
        if file is None:
            raise
        print("%s:%d:%d: %s" % (file, e.line, e.column, e.message), file=sys.stderr)
        return EXIT_INPUT_ERROR
    if freezing:
        gc.freeze()
    for query_id, file in zip(ids, files):
        for warning in replay.queries[query_id].warnings:
            print("%s:%s" % (file, warning.replace(": ", ": warning: ", 1)), file=sys.stderr)
    if args.out_dir:
        _write_all_atomically(Path(args.out_dir), names,
                              ((name_of[query_id], record) for query_id, record in replay.run()))
    else:
        lines = (_RECORD_JSON.encode(record) + "\n" for _, record in replay.run())
        if args.out:
            _write_atomically(Path(args.out), lines)
        else:
            for line in lines:
                sys.stdout.write(line)
    failed = replay.failures()
    for query_id, instant, error in failed:
        print("rspstar replay: query %s failed at %s: %s" % (name_of[query_id], instant, error), file=sys.stderr)
    return EXIT_QUERY_FAILED if failed else 0


def _fails(text: str, error: QuerySyntaxError, options: QueryOptions, base: str, streams) -> bool:
    """Whether `text` is the query the replay refused with `error` (compiled again to say which
    file it was: only when one was refused)."""
    try:
        compile_query(text, dialect=options.dialect, start=options.start, base=options.base or base,
                      streams=options.streams or tuple(iri for iri, _ in streams))
    except QuerySyntaxError as e:
        return (e.line, e.column, e.message) == (error.line, error.column, error.message)
    return False


# A record's JSON line, keys sorted (one encoder for every line, not one made per line).
_RECORD_JSON = json.JSONEncoder(sort_keys=True)


def _open_at_once() -> int:
    """How many of a replay's outputs it keeps open at a time: half the file descriptors the
    process may hold (the other half left to the engine and the interpreter), at least 8."""
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    return 1 << 20 if soft == resource.RLIM_INFINITY else max(8, soft // 2)


def _unwritable(directory: Path, error: OSError) -> UsageError:
    """The results refused by the folder they go in (not writable, not a folder, a full disk,
    too many files open), as the command says it."""
    reason = error.strerror or str(error)
    if isinstance(error, FileExistsError) and directory.exists() and not directory.is_dir():
        reason = "a file of that name is there, not a folder"
    return UsageError("cannot write the results in %s: %s" % (directory, reason))


def _write_all_atomically(directory: Path, ids: list[str], records, open_at_once: int | None = None) -> None:
    """One <id>.jsonl per query in `directory`, all or none (each written beside its final
    name, renamed into place once the whole replay has run). At most `open_at_once` outputs
    are open at a time (default: _open_at_once()): past that, the one written least recently
    is closed and opened again to append when its query emits, so that more query files than
    the process may open files still replay. A folder or disk that refuses the outputs is a
    UsageError naming it, and nothing is left in it."""
    bound = _open_at_once() if open_at_once is None else open_at_once
    temporary: dict[str, Path] = {}
    final: dict[str, Path] = {}
    outs: collections.OrderedDict[str, object] = collections.OrderedDict()   # least recently written first
    try:
        try:
            directory.mkdir(parents=True, exist_ok=True)
            # What the folder holds, read once: a name it does not hold is written as it is
            # (a thousand outputs are not looked up one by one).
            with os.scandir(directory) as entries:
                present = {entry.name for entry in entries}
            for query_id in ids:
                name = "%s.jsonl" % query_id
                final[query_id] = _results_file(directory / name) if name in present else directory / name
                fd, temporary[query_id] = _create_beside(final[query_id])
                if len(outs) < bound:
                    outs[query_id] = os.fdopen(fd, "w", encoding="utf-8")
                else:
                    os.close(fd)
        except OSError as e:
            raise _unwritable(directory, e) from None
        rotating = len(ids) > bound
        for query_id, record in records:        # (the engine's own errors pass as they come)
            try:
                out = outs.get(query_id)
                if out is None:
                    if len(outs) >= bound:
                        outs.popitem(last=False)[1].close()
                    out = outs[query_id] = open(temporary[query_id], "a", encoding="utf-8")
                elif rotating:
                    outs.move_to_end(query_id)
                out.write(_RECORD_JSON.encode(record) + "\n")
            except OSError as e:
                raise _unwritable(directory, e) from None
        try:
            while outs:
                outs.popitem()[1].close()
            for query_id, tmp in temporary.items():
                os.replace(tmp, final[query_id])
        except OSError as e:
            raise _unwritable(directory, e) from None
        temporary.clear()       # all in place: none is left to remove
    finally:
        for out in outs.values():
            with contextlib.suppress(OSError):     # (what it would still write is not wanted)
                out.close()
        for tmp in temporary.values():
            tmp.unlink(missing_ok=True)


def cmd_check(args) -> int:
    text = _read_query(args.query)
    options = QueryOptions.from_pairs(dict(_key_value(o, "--option") for o in args.option))
    given_base = options.base
    try:
        # The serving engine's limits and partition keys are its configuration's, not known here.
        admitted = admit(text, _UNLIMITED, replace(options, partition=None, base=options.base or _file_iri(args.query)),
                         registering=False)
    except QuerySyntaxError as e:
        print("%s:%d:%d: %s" % (args.query, e.line, e.column, e.message), file=sys.stderr)
        return EXIT_INPUT_ERROR
    query, policy, options = admitted.query, admitted.policy, admitted.options
    if args.background:
        query = replace(query, warnings=query.warnings + _background_warnings(query, Path(args.background)))
    plan = r2r_plan(query, policy, options)
    summary = {
        "dialect": query.dialect, "form": query.form.value, "r2s": query.r2s.value, "name": query.name,
        "output_stream": query.output_stream,
        "windows": [w.describe() for w in query.windows.values()],
        "report": policy.describe(),
        "policy": policy.show(),
        "normalised": query.normalised,
        "readings": options.readings(query),
        "warnings": query.warnings + ([NEVER_EVALUATED] if policy.never_reports else []),
        **_base_described(query, given_base),
    }
    for key, graphs in (("from", query.from_graphs), ("from_named", query.from_named_graphs)):
        if graphs:
            summary[key] = graphs
    if query.translation is not None:
        summary["rspql"] = query.translation.splitlines()
        if query.merged_windows:
            summary["default_graph"] = "the merge of windows %s and the background default graph" % \
                ", ".join("<%s>" % w for w in query.merged_windows)
    summary["sparql"] = compile_template(query, options.rewrite_options(query)).show().splitlines()
    shared = parameterized(query) if plan.kind == "incremental" and options.share_constants else None
    if shared is not None:
        summary["constants"] = ["%s at %d:%d" % (constant, *query.body.source.position(at))
                                for constant, (at, _) in zip(shared.constants, shared.spans)]
    summary["incremental"] = plan.describe()
    if options.entailment != "none":
        summary["entailment"] = entailment_summary(query, plan)
    print(json.dumps(summary, indent=2))
    return 0


def _background_warnings(query, path: Path) -> list[str]:
    """What `check --background FILE` adds: the query's patterns outside its windows that read
    a graph the file leaves empty (translator/warnings.py)."""
    from rspstar.store.rdf_input import format_for_path
    from rspstar.store.stream_store import StreamStore
    try:
        data = path.read_bytes()
    except OSError as e:
        raise UsageError("cannot read background %s: %s" % (path, e.strerror)) from None
    store = StreamStore()
    store.background.load(data, format_for_path(path), str(path))

    def holds(graph: str | None) -> bool:
        return bool(store.query("ASK { ?s ?p ?o }" if graph is None else "ASK { GRAPH <%s> { ?s ?p ?o } }" % graph))

    return background_warnings(query, holds, [g for g in store.background.graphs() if holds(g)])


def entailment_summary(query, plan) -> list[str]:
    """What `option entailment = rdfs` does to the query (spec §6.11), for `check`."""
    dataset = ("the FROM graphs %s" % ", ".join("<%s>" % g for g in query.from_graphs) if query.from_graphs
               else "the background default graph")
    lines = ["rdfs (rules 2, 3, 5, 7, 9, 11) over the schema S of %s: its rdfs:subClassOf, rdfs:subPropertyOf, "
             "rdfs:domain and rdfs:range triples, read again at each evaluation" % dataset,
             "each element a window holds is closed once per schema into a graph of its own, cl(G + S) - (cl(S) - G), "
             "as it is published (or when an evaluation first reads it); GRAPH patterns in windows match those "
             "graphs, ?g still binding the element ($closures and $closure-graphs in sparql)",
             "the query's default graph is read as cl(B): %s and its inferred triples" % dataset,
             "triple terms and << >> patterns match as written: an inferred triple has no annotation"]
    if plan.kind != "whole":
        lines.append("incremental: the ranges' rows are kept per schema, so a schema change evaluates them again")
    return lines


def _serve_overrides(args) -> dict[str, object]:
    return {name: value for name, value in (("http.host", args.host), ("http.port", args.port)) if value is not None}


def cmd_serve(args) -> int:
    from .serve import serve
    return serve(Path(args.config) if args.config else DEFAULT_CONFIG, Path(args.data), _serve_overrides(args))


def cmd_config(args) -> int:
    """The effective settings, each with where it came from."""
    config = load_config(Path(args.config) if args.config else DEFAULT_CONFIG, None, _serve_overrides(args))
    rows = schema.effective(config.settings)
    width = max(len(name) for name, _, _ in rows)
    for name, value, origin in rows:
        print("%-*s = %s   # %s" % (width, name, value, origin))
    return 0


def _version() -> str:
    import pyoxigraph
    from rspstar import __version__
    return "rspstar %s (pyoxigraph %s, Python %s)" % (__version__, pyoxigraph.__version__, sys.version.split()[0])


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="rspstar", description="RSP-QL* stream processing engine")
    parser.add_argument("--version", action="version", version=_version())
    sub = parser.add_subparsers(dest="command", required=True)

    rp = sub.add_parser("replay", help="evaluate a query over recorded streams in event time",
                        epilog=_REPLAY_EXIT_STATUS, formatter_class=argparse.RawDescriptionHelpFormatter)
    rp.add_argument("query", nargs="+", help="RSP-QL* query file(s): several replay together in one pass")
    rp.add_argument("--stream", action="append", default=[], metavar="IRI=FILE",
                    help="a recorded stream (TriG 1.2 or N-Quads 1.2); repeatable")
    rp.add_argument("--background", metavar="FILE", help="background data (TriG, Turtle, N-Quads)")
    rp.add_argument("--from", dest="start", required=True, metavar="INSTANT",
                    help="evaluate instants after this xsd:dateTime")
    rp.add_argument("--to", dest="end", required=True, metavar="INSTANT",
                    help="... up to and including this xsd:dateTime")
    rp.add_argument("--option", action="append", default=[], metavar="KEY=VALUE", help=command_line_help())
    rp.add_argument("--out", metavar="FILE", help="write JSON lines here (default: standard output)")
    rp.add_argument("--out-dir", metavar="DIR", help="write <query file stem>.jsonl per query here "
                                                     "(needed with several queries)")
    rp.set_defaults(handler=cmd_replay)

    sv = sub.add_parser("serve", help="run the engine: store on disk, Spark ingestion, scheduler, HTTP API and dashboard")
    sv.add_argument("--config", help="TOML configuration (default: the embedded one, %s)" % DEFAULT_CONFIG)
    sv.add_argument("--host", help="address to listen on (default: [http] host, %s)" % schema.default("http.host"))
    sv.add_argument("--port", type=int, help="port (default: [http] port, %d)" % schema.default("http.port"))
    sv.add_argument("--data", default="data", help="data directory: store, queries, outboxes, checkpoints "
                                                   "(default: %(default)s)")
    sv.set_defaults(handler=cmd_serve)

    cf = sub.add_parser("config", help="print the effective settings and where each came from "
                                       "(docs/configuration.md lists them all)")
    cf.add_argument("--config", help="TOML configuration (default: the embedded one)")
    cf.add_argument("--host", help=argparse.SUPPRESS)
    cf.add_argument("--port", type=int, help=argparse.SUPPRESS)
    cf.set_defaults(handler=cmd_config)

    ck = sub.add_parser("check", help="parse and check a query, print its windows, report policy, RSP-QL* "
                                      "translation (dialects) and SPARQL template")
    ck.add_argument("query")
    ck.add_argument("--option", action="append", default=[], metavar="KEY=VALUE", help=command_line_help())
    ck.add_argument("--background", metavar="FILE",
                    help="background data the query will read (TriG, Turtle, N-Quads): its patterns outside "
                         "windows that would read an empty graph are warned about")
    ck.set_defaults(handler=cmd_check)
    return parser


def main(argv: list[str] | None = None) -> int:
    """The command line: `argv`, or sys.argv's when None (`python -m rspstar.endpoint.cli`),
    which runs serve under jemalloc; the `rspstar` command (endpoint/launch.py) has
    done that before it passes its arguments."""
    args = build_parser().parse_args(argv)
    if argv is None and args.command in UNDER_JEMALLOC:
        use_jemalloc()
    try:
        return args.handler(args)
    except (EndpointError, StoreError, TranslatorError, schema.ConfigError) as e:
        print("rspstar %s: %s" % (args.command, e), file=sys.stderr)
        return EXIT_INPUT_ERROR
    except BrokenPipeError:
        # The reader stopped reading (`rspstar replay ... | head -1`): what it wanted it has.
        # Standard output goes nowhere from here, so the interpreter's final flush is quiet.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0


if __name__ == "__main__":
    sys.exit(main())

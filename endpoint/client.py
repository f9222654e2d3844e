"""A small client of a running engine (`rspstar serve`), over its HTTP API with requests:

    import rspstar
    server = rspstar.Client("http://127.0.0.1:8000", token=open("data/token").read().strip())
    warm = server.register(QUERY_TEXT, id="warm")
    server.push("http://example.org/temp", {"data": "<http://example.org/k> <http://example.org/t> 31 ."})
    warm.results().rows()                     # the history, as the Python API gives it
    for record in warm.follow():              # each new evaluation as it comes (server-sent events)
        ...

Records are the same dicts the Python API's `Query.records` holds (`time`, `windows` and
`bindings` of N-Triples terms, `triples` or `boolean`: the compact shape), so `Results` reads
them into rows and DataFrames alike. An error the server answers is a `ServerError` with its
status, the server's error name, message and position.
"""
from __future__ import annotations

import json
import os
import time
from datetime import datetime
from pathlib import Path
from typing import Iterator

import requests

from rspstar.store import formats
from rspstar.translator.syntax import check_stream_iri
from rspstar.translator.temporal import format_instant

from .api import Results, _instant, _options, _text_of
from .engine.errors import EndpointError

# Seconds to wait for an answer (an event stream sends a keep-alive comment every 15 s by default).
TIMEOUT = 60.0
# Attempts at reconnecting an event stream that broke, one after another, before giving up.
RECONNECTS = 5
_LIVE_ONLY = ("trigger", "latency_ms")


class ServerError(EndpointError):
    """The server refused a request: `status`, the server's `error` name, its `message`, and the
    `line` and `column` it names, if any."""

    def __init__(self, status: int, error: str, message: str, line: int | None = None, column: int | None = None):
        super().__init__("%d %s: %s%s" % (status, error, message, "" if line is None else " (line %s, column %s)"
                                          % (line, column)))
        self.status, self.error, self.message, self.line, self.column = status, error, message, line, column


def _records(text: str) -> list[dict]:
    return [_compact(json.loads(line)) for line in text.splitlines() if line.strip()]


def _compact(record: dict) -> dict:
    return {k: v for k, v in record.items() if k not in _LIVE_ONLY}


def _time(value) -> str | None:
    return None if value is None else format_instant(_instant(value))


class RemoteQuery:
    """A query registered on a running engine: its id, and its results and events."""

    def __init__(self, client: "Client", description: dict):
        self.client = client
        self.id = description["id"]
        self.description = description

    def describe(self) -> dict:
        return self.client.describe(self.id)

    def results(self, since=None, limit: int | None = None) -> Results:
        return self.client.results(self.id, since, limit)

    def follow(self, since=None) -> Iterator[dict]:
        return self.client.follow(self.id, since)

    def remove(self) -> None:
        self.client.remove(self.id)

    def __repr__(self) -> str:
        return "<RemoteQuery %r on %s>" % (self.id, self.client.url)


class Client:
    """A running engine at `url`. `token` is the bearer token writes need (its text, or the
    pathlib.Path of the file `rspstar serve` keeps it in, DATA/token); None: the environment's
    RSPSTAR_TOKEN, if any."""

    def __init__(self, url: str = "http://127.0.0.1:8000", token: str | os.PathLike | None = None, *,
                 timeout: float = TIMEOUT, session: requests.Session | None = None):
        self.url = url.rstrip("/")
        if isinstance(token, os.PathLike):
            token = Path(token).read_text(encoding="utf-8").strip()
        token = token if token is not None else os.environ.get("RSPSTAR_TOKEN")
        self.timeout = timeout
        self.session = session or requests.Session()
        self._auth = {"Authorization": "Bearer " + token} if token else {}

    def __repr__(self) -> str:
        return "<Client of %s>" % self.url

    def _call(self, method: str, path: str, **kwargs) -> requests.Response:
        kwargs.setdefault("timeout", self.timeout)
        if method != "GET":
            kwargs["headers"] = {**self._auth, **kwargs.get("headers", {})}
        response = self.session.request(method, self.url + path, **kwargs)
        if response.status_code >= 400:
            raise self._error(response)
        return response

    @staticmethod
    def _error(response: requests.Response) -> ServerError:
        try:
            body = response.json()
        except ValueError:
            body = {}
        if not isinstance(body, dict):
            body = {}
        return ServerError(response.status_code, str(body.get("error", response.reason)),
                           str(body.get("message", response.text[:500])), body.get("line"), body.get("column"))

    # -- queries ---------------------------------------------------------------------------------
    def register(self, query, id: str | None = None, *, sinks=(), **options) -> RemoteQuery:
        """Register an RSP-QL* query (its text, or a pathlib.Path of a file holding it) with its
        options (report=..., ...) and sinks; the query registered."""
        text, _, _ = _text_of(query, "the query", "the query's text (a str) or a pathlib.Path of a file holding it")
        body = {"query": text, "id": id, "sinks": list(sinks), "options": _options(options)}
        return RemoteQuery(self, self._call("POST", "/queries", json=body).json())

    def queries(self) -> list[RemoteQuery]:
        return [RemoteQuery(self, q) for q in self._call("GET", "/queries").json()["queries"]]

    def query(self, query_id: str) -> RemoteQuery:
        return RemoteQuery(self, self.describe(query_id))

    def describe(self, query_id: str) -> dict:
        return self._call("GET", "/queries/%s" % query_id).json()

    def remove(self, query_id: str) -> None:
        self._call("DELETE", "/queries/%s" % query_id)

    def results(self, query_id: str, since=None, limit: int | None = None) -> Results:
        """The records the server's history keeps for the query: those after `since` (a datetime
        or xsd:dateTime string, exclusive), at most `limit` (the latest; with `since`, the first
        after it)."""
        params = {"format": "compact"}
        if since is not None:
            params["since"] = _time(since)
        if limit is not None:
            params["limit"] = str(limit)
        return Results(_records(self._call("GET", "/queries/%s/results" % query_id, params=params).text))

    def follow(self, query_id: str, since=None) -> Iterator[dict]:
        """Each evaluation's record as the server gives it (server-sent events): first those
        after `since` (exclusive) that the history keeps, then the live ones. A stream that ends
        (idle, expired) or breaks is opened again where it stopped (Last-Event-ID), so none is
        missed or given twice; the iteration ends when the query is removed."""
        last = _time(since)
        failures = 0
        while True:
            headers = {"Accept": "text/event-stream", **({"Last-Event-ID": last} if last else {})}
            try:
                with self.session.get(self.url + "/queries/%s/events" % query_id, params={"format": "compact"},
                                      headers=headers, stream=True, timeout=self.timeout) as response:
                    if response.status_code >= 400:
                        raise self._error(response)
                    failures = 0
                    for name, data, event_id in _events(response):
                        if name == "result":
                            last = event_id or last
                            yield _compact(json.loads(data))
                        elif name == "closed" and json.loads(data).get("reason") == "removed":
                            return
            except (requests.ConnectionError, requests.exceptions.ChunkedEncodingError):
                failures += 1
                if failures > RECONNECTS:
                    raise
                time.sleep(min(2.0 * failures, 10.0))

    # -- streams ---------------------------------------------------------------------------------
    def push(self, stream: str, data, *, format: str | None = None) -> dict:
        """Post elements to `stream`: TriG (the default), N-Quads or JSON-lines text, a
        pathlib.Path of such a file (its format from its extension), or JSON envelopes (a dict
        {"time"?, "data", "graph"?}, `time` a datetime or string, or a list of them). The
        server's answer: {stream, accepted, elements}."""
        check_stream_iri(stream, "push: the stream")
        if isinstance(data, dict):
            data = [data]
        if isinstance(data, list):
            text, format = "".join(json.dumps({**e, **({"time": _time(e["time"])} if isinstance(e.get("time"), datetime)
                                                       else {})}) + "\n" for e in data), "jsonl"
        else:
            text, _, path = _text_of(data, "the pushed data", "TriG, N-Quads or JSON-lines text, a pathlib.Path, "
                                     "or JSON envelopes (a dict or a list of them)")
            if format is None:
                format = formats.by_path(path).name if path is not None else \
                    "jsonl" if text.lstrip().startswith("{") else "trig"
        media = formats.by_name(format).media_types[0]
        return self._call("POST", "/streams", params={"stream": stream}, data=text.encode("utf-8"),
                          headers={"Content-Type": media}).json()


def _events(response: requests.Response) -> Iterator[tuple[str, str, str | None]]:
    """(event name, data, id) of each event of a text/event-stream response, as it comes."""
    name, data, event_id = None, [], None
    for line in response.iter_lines(decode_unicode=True):
        if line == "":
            if name is not None or data:
                yield name or "message", "\n".join(data), event_id
            name, data = None, []
        elif line.startswith(":"):
            continue
        else:
            field, _, value = line.partition(":")
            value = value[1:] if value.startswith(" ") else value
            if field == "event":
                name = value
            elif field == "data":
                data.append(value)
            elif field == "id":
                event_id = value

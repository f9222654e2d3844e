"""The HTTP server `rspstar serve` runs the app in: waitress, a production WSGI server that fits
this process (one process, which must keep the scheduler and the Spark driver, so no forking
server), with the limits a public port needs.

- Connections are served by one event loop (poll, no limit of 1,024 descriptors): an idle or
  slow connection holds a socket, never a thread. A request is read whole, headers and body
  (a large body spooled to a temporary file), before a worker thread takes it, so a client
  sending slowly costs no worker; `threads` workers answer requests.
- At most `connection_limit` connections are open (beyond it new ones wait in the listen
  queue); a connection idle for `idle_timeout` seconds is closed, and so is one that has not
  sent a whole request within `request_timeout` seconds of its first byte (slowloris), and one
  whose client has taken none of the answer waiting for it for `idle_timeout` seconds (a
  client that does not read: waitress holds at most 16 MiB for it, past 1 MiB in a temporary
  file, and then blocks the worker writing to it).
- A body larger than `max_body`, declared or chunked, is answered 413 before the app sees
  anything, with the JSON error body every error of the API has (so are headers too large and
  malformed requests); the `Server` header names rspstar.

Server-sent event streams hold a worker thread each for as long as they last: the app caps them
below the thread count (`[http] max_event_streams`), so requests always find a worker. The loop
keeps reading a connection while its request is answered (one request ahead), so it sees a
client close the connection at once and tells the app (`waitress.client_disconnected`): an event
stream whose client dropped ends within a second, its slot given back, instead of at its next
write.
"""
from __future__ import annotations

import json
import threading
import time

from waitress.adjustments import Adjustments
from waitress.channel import HTTPChannel
from waitress.server import TcpWSGIServer
from waitress.task import ErrorTask, ThreadedTaskDispatcher

from .errors import server_refusal_body, status_for

# How often the loop looks for connections to close; the timeouts are honoured to within this.
MAINTENANCE_SECONDS = 1


class _Refusal(ErrorTask):
    """A request the server refuses before the app sees it, answered with the API's JSON error
    (waitress answers plain text), its status chosen where every status is."""

    def execute(self):
        error = self.request.error
        adjustments = self.channel.adj
        body = json.dumps(server_refusal_body(error, adjustments.max_request_body_size,
                                              adjustments.max_request_header_size)).encode()
        self.status = "%d %s" % (status_for(error), error.reason)
        self.response_headers.extend([("Content-Type", "application/json"), ("X-Content-Type-Options", "nosniff")])
        self.set_close_on_finish()
        self.content_length = len(body)
        self.write(body)


class _Channel(HTTPChannel):
    """A connection that remembers when the request it is reading began, and answers what the
    server refuses in JSON."""

    error_task_class = _Refusal

    request_started: float | None = None

    def received(self, data):
        if self.request is None and data:
            self.request_started = time.time()
        try:
            return super().received(data)
        finally:
            if self.request is None:
                self.request_started = None


class _Server(TcpWSGIServer):
    channel_class = _Channel
    request_timeout = 10.0

    def maintenance(self, now):
        super().maintenance(now)     # idle connections
        cutoff = now - self.request_timeout
        stalled = now - self.adj.channel_timeout
        for channel in list(self.active_channels.values()):
            started = getattr(channel, "request_started", None)
            if started is not None and started < cutoff and not channel.requests:
                channel.will_close = True
            elif channel.total_outbufs_len and channel.last_activity < stalled:
                # An answer waits for a client that has taken none of it for idle_timeout: a
                # client that does not read. Closed, so the worker writing to it (an event
                # stream, blocked once waitress holds its most) is freed with its slot.
                channel.handle_close()


class HttpServer:
    """The app on host:port until `shutdown`."""

    def __init__(self, app, host: str, port: int, *, threads: int, connection_limit: int, idle_timeout: float,
                 request_timeout: float, max_body: int, max_header: int = 65536):
        adjustments = Adjustments(
            host=host, port=port, threads=threads, connection_limit=connection_limit,
            channel_timeout=max(1, round(idle_timeout)), cleanup_interval=MAINTENANCE_SECONDS,
            max_request_body_size=max_body, max_request_header_size=max_header, ident="rspstar",
            asyncore_use_poll=True, expose_tracebacks=False, log_socket_errors=False,
            clear_untrusted_proxy_headers=True, backlog=1024, channel_request_lookahead=1)
        self._map: dict = {}
        self.dispatcher = ThreadedTaskDispatcher()
        self.dispatcher.set_thread_count(threads)
        self._server = _Server(app, self._map, True, None, dispatcher=self.dispatcher, adj=adjustments,
                               sockinfo=adjustments.listen[0])
        self._server.request_timeout = request_timeout
        self._stopped = threading.Event()

    @property
    def port(self) -> int:
        return int(self._server.effective_port)      # waitress gives it as text

    def serve_forever(self) -> None:
        try:
            self._server.run()
        finally:
            self._stopped.set()

    def shutdown(self, timeout: float = 10.0) -> None:
        """Close the listener and every connection (from the loop's own thread), then stop the
        workers, waiting up to `timeout` for the requests they are answering."""
        def close_all():
            for dispatcher in list(self._map.values()):
                dispatcher.close()
        self._server.trigger.pull_trigger(close_all)
        self._stopped.wait(timeout)
        self.dispatcher.shutdown(cancel_pending=True, timeout=timeout)

"""A real server (waitress, as `rspstar serve` runs it) over an in-memory engine, in a process of
its own, for the tests that need one: started with the app's and the server's settings as JSON."""
import json
import subprocess
import sys

from conftest import REPO

SERVER = r"""
import sys, json, tempfile, pathlib
import pyoxigraph as ox
from rspstar.endpoint.engine.clock import WallClock
from rspstar.endpoint.engine.runner import Runner, EngineConfig
from rspstar.endpoint.http import HttpSettings, create_app
from rspstar.endpoint.http.server import HttpServer
from rspstar.store.stream_store import StreamStore
settings = json.loads(sys.argv[1])
from rspstar.endpoint.serve import configure_process
configure_process()                           # as `rspstar serve` does, before any thread
data = pathlib.Path(tempfile.mkdtemp(prefix="rspstar-served-"))
store = StreamStore()
store.background.load(b'<http://example.org/s1> <http://example.org/room> <http://example.org/kitchen> .\n'
                      b'<http://example.org/p1> <http://example.org/status> <http://example.org/active> '
                      b'<http://example.org/profile> .\n', ox.RdfFormat.N_QUADS, "background")
engine = Runner(store, WallClock(), EngineConfig(data_dir=data / "engine", allowed_sinks=["http://localhost:9"],
                                                **{k: settings[k] for k in ("max_delay",) if k in settings}))
engine.register("PREFIX ex: <http://example.org/> SELECT ?o FROM NAMED WINDOW ex:w ON ex:s [RANGE PT1S] "
                "WHERE { WINDOW ex:w { GRAPH ?g { ?o ex:v ?v } } }", "q")
app_settings = {k: v for k, v in settings.items() if k in HttpSettings.__dataclass_fields__}
app = create_app(engine, HttpSettings(landing_dir=data / "landing", **app_settings))
server = HttpServer(app, "127.0.0.1", 0, threads=settings.get("threads", 8),
                    connection_limit=settings.get("connections", 4000), idle_timeout=settings.get("idle", 30),
                    request_timeout=settings.get("request", 10), max_body=settings.get("max_body", 1 << 20))
if settings.get("scheduler"):                 # queries evaluated live, as `rspstar serve` does
    from rspstar.endpoint.engine.scheduler import LiveScheduler
    LiveScheduler(engine).start()
print(server.port, flush=True)
server.serve_forever()
"""


def start(**settings):
    """(process, base URL, port) of a server with these settings (token, max_body, ...)."""
    process = subprocess.Popen([sys.executable, "-c", SERVER, json.dumps(settings)], cwd=REPO,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    port = int(process.stdout.readline())
    return process, "http://127.0.0.1:%d" % port, port

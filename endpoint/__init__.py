"""The engine (`engine/`: runner, evaluation, R2S, scheduler, replay, sinks) and its doors: the HTTP API and dashboard (`http/`, `static/`), `serve`, the command line, the Python API."""

"""The engine: the runner that evaluates registered continuous queries at their report
instants (`runner.Runner`), the evaluation of one query (S2R, R2R, R2S: `evaluation`, `r2s`),
the live scheduler and the replay that drive the runner in wall-clock and event time, the
sinks results go to, and where registered queries are kept. Nothing here imports a door (HTTP,
command line, Python API, dashboard)."""

"""Orchestration and the outside world: evaluation, R2S, replay, scheduler, HTTP, command line."""

"""Errors of the orchestration layer. Every one of them is an EndpointError."""
from __future__ import annotations


class EndpointError(Exception):
    """Base error of the `endpoint` package."""


class UsageError(EndpointError):
    """A command line or option that cannot be honoured."""

"""The HTTP face of the engine: an app factory (`create_app`) that attaches the services and
registers one blueprint per concern: the SPARQL protocol (`sparql`), continuous queries
(`queries`), streams (`streams`), operations (`operations`: health, metrics, the API
document) and the dashboard (`dashboard`)."""
from .app import HttpSettings, create_app
from .context import Readiness

__all__ = ["HttpSettings", "Readiness", "create_app"]

"""The dashboard: its page, and the charting library from the installed plotly package
(never from a CDN). Its scripts and styles are the app's static files."""
from __future__ import annotations

import importlib.resources

from flask import Blueprint, Response, current_app

from ..engine.runner import QUERY_ID
from .errors import BadRequest
from .protocol import params, single

blueprint = Blueprint("dashboard", __name__)
PLOTLY_JS = importlib.resources.files("plotly") / "package_data" / "plotly.min.js"


@blueprint.route("/", methods=["GET"])
def dashboard():
    found = params(("refresh", "query"))
    if single(found, "refresh") not in (None, "poll", "events"):
        raise BadRequest("refresh takes poll or events")
    wanted = single(found, "query")
    if wanted is not None and not QUERY_ID.fullmatch(wanted):
        raise BadRequest("query takes a query id")
    return current_app.send_static_file("index.html")


@blueprint.route("/static/vendor/plotly.min.js", methods=["GET"])
def plotly_js():
    response = Response(PLOTLY_JS.read_bytes(), mimetype="text/javascript")
    response.headers["Cache-Control"] = "public, max-age=86400"
    return response

"""The dashboard: its page, and the charting library from the installed plotly package
(never from a CDN). Its scripts and styles are the app's static files."""
from __future__ import annotations

import importlib.resources

from flask import Blueprint, Response, current_app

blueprint = Blueprint("dashboard", __name__)
PLOTLY_JS = importlib.resources.files("plotly") / "package_data" / "plotly.min.js"


@blueprint.route("/", methods=["GET"])
def dashboard():
    return current_app.send_static_file("index.html")


@blueprint.route("/static/vendor/plotly.min.js", methods=["GET"])
def plotly_js():
    response = Response(PLOTLY_JS.read_bytes(), mimetype="text/javascript")
    response.headers["Cache-Control"] = "public, max-age=86400"
    return response

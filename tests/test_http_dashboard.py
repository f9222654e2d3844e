"""The dashboard blueprint: the page and its assets, nothing from a CDN."""
import re




def test_dashboard_and_its_assets_are_served(client):
    page = client.get("/")
    assert page.status_code == 200 and b'<script src="/static/dashboard.js">' in page.data
    assert client.get("/static/dashboard.js").status_code == 200
    assert client.get("/static/dashboard.css").status_code == 200
    plotly = client.get("/static/vendor/plotly.min.js")
    assert plotly.status_code == 200 and plotly.mimetype == "text/javascript" and b"plotly.js v" in plotly.data[:200]
    assert not re.search(rb'src="https?://', page.data)      # nothing from a CDN

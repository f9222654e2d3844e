"""Schemathesis hooks for fuzzing the API (tests/test_api_fuzz.py): bodies the document gives as
text (SPARQL, RSP-QL*, TriG, N-Quads, N-Triples, Turtle, JSON lines) are sent as their UTF-8
bytes, anything else generated for them as its string form, so the text reaches the parsers."""
import schemathesis

TEXT_TYPES = ("application/sparql-query", "application/sparql-update", "application/trig", "application/n-quads",
              "application/n-triples", "text/turtle", "application/x-ndjson", "text/plain")


@schemathesis.serializer(*TEXT_TYPES)
def text_body(ctx, value):
    return (value if isinstance(value, str) else str(value)).encode("utf-8")

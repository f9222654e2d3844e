"""What the HTTP tests share: the token, background data, a query, a stream and SPARQL queries
(the `engine` and `client` fixtures over them are in conftest.py)."""


from rspstar.translator.temporal import parse_instant

T0 = parse_instant("2026-03-01T08:00:00Z")
S = 1_000_000
TOKEN = "s3cret"
AUTH = {"Authorization": "Bearer " + TOKEN}
BACKGROUND = b"""@prefix ex: <http://example.org/> .
ex:s1 ex:room ex:kitchen .
ex:s1 ex:reading 21 {| ex:confidence 0.9 |} .
ex:profile { ex:s1 ex:status ex:active . }
"""
RSPQL = """PREFIX ex: <http://example.org/>
SELECT ?o ?v FROM NAMED WINDOW ex:w ON ex:s [RANGE PT2S]
WHERE { WINDOW ex:w { GRAPH ?g { ?o ex:v ?v } } }"""
STREAM = b"""@prefix ex: <http://example.org/> . @prefix prov: <http://www.w3.org/ns/prov#> .
ex:e0 prov:generatedAtTime "2026-03-01T08:00:00Z"^^<http://www.w3.org/2001/XMLSchema#dateTime> .
ex:e0 { ex:o0 ex:v 1 . }
"""
SELECT = "PREFIX ex: <http://example.org/> SELECT ?s ?r WHERE { ?s ex:room ?r }"


TRIPLE_TERM = "PREFIX ex: <http://example.org/> SELECT ?t WHERE { ?r <http://www.w3.org/1999/02/22-rdf-syntax-ns#reifies> ?t }"


CONSTRUCT = "PREFIX ex: <http://example.org/> CONSTRUCT { ?s ex:in ?r } WHERE { ?s ex:room ?r }"

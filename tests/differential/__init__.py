"""The differential test's parts (tests/test_differential.py): the test's own model of an RSP-QL*
query and of its input (`model`), hypothesis strategies drawing them (`strategies`), a naive
reference written from the specification alone (`reference`), and the engine's runs with every
optimisation on and off, counting the fast paths they reach (`runs`)."""

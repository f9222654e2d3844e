"""The `rspu:` SPARQL extension functions (spec: uncertainty.md), for Oxigraph.

Each function takes RDF terms and returns a term, or None for a SPARQL expression error (a
FILTER drops the row, a BIND leaves its variable unbound); nothing raises into the query.
A `FunctionLibrary` holds the cache (the RSPU paper §4.1, kept one evaluation longer) and counts
calls, so the benchmark can show what each optimization saves.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Callable

import pyoxigraph as ox

from ..namespaces import RSPU, XSD
from .distributions import Distribution, FamilyRegistry, UncertaintyError, default_families, normal_cdf

DISTRIBUTION_DATATYPE = RSPU + "distribution"
NUMERIC_DATATYPES = frozenset(XSD + t for t in (
    "double", "float", "decimal", "integer", "int", "long", "short", "byte", "nonNegativeInteger",
    "positiveInteger", "negativeInteger", "nonPositiveInteger", "unsignedInt", "unsignedLong",
    "unsignedShort", "unsignedByte"))
# A nested call such as rspu:lessThan(rspu:add(?u, ?x), 0.18) is rewritten into one call of
# <urn:rspstar:rspu-fused:lessThan(add(_,_),_)>(?u, ?x, 0.18): each crossing from Oxigraph into
# Python costs more than a cached call, and the composition is the same (an inner error makes
# the outer call an error, as when Oxigraph evaluates the arguments).
FUSED_PREFIX = "urn:rspstar:rspu-fused:"
_FUSED_SHAPE = re.compile(r"\w+\(|_|\)|,")

_DISTRIBUTION = ox.NamedNode(DISTRIBUTION_DATATYPE)
_DOUBLE = ox.NamedNode(XSD + "double")
_PARSE_CACHE_LIMIT = 100_000
_MISS = object()

Value = float | Distribution


@dataclass
class CallCounts:
    calls: int = 0        # invocations by the query engine
    computed: int = 0     # invocations that were not answered from the cache
    kept: int = 0         # invocations answered from the previous evaluation's answers


class FunctionLibrary:
    """The `rspu:` functions (FUNCTIONS) bound to one family registry, cache and call counter."""

    def __init__(self, families: FamilyRegistry | None = None, cache: bool = True,
                 operations: dict[str, tuple[str, Callable]] | None = None):
        self._families = families
        # name -> (argument kinds, function on decoded values); replaceable to compare
        # other implementations (the benchmark's Monte Carlo) on the same calls.
        self.operations = {**_ON_VALUES, **(operations or {})}
        self.cache_enabled = cache
        self.counts = CallCounts()
        # One per function: [this evaluation's answers, the previous evaluation's answers].
        self._caches: list[list[dict[tuple[str, ...], ox.Literal | None]]] = []
        self._parsed: dict[str, Distribution | str] = {}   # a lexical form's parse, or why it failed
        self._table: dict[ox.NamedNode, Callable] | None = None

    @property
    def names(self) -> tuple[str, ...]:
        """The local names of the functions this library provides."""
        return tuple(self.operations)

    @property
    def families(self) -> FamilyRegistry:
        if self._families is None:
            self._families = default_families()
        return self._families

    @property
    def table(self) -> dict[ox.NamedNode, Callable]:
        """The functions for Oxigraph's `custom_functions`, built when first asked for: every
        registered query has a library, and most call no rspu: function; the table's closures
        (about a hundred objects) would be kept for the cycle collector to scan in each."""
        if self._table is None:
            self._table = {ox.NamedNode(RSPU + name): self._function(name, (name, *[None] * len(kinds)))
                           for name, (kinds, _) in self.operations.items()}
        return self._table

    def table_for(self, fused: tuple[str, ...]) -> dict[ox.NamedNode, Callable]:
        """The table with the fused calls a rewritten query makes (its `fused_functions`):
        every place that hands a rewritten query to Oxigraph asks through here."""
        for iri in fused:
            self.add_fused(iri)
        return self.table

    def add_fused(self, iri: str) -> None:
        """Register a fused call: FUSED_PREFIX + its shape, e.g. lessThan(add(_,_),_)."""
        node = ox.NamedNode(iri)
        if node not in self.table:
            self.table[node] = self._function(iri, _parse_shape(iri[len(FUSED_PREFIX):]))

    def begin_evaluation(self) -> None:
        """The cache holds one evaluation's answers (the RSPU paper) and keeps those of the
        evaluation before: the functions are pure, and a sliding window meets most of its
        elements again at the next close. An answer not asked for in an evaluation is dropped at
        the one after, so the cache never holds more than two windows' calls."""
        for generations in self._caches:
            generations[1] = generations[0]
            generations[0] = {}

    def _function(self, name: str, tree):
        """The SPARQL function computing a call tree of its arguments: inner results stay
        values (no literal is written and read back between them); the whole call is
        cached, and counted as one call per function in the tree."""
        generations: list[dict[tuple[str, ...], ox.Literal | None]] = [{}, {}]
        self._caches.append(generations)
        counts = self.counts
        calls = _count_calls(tree)
        try:
            width, evaluate = self._build(tree, 0)
        except TypeError:
            width, evaluate = -1, None     # a function given the wrong number of arguments

        def call(*args):
            counts.calls += calls
            if self.cache_enabled:
                # Oxigraph terms are tracked by Python's cycle collector, strings are not:
                # tens of thousands of term keys made full collections run mid-evaluation.
                key = tuple(map(str, args))
                current = generations[0]
                cached = current.get(key, _MISS)
                if cached is not _MISS:
                    return cached
                cached = generations[1].get(key, _MISS)
                if cached is not _MISS:
                    counts.kept += calls
                    current[key] = cached
                    return cached
            counts.computed += calls
            result = None
            if len(args) == width:
                try:
                    result = self._encode(evaluate(args))
                except (UncertaintyError, ValueError, ArithmeticError, TypeError):
                    pass
            if self.cache_enabled:
                generations[0][key] = result
            return result

        call.__name__ = name
        return call

    def _build(self, node, start: int):
        """(arguments consumed, function of the argument tuple) for one node of a call tree."""
        shifted = self._shifted_comparison(node, start)
        return (3, shifted) if shifted is not None else self._build_general(node, start)

    def _build_general(self, node, start: int):
        kinds, op = self.operations[node[0]]
        children = node[1:]
        if len(children) != len(kinds):
            raise TypeError("%s takes %d arguments" % (node[0], len(kinds)))
        getters = []
        at = start
        for kind, child in zip(kinds, children):
            if child is None:
                getters.append(self._argument(kind, at))
                at += 1
            else:
                width, inner = self._build(child, at)
                getters.append(_distribution_of(inner) if kind == "d" else inner)
                at += width
        if len(getters) == 2:
            first, second = getters
            return at - start, lambda args: op(first(args), second(args))
        return at - start, lambda args: op(*[get(args) for get in getters])

    def _shifted_comparison(self, node, start: int):
        """lessThan(add(D, x), c) or greaterThan(add(D, x), c) (the RSPU paper's Listing 2) with D a
        normal and x, c numbers: P(N(μ + x, σ²) < c) computed on the numbers, without the
        distribution for D + x the general path builds, which is much of such a call's time
        (bench/out/NOTES.md#figures-from-comments); the arithmetic is the general path's, step for
        step. Any other arguments go that way."""
        name = node[0]
        if name not in ("lessThan", "greaterThan") or node[1:] != (("add", None, None), None) or \
                self.operations[name] is not _ON_VALUES[name] or self.operations["add"] is not _ON_VALUES["add"]:
            return None
        general = self._build_general(node, start)[1]
        distribution, value = self.distribution, self.value
        less = name == "lessThan"
        first, second, third = start, start + 1, start + 2

        def evaluate(args):
            d = distribution(args[first])
            x, c = value(args[second]), value(args[third])
            if d.uniforms or type(x) is not float or type(c) is not float:
                return general(args)
            mu = d.mu + x
            if not math.isfinite(mu):
                return general(args)        # raises as the general path does
            p = normal_cdf((c - mu) / math.sqrt(d.variance))
            return _clamp(p if less else 1.0 - p)

        return evaluate

    def _argument(self, kind: str, position: int):
        decode = self.distribution if kind == "d" else self.value
        return lambda args: decode(args[position])

    def _encode(self, result) -> ox.Literal:
        if isinstance(result, Distribution):
            return self._literal(result)
        return ox.Literal(repr(result), datatype=_DOUBLE)

    # -- argument decoding -------------------------------------------------------------------
    def distribution(self, term) -> Distribution:
        if not isinstance(term, ox.Literal) or term.datatype != _DISTRIBUTION:
            raise UncertaintyError("expected an rspu:distribution literal, got %s" % (term,))
        lexical = term.value
        parsed = self._parsed.get(lexical)
        if parsed is None:
            try:
                parsed = self.families.parse(lexical)
            except UncertaintyError as e:
                # The message, not the error: a cached exception keeps the frames of every
                # raise alive (with the query results they hold) and its traceback grows.
                parsed = str(e)
            self._remember_parse(lexical, parsed)
        if isinstance(parsed, str):
            raise UncertaintyError(parsed)
        return parsed

    def value(self, term) -> Value:
        """A number (any XSD numeric literal) or a distribution."""
        if isinstance(term, ox.Literal):
            datatype = term.datatype.value
            if datatype in NUMERIC_DATATYPES:
                number = float(term.value)
                if math.isnan(number):
                    raise UncertaintyError("NaN is not a usable number")
                return number
            if datatype == DISTRIBUTION_DATATYPE:
                return self.distribution(term)
        raise UncertaintyError("expected a number or an rspu:distribution, got %s" % (term,))

    def _literal(self, d: Distribution) -> ox.Literal:
        # With fusion off, a sum is usually compared next (lessThan(add(..), x)): remember
        # its parse.
        lexical = d.lexical()
        self._remember_parse(lexical, d)
        return ox.Literal(lexical, datatype=_DISTRIBUTION)

    def _remember_parse(self, lexical: str, parsed: Distribution | str) -> None:
        if len(self._parsed) >= _PARSE_CACHE_LIMIT:
            self._parsed.clear()
        self._parsed[lexical] = parsed


def _negate(x: Value) -> Value:
    return -x if isinstance(x, float) else x.negated()


def _sum(d: Distribution, x: Value) -> Distribution:
    if isinstance(x, float):
        if math.isinf(x):
            raise UncertaintyError("cannot shift a distribution by infinity")
        return d.shifted(x)
    return d.plus(x)


def _cdf_of_difference(d: Distribution, x: Value) -> float:
    """P(D < X) = P(D - X < 0) for independent D and X (continuous: < and <= agree)."""
    if isinstance(x, float):
        return d.cdf(x)
    return d.plus(x.negated()).cdf(0.0)


def probability_between(d: Distribution, lo: Value, hi: Value) -> float:
    """P(lo < D < hi) for independent D, lo and hi (numbers or distributions)."""
    if isinstance(lo, float) and isinstance(hi, float):
        return max(0.0, d.cdf(hi) - d.cdf(lo)) if lo < hi else 0.0
    if isinstance(lo, float):
        # P(lo < D < HI) = P(D < HI) - P(D <= lo, D < HI) = ∫_lo^∞ f_D(y) P(HI > y) dy
        return _integrate(d, lambda y: 1.0 - hi.cdf(y), lower=lo)
    if isinstance(hi, float):
        return _integrate(d, lambda y: lo.cdf(y), upper=hi)
    return _integrate(d, lambda y: lo.cdf(y) * (1.0 - hi.cdf(y)))


def _integrate(d: Distribution, weight: Callable[[float], float], lower: float = -math.inf,
               upper: float = math.inf) -> float:
    """∫ f_D(y) weight(y) dy over D's support ∩ [lower, upper], adaptively to ~1e-12."""
    # Imported here: only `between` with distributions as bounds integrates, and importing
    # scipy.integrate was most of what every command and Spark Python worker spent importing
    # the engine (bench/out/NOTES.md#scipy-import).
    from scipy import integrate
    a, b = d.support()
    a, b = max(a, lower), min(b, upper)
    if not a < b:
        return 0.0
    points = [p for p in d.kinks() if a < p < b]
    if d.variance > 0:
        # Split the normal's bulk so quad sees its scale.
        sigma = d.std
        centre = d.mean
        points += [centre + k * sigma for k in (-8, -4, -2, -1, 0, 1, 2, 4, 8) if a < centre + k * sigma < b]
    edges = [a] + sorted(set(points)) + [b]
    total = 0.0
    for left, right in zip(edges, edges[1:]):
        value, _ = integrate.quad(lambda y: d.pdf(y) * weight(y), left, right,
                                  epsabs=1e-13, epsrel=1e-12, limit=200)
        total += value
    return total




def fused_shape(tree) -> str:
    """The shape text of a call tree: (name, child, ...) with None for an argument."""
    if tree is None:
        return "_"
    return "%s(%s)" % (tree[0], ",".join(fused_shape(child) for child in tree[1:]))


def _parse_shape(shape: str):
    tokens = _FUSED_SHAPE.findall(shape)
    position = 0

    def node():
        nonlocal position
        token = tokens[position]
        position += 1
        if token == "_":
            return None
        if not token.endswith("(") or token[:-1] not in FUNCTION_NAMES:
            raise UncertaintyError("not a fused rspu: call shape: %r" % shape)
        children = []
        while tokens[position] != ")":
            if tokens[position] == ",":
                position += 1
            children.append(node())
        position += 1
        return (token[:-1], *children)

    try:
        tree = node()
    except IndexError:
        raise UncertaintyError("not a fused rspu: call shape: %r" % shape) from None
    if tree is None or position != len(tokens):
        raise UncertaintyError("not a fused rspu: call shape: %r" % shape)
    return tree


def _clamp(p: float) -> float:
    return min(1.0, max(0.0, p))


@dataclass(frozen=True)
class RspuFunction:
    """One `rspu:` function: its local name, its parameters as the specification names them
    (`d` a distribution; any other a number or a distribution), what it computes on decoded
    arguments, and what it returns (docs/uncertainty.md's table, `functions_table`)."""

    name: str
    parameters: tuple[str, ...]
    compute: Callable
    returns: str

    @property
    def kinds(self) -> str:
        """Its arguments' kinds: "d" a distribution, "v" a number or a distribution."""
        return "".join("d" if p == "d" else "v" for p in self.parameters)


# The functions, the one place to add one: the library, the check of calls at registration
# (translator/validate.py), the SPARQL service description and docs/uncertainty.md read them here.
FUNCTIONS: tuple[RspuFunction, ...] = (
    RspuFunction("add", ("d", "x"), lambda d, x: _sum(d, x), "distribution of `D + X`"),
    RspuFunction("subtract", ("d", "x"), lambda d, x: _sum(d, _negate(x)), "distribution of `D − X`"),
    RspuFunction("greaterThan", ("d", "x"), lambda d, x: _clamp(1.0 - _cdf_of_difference(d, x)),
                 "`xsd:double` probability `P(D > X)`"),
    RspuFunction("lessThan", ("d", "x"), lambda d, x: _clamp(_cdf_of_difference(d, x)),
                 "`xsd:double` probability `P(D < X)`"),
    RspuFunction("between", ("d", "lo", "hi"), lambda d, lo, hi: _clamp(probability_between(d, lo, hi)),
                 "`xsd:double` probability `P(lo < D < hi)`"),
)
# Each function on decoded arguments (argument kinds, function): a library's default operations.
_ON_VALUES: dict[str, tuple[str, Callable]] = {f.name: (f.kinds, f.compute) for f in FUNCTIONS}
FUNCTION_NAMES = tuple(_ON_VALUES)
_ARGUMENT_KINDS = {"d": "distribution", "v": "value"}
_COUNTS = {1: "a", 2: "two", 3: "three"}


def arguments_in_words(kinds: str) -> str:
    """A function's arguments in words: "dv" is a distribution and a value."""
    runs: list[tuple[str, int]] = []
    for kind in kinds:
        if runs and runs[-1][0] == kind:
            runs[-1] = (kind, runs[-1][1] + 1)
        else:
            runs.append((kind, 1))
    words = ["%s %s%s" % (_COUNTS.get(n, str(n)), _ARGUMENT_KINDS[kind], "" if n == 1 else "s") for kind, n in runs]
    return " and ".join(words)


def functions_table() -> str:
    """docs/uncertainty.md's table of the functions (a test keeps the page equal to it)."""
    return "\n".join(["| function | arguments | returns |", "| --- | --- | --- |"] + [
        "| `rspu:%s(%s)` | %s | %s |" % (f.name, ", ".join(f.parameters), arguments_in_words(f.kinds), f.returns)
        for f in FUNCTIONS])


def _count_calls(tree) -> int:
    return 0 if tree is None else 1 + sum(_count_calls(child) for child in tree[1:])


def _distribution_of(inner):
    """An inner result where a distribution is expected: a probability there is an error, as
    its xsd:double literal would be."""
    def get(args):
        value = inner(args)
        if not isinstance(value, Distribution):
            raise UncertaintyError("expected an rspu:distribution, got the number %r" % value)
        return value
    return get

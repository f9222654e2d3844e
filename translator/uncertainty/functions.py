"""The `rspu:` SPARQL extension functions (spec: uncertainty.md), for Oxigraph.

Each function takes RDF terms and returns a term, or None for a SPARQL expression error (a
FILTER drops the row, a BIND leaves its variable unbound); nothing raises into the query.
A `FunctionLibrary` holds the per-evaluation cache (seed 002 §4.1) and counts calls, so the
benchmark can show what each optimization saves.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Callable

import pyoxigraph as ox
from scipy import integrate

from ..namespaces import RSPU, XSD
from .distributions import Distribution, FamilyRegistry, UncertaintyError, default_families

DISTRIBUTION_DATATYPE = RSPU + "distribution"
NUMERIC_DATATYPES = frozenset(XSD + t for t in (
    "double", "float", "decimal", "integer", "int", "long", "short", "byte", "nonNegativeInteger",
    "positiveInteger", "negativeInteger", "nonPositiveInteger", "unsignedInt", "unsignedLong",
    "unsignedShort", "unsignedByte"))
FUNCTION_NAMES = ("add", "subtract", "greaterThan", "lessThan", "between")
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


class FunctionLibrary:
    """The five `rspu:` functions bound to one family registry, cache and call counter."""

    def __init__(self, families: FamilyRegistry | None = None, cache: bool = True):
        self.families = families or default_families()
        self.cache_enabled = cache
        self.counts = CallCounts()
        self._cache: dict[tuple, ox.Literal | None] = {}
        self._parsed: dict[str, Distribution | UncertaintyError] = {}
        implementations: dict[str, Callable[..., ox.Literal]] = {
            "add": self._add, "subtract": self._subtract, "greaterThan": self._greater_than,
            "lessThan": self._less_than, "between": self._between,
        }
        self.table = {ox.NamedNode(RSPU + name): self._entry(name, impl)
                      for name, impl in implementations.items()}

    def add_fused(self, iri: str) -> None:
        """Register a fused call (FUSED_PREFIX + its shape) built from the functions' own
        entries, so it shares their caches and counts."""
        node = ox.NamedNode(iri)
        if node not in self.table:
            self.table[node] = _compose(_parse_shape(iri[len(FUSED_PREFIX):]), self.table)

    def begin_evaluation(self) -> None:
        """The cache lives for one evaluation (seed 002): a new window starts it empty."""
        self._cache.clear()

    def _entry(self, name: str, impl: Callable[..., ox.Literal]):
        cache = self._cache
        counts = self.counts

        def call(*args):
            counts.calls += 1
            if self.cache_enabled:
                key = (name, *args)
                cached = cache.get(key, _MISS)
                if cached is not _MISS:
                    return cached
            counts.computed += 1
            try:
                result = impl(*args)
            except (UncertaintyError, ValueError, ArithmeticError, TypeError):
                result = None
            if self.cache_enabled:
                cache[key] = result
            return result

        call.__name__ = name
        return call

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
                parsed = e
            if len(self._parsed) >= _PARSE_CACHE_LIMIT:
                self._parsed.clear()
            self._parsed[lexical] = parsed
        if isinstance(parsed, UncertaintyError):
            raise parsed
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

    # -- functions ---------------------------------------------------------------------------
    def _add(self, d, x) -> ox.Literal:
        return self._literal(_sum(self.distribution(d), self.value(x)))

    def _subtract(self, d, x) -> ox.Literal:
        return self._literal(_sum(self.distribution(d), _negate(self.value(x))))

    def _literal(self, d: Distribution) -> ox.Literal:
        # A sum is usually compared next (lessThan(add(..), x)): remember its parse.
        lexical = d.lexical()
        if len(self._parsed) >= _PARSE_CACHE_LIMIT:
            self._parsed.clear()
        self._parsed[lexical] = d
        return ox.Literal(lexical, datatype=_DISTRIBUTION)

    def _greater_than(self, d, x) -> ox.Literal:
        return _probability(1.0 - _cdf_of_difference(self.distribution(d), self.value(x)))

    def _less_than(self, d, x) -> ox.Literal:
        return _probability(_cdf_of_difference(self.distribution(d), self.value(x)))

    def _between(self, d, lo, hi) -> ox.Literal:
        return _probability(probability_between(self.distribution(d), self.value(lo), self.value(hi)))


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


def _probability(p: float) -> ox.Literal:
    return ox.Literal(repr(min(1.0, max(0.0, p))), datatype=_DOUBLE)


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


def _compose(tree, table):
    """A function of the tree's leaf arguments (in order) applying its rspu: calls."""
    def build(node):
        entry = table[ox.NamedNode(RSPU + node[0])]
        children = node[1:]
        if all(child is None for child in children):
            arity = len(children)
            return arity, lambda args, at: entry(*args[at:at + arity])
        parts = [build(child) if child is not None else None for child in children]
        width = sum(1 if part is None else part[0] for part in parts)

        def apply(args, at):
            values = []
            for part in parts:
                if part is None:
                    values.append(args[at])
                    at += 1
                else:
                    value = part[1](args, at)
                    if value is None:
                        return None
                    values.append(value)
                    at += part[0]
            return entry(*values)
        return width, apply

    width, apply = build(tree)

    def fused(*args):
        return apply(args, 0) if len(args) == width else None

    return fused

"""Distribution literals (`rspu:distribution`) and exact probabilities over them.

Every distribution the functions produce is a sum of independent parts: one normal
N(μ, σ²) (σ² may be 0: no normal part) plus any number of uniforms U(a_i, b_i). That class is
closed under `add` and `subtract` (normal + normal is normal, -U(a, b) is U(-b, -a)), and its
CDF has an exact closed form:

    F(x) = 1/(k! Π w_i) · Σ_{S ⊆ {1..k}} (-1)^|S| · E[(c_S - Z)_+^k],
    c_S = x - μ - Σ a_i - Σ_{i∈S} w_i,   Z ~ N(0, σ²),   w_i = b_i - a_i,

where E[(c - Z)_+^k] expands into truncated normal moments (a recursion in Φ and φ), or into
max(c, 0)^k when σ² = 0. Comparisons reduce to this CDF: P(D > X) = 1 - F_{D-X}(0) for
independent D and X. Only `between` with distribution bounds needs numerical integration.

Families (the lexical forms the engine reads and writes):
  N(μ, σ²)                    normal, σ² > 0 (the second parameter is the variance)
  U(a, b)                     uniform on [a, b], a < b
  NU(μ, σ², a1, b1, ...)      N(μ, σ²) + U(a1, b1) + ...: σ² >= 0, at least one part
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass
from fractions import Fraction
from itertools import combinations
from typing import Callable

from ..errors import TranslatorError

_SQRT2 = math.sqrt(2.0)
_INV_SQRT_2PI = 1.0 / math.sqrt(2.0 * math.pi)
_LITERAL = re.compile(r"^\s*([A-Za-z][A-Za-z0-9]*)\s*\(([^()]*)\)\s*$")
_NUMBER = re.compile(r"^\s*[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?\s*$")
# Inclusion-exclusion has 2^k terms; past this many uniform parts it is too slow and loses
# precision to cancellation, so such sums are refused as an expression error.
MAX_UNIFORM_PARTS = 10


class UncertaintyError(TranslatorError):
    """An invalid distribution literal or an argument no `rspu:` function accepts."""


def normal_cdf(z: float) -> float:
    return 0.5 * math.erfc(-z / _SQRT2)


@dataclass(frozen=True)
class Distribution:
    """N(mu, variance) + Σ U(a_i, b_i), all independent."""

    mu: float
    variance: float
    uniforms: tuple[tuple[float, float], ...] = ()

    def __post_init__(self) -> None:
        if not (math.isfinite(self.mu) and math.isfinite(self.variance)) or self.variance < 0:
            raise UncertaintyError("invalid normal part N(%r, %r)" % (self.mu, self.variance))
        for a, b in self.uniforms:
            if not (math.isfinite(a) and math.isfinite(b) and a < b):
                raise UncertaintyError("invalid uniform part U(%r, %r): needs a < b" % (a, b))
        if self.variance == 0 and not self.uniforms:
            raise UncertaintyError("a distribution needs a positive variance or a uniform part")
        if len(self.uniforms) > MAX_UNIFORM_PARTS:
            raise UncertaintyError("more than %d uniform parts" % MAX_UNIFORM_PARTS)

    # -- algebra ------------------------------------------------------------------------------
    def shifted(self, c: float) -> "Distribution":
        return Distribution(self.mu + c, self.variance, self.uniforms).canonical()

    def negated(self) -> "Distribution":
        return Distribution(-self.mu, self.variance, tuple((-b, -a) for a, b in self.uniforms))

    def plus(self, other: "Distribution") -> "Distribution":
        return Distribution(self.mu + other.mu, self.variance + other.variance,
                            self.uniforms + other.uniforms).canonical()

    def canonical(self) -> "Distribution":
        """Fold the constant into the uniform when there is no normal part, so U + c stays U."""
        if self.variance == 0 and self.mu != 0:
            (a, b), *rest = self.uniforms
            return Distribution(0.0, 0.0, ((a + self.mu, b + self.mu), *rest))
        return self

    @property
    def mean(self) -> float:
        return self.mu + sum((a + b) / 2 for a, b in self.uniforms)

    @property
    def std(self) -> float:
        return math.sqrt(self.variance + sum((b - a) ** 2 / 12 for a, b in self.uniforms))

    def support(self) -> tuple[float, float]:
        """An interval outside which the density is below 1e-300 (exactly 0 without a normal)."""
        spread = 40.0 * math.sqrt(self.variance)
        return (self.mu + sum(a for a, _ in self.uniforms) - spread,
                self.mu + sum(b for _, b in self.uniforms) + spread)

    def kinks(self) -> list[float]:
        """Points where the density is not smooth (for numerical integration)."""
        if self.variance > 0:
            return []
        base = self.mu + sum(a for a, _ in self.uniforms)
        widths = [b - a for a, b in self.uniforms]
        points = set()
        for r in range(len(widths) + 1):
            for subset in combinations(widths, r):
                points.add(base + sum(subset))
        return sorted(points)

    # -- probabilities ---------------------------------------------------------------------
    def cdf(self, x: float) -> float:
        if not self.uniforms:
            return normal_cdf((x - self.mu) / math.sqrt(self.variance))
        lo, hi = self.support()
        if x <= lo:
            return 0.0
        if x >= hi:
            return 1.0
        if self.variance == 0 and len(self.uniforms) > 1:
            return float(self._uniform_sum_cdf_exact(x))
        return min(1.0, max(0.0, self._partial_moment_sum(x, len(self.uniforms))))

    def _uniform_sum_cdf_exact(self, x: float) -> Fraction:
        """Without a normal part the CDF is a piecewise polynomial; summing its inclusion-
        exclusion terms in exact rationals avoids cancellation when widths differ a lot."""
        k = len(self.uniforms)
        widths = [Fraction(b) - Fraction(a) for a, b in self.uniforms]
        base = Fraction(x) - Fraction(self.mu) - sum(Fraction(a) for a, _ in self.uniforms)
        total = Fraction(0)
        for r in range(k + 1):
            for subset in combinations(widths, r):
                c = base - sum(subset)
                if c > 0:
                    total += (-1) ** r * c ** k
        return min(Fraction(1), max(Fraction(0), total / (math.factorial(k) * math.prod(widths))))

    def pdf(self, x: float) -> float:
        k = len(self.uniforms)
        if k == 0:
            sigma = math.sqrt(self.variance)
            z = (x - self.mu) / sigma
            return _INV_SQRT_2PI * math.exp(-0.5 * z * z) / sigma
        return max(0.0, self._partial_moment_sum(x, k - 1))

    def _partial_moment_sum(self, x: float, power: int) -> float:
        """1/(power! Π w) Σ_S (-1)^|S| E[(c_S - Z)_+^power]: the CDF for power = k, the
        density for power = k - 1."""
        k = len(self.uniforms)
        if k == 0:
            return normal_cdf((x - self.mu) / math.sqrt(self.variance))
        widths = [b - a for a, b in self.uniforms]
        base = x - self.mu - sum(a for a, _ in self.uniforms)
        sigma = math.sqrt(self.variance)
        terms = []
        for r in range(k + 1):
            sign = -1.0 if r % 2 else 1.0
            for subset in combinations(widths, r):
                terms.append(sign * _positive_part_moment(base - sum(subset), power, sigma))
        return math.fsum(terms) / (math.factorial(power) * math.prod(widths))

    # -- lexical form --------------------------------------------------------------------------
    def lexical(self) -> str:
        if not self.uniforms:
            return "N(%s)" % _params((self.mu, self.variance))
        if self.variance == 0 and len(self.uniforms) == 1 and self.mu == 0:
            return "U(%s)" % _params(self.uniforms[0])
        return "NU(%s)" % _params((self.mu, self.variance, *(p for ab in self.uniforms for p in ab)))


def _params(values) -> str:
    # "+ 0.0" turns -0.0 into 0.0: the lexical form should not depend on how a zero came about.
    return ", ".join(repr(float(v) + 0.0) for v in values)


def _positive_part_moment(c: float, power: int, sigma: float) -> float:
    """E[(c - Z)_+^power] for Z ~ N(0, sigma²) (sigma may be 0)."""
    if sigma == 0:
        if c <= 0:
            return 0.0
        return c ** power
    # Truncated moments M_j = E[Z^j 1{Z < c}]:
    # M_0 = Φ(c/σ), M_1 = -σ² φ_σ(c), M_j = (j-1) σ² M_{j-2} - σ² c^{j-1} φ_σ(c).
    z = c / sigma
    density = _INV_SQRT_2PI * math.exp(-0.5 * z * z) / sigma
    var = sigma * sigma
    moments = [normal_cdf(z), -var * density]
    for j in range(2, power + 1):
        moments.append((j - 1) * var * moments[j - 2] - var * c ** (j - 1) * density)
    return math.fsum(math.comb(power, j) * c ** (power - j) * (-1) ** j * moments[j]
                     for j in range(power + 1))


# -- families ---------------------------------------------------------------------------------

@dataclass(frozen=True)
class Family:
    """A lexical family: its name, a description of its parameters and a constructor."""

    name: str
    parameters: str
    build: Callable[[list[float]], Distribution]


def _normal(p: list[float]) -> Distribution:
    if len(p) != 2:
        raise UncertaintyError("N takes 2 parameters (mean, variance), got %d" % len(p))
    if p[1] <= 0:
        raise UncertaintyError("N needs a positive variance, got %r" % p[1])
    return Distribution(p[0], p[1])


def _uniform(p: list[float]) -> Distribution:
    if len(p) != 2:
        raise UncertaintyError("U takes 2 parameters (a, b), got %d" % len(p))
    if not p[0] < p[1]:
        raise UncertaintyError("U(a, b) needs a < b, got U(%r, %r)" % (p[0], p[1]))
    return Distribution(0.0, 0.0, ((p[0], p[1]),))


def _normal_uniforms(p: list[float]) -> Distribution:
    if len(p) < 2 or len(p) % 2:
        raise UncertaintyError("NU takes mean, variance and pairs a, b; got %d parameters" % len(p))
    return Distribution(p[0], p[1], tuple((p[i], p[i + 1]) for i in range(2, len(p), 2)))


class FamilyRegistry:
    """The distribution families a function library reads. A family added here must give
    results that every function accepts: its sums must land in a registered family."""

    def __init__(self) -> None:
        self._families: dict[str, Family] = {}

    def register(self, family: Family) -> None:
        self._families[family.name] = family

    def names(self) -> list[str]:
        return sorted(self._families)

    def parse(self, lexical: str) -> Distribution:
        m = _LITERAL.match(lexical)
        if not m:
            raise UncertaintyError("%r is not a distribution literal F(p1, p2, ...)" % lexical)
        name, body = m.groups()
        family = self._families.get(name)
        if family is None:
            raise UncertaintyError("unknown distribution family %r (known: %s)" % (name, ", ".join(self.names())))
        params = []
        for text in body.split(","):
            if not _NUMBER.match(text):
                raise UncertaintyError("parameter %r of %s is not a number" % (text.strip(), name))
            params.append(float(text))
        return family.build(params)


def default_families() -> FamilyRegistry:
    registry = FamilyRegistry()
    registry.register(Family("N", "mean, variance", _normal))
    registry.register(Family("U", "a, b", _uniform))
    registry.register(Family("NU", "mean, variance, a1, b1, a2, b2, ...", _normal_uniforms))
    return registry

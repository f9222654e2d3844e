"""xsd:duration and xsd:dateTime values as integer microseconds.

Window arithmetic must be exact (a close at 08:00:10 is not 08:00:09.999999), so instants are
integer microseconds since the Unix epoch and durations integer microseconds. Durations with
months or years have no fixed length and are refused.
"""
from __future__ import annotations

import re
from datetime import datetime, timedelta, timezone
from decimal import Decimal, InvalidOperation

from .errors import TemporalValueError

MICROS = 1_000_000
_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
_NAIVE_EPOCH = datetime(1970, 1, 1)
_MICROSECOND = timedelta(microseconds=1)
# The instants the engine takes: 0001-01-01T00:00:00Z to 9999-12-31T23:59:59.999999Z.
FIRST_INSTANT = (datetime(1, 1, 1, tzinfo=timezone.utc) - _EPOCH) // _MICROSECOND
LAST_INSTANT = (datetime(9999, 12, 31, 23, 59, 59, 999999, tzinfo=timezone.utc) - _EPOCH) // _MICROSECOND

_DURATION = re.compile(
    r"^(-)?P(?:(\d+)Y)?(?:(\d+)M)?(?:(\d+)D)?"
    r"(?:T(?:(\d+)H)?(?:(\d+)M)?(?:(\d+(?:\.\d*)?|\.\d+)S)?)?$"
)
_DATETIME = re.compile(
    r"^(-?\d{4,})-(\d{2})-(\d{2})T(\d{2}):(\d{2}):(\d{2})(\.\d+)?(Z|[+-]\d{2}:\d{2})?$"
)


def _fraction_micros(text: str, what: str) -> int:
    try:
        value = Decimal(text) * MICROS
    except InvalidOperation as e:
        raise TemporalValueError("invalid %s %r" % (what, text)) from e
    if value != value.to_integral_value():
        raise TemporalValueError("%s %r is finer than a microsecond" % (what, text))
    return int(value)


def parse_duration(text: str) -> int:
    """Microseconds of an xsd:duration such as PT10S, PT0.5S or P1DT2H."""
    m = _DURATION.match(text.strip())
    if not m or text.strip() in ("P", "PT", "-P") or text.strip().endswith("T"):
        raise TemporalValueError("invalid duration %r (expected an xsd:duration such as PT10S)" % text)
    sign, years, months, days, hours, minutes, seconds = m.groups()
    if years or months:
        raise TemporalValueError(
            "duration %r uses years or months, which have no fixed length; use days or less" % text)
    total = int(days or 0) * 86400 * MICROS + int(hours or 0) * 3600 * MICROS + int(minutes or 0) * 60 * MICROS
    if seconds:
        total += _fraction_micros(seconds, "duration")
    return -total if sign else total


def parse_instant(text: str) -> int:
    """Microseconds since the epoch of an xsd:dateTime; a value without a zone is UTC. Years
    outside 0001-9999 (as UTC), which xsd:dateTime allows and nobody means, are refused."""
    micros = _instant(text)
    if not FIRST_INSTANT <= micros <= LAST_INSTANT:
        raise TemporalValueError("instant %r is outside the years 0001-9999 (in UTC), the instants the engine takes"
                                 % text)
    return micros


def _instant(text: str) -> int:
    m = _DATETIME.match(text.strip())
    if not m:
        raise TemporalValueError("invalid instant %r (expected an xsd:dateTime such as 2026-03-01T08:00:00Z)" % text)
    year, month, day, hour, minute, second, fraction, zone = m.groups()
    if len(year) == 4 and hour != "24" and (fraction is None or len(fraction) <= 7):
        # The common case, in C (every element's timestamp comes through here): the pattern has
        # already held the text to xsd's form, and what datetime refuses (year 0, 24:00, a day
        # the month lacks) takes the exact path below.
        try:
            value = datetime.fromisoformat(m.group(0))
        except ValueError:
            pass
        else:
            return (value - (_EPOCH if value.tzinfo else _NAIVE_EPOCH)) // _MICROSECOND
    year, month, day = int(year), int(month), int(day)
    hour, minute, second = int(hour), int(minute), int(second)
    if not (1 <= month <= 12 and 1 <= day <= _days_in_month(year, month)
            and (hour < 24 or (hour == 24 and minute == 0 and second == 0 and not fraction))
            and minute < 60 and second < 60):
        raise TemporalValueError("invalid instant %r (field out of range)" % text)
    days = _days_from_civil(year, month, day)
    total = ((days * 24 + hour) * 60 + minute) * 60 + second
    micros = total * MICROS + (_fraction_of_second(fraction, text) if fraction else 0)
    if zone and zone != "Z":
        offset = (int(zone[1:3]) * 60 + int(zone[4:6])) * 60 * MICROS
        micros += -offset if zone[0] == "+" else offset
    return micros


# A timestamp's usual form; a document's elements share their seconds far more than their fractions.
_SECONDS_AND_FRACTION = re.compile(r"(\d{4}-\d\d-\d\dT(?!24)\d\d:\d\d:\d\d)(?:\.(\d{1,6}))?(Z|[+-]\d\d:\d\d)?")


def parse_instants(texts) -> list[int]:
    """`parse_instant` of each text, in order (the first invalid one raises as it would).
    Each distinct second is parsed once: a stream file's elements are mostly many to a second,
    and reading their timestamps is on a replay's critical path."""
    seconds: dict[str, int] = {}
    instants = []
    for text in texts:
        m = _SECONDS_AND_FRACTION.fullmatch(text)
        if m is None:
            instants.append(parse_instant(text))
            continue
        whole, fraction, zone = m.groups()
        key = whole + zone if zone else whole
        base = seconds.get(key)
        if base is None:
            base = seconds[key] = parse_instant(key)
        instants.append(base + int(fraction.ljust(6, "0")) if fraction else base)
    return instants


def _fraction_of_second(fraction: str, text: str) -> int:
    """Microseconds of `.ddd...` (digits only, as the pattern matched): exact, in integers, as
    every element's timestamp goes through here."""
    digits = fraction[1:]
    if len(digits) > 6:
        if digits[6:].strip("0"):
            raise TemporalValueError("instant %r is finer than a microsecond" % text)
        digits = digits[:6]
    return int(digits.ljust(6, "0"))


_MONTH_DAYS = (31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31)


def _days_in_month(year: int, month: int) -> int:
    if month == 2 and year % 4 == 0 and (year % 100 != 0 or year % 400 == 0):
        return 29
    return _MONTH_DAYS[month - 1]


def _days_from_civil(y: int, m: int, d: int) -> int:
    # Howard Hinnant's algorithm: proleptic Gregorian days since 1970-01-01, any year.
    y -= m <= 2
    era = (y if y >= 0 else y - 399) // 400
    yoe = y - era * 400
    doy = (153 * (m + (-3 if m > 2 else 9)) + 2) // 5 + d - 1
    doe = yoe * 365 + yoe // 4 - yoe // 100 + doy
    return era * 146097 + doe - 719468


def _civil_from_days(z: int) -> tuple[int, int, int]:
    z += 719468
    era = (z if z >= 0 else z - 146096) // 146097
    doe = z - era * 146097
    yoe = (doe - doe // 1460 + doe // 36524 - doe // 146096) // 365
    y = yoe + era * 400
    doy = doe - (365 * yoe + yoe // 4 - yoe // 100)
    mp = (5 * doy + 2) // 153
    d = doy - (153 * mp + 2) // 5 + 1
    m = mp + (3 if mp < 10 else -9)
    return y + (m <= 2), m, d


def format_instant(micros: int) -> str:
    """The canonical UTC lexical form: 2026-03-01T08:00:10Z, fractions without trailing zeros."""
    seconds, fraction = divmod(micros, MICROS)
    days, rest = divmod(seconds, 86400)
    y, m, d = _civil_from_days(days)
    hh, rest = divmod(rest, 3600)
    mm, ss = divmod(rest, 60)
    text = "%04d-%02d-%02dT%02d:%02d:%02d" % (y, m, d, hh, mm, ss)
    if fraction:
        text += ("." + "%06d" % fraction).rstrip("0")
    return text + "Z"


class InstantTexts:
    """format_instant with the texts of recent instants kept: the queries evaluated at one
    close all write that close and their windows' bounds, the same few instants. Bounded:
    past `keep` texts it starts again."""

    def __init__(self, keep: int = 4096):
        self.keep = keep
        self._texts: dict[int, str] = {}

    def __call__(self, micros: int) -> str:
        text = self._texts.get(micros)
        if text is None:
            if len(self._texts) >= self.keep:
                self._texts = {}
            text = self._texts[micros] = format_instant(micros)
        return text


def format_duration(micros: int) -> str:
    sign = "-" if micros < 0 else ""
    seconds, fraction = divmod(abs(micros), MICROS)
    text = "%sPT%d" % (sign, seconds)
    if fraction:
        text += ("." + "%06d" % fraction).rstrip("0")
    return text + "S"

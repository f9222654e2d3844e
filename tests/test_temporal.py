import pytest

from rspstar.translator.errors import TemporalValueError
from rspstar.translator.temporal import (MICROS, InstantTexts, format_duration, format_instant, parse_duration, parse_instant,
                                         parse_instants)


@pytest.mark.parametrize("text,micros", [
    ("PT10S", 10_000_000), ("PT0.5S", 500_000), ("PT1M30S", 90_000_000), ("P1DT2H", 93_600_000_000),
    ("PT0.000001S", 1), ("-PT1S", -1_000_000),
])
def test_durations(text, micros):
    assert parse_duration(text) == micros


@pytest.mark.parametrize("text", ["P1M", "P1Y", "PT", "P", "10S", "PT1.5", "PT0.0000001S", "PTS"])
def test_bad_durations_are_refused(text):
    with pytest.raises(TemporalValueError):
        parse_duration(text)


def test_instants_round_trip_and_zones():
    assert format_instant(parse_instant("2026-03-01T08:00:10Z")) == "2026-03-01T08:00:10Z"
    assert parse_instant("2026-03-01T09:00:10+01:00") == parse_instant("2026-03-01T08:00:10Z")
    assert parse_instant("2026-03-01T08:00:10") == parse_instant("2026-03-01T08:00:10Z")
    assert format_instant(parse_instant("2026-03-01T08:00:01.500Z")) == "2026-03-01T08:00:01.5Z"
    assert format_instant(-500_000) == "1969-12-31T23:59:59.5Z"
    assert parse_instant("1970-01-01T00:00:00Z") == 0
    assert format_instant(parse_instant("2024-02-29T23:59:59.999999Z")) == "2024-02-29T23:59:59.999999Z"


@pytest.mark.parametrize("text", ["2026-02-30T00:00:00Z", "2026-13-01T00:00:00Z", "yesterday",
                                  "2026-03-01 08:00:00Z", "2026-03-01T25:00:00Z"])
def test_bad_instants_are_refused(text):
    with pytest.raises(TemporalValueError):
        parse_instant(text)


def test_format_duration():
    assert format_duration(1_500_000) == "PT1.5S"
    assert format_duration(10_000_000) == "PT10S"


def test_instant_fractions_are_exact_to_the_microsecond():
    assert parse_instant("2026-03-01T08:00:01.5Z") % MICROS == 500_000
    assert parse_instant("2026-03-01T08:00:01.1234560000Z") % MICROS == 123_456
    with pytest.raises(TemporalValueError, match="finer than a microsecond"):
        parse_instant("2026-03-01T08:00:01.1234567Z")


def test_parse_instants_agrees_with_parse_instant_text_by_text():
    texts = ["2026-03-01T08:00:00.333Z", "2026-03-01T08:00:00.5Z", "2026-03-01T08:00:00Z",
             "2026-03-01T09:00:00.25+01:00", "2026-03-01T08:00:00.25-00:30", "2026-03-01T08:00:00.000001",
             "1969-12-31T23:59:59.5Z", "2024-02-29T23:59:59.999999Z", "2026-03-01T24:00:00Z",
             " 2026-03-01T08:00:00Z ", "2026-03-01T08:00:00.1234560Z", "0001-01-01T00:00:00Z",
             "9999-12-31T23:59:59.999999Z"]
    assert parse_instants(texts) == [parse_instant(t) for t in texts]
    assert parse_instants(["2026-03-01T08:00:00.1Z"] * 3) == [parse_instant("2026-03-01T08:00:00.1Z")] * 3


@pytest.mark.parametrize("text", ["2026-02-30T08:00:00.5Z", "2026-03-01T24:00:00.5Z", "2026-03-01T08:60:00.1Z",
                                  "2026-03-01T08:00:00.1234567Z", "2026-03-01 08:00:00Z", "-0001-01-01T00:00:00Z",
                                  "12026-03-01T08:00:00.7Z", "0000-01-01T00:00:00Z"])
def test_parse_instants_refuses_what_parse_instant_refuses(text):
    with pytest.raises(TemporalValueError):
        parse_instant(text)
    with pytest.raises(TemporalValueError):
        parse_instants(["2026-03-01T08:00:00Z", text])


@pytest.mark.parametrize("text", ["10000-01-01T00:00:00Z", "-0001-01-01T00:00:00Z", "0000-12-31T23:59:59Z",
                                  "9999-12-31T23:59:59-00:01", "0001-01-01T00:00:00+00:01"])
def test_instants_outside_the_years_0001_to_9999_are_refused_naming_them(text):
    # xsd:dateTime allows any year; the engine's clock never reads one of these, and one stamped
    # so moved a stream's watermark past every reading to come (issue 60).
    with pytest.raises(TemporalValueError, match=r"outside the years 0001-9999 \(in UTC\)") as refused:
        parse_instant(text)
    assert repr(text) in str(refused.value)


def test_the_first_and_last_instants_of_the_years_0001_to_9999_are_taken():
    assert format_instant(parse_instant("0001-01-01T00:00:00Z")) == "0001-01-01T00:00:00Z"
    assert format_instant(parse_instant("9999-12-31T23:59:59.999999Z")) == "9999-12-31T23:59:59.999999Z"
    assert parse_instant("9999-12-31T23:59:59-00:00") == parse_instant("9999-12-31T23:59:59Z")


def test_instant_texts_write_what_format_instant_writes_and_keep_a_bounded_number():
    texts = InstantTexts(keep=3)
    instants = [0, 1_500_000, -86_400_000_001, 253402300799_999_999, 1_500_000, 7]
    assert [texts(t) for t in instants] == [format_instant(t) for t in instants]
    # Past its bound it starts again rather than growing with every instant ever written.
    for t in range(100):
        assert texts(t * 1_000_000) == format_instant(t * 1_000_000)
    assert len(texts._texts) <= 3

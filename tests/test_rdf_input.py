"""store/rdf_input.py's `instants_of` (every element of a replay's files is timed through it)
reads each text as translator.temporal.parse_instants does: the same instants, or the same
refusal of the first invalid text."""
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rspstar.store.rdf_input import instants_of
from rspstar.translator.errors import TemporalValueError
from rspstar.translator.temporal import parse_instant, parse_instants


def outcome(read, texts):
    try:
        return read(texts)
    except TemporalValueError:
        return "refused"


DIGITS = st.sampled_from("0123456789")
# Texts near the usual form: any field may be out of range, short, long, in other digits,
# with or without a fraction and a zone; and whitespace around it, or none of it at all.
FIELD = st.one_of(st.text(DIGITS, min_size=2, max_size=2), st.sampled_from(["00", "23", "24", "59", "60", "99", "٠١",
                                                                          "1", "123"]))
YEAR = st.one_of(st.sampled_from(["2026", "2024", "1969", "0000", "1900", "2000", "-0001", "12026", "٢٠٢٦"]),
                 st.text(DIGITS, min_size=4, max_size=4))
FRACTION = st.one_of(st.just(""), st.builds(lambda d: "." + d, st.text(DIGITS, min_size=0, max_size=9)))
ZONE = st.sampled_from(["", "Z", "+01:00", "-00:30", "+14:00", "+1:00", "z", " Z", "+01:00 "])
TEXT = st.one_of(
    st.builds(lambda y, mo, d, h, mi, s, f, z, pad: pad + "%s-%s-%sT%s:%s:%s%s%s" % (y, mo, d, h, mi, s, f, z) + pad,
              YEAR, FIELD, FIELD, FIELD, FIELD, FIELD, FRACTION, ZONE, st.sampled_from(["", "", "", " "])),
    st.text(max_size=30))
# Many texts share their seconds or their fraction and zone, as a stream file's do.
TEXTS = st.lists(st.one_of(TEXT, st.sampled_from(["2026-03-01T08:00:00.5Z", "2026-03-01T08:00:00Z",
                                                  "2026-03-01T08:00:01.5Z", "2026-03-01T09:00:00.5+01:00"])),
                 max_size=12)


@settings(max_examples=2000, deadline=None)
@given(TEXTS)
def test_instants_of_reads_every_text_as_parse_instants_does(texts):
    assert outcome(instants_of, texts) == outcome(parse_instants, texts)


def test_instants_of_shares_what_texts_share_and_reads_the_rest_alone():
    texts = ["2026-03-01T08:00:00.333Z", "2026-03-01T08:00:00.5Z", "2026-03-01T08:00:00Z",
             "2026-03-01T09:00:00.25+01:00", "2026-03-01T08:00:00.25-00:30", "2026-03-01T08:00:00.000001",
             "1969-12-31T23:59:59.5Z", "2024-02-29T23:59:59.999999Z", "2026-03-01T24:00:00Z",
             " 2026-03-01T08:00:00Z ", "2026-03-01T08:00:00.1234560Z", "2026-03-01T08:00:00.5Z"]
    assert instants_of(texts) == [parse_instant(t) for t in texts]
    for bad in ["2026-02-30T08:00:00.5Z", "2026-03-01T24:00:00.5Z", "2026-03-01T08:60:00.1Z",
                "2026-03-01T08:00:00.1234567Z", "2026-03-01 08:00:00Z", "soon",
                # outside the years 0001-9999, which the engine takes
                "-0001-01-01T00:00:00Z", "12026-03-01T08:00:00.7Z", "0000-01-01T00:00:00.5Z"]:
        with pytest.raises(TemporalValueError):
            instants_of(["2026-03-01T08:00:00Z", bad])

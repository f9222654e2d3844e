"""The one registry of input formats: names, file extensions and media types agree."""
import pyoxigraph as ox
import pytest

from rspstar.store import formats


def test_every_way_of_naming_a_format_finds_the_same_one():
    for fmt in formats.FORMATS:
        assert formats.by_name(fmt.name) is fmt
        for extension in fmt.extensions:
            assert formats.by_path("dir/File" + extension.upper()) is fmt
        for media_type in fmt.media_types:
            assert formats.by_media_type(media_type) is fmt
    assert formats.by_path("data.unknown") is formats.DEFAULT and formats.DEFAULT.rdf is ox.RdfFormat.TRIG
    assert formats.by_media_type("text/csv") is None
    assert formats.by_path("a.jsonl").rdf is None and formats.by_path("a.nq").line_based


def test_an_unknown_name_says_which_are_known():
    with pytest.raises(formats.UnknownFormat, match="unknown format 'csv' .*trig, nquads"):
        formats.by_name("csv")

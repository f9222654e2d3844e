"""The recordings: replayable, rotated, and within one budget of bytes on disk."""
import pyoxigraph as ox
import pytest

from rspstar.store.codec import canonical
from rspstar.store.rdf_input import read_elements
from rspstar.store.recordings import Recordings, recording_path, rotated_path
from rspstar.store.stream_store import StreamStore

A, B = "http://example.org/a", "http://example.org/b.5"


def elements(k: int):
    text = ('<http://example.org/e%d> <http://www.w3.org/ns/prov#generatedAtTime> '
            '"2026-03-01T08:00:%02dZ"^^<http://www.w3.org/2001/XMLSchema#dateTime> . '
            '<http://example.org/e%d> { <http://example.org/o> <http://example.org/v> %d {| <http://example.org/c> 0.9 |} . }'
            % (k, k % 60, k, k))
    return read_elements(text.encode(), "t.trig", ox.RdfFormat.TRIG).elements


def replayed(path):
    return [s.graph for s in StreamStore().documents.stage("s", path.read_bytes(), ox.RdfFormat.N_QUADS, str(path)).staged]


def test_a_full_recording_is_rotated_and_every_file_replays_newest_first(tmp_path):
    recordings = Recordings(tmp_path, max_bytes=10**6)
    # Two elements a file (their reifiers' blank node labels make sizes vary a little).
    recordings.file_bytes = 3 * len(canonical(elements(0))) // 2
    batches = [elements(k) for k in range(5)]
    for batch in batches:
        recordings.record({A: batch})
    current = recording_path(tmp_path, A)
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        [current.name, rotated_path(current, 1).name, rotated_path(current, 2).name])
    assert replayed(current) == [e.graph for e in batches[4]]
    assert replayed(rotated_path(current, 1)) == [e.graph for b in batches[2:4] for e in b]
    assert replayed(rotated_path(current, 2)) == [e.graph for b in batches[0:2] for e in b]


def test_the_recordings_stay_within_their_budget_dropping_the_oldest_file_of_any_stream(tmp_path):
    one = tmp_path / "probe"
    Recordings(one, 10**6).record({A: elements(0)})
    size = recording_path(one, A).stat().st_size              # bytes of one element's record
    budget = 8 * size
    recordings = Recordings(tmp_path / "r", max_bytes=budget)
    assert recordings.file_bytes == size                      # an eighth of the budget
    recordings.file_bytes = 1                                 # each element its own file
    for k in range(40):
        recordings.record({A if k % 4 else B: elements(k)})   # B gets a quarter of the elements
        on_disk = sum(p.stat().st_size for p in (tmp_path / "r").iterdir())
        assert on_disk == recordings.total_bytes()
        assert on_disk <= budget + 2 * size                   # plus each stream's file in progress
    kept = sorted(int(g.rsplit("e", 1)[1]) for p in (tmp_path / "r").iterdir() for g in replayed(p))
    # The newest elements, of both streams: the oldest files went first, whichever their stream.
    assert kept == list(range(40 - len(kept), 40)) and len(kept) >= 7
    assert any(k % 4 == 0 for k in kept)


def test_a_restart_counts_what_earlier_runs_recorded(tmp_path):
    first = Recordings(tmp_path, max_bytes=10**6)
    first.file_bytes = 1                          # every element its own file
    for k in range(5):
        first.record({A: elements(k)})
    current = recording_path(tmp_path, A)
    assert [replayed(rotated_path(current, k)) for k in (1, 5)] == [["http://example.org/e4"], ["http://example.org/e0"]]
    # Room for one more element (sizes vary by a few bytes with blank node labels), not two.
    again = Recordings(tmp_path, max_bytes=first.total_bytes() + len(canonical(elements(0))) // 2)
    assert again.total_bytes() == first.total_bytes()
    again.file_bytes = 1
    again.record({A: elements(5)})                # over budget now: the oldest file goes
    assert [replayed(rotated_path(current, k)) for k in (1, 5)] == [["http://example.org/e5"], ["http://example.org/e1"]]
    assert not rotated_path(current, 6).exists()
    assert again.total_bytes() == sum(p.stat().st_size for p in tmp_path.iterdir())


def test_a_budget_must_be_positive(tmp_path):
    with pytest.raises(ValueError, match="positive"):
        Recordings(tmp_path, max_bytes=0)


def test_recording_goes_on_after_files_are_removed_by_hand(tmp_path):
    recordings = Recordings(tmp_path, max_bytes=6 * len(canonical(elements(0))))
    recordings.file_bytes = 1                      # every element its own file
    for k in range(4):
        recordings.record({A: elements(k)})
    for path in tmp_path.iterdir():
        path.unlink()                              # an operator clears the folder
    with pytest.raises(OSError):
        for k in range(4, 12):                     # the first write that meets a missing file fails
            recordings.record({A: elements(k)})
    for k in range(12, 20):
        recordings.record({A: elements(k)})        # and the next reads the folder afresh
    assert recordings.total_bytes() == sum(p.stat().st_size for p in tmp_path.iterdir()) <= recordings.max_bytes
    assert replayed(rotated_path(recording_path(tmp_path, A), 1)) == ["http://example.org/e19"]


def test_a_batch_that_cannot_be_recorded_is_still_stored(tmp_path, caplog):
    from rspstar.store.ingestion import SourceConfig, SparkIngestion     # no Spark started: the batch function alone

    class FullDisk(Recordings):
        def record(self, elements):
            raise OSError(28, "No space left on device")

    store = StreamStore()
    source = SourceConfig("landing", "files", stream=A, path=str(tmp_path / "landing"))
    ingestion = SparkIngestion(None, store, [source], tmp_path / "c", tmp_path / "q", FullDisk(tmp_path / "r"))
    text = canonical(elements(1)).decode()
    ingestion._write(source, 0, [{"origin": "file://%s/x.nq" % (tmp_path / "landing"), "stream": A, "text": text,
                                  "ingest_time": 0}], False)
    assert store.streams()[A].ingested == 1
    assert "stored but not recorded: [Errno 28] No space left on device" in caplog.text

"""What the engine does about a micro-batch that Spark's JVM keeps failing on, without Spark: the
batch in progress is read from the streaming query's checkpoint (as Spark writes it), its
failures are counted beside the checkpoint (a restart of the engine counts on), and at the
second its landing files are set aside with the reason, an empty file left in each one's place
so that Spark's replay of the batch reads nothing of them. The real JVM: tests/test_ingestion_burst.py."""
import json
from pathlib import Path
from urllib.parse import quote

from rspstar.store.ingestion import FAILURES_BEFORE_SET_ASIDE, SourceConfig, SparkIngestion, batch_files, pending_batch
from rspstar.store.landing import LandedFiles, landing_folder
from rspstar.store.stream_store import StreamStore

STREAM = "http://example.org/s"


def spark_checkpoint(checkpoint: Path, batches: dict[int, list[Path]], committed: int, compact: int | None = None):
    """A file stream's checkpoint as Spark 4 writes it: offsets/N, commits/N, sources/0/N (and
    N.compact holding every entry up to N), paths as file URIs percent-encoded once more."""
    for folder in ("offsets", "commits", "sources/0"):
        (checkpoint / folder).mkdir(parents=True, exist_ok=True)
    entries = []
    for batch, files in batches.items():
        (checkpoint / "offsets" / str(batch)).write_text('v1\n{}\n{"logOffset":%d}\n' % batch)
        if batch <= committed:
            (checkpoint / "commits" / str(batch)).write_text('v1\n{"nextBatchWatermarkMs":0}\n')
        lines = ['{"path":"file://%s","timestamp":1,"batchId":%d}' % (quote(str(f)), batch) for f in files]
        entries += lines
        name = "%d.compact" % batch if batch == compact else str(batch)
        (checkpoint / "sources" / "0" / name).write_text("v1\n" + "\n".join(entries if batch == compact else lines)
                                                         + "\n")


def test_the_batch_in_progress_and_its_files_are_read_from_the_checkpoint(tmp_path):
    folder = landing_folder(tmp_path / "landing", STREAM)       # a folder name with % in it
    files = [folder / ("f%d.nq" % k) for k in range(4)]
    spark_checkpoint(tmp_path / "ck", {0: files[:1], 1: files[1:3], 2: files[3:]}, committed=1, compact=2)
    assert pending_batch(tmp_path / "ck") == 2
    assert batch_files(tmp_path / "ck", 2) == files[3:]
    assert batch_files(tmp_path / "ck", 1) == files[1:3]
    (tmp_path / "ck" / "commits" / "2").write_text("v1\n{}\n")
    assert pending_batch(tmp_path / "ck") is None
    assert pending_batch(tmp_path / "none") is None


def test_a_batch_failing_twice_has_its_files_set_aside_even_across_a_restart_of_the_engine(tmp_path):
    landing = tmp_path / "landing"
    folder = landing_folder(landing, STREAM)
    folder.mkdir(parents=True)
    good, bad = folder / "good.nq", folder / "bad.nq"
    good.write_bytes(b"<http://a> <http://b> <http://c> .\n")
    bad.write_bytes(b"x" * 10_000)
    landed = LandedFiles()
    landed.landed(bad, 10_000, [STREAM])
    source = SourceConfig("landing", "files", stream=STREAM, path=str(landing))
    spark_checkpoint(tmp_path / "checkpoints" / "landing", {0: [good], 1: [bad]}, committed=0)

    def engine():
        store = StreamStore()
        return SparkIngestion(None, store, [source], tmp_path / "checkpoints", tmp_path / "quarantine", landed=landed,
                              session=lambda: None)

    engine()._count_failure("landing", "Spark's JVM is gone")
    assert bad.stat().st_size == 10_000                              # once: any cause, tried again
    assert FAILURES_BEFORE_SET_ASIDE == 2
    again = engine()                                                 # the engine was restarted meanwhile
    again._count_failure("landing", "Spark's JVM ran out of memory (java.lang.OutOfMemoryError: Java heap space)")
    assert bad.exists() and bad.stat().st_size == 0                  # an empty file in its place
    assert good.stat().st_size > 0                                   # another batch's file is not touched
    [reason] = [json.loads(p.read_text()) for p in (tmp_path / "quarantine").glob("*.reason.json")]
    assert reason["origin"] == str(bad) and reason["stream"] == STREAM
    assert "failed 2 times" in reason["reason"] and "max_batch_bytes" in reason["reason"], reason
    [data] = (tmp_path / "quarantine").glob("*.data")
    assert data.read_bytes() == b"x" * 10_000                       # kept whole
    assert landed.bytes() == 0 and again.writers["landing"].quarantined == {STREAM: 1}
    assert not (tmp_path / "checkpoints" / "landing.failures.json").exists()
    # Another batch failing starts its own count.
    spark_checkpoint(tmp_path / "checkpoints" / "landing", {2: [good]}, committed=1)
    again._count_failure("landing", "Spark's JVM is gone")
    assert json.loads((tmp_path / "checkpoints" / "landing.failures.json").read_text())["batch"] == 2
    assert good.stat().st_size > 0

"""Work weighed and deadlines kept (issue 24), on moto's S3, the real Spark and Nessie: the store weighs gzip by its
trailer, bzip2 by a bounded probe, Parquet by its footer and ORC by its footer's statistics, reading only bounded
ranges of the exact version; a bzip2 bomb and an ORC file of millions of identical rows are INVALID after a bounded
read; a small .csv.gz or ORC file that inflates past the large-file threshold goes to the distributed engine; a
deadline that passes while Spark writes stops the job, deletes the attempt's branch and hands the file back to the
queue (deferred), and the next invocation publishes it."""

from __future__ import annotations

import bz2
import gzip
import io
import time
import uuid
from collections.abc import Callable

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyarrow import orc

from tests.conftest import Lake
from tests.unit.entrypoints.test_handler_scale import RecordingJobs
from wap_ingest.core.errors import OutOfTimeError
from wap_ingest.core.ingest import Item, LargeFiles
from wap_ingest.core.models import FileFormat, IngestOutcome, OutcomeStatus, SourceObject

pytestmark = [pytest.mark.stack, pytest.mark.spark]


def csv_text(rows: int) -> bytes:
    return ("my_col_0,my_col_1,my_col_2\n" + "".join(f"{i},v{i % 97},{i / 2}\n" for i in range(rows))).encode()


def orc_bytes(table: pa.Table, codec: str) -> bytes:
    sink = io.BytesIO()
    orc.write_table(table, sink, compression=codec)
    return sink.getvalue()


def orc_rows(rows: int) -> pa.Table:
    return pa.table({"my_col_0": pa.array(range(rows)), "my_col_1": [f"v{i % 97}" for i in range(rows)],
                     "my_col_2": [i / 2 for i in range(rows)]})


def headed(lake: Lake, key: str, body: bytes) -> SourceObject:
    """Upload, and the version as the store has it (its size and ETag), as routing heads it."""
    lake.put(key, body)
    return lake.service.objects.head(lake.inbox_bucket, key)


def test_the_store_weighs_each_kind_of_file_by_its_own_bytes(lake: Lake) -> None:
    table = f"t_{uuid.uuid4().hex[:8]}"
    raw = csv_text(200_000)
    gz = headed(lake, f"{table}/a.csv.gz", gzip.compress(raw))
    weight = lake.service.objects.weigh(gz, FileFormat.CSV)
    assert weight.processed == len(raw) and weight.how == "gzip trailer" and weight.stored == gz.size
    bz = headed(lake, f"{table}/a.csv.bz2", bz2.compress(raw))  # smaller than the probe: measured whole
    assert lake.service.objects.weigh(bz, FileFormat.CSV).processed == len(raw)
    larger = csv_text(1_000_000)
    bz = headed(lake, f"{table}/b.csv.bz2", bz2.compress(larger))
    weight = lake.service.objects.weigh(bz, FileFormat.CSV)
    assert weight.how == "bzip2 probe" and len(larger) / 2 < weight.processed < len(larger) * 2  # an estimate
    sink = io.BytesIO()
    pq.write_table(pa.table({"a": pa.array(range(100_000)), "b": pa.array(["x" * 30] * 100_000)}), sink)
    parquet = headed(lake, f"{table}/a.parquet", sink.getvalue())
    weight = lake.service.objects.weigh(parquet, FileFormat.PARQUET)
    assert weight.how == "Parquet footer" and weight.processed > weight.stored
    plain = headed(lake, f"{table}/a.csv", raw)
    assert lake.service.objects.weigh(plain, FileFormat.CSV).processed == len(raw)
    broken = headed(lake, f"{table}/b.parquet", b"PAR1 this is not parquet at all")
    with pytest.raises(Exception, match="not a complete Parquet file"):
        lake.service.objects.weigh(broken, FileFormat.PARQUET)
    rows = orc_rows(100_000)
    compressed = headed(lake, f"{table}/a.orc", orc_bytes(rows, "zstd"))
    weight = lake.service.objects.weigh(compressed, FileFormat.ORC)
    assert (weight.how, weight.processed, weight.stored) == ("ORC footer", rows.nbytes, compressed.size)
    assert weight.processed > 10 * weight.stored
    broken = headed(lake, f"{table}/b.orc", b"ORC" + orc_bytes(rows, "zlib")[3:-30])
    with pytest.raises(Exception, match="not a complete ORC file"):
        lake.service.objects.weigh(broken, FileFormat.ORC)


def test_a_bzip2_bomb_is_invalid_after_a_bounded_read(lake: Lake) -> None:
    table = f"t_{uuid.uuid4().hex[:8]}"
    bomb = bz2.compress(b"0" * (48 * 1024 * 1024))  # a few hundred bytes that inflate to 48 MiB
    source = lake.put(f"{table}/bomb.csv.bz2", bomb)
    outcome = lake.service.ingest(source)
    assert outcome.status is OutcomeStatus.INVALID, outcome.message
    assert "a decompression bomb is never started" in outcome.message and "WAP_MAX_INFLATION" in outcome.message
    assert not [b for b in lake.wap_branches() if table in b]


def test_an_orc_file_of_identical_rows_is_a_bomb_after_a_bounded_read(lake: Lake) -> None:
    table = f"t_{uuid.uuid4().hex[:8]}"
    rows = 3_000_000
    same = pa.table({"my_col_0": pa.array([7] * rows), "my_col_1": ["the same value"] * rows,
                     "my_col_2": pa.array([0.5] * rows)})
    source = lake.put(f"{table}/bomb.orc", orc_bytes(same, "zstd"))  # about 40 kB that decode to 102 MB
    outcome = lake.service.ingest(source)
    assert outcome.status is OutcomeStatus.INVALID, outcome.message
    assert "a decompression bomb is never started" in outcome.message and "by its ORC footer" in outcome.message
    assert not [b for b in lake.wap_branches() if table in b]


@pytest.mark.parametrize(("suffix", "compressed"), [
    ("csv.gz", lambda: (gzip.compress(csv_text(100_000)), len(csv_text(100_000)))),
    ("orc", lambda: (orc_bytes(orc_rows(100_000), "zlib"), orc_rows(100_000).nbytes)),  # about 19 times
])
def test_a_small_file_that_inflates_past_the_threshold_goes_to_the_distributed_engine(
        lake: Lake, suffix: str, compressed: Callable[[], tuple[bytes, int]]) -> None:
    table = f"t_{uuid.uuid4().hex[:8]}"
    body, processed = compressed()
    source = headed(lake, f"{table}/a.{suffix}", body)
    jobs = RecordingJobs()
    service = lake.service.replaced(large_files=LargeFiles(jobs, threshold_bytes=(source.size or 0) * 2))
    outcome = service.ingest(source)
    assert outcome.status is OutcomeStatus.SUBMITTED, outcome.message
    assert f"{processed} bytes to process ({source.size} stored)" in outcome.message
    assert [s.key for s, _ in jobs.submitted] == [source.key]


def test_a_deadline_passing_during_the_write_defers_the_file_and_leaves_nothing(lake: Lake) -> None:
    table = f"t_{uuid.uuid4().hex[:8]}"
    source = lake.put(f"{table}/big.csv", csv_text(1_500_000))
    started = time.monotonic()
    results = lake.service.ingest_all([Item(SourceObject(source.bucket, source.key))],
                                      out_of_time=lambda: time.monotonic() > started + 2.0)
    assert isinstance(results[0], OutOfTimeError), results[0]  # deferred: back to the queue, no alert
    assert not [b for b in lake.wap_branches() if table in b]
    assert lake.service.ingest(SourceObject(source.bucket, source.key)).status is OutcomeStatus.PUBLISHED
    assert lake.count(f"wap.{table}") == 1_500_000
    assert isinstance(lake.service.ingest(SourceObject(source.bucket, source.key)), IngestOutcome)

"""SparkBatchWriter's staging, without Spark: a file that cannot be staged is that file's problem, not the batch's."""

from __future__ import annotations

from pathlib import Path

from wap_ingest.adapters.spark import SparkIcebergWriter
from wap_ingest.adapters.spark_batch import SparkBatchWriter
from wap_ingest.core.errors import SourceNotFoundError
from wap_ingest.core.models import FileFormat, MeasurementPlan, SourceObject, TableRef


def test_a_file_gone_since_its_head_is_reported_unreadable_not_raised() -> None:
    def stage(source: SourceObject) -> Path:
        raise SourceNotFoundError(f"{source.uri}: the object no longer exists")

    writer = SparkBatchWriter(SparkIcebergWriter(spark=None, stage=stage))
    files = [(SourceObject("b", f"t/{n}.csv", etag=n), FileFormat.CSV) for n in "ab"]
    result = writer.append_batch(files, TableRef("wap", "t"), "branch", MeasurementPlan(),
                                 accept=lambda *_: True, properties=lambda _: {})
    assert result.appended is None and result.accepted == ()
    assert set(result.unreadable) == {s.identity for s, _ in files}
    assert all("no longer exists" in why for why in result.unreadable.values())

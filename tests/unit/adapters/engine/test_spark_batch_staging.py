"""The engine staging several files, without Spark: a file that cannot be staged is its own problem, not the batch's."""

from __future__ import annotations

from pathlib import Path

from wap_ingest.adapters.engine.session import SparkEngine
from wap_ingest.adapters.engine.writer import SparkIcebergWriter
from wap_ingest.core.errors import SourceNotFoundError
from wap_ingest.core.measurements import MeasurementPlan
from wap_ingest.core.models import FileFormat, SourceObject, TableRef
from wap_ingest.core.ports import WriteSpec


def test_a_file_gone_since_its_head_is_reported_unreadable_not_raised() -> None:
    def stage(source: SourceObject, _stop: object) -> Path:
        raise SourceNotFoundError(f"{source.uri}: the object no longer exists")

    writer = SparkIcebergWriter(SparkEngine(lambda: None), stage)  # no file is staged: Spark is never asked
    files = [(SourceObject("b", f"t/{n}.csv", etag=n), FileFormat.CSV) for n in "ab"]
    with writer.stage(WriteSpec(TableRef("wap", "t"), "branch", MeasurementPlan()), files) as staged:
        assert staged.measured == {}
        assert set(staged.left_out) == {s.identity for s, _ in files}
        assert all("no longer exists" in why for why in staged.left_out.values())
        result = staged.append([s for s, _ in files])
    assert result.snapshot is None and result.written == ()

"""A local Parquet file's schema is read from its footer in the driver, exactly as Spark's own inference makes it,
without the one-task Spark job inference runs (issue 17, item 2), on the real Spark."""

from __future__ import annotations

import datetime as dt
import decimal
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tests import bad_inputs
from tests.conftest import Lake
from wap_ingest.core.models import FileFormat

pytestmark = [pytest.mark.stack, pytest.mark.spark]

TYPES = pa.table({
    "i8": pa.array([1, None], pa.int8()), "i32": pa.array([1, 2], pa.int32()), "i64": pa.array([1, None], pa.int64()),
    "u32": pa.array([1, 2], pa.uint32()), "f32": pa.array([1.5, None], pa.float32()), "f64": pa.array([0.5, 1.0]),
    "s": pa.array(["a", None]), "b": pa.array([b"x", b"y"], pa.binary()), "flag": pa.array([True, False]),
    "d": pa.array([dt.date(2026, 1, 1), None], pa.date32()),
    "ts_utc": pa.array([dt.datetime(2026, 1, 1), None], pa.timestamp("us", tz="UTC")),
    "ts_local": pa.array([dt.datetime(2026, 1, 1), None], pa.timestamp("us")),
    "ts_ms": pa.array([dt.datetime(2026, 1, 1), None], pa.timestamp("ms", tz="UTC")),
    "dec": pa.array([decimal.Decimal("1.25"), None], pa.decimal128(10, 2)),
    "tags": pa.array([["a"], []], pa.list_(pa.string())),
    "point": pa.array([{"x": 1, "y": "a"}, None], pa.struct([("x", pa.int64()), ("y", pa.string())])),
    "attrs": pa.array([[("k", 1)], None], pa.map_(pa.string(), pa.int64())),
})


def jobs(spark: object) -> int:
    return len(spark.sparkContext.statusTracker().getJobIdsForGroup(None))  # type: ignore[attr-defined]


@pytest.mark.parametrize("flavor", ["pyarrow", "int96", "spark"])
def test_the_footer_schema_is_sparks_own_inference_without_a_job(lake: Lake, tmp_path: Path, flavor: str) -> None:
    from wap_ingest.adapters.engine.read import footer_schema, read_source

    spark = lake.service.ports.writer.spark
    path = tmp_path / "types.parquet"
    if flavor == "spark":  # written by Spark: its footer carries Spark's own schema, which inference prefers
        spark.read.parquet(str(_write(tmp_path / "source.parquet", False))).write.parquet(str(tmp_path / "out"))
        path = next((tmp_path / "out").glob("*.parquet"))
    else:
        _write(path, flavor == "int96")
    inferred = spark.read.parquet(str(path)).schema
    before = jobs(spark)
    assert footer_schema(spark, str(path)) == inferred
    frame = read_source(spark, [str(path)], FileFormat.PARQUET, source_uri="s3://in/types.parquet", table="wap.t")
    assert jobs(spark) == before  # neither the footer nor the read ran a Spark job
    assert frame.schema == inferred and frame.count() == 2


def test_an_unreadable_footer_falls_back_to_sparks_read_and_its_classified_error(lake: Lake, tmp_path: Path) -> None:
    from wap_ingest.adapters.engine.read import footer_schema, read_source
    from wap_ingest.core.errors import WapError

    spark = lake.service.ports.writer.spark
    path = tmp_path / "bad.parquet"
    path.write_bytes(bad_inputs.parquet_truncated())
    assert footer_schema(spark, str(path)) is None
    with pytest.raises(WapError) as caught:
        read_source(spark, [str(path)], FileFormat.PARQUET, source_uri="s3://in/bad.parquet", table="wap.t")
    assert "s3://in/bad.parquet" in str(caught.value)


def _write(path: Path, int96: bool) -> Path:
    pq.write_table(TYPES, path, use_deprecated_int96_timestamps=int96)
    return path

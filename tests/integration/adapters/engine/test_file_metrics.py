"""The new files' metrics from an append's manifests (adapters/spark_audit.added_file_metrics) on the real Spark,
Iceberg and Nessie: null counts for every column, bounds (numbers; dates and timestamps in microseconds) for the
columns asked for only, for each type the schema's JSON names differently from its type id."""

from __future__ import annotations

import datetime as dt
import decimal
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tests.conftest import Lake
from wap_ingest.core.models import TableRef

pytestmark = [pytest.mark.stack, pytest.mark.spark]

UTC = dt.UTC
ROWS = pa.table({
    "n": pa.array([3, None, 7], pa.int32()), "big": pa.array([-5, 2, None], pa.int64()),
    "x": pa.array([0.5, None, 2.5], pa.float64()), "dec": pa.array([decimal.Decimal("1.25"), None,
                                                                    decimal.Decimal("9.50")], pa.decimal128(10, 2)),
    "day": pa.array([dt.date(2026, 1, 2), dt.date(2026, 1, 1), None], pa.date32()),
    "at": pa.array([dt.datetime(2026, 1, 1, 6, tzinfo=UTC), None, dt.datetime(2026, 1, 3, tzinfo=UTC)],
                   pa.timestamp("us", tz="UTC")),
    "local": pa.array([None, dt.datetime(2026, 1, 1), dt.datetime(2026, 2, 1)], pa.timestamp("us")),
    "s": pa.array(["a", None, None]),
})


def micros(value: dt.datetime) -> int:
    return int(value.replace(tzinfo=value.tzinfo or UTC).timestamp()) * 1_000_000


def test_null_counts_for_all_and_bounds_for_the_asked_columns(lake: Lake, table_name: str, tmp_path: Path) -> None:
    from wap_ingest.adapters.engine.audit import added_file_metrics
    from wap_ingest.adapters.engine.tables import IcebergTables

    spark = lake.service.ports.writer.spark
    pq.write_table(ROWS, tmp_path / "rows.parquet")
    lake.service.ports.catalog.ensure_namespace("main", "wap")  # as the service makes it
    spark.read.parquet(str(tmp_path / "rows.parquet")).writeTo(f"nessie.wap.{table_name}").create()
    with IcebergTables(spark) as tables:
        iceberg = tables.iceberg_table(TableRef("wap", table_name), "main")
        snapshot = int(iceberg.currentSnapshot().snapshotId())
        every = added_file_metrics(spark, iceberg, snapshot)
        some = added_file_metrics(spark, iceberg, snapshot, ["N", "at", "day"])
    assert every.files == 1 and every.rows == 3
    assert every.null_counts == {"n": 1, "big": 1, "x": 1, "dec": 1, "day": 1, "at": 1, "local": 1, "s": 2}
    assert every.lower == {"n": 3, "big": -5, "x": 0.5, "dec": 1.25, "day": micros(dt.datetime(2026, 1, 1)),
                           "at": micros(dt.datetime(2026, 1, 1, 6)), "local": micros(dt.datetime(2026, 1, 1))}
    assert every.upper == {"n": 7, "big": 2, "x": 2.5, "dec": 9.5, "day": micros(dt.datetime(2026, 1, 2)),
                           "at": micros(dt.datetime(2026, 1, 3)), "local": micros(dt.datetime(2026, 2, 1))}
    assert some.null_counts == every.null_counts
    assert some.lower == {k: every.lower[k] for k in ("n", "at", "day")}
    assert some.upper == {k: every.upper[k] for k in ("n", "at", "day")}

"""The audit reads the rows one run appended, not the table: counted with Spark's own input metrics."""

from __future__ import annotations

import logging
import time
import uuid
from typing import Any

import pyarrow as pa
import pytest

from tests.conftest import Lake, parquet_bytes
from tests.integration.core.audits.test_audit_suites import run, suites, table_bytes
from wap_ingest.core.models import AppendResult, OutcomeStatus, TableRef

pytestmark = [pytest.mark.stack, pytest.mark.spark]
log = logging.getLogger(__name__)

LARGE = 3_000_000
NEW = 1_000
CHECKS: list[dict[str, Any]] = [
    {"check": "not_null", "columns": ["my_col_0", "my_col_1"]},
    {"check": "unique", "columns": ["my_col_0"]},  # against main too: a semi-join with the table before the append
    {"check": "range", "column": "my_col_2", "min": 0, "max": 10_000_000},
    {"check": "regex", "column": "my_col_1", "pattern": "v[0-9]+"},
    {"check": "row_count", "min": 1},
]


def new_rows() -> bytes:
    ids = range(LARGE, LARGE + NEW)
    return table_bytes({"my_col_0": pa.array(ids, pa.int32()), "my_col_1": pa.array([f"v{i}" for i in ids]),
                        "my_col_2": pa.array([i / 2 for i in ids], pa.float64())})


def records_read_by(spark: Any, action: Any) -> tuple[int, int, float]:
    """Run `action` in a job group of its own; (input records, stages, seconds) from Spark's status store."""
    sc = spark.sparkContext
    group = f"audit-cost-{uuid.uuid4().hex[:8]}"
    sc.setJobGroup(group, "audit cost")
    started = time.perf_counter()
    try:
        action()
    finally:
        elapsed = time.perf_counter() - started
        sc.setLocalProperty("spark.jobGroup.id", None)
    sc._jsc.sc().listenerBus().waitUntilEmpty()
    store = sc._jsc.sc().statusStore()
    stages = [s for job in sc.statusTracker().getJobIdsForGroup(group)
              for s in sc.statusTracker().getJobInfo(job).stageIds]
    return sum(int(store.lastStageAttempt(s).inputRecords()) for s in stages), len(stages), elapsed


def audit_again(lake: Lake, table: str, audits: Any) -> tuple[int, int, float]:
    """Measure the published append again, exactly as the pipeline did, inside a job group."""
    writer = lake.service.ports.writer
    ref = TableRef("wap", table)
    identity = f"{lake.inbox_bucket}/{table}/new.parquet#" + _etag(lake, table)
    appended = writer.find_append(ref, "main", identity)
    assert isinstance(appended, AppendResult) and appended.rows == NEW
    plan = audits.suite_for(ref).plan()
    measured = []
    counted = records_read_by(writer.spark,
                              lambda: measured.append(writer.measure_appended(ref, "main", appended, plan)))
    # what the new files' metrics answered, without reading rows
    assert set(measured[0].from_metadata) == {"row_count", "not_null:my_col_0", "not_null:my_col_1", "range:my_col_2"}
    return counted


def _etag(lake: Lake, table: str) -> str:
    return str(lake.s3.head_object(Bucket=lake.inbox_bucket, Key=f"{table}/new.parquet")["ETag"]).strip('"')


def test_audit_of_a_small_append_reads_the_new_rows_only_whatever_the_table_size(lake: Lake) -> None:
    spark = lake.service.ports.writer.spark
    lake.service.ports.catalog.ensure_namespace("main", "wap")
    large, small = f"t_large_{uuid.uuid4().hex[:8]}", f"t_small_{uuid.uuid4().hex[:8]}"
    # the large table is generated inside Spark (no file), straight on main
    spark.range(LARGE).selectExpr(
        "CAST(id AS INT) AS my_col_0", "concat('v', CAST(id AS STRING)) AS my_col_1",
        "CAST(id AS DOUBLE) / 2 AS my_col_2",
    ).writeTo(f"nessie.wap.{large}").tableProperty("format-version", "2").create()
    assert run(lake, lake.put(f"{small}/base.parquet", parquet_bytes(NEW)), suites(small, CHECKS)).status \
        is OutcomeStatus.PUBLISHED

    figures = {}
    for table in (small, large):
        audits = suites(table, CHECKS)
        outcome = run(lake, lake.put(f"{table}/new.parquet", new_rows()), audits)
        assert outcome.status is OutcomeStatus.PUBLISHED, outcome.message
        assert outcome.report is not None and [c.status.value for c in outcome.report.checks] == ["passed"] * 7
        records, stages, seconds = audit_again(lake, table, audits)
        figures[table] = (records, stages, seconds, outcome.timings.get("audit", 0.0))
    assert lake.count(f"wap.{large}") == LARGE + NEW

    for table, (records, stages, seconds, in_pipeline) in figures.items():
        log.warning("audit of %d new rows in %s: %d records read in %d stages, %.2fs (in the pipeline: %.2fs)",
                    NEW, table, records, stages, seconds, in_pipeline)
        print(f"AUDIT-COST {table}: {records} records read, {stages} stages, {seconds:.2f}s "
              f"(pipeline audit stage {in_pipeline:.2f}s)")
    large_records = figures[large][0]
    # the new rows are read by the aggregation pass and the semi-join; the base scan is pruned to nothing
    assert NEW <= large_records <= 3 * NEW, large_records
    assert figures[small][0] == large_records

"""A Parquet file that fits its table is registered, not rewritten (issue 27), on the real Spark, Iceberg, Nessie and
moto: the source object is copied server-side into the table's location and appended as a data file with its
footer's metrics; Spark and PyIceberg (the independent client) read it back as the rewrite path would have written
it; the audit answers from its metrics; a redelivery is a duplicate; the lake's copy outlives the source; `wap
maintain` compacts registered files like any other."""

from __future__ import annotations

import datetime as dt
import decimal
import io
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tests.conftest import Lake, parquet_bytes
from wap_ingest.core import lineage
from wap_ingest.core.audits import suites_from
from wap_ingest.core.models import OutcomeStatus, SourceObject, TableRef

pytestmark = [pytest.mark.stack, pytest.mark.spark]
CHECKS = [{"check": "not_null", "columns": ["my_col_1"]}, {"check": "row_count", "min": 1}]

# every type the register path takes, with nulls where a column may have them
TYPES = pa.table({
    "i32": pa.array([1, 2, None], pa.int32()), "i64": pa.array([10, None, 30], pa.int64()),
    "f32": pa.array([1.5, None, 2.5], pa.float32()), "f64": pa.array([0.5, 1.0, None]),
    "s": pa.array(["a", None, "c"]), "b": pa.array([b"x", b"y", None], pa.binary()),
    "flag": pa.array([True, False, None]), "d": pa.array([dt.date(2026, 1, 1), None, dt.date(1969, 7, 20)]),
    "ts_utc": pa.array([dt.datetime(2026, 1, 1, 12), None, dt.datetime(2000, 2, 29)], pa.timestamp("us", tz="UTC")),
    "ts_local": pa.array([dt.datetime(2026, 1, 1, 12), dt.datetime(1999, 12, 31, 23, 59), None], pa.timestamp("us")),
    "ts_ms": pa.array([dt.datetime(2026, 1, 1, 0, 0, 1), None, dt.datetime(2026, 1, 2)], pa.timestamp("ms", tz="UTC")),
    "dec": pa.array([decimal.Decimal("1.25"), None, decimal.Decimal("-3.50")], pa.decimal128(10, 2)),
    "tags": pa.array([["a"], [], None], pa.list_(pa.string())),
    "point": pa.array([{"x": 1, "y": "a"}, None, {"x": None, "y": "c"}],
                      pa.struct([("x", pa.int64()), ("y", pa.string())])),
    "attrs": pa.array([[("k", 1)], None, [("a", 2), ("b", None)]], pa.map_(pa.string(), pa.int64())),
    "ids": pa.array([[(1, "one")], [], None], pa.map_(pa.int32(), pa.string())),
})


def parquet_of(table: pa.Table, **options: Any) -> bytes:
    sink = io.BytesIO()
    pq.write_table(table, sink, **options)
    return sink.getvalue()


def service_for(lake: Lake, tables: dict[str, object]) -> Any:
    return lake.service.replaced(suites=suites_from({"tables": tables}, default_namespace="wap"))


def snapshot_of(lake: Lake, table: str, ref: str = "main") -> dict[str, str]:
    from wap_ingest.adapters.engine.tables import IcebergTables

    with IcebergTables(lake.service.ports.writer.spark) as tables:
        return {str(k): str(v) for k, v in
                dict(tables.iceberg_table(TableRef("wap", table), ref).currentSnapshot().summary()).items()}


def data_files(lake: Lake, table: str) -> list[str]:
    """The data files of the table on main (Iceberg's `files` metadata table)."""
    spark = lake.service.ports.writer.spark
    spark.catalog.refreshTable(f"nessie.wap.{table}")
    return sorted(str(r["file_path"]) for r in spark.sql(f"SELECT file_path FROM nessie.wap.{table}.files").collect())


def s3_bytes(lake: Lake, uri: str) -> bytes:
    bucket, _, key = uri.removeprefix("s3://").partition("/")
    return bytes(lake.s3.get_object(Bucket=bucket, Key=key)["Body"].read())


def pyiceberg_table(lake: Lake, table: str) -> pa.Table:
    from pyiceberg.catalog import load_catalog

    catalog = load_catalog("independent", type="rest", uri=f"{lake.env['NESSIE_ENDPOINT']}/iceberg/main",
                           **{"py-io-impl": "pyiceberg.io.fsspec.FsspecFileIO"})
    return catalog.load_table(f"wap.{table}").scan().to_arrow()


def spark_rows(lake: Lake, table: str) -> tuple[list[tuple[str, str]], list[dict[str, Any]]]:
    spark = lake.service.ports.writer.spark
    spark.catalog.refreshTable(f"nessie.wap.{table}")
    frame = spark.table(f"nessie.wap.{table}")
    rows = sorted((r.asDict(recursive=True) for r in frame.collect()), key=repr)
    return [(f.name, f.dataType.simpleString()) for f in frame.schema.fields], rows


def test_a_fitting_file_is_registered_byte_for_byte_and_says_so(lake: Lake, table_name: str) -> None:
    body = parquet_bytes(20)
    service = service_for(lake, {table_name: CHECKS})
    outcome = service.ingest(lake.put(f"{table_name}/a.parquet", body))
    assert outcome.status is OutcomeStatus.PUBLISHED, outcome.message
    assert "registered (a new table made from the file's schema)" in outcome.message
    [location] = data_files(lake, table_name)
    assert location.rsplit("/", 1)[-1].startswith("wap-") and "/data/" in location
    assert s3_bytes(lake, location) == body  # the producer's file itself, not a rewrite of its rows
    summary = snapshot_of(lake, table_name)
    assert summary[lineage.WRITE] == "registered" and summary[lineage.IDENTITY] == outcome.source.identity
    assert summary["added-records"] == "20" and summary["added-data-files"] == "1"

    again = service.ingest(lake.put(f"{table_name}/b.parquet", parquet_bytes(5)))
    assert again.status is OutcomeStatus.PUBLISHED and "registered (the file's schema fits the table)" in again.message
    assert lake.count(f"wap.{table_name}") == 25
    [merge, *_] = lake.service.ports.catalog.publications(TableRef("wap", table_name))
    assert merge.properties[lineage.WRITE] == "registered"
    assert merge.properties[lineage.WRITE_REASON] == "the file's schema fits the table"
    [newest, *_] = lake.service.history(TableRef("wap", table_name))
    assert newest.write == "registered (the file's schema fits the table)"


def test_registered_files_read_back_as_the_rewrite_path_writes_them(lake: Lake, table_name: str) -> None:
    """The same source into two tables, one registering and one rewriting: Spark and PyIceberg see the same types and
    rows in both (the name mapping maps the file's columns, list elements, map keys and values by name)."""
    body = parquet_of(TYPES)
    rewritten, registered = f"{table_name}_rw", f"{table_name}_rg"
    service = service_for(lake, {rewritten: {"checks": [{"check": "row_count", "min": 1}], "write": "rewrite"},
                                 registered: [{"check": "row_count", "min": 1}]})
    for table in (rewritten, registered):
        for n in range(2):  # a new table, then an existing one
            outcome = service.ingest(lake.put(f"{table}/{n}.parquet", body))
            assert outcome.status is OutcomeStatus.PUBLISHED, outcome.message
            assert ("registered (" in outcome.message) is (table == registered), outcome.message
    assert spark_rows(lake, registered) == spark_rows(lake, rewritten)
    mine, theirs = pyiceberg_table(lake, registered), pyiceberg_table(lake, rewritten)
    assert mine.schema == theirs.schema
    assert sorted(mine.to_pylist(), key=repr) == sorted(theirs.to_pylist(), key=repr)
    properties = lake.service.ports.writer.spark.sql(f"SHOW TBLPROPERTIES nessie.wap.{registered}").collect()
    assert any(r["key"] == "schema.name-mapping.default" for r in properties)


def test_a_registered_tables_types_are_spelled_as_spark_reads_them(lake: Lake, table_name: str) -> None:
    """An audit answered from the metrics has no engine's frame to name the types: they are Spark's names of the
    table's Iceberg types (audit_metadata.spark_type_name), checked here against Spark's own reading, every type."""
    from wap_ingest.adapters.engine.audit_metadata import spark_type_name
    from wap_ingest.bootstrap import builders

    wanted = {"i32": "int", "i64": "bigint", "ts_utc": "timestamp", "ts_local": "timestamp_ntz", "dec": "decimal(10,2)",
              "b": "binary", "d": "date"}
    service = service_for(lake, {table_name: [{"check": "schema", "columns": wanted}]})
    for n in range(2):  # a new table (the engine makes it), then an existing one (no engine)
        outcome = service.ingest(lake.put(f"{table_name}/{n}.parquet", parquet_of(TYPES)))
        assert outcome.status is OutcomeStatus.PUBLISHED and "registered (" in outcome.message, outcome.message
    table = builders.branch_tables_for(lake.service.settings).load(TableRef("wap", table_name), "main")
    assert table is not None
    spark_types, _ = spark_rows(lake, table_name)
    assert [(f.name, spark_type_name(f.field_type)) for f in table.schema().fields] == spark_types


def test_the_audit_answers_from_the_registered_files_metrics_without_a_spark_job(lake: Lake, table_name: str
                                                                                ) -> None:
    service = service_for(lake, {table_name: CHECKS})
    service.ingest(lake.put(f"{table_name}/warm.parquet", parquet_bytes(3)))
    spark = lake.service.ports.writer.spark
    before = len(spark.sparkContext.statusTracker().getJobIdsForGroup(None))
    clean = service.ingest(lake.put(f"{table_name}/clean.parquet", parquet_bytes(10)))
    assert clean.status is OutcomeStatus.PUBLISHED and "registered (" in clean.message, clean.message
    assert len(spark.sparkContext.statusTracker().getJobIdsForGroup(None)) == before  # no row was read
    outcome = service.ingest(lake.put(f"{table_name}/nulls.parquet", parquet_bytes(10, nulls=4)))
    assert outcome.status is OutcomeStatus.REJECTED and "registered (" in outcome.message, outcome.message
    assert outcome.report is not None
    [nulls] = [c for c in outcome.report.checks if c.check == "not_null"]
    assert nulls.measured == "4 nulls" and len(nulls.samples) == 4  # counted from the metrics; samples read rows
    appended = lake.service.ports.writer.find_append(TableRef("wap", table_name), str(outcome.branch),
                                                     outcome.source.identity)
    assert appended is not None
    plan = service.suites.suite_for(TableRef("wap", table_name)).plan()
    measured = lake.service.ports.writer.measure_appended(TableRef("wap", table_name), str(outcome.branch),
                                                          appended, plan)
    assert {"row_count", "not_null:my_col_1"} <= set(measured.from_metadata)
    assert lake.count(f"wap.{table_name}", ref=str(outcome.branch)) == 23  # the branch reads the registered file


def test_a_redelivery_is_a_duplicate_and_registers_nothing_twice(lake: Lake, table_name: str) -> None:
    service = service_for(lake, {table_name: CHECKS})
    source = lake.put(f"{table_name}/once.parquet", parquet_bytes(8))
    first = service.ingest(source)
    assert first.status is OutcomeStatus.PUBLISHED and "registered (" in first.message
    [location] = data_files(lake, table_name)
    second = service.ingest(source)
    assert second.status is OutcomeStatus.DUPLICATE
    assert data_files(lake, table_name) == [location] and lake.count(f"wap.{table_name}") == 8
    bucket, _, key = location.removeprefix("s3://").partition("/")
    stored = lake.s3.list_objects_v2(Bucket=bucket, Prefix=key.rsplit("/", 1)[0] + "/")["Contents"]
    assert [o["Key"] for o in stored] == [key]  # one copy in the lake


def test_a_registered_file_outlives_its_source(lake: Lake, table_name: str) -> None:
    service = service_for(lake, {table_name: CHECKS})
    source: SourceObject = lake.put(f"{table_name}/gone.parquet", parquet_bytes(12))
    assert "registered (" in service.ingest(source).message
    lake.s3.delete_object(Bucket=source.bucket, Key=source.key)
    assert lake.count(f"wap.{table_name}") == 12
    assert pyiceberg_table(lake, table_name).num_rows == 12


def test_maintain_compacts_registered_files_into_the_tables_layout(lake: Lake, table_name: str) -> None:
    service = service_for(lake, {table_name: {"checks": CHECKS, "maintenance": {"min_input_files": 2}}})
    for n in range(3):
        assert "registered (" in service.ingest(lake.put(f"{table_name}/{n}.parquet", parquet_bytes(10))).message
    before = spark_rows(lake, table_name)
    assert len(data_files(lake, table_name)) == 3
    [result] = service.maintain(TableRef("wap", table_name))
    assert getattr(result, "status", None) == "maintained", result
    after = data_files(lake, table_name)
    assert len(after) == 1 and not after[0].rsplit("/", 1)[-1].startswith("wap-")
    assert spark_rows(lake, table_name) == before
    assert pyiceberg_table(lake, table_name).num_rows == 30


@pytest.mark.parametrize(("checks", "most"), [
    (CHECKS, 0),  # not_null and row_count: the footer's metrics answer them
    ([{"check": "unique", "columns": ["my_col_0"], "against_main": False}], 110),  # a pass over the new rows
], ids=["answered-by-metrics", "rows-read"])
def test_a_registered_file_into_an_existing_table_makes_no_jvm_call_unless_its_audit_reads_rows(
        lake: Lake, table_name: str, monkeypatch: pytest.MonkeyPatch, checks: list[dict[str, Any]], most: int) -> None:
    """The commit is PyIceberg's (adapters/catalog/tables.py) and the audit is answered from the registered file's
    metrics: no Py4J round trip at all from the calling thread. When the audit reads rows, Spark reads them from the
    registered snapshot (before PyIceberg, the Java commit alone cost 83 round trips, 188 before py4j_lookup). A
    count, not a time: it fails when the JVM comes back onto the register path."""
    import threading

    from py4j.clientserver import ClientServerConnection

    service = service_for(lake, {table_name: checks})
    assert "registered (" in service.ingest(lake.put(f"{table_name}/first.parquet", parquet_bytes(10))).message
    calls: list[str] = []
    send = ClientServerConnection.send_command
    me = threading.current_thread()

    def counted(self: ClientServerConnection, command: str) -> Any:
        if threading.current_thread() is me:
            calls.append(command.split("\n", 1)[0])
        return send(self, command)

    monkeypatch.setattr(ClientServerConnection, "send_command", counted)
    outcome = service.ingest(lake.put(f"{table_name}/second.parquet", parquet_bytes(10)))
    monkeypatch.undo()
    assert "registered (" in outcome.message
    assert outcome.status is OutcomeStatus.PUBLISHED, outcome.message
    assert (len(calls) == 0) if most == 0 else (0 < len(calls) <= most), (len(calls), calls[:20])

"""When a Parquet file is registered and when it is rewritten (issue 27, item 2), on the real stack: every reason to
rewrite is named in the outcome, the merge commit and `wap history`; with `write: register` a file that cannot be
registered is INVALID with the reason; a partitioned table registers a file whose rows lie in one partition."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pyarrow as pa
import pytest

from tests import bad_inputs
from tests.conftest import Lake, parquet_bytes
from tests.integration.adapters.engine.test_register import (
    CHECKS,
    data_files,
    parquet_of,
    s3_bytes,
    service_for,
    snapshot_of,
)
from wap_ingest.core import lineage
from wap_ingest.core.ingest import Item
from wap_ingest.core.models import IngestOutcome, OutcomeStatus, TableRef

pytestmark = [pytest.mark.stack, pytest.mark.spark]
ROWS = {"my_col_0": pa.array(range(6), pa.int32()), "my_col_1": pa.array([f"v{i}" for i in range(6)])}


def rows_with(column: str, values: pa.Array) -> bytes:
    return parquet_of(pa.table(ROWS | {column: values}))


STAMPS = [dt.datetime(2026, 3, 1, h) for h in range(6)]
# (case, the file, the words of the reason)
BY_FILE: list[tuple[str, bytes, str]] = [
    ("int96", parquet_of(pa.table(ROWS | {"ts": pa.array(STAMPS, pa.timestamp("us"))}),
                         use_deprecated_int96_timestamps=True), "column ts: INT96 timestamps"),
    ("unsigned", rows_with("n", pa.array(range(6), pa.uint32())), "column n: unsigned 32-bit integers"),
    ("int8", rows_with("n", pa.array(range(6), pa.int8())), "column n: 8-bit integers"),
    ("fixed", rows_with("n", pa.array([b"abcd"] * 6, pa.binary(4))), "column n: fixed-length binary"),
    ("zone", rows_with("ts", pa.array(STAMPS, pa.timestamp("us", tz="Europe/Paris"))),
     "column ts: timestamps in time zone Europe/Paris"),
]


@pytest.mark.parametrize(("case", "body", "reason"), BY_FILE, ids=[c for c, _, _ in BY_FILE])
def test_a_type_registration_cannot_keep_is_rewritten_and_register_refuses_it(lake: Lake, table_name: str, case: str,
                                                                              body: bytes, reason: str) -> None:
    auto, strict = f"{table_name}_a", f"{table_name}_r"
    service = service_for(lake, {auto: [{"check": "row_count", "min": 1}],
                                 strict: {"checks": [{"check": "row_count", "min": 1}], "write": "register"}})
    outcome = service.ingest(lake.put(f"{auto}/{case}.parquet", body))
    assert outcome.status is OutcomeStatus.PUBLISHED, outcome.message
    assert f"rewritten ({reason}" in outcome.message, outcome.message
    assert snapshot_of(lake, auto)[lineage.WRITE] == "rewritten"
    [merge, *_] = lake.service.ports.catalog.publications(TableRef("wap", auto))
    assert merge.properties[lineage.WRITE] == "rewritten" and reason in merge.properties[lineage.WRITE_REASON]
    assert reason in str(lake.service.history(TableRef("wap", auto))[0].write)
    refused = service.ingest(lake.put(f"{strict}/{case}.parquet", body))
    assert refused.status is OutcomeStatus.INVALID, refused.message
    assert "cannot be registered" in refused.message and reason in refused.message and "Fix:" in refused.message


def ingest_twice(lake: Lake, table: str, entry: object, first: bytes, second: bytes, suffix: str = "parquet"
                 ) -> IngestOutcome:
    """The first file makes the table; the second one's outcome."""
    service = service_for(lake, {table: entry})
    made = service.ingest(lake.put(f"{table}/first.parquet", first))
    assert made.status is OutcomeStatus.PUBLISHED, made.message
    outcome: IngestOutcome = service.ingest(lake.put(f"{table}/second.{suffix}", second))
    return outcome


ALLOW_NEW = {"checks": [{"check": "row_count", "min": 1},
                        {"check": "schema", "columns": {"my_col_0": "int"}, "new_columns": "allow"}]}
# (case, the table's entry, the second file, its suffix, the words of the reason)
BY_TABLE: list[tuple[str, Any, bytes, str, str]] = [
    ("new column", ALLOW_NEW, parquet_bytes(4, extra={"x": [1, 2, 3, 4]}), "parquet",
     "its columns are not the table's (new x)"),
    ("wider type", [{"check": "row_count", "min": 1}], parquet_of(pa.table({"n": pa.array([1], pa.int64())})),
     "parquet", "column n: long in the file, int in the table (needs conversion)"),
    ("setting", {"checks": CHECKS, "write": "rewrite"}, parquet_bytes(4), "parquet",
     "write: rewrite in the audits file"),
    ("csv", CHECKS, b"my_col_0,my_col_1,my_col_2\n1,a,0.5\n", "csv", "a csv file (only Parquet files are registered)"),
    ("sorted", {"checks": CHECKS, "layout": {"sort_by": ["my_col_0"]}}, parquet_bytes(4), "parquet",
     "the table's layout sorts its rows (sort_by)"),
    ("quarantine", {"checks": CHECKS, "on_failure": "quarantine"}, parquet_bytes(4), "parquet",
     "the table quarantines failing rows"),
    ("bucket", {"checks": CHECKS, "layout": {"partition_by": ["bucket(4, my_col_0)"]}}, parquet_bytes(4), "parquet",
     "the table is partitioned by bucket[4](my_col_0) and the file's rows span several partitions"),
]


@pytest.mark.parametrize(("case", "entry", "second", "suffix", "reason"), BY_TABLE, ids=[c[0] for c in BY_TABLE])
def test_what_the_table_needs_makes_a_file_rewritten(lake: Lake, table_name: str, case: str, entry: object,
                                                     second: bytes, suffix: str, reason: str) -> None:
    first = parquet_of(pa.table({"n": pa.array([1], pa.int32())})) if case == "wider type" else parquet_bytes(3)
    outcome = ingest_twice(lake, table_name, entry, first, second, suffix)
    assert outcome.status is OutcomeStatus.PUBLISHED, outcome.message
    assert f"rewritten ({reason}" in outcome.message, outcome.message


def test_a_promoted_type_registers_and_reads_as_the_tables(lake: Lake, table_name: str) -> None:
    """int in the file, long in the table: Iceberg's readers promote it."""
    first = parquet_of(pa.table({"n": pa.array([1, 2], pa.int64()), "my_col_1": ["a", "b"]}))
    second = parquet_of(pa.table({"n": pa.array([3], pa.int32()), "my_col_1": ["c"]}))
    outcome = ingest_twice(lake, table_name, [{"check": "row_count", "min": 1}], first, second)
    assert "registered (the file's schema fits the table)" in outcome.message, outcome.message
    spark = lake.service.ports.writer.spark
    spark.catalog.refreshTable(f"nessie.wap.{table_name}")
    frame = spark.table(f"nessie.wap.{table_name}")
    assert dict(frame.dtypes)["n"] == "bigint" and sorted(r["n"] for r in frame.collect()) == [1, 2, 3]


def test_a_file_missing_a_column_is_refused_by_register_with_the_reason(lake: Lake, table_name: str) -> None:
    second = parquet_of(pa.table({"my_col_0": pa.array([1], pa.int32()), "my_col_1": ["a"]}))
    outcome = ingest_twice(lake, table_name, {"checks": CHECKS, "write": "register"}, parquet_bytes(3), second)
    assert outcome.status is OutcomeStatus.INVALID
    assert "cannot be registered into wap." in outcome.message
    assert "its columns are not the table's (missing my_col_2)" in outcome.message


def test_a_truncated_file_is_invalid_before_either_path_whatever_write_says(
        lake: Lake, table_name: str) -> None:
    outcome = ingest_twice(lake, table_name, CHECKS, parquet_bytes(3), bad_inputs.parquet_truncated())
    assert outcome.status is OutcomeStatus.INVALID and "not a complete Parquet file" in outcome.message
    strict = ingest_twice(lake, f"{table_name}_r", {"checks": CHECKS, "write": "register"}, parquet_bytes(3),
                          bad_inputs.parquet_truncated())
    assert strict.status is OutcomeStatus.INVALID
    # weighed before anything is registered or read (core.routing): the same words whatever `write:` says
    assert "not a complete Parquet file (no PAR1 magic at its end)" in strict.message


def test_a_table_with_a_sort_order_rewrites(lake: Lake, table_name: str) -> None:
    service = service_for(lake, {table_name: CHECKS})
    assert service.ingest(lake.put(f"{table_name}/a.parquet", parquet_bytes(3))).status is OutcomeStatus.PUBLISHED
    spark = lake.service.ports.writer.spark
    spark.sql(f"ALTER TABLE nessie.wap.{table_name} WRITE ORDERED BY my_col_0")
    outcome = service.ingest(lake.put(f"{table_name}/b.parquet", parquet_bytes(3)))
    assert "rewritten (the table has a sort order" in outcome.message, outcome.message


def test_files_read_together_are_rewritten_as_one_data_file(lake: Lake, table_name: str) -> None:
    service = service_for(lake, {table_name: CHECKS})
    items = [Item(lake.put(f"{table_name}/{n}.parquet", parquet_bytes(4))) for n in range(3)]
    results = service.ingest_all(items)
    assert all(isinstance(r, IngestOutcome) and r.status is OutcomeStatus.PUBLISHED for r in results), results
    assert all("rewritten (read together with 2 other file(s)" in r.message for r in results)  # type: ignore[union-attr]
    assert not [f for f in data_files(lake, table_name) if f.rsplit("/", 1)[-1].startswith("wap-")]
    [entry, *_] = lake.service.history(TableRef("wap", table_name))
    assert entry.write is not None and entry.write.startswith("rewritten (read together")


def test_write_register_takes_a_tables_files_one_by_one(lake: Lake, table_name: str) -> None:
    service = service_for(lake, {table_name: {"checks": CHECKS, "write": "register"}})
    items = [Item(lake.put(f"{table_name}/{n}.parquet", parquet_bytes(4))) for n in range(2)]
    results = service.ingest_all(items)
    assert all(isinstance(r, IngestOutcome) and "registered (" in r.message for r in results), results
    assert len(data_files(lake, table_name)) == 2


def stamped(hours: list[int]) -> bytes:
    return parquet_of(pa.table({"ts": pa.array([dt.datetime(2026, 3, 1, h) for h in hours], pa.timestamp("us")),
                                "my_col_1": [f"v{h}" for h in hours]}))


def test_a_partitioned_table_registers_a_file_of_one_partition_and_rewrites_one_spanning_two(lake: Lake,
                                                                                            table_name: str) -> None:
    entry = {"checks": CHECKS, "layout": {"partition_by": ["day(ts)", "my_col_1"]}}
    service = service_for(lake, {table_name: entry})
    first = service.ingest(lake.put(f"{table_name}/one.parquet", stamped([5])))
    assert first.status is OutcomeStatus.PUBLISHED and "registered (a new table" in first.message, first.message
    [location] = data_files(lake, table_name)
    assert "/ts_day=2026-03-01/my_col_1=v5/" in location and s3_bytes(lake, location) == stamped([5])
    spark = lake.service.ports.writer.spark
    same_day = service.ingest(lake.put(f"{table_name}/same.parquet", parquet_of(pa.table({
        "ts": pa.array([dt.datetime(2026, 3, 2, h) for h in (1, 23)], pa.timestamp("us")),
        "my_col_1": ["x", "x"]}))))
    assert "registered (" in same_day.message, same_day.message
    spanning = service.ingest(lake.put(f"{table_name}/two.parquet", stamped([1, 2])))
    assert "rewritten (the table is partitioned by identity(my_col_1) and the file's rows span" in spanning.message
    spark.catalog.refreshTable(f"nessie.wap.{table_name}")
    partitions = spark.sql(f"SELECT partition.ts_day AS d, record_count AS n FROM nessie.wap.{table_name}.files"
                           ).collect()
    found = spark.sql(f"SELECT ts, my_col_1 FROM nessie.wap.{table_name} WHERE ts >= '2026-03-02'").collect()
    assert sorted(r["my_col_1"] for r in found) == ["x", "x"]
    # the registered files: one row on 03-01 (v5), two on 03-02 (x); the rewritten one: a file per partition (v1, v2)
    assert sorted((str(r["d"]), r["n"]) for r in partitions) == [("2026-03-01", 1)] * 3 + [("2026-03-02", 2)]


@pytest.mark.parametrize("checks", [[{"check": "row_count", "min": 1}],  # answered by metadata alone
                                    [{"check": "regex", "column": "name", "pattern": "name-.*"}]])  # reads rows
def test_a_file_whose_pages_do_not_decode_is_invalid_before_it_is_registered(
        lake: Lake, table_name: str, checks: list[dict[str, object]]) -> None:
    """Registration re-encodes nothing, but it decodes every page before the file becomes the table's: a damaged
    page is the file's fault (INVALID, no branch, nothing copied into the table's location), whatever the checks
    read; before, a table whose checks metadata answered published it as it came."""
    outcome = service_for(lake, {table_name: {"checks": checks, "write": "register"}}).ingest(
        lake.put(f"{table_name}/c.parquet", bad_inputs.parquet_corrupt_page()))
    assert outcome.status is OutcomeStatus.INVALID, outcome.message
    assert "cannot be ingested" in outcome.message and "Fix" in outcome.message
    assert not [b for b in lake.wap_branches() if table_name in b]
    listed = lake.s3.list_objects_v2(Bucket=lake.env["LAKE_BUCKET"], Prefix=f"warehouse/wap/{table_name}")
    assert listed.get("KeyCount", 0) == 0  # (a table's location is warehouse/<namespace>/<table>_<uuid>/)


def test_a_damaged_file_for_an_existing_table_leaves_no_copy_while_its_pages_decode_meanwhile(
        lake: Lake, table_name: str) -> None:
    """Into a table that exists, the pages are decoded while the footer is judged and the object copied: the verdict
    comes before the append is committed, and the copy already made is removed (nothing on main, no branch, no
    data file left in the table's location)."""
    service = service_for(lake, {table_name: {"checks": [{"check": "row_count", "min": 1}], "write": "register"}})
    good = service.ingest(lake.put(f"{table_name}/a.parquet", bad_inputs.good_parquet(3, compression="gzip")))
    assert "registered (" in good.message, good.message  # the damaged file below fits the table: it is copied

    def data_files() -> list[str]:
        listed = lake.s3.list_objects_v2(Bucket=lake.env["LAKE_BUCKET"], Prefix=f"warehouse/wap/{table_name}")
        return sorted(item["Key"] for item in listed.get("Contents", []) if "/data/" in item["Key"])

    before = data_files()
    outcome = service.ingest(lake.put(f"{table_name}/c.parquet", bad_inputs.parquet_corrupt_page()))
    assert outcome.status is OutcomeStatus.INVALID, outcome.message
    assert "cannot be ingested" in outcome.message and "Fix" in outcome.message
    assert not [b for b in lake.wap_branches() if table_name in b]
    assert data_files() == before and len(before) == 1
    assert lake.count(f"wap.{table_name}") == 3
    assert "registered (" in service.ingest(lake.put(f"{table_name}/d.parquet", bad_inputs.good_parquet(
        4, compression="gzip"))).message  # and the next file is registered as before
    assert lake.count(f"wap.{table_name}") == 7


def test_nanosecond_timestamps_are_not_registered_into_a_format_2_table(lake: Lake, table_name: str) -> None:
    """(With `write: auto` such a file goes to the rewrite path, whose Spark read refuses the type.)"""
    body = rows_with("ts", pa.array(STAMPS, pa.timestamp("ns")))
    outcome = service_for(lake, {table_name: {"checks": [{"check": "row_count", "min": 1}], "write": "register"}}
                          ).ingest(lake.put(f"{table_name}/ns.parquet", body))
    assert outcome.status is OutcomeStatus.INVALID, outcome.message
    assert "column ts: nanosecond timestamps (Iceberg stores them from format version 3" in outcome.message


def test_a_name_mapping_set_by_hand_that_misses_a_column_makes_a_file_rewritten(lake: Lake, table_name: str) -> None:
    """Readers would read the unmapped column of a registered file as null: such a file is rewritten."""
    service = service_for(lake, {table_name: CHECKS})
    assert "registered (" in service.ingest(lake.put(f"{table_name}/a.parquet", parquet_bytes(3))).message
    stale = '[{"field-id": 1, "names": ["my_col_0"]}, {"field-id": 2, "names": ["my_col_1"]}]'
    lake.service.ports.writer.spark.sql(
        f"ALTER TABLE nessie.wap.{table_name} SET TBLPROPERTIES ('schema.name-mapping.default' = '{stale}')")
    outcome = service.ingest(lake.put(f"{table_name}/b.parquet", parquet_bytes(4)))
    assert outcome.status is OutcomeStatus.PUBLISHED and lake.count(f"wap.{table_name}") == 7
    assert "rewritten (the table's name mapping (schema.name-mapping.default) does not map column my_col_2)" in \
        outcome.message, outcome.message

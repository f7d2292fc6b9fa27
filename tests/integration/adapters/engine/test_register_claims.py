"""The register path believes nothing a file says of itself (issue 33, item 1), on the real stack (moto, Nessie,
Spark, PyIceberg): a file whose footer lies about its nulls, bounds or rows is rewritten by the engine (and refused
under `write: register`), with the reason in the outcome, the merge commit and `wap history`; the metrics committed
for a registered file are those the service measured of its pages (NaN counts too), so the audit, the pruning of
every reader and the partition a file is placed in rest on the rows themselves.

Each test fails on the code before this issue: there a footer's figures were the audit's and the table's."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pytest

from tests import parquet_lies as lies
from tests.conftest import Lake
from tests.integration.adapters.engine.test_register import service_for
from wap_ingest.core import lineage
from wap_ingest.core.models import OutcomeStatus, TableRef

pytestmark = [pytest.mark.stack, pytest.mark.spark]
ROWS = 1_000


def customer_rows(rows: int = ROWS, nulls_every: int = 10) -> pa.Table:
    return pa.table({"my_col_0": pa.array(range(rows), pa.int64()),
                     "my_col_1": pa.array([None if i % nulls_every == 0 else f"v{i}" for i in range(rows)]),
                     "my_col_2": pa.array([i / 2 for i in range(rows)])})


def independent_table(lake: Lake, table: str, ref: str = "main") -> Any:
    """The table as PyIceberg reads it through Nessie's Iceberg REST endpoint: a client the service does not use."""
    from pyiceberg.catalog import load_catalog

    catalog = load_catalog("independent", type="rest", uri=f"{lake.env['NESSIE_ENDPOINT']}/iceberg/{ref}",
                           **{"py-io-impl": "pyiceberg.io.fsspec.FsspecFileIO"})
    return catalog.load_table(f"wap.{table}")


def test_a_footer_that_hides_nulls_is_rewritten_and_its_nulls_are_audited(lake: Lake, table_name: str) -> None:
    """The issue's case: 1,000 rows, 100 of them null in my_col_1, the footer saying none is; suite not_null."""
    body = lies.lie(lies.parquet_bytes(customer_rows()), lies.set_null_count(0, "my_col_1", 0))
    outcome = service_for(lake, {table_name: [{"check": "not_null", "columns": ["my_col_1"]}]}).ingest(
        lake.put(f"{table_name}/lying.parquet", body))
    assert outcome.status is OutcomeStatus.REJECTED, outcome.message
    assert "rewritten (footer statistics disagree with the pages: my_col_1 null_count 0, measured 100)" in \
        outcome.message, outcome.message
    assert outcome.report is not None
    [nulls] = [c for c in outcome.report.checks if c.check == "not_null"]
    assert nulls.measured == "100 nulls"
    assert TableRef("wap", table_name) not in lake.service.ports.catalog.list_tables("main")  # nothing reached main


def test_a_lying_file_published_says_why_it_was_rewritten_and_every_reader_finds_its_nulls(
        lake: Lake, table_name: str) -> None:
    body = lies.lie(lies.parquet_bytes(customer_rows()), lies.set_null_count(0, "my_col_1", 0))
    outcome = service_for(lake, {table_name: [{"check": "row_count", "min": 1}]}).ingest(
        lake.put(f"{table_name}/lying.parquet", body))
    assert outcome.status is OutcomeStatus.PUBLISHED, outcome.message
    [merge, *_] = lake.service.ports.catalog.publications(TableRef("wap", table_name))
    assert merge.properties[lineage.WRITE] == "rewritten"
    assert merge.properties[lineage.WRITE_REASON].startswith("footer statistics disagree with the pages: my_col_1 "
                                                             "null_count 0, measured 100")
    [entry] = lake.service.history(TableRef("wap", table_name))
    assert entry.write is not None and entry.write.startswith("rewritten (footer statistics disagree")
    from pyiceberg.expressions import IsNull

    assert independent_table(lake, table_name).scan(row_filter=IsNull("my_col_1")).to_arrow().num_rows == 100
    spark = lake.service.ports.writer.spark
    assert spark.sql(f"SELECT count(*) AS n FROM nessie.wap.{table_name} WHERE my_col_1 IS NULL").collect()[0]["n"] \
        == 100


def test_bounds_that_hide_out_of_range_values_are_measured_not_believed(lake: Lake, table_name: str) -> None:
    """The footer says my_col_0 starts at 500; its first 100 values break `range: min 100`."""
    body = lies.lie(lies.parquet_bytes(customer_rows(nulls_every=ROWS + 1)),
                    lies.set_bounds(0, "my_col_0", low=lies.int64(500)))
    outcome = service_for(lake, {table_name: [{"check": "range", "column": "my_col_0", "min": 100}]}).ingest(
        lake.put(f"{table_name}/bounds.parquet", body))
    assert outcome.status is OutcomeStatus.REJECTED, outcome.message
    assert "my_col_0 min 500, measured 0" in outcome.message, outcome.message
    assert outcome.report is not None
    [broken] = [c for c in outcome.report.checks if c.check == "range"]
    assert broken.measured.startswith("100 ")


def test_a_footer_that_undercounts_rows_gives_the_rows_the_pages_hold(lake: Lake, table_name: str) -> None:
    body = lies.lie(lies.parquet_bytes(customer_rows(nulls_every=ROWS + 1)), lies.set_file_rows(900))
    outcome = service_for(lake, {table_name: [{"check": "row_count", "min": 1}]}).ingest(
        lake.put(f"{table_name}/rows.parquet", body))
    assert outcome.status is OutcomeStatus.PUBLISHED, outcome.message
    assert "num_rows 900, measured 1000" in outcome.message
    assert lake.count(f"wap.{table_name}") == ROWS
    [entry] = lake.service.history(TableRef("wap", table_name))
    assert entry.rows == ROWS  # the ledger and the merge say what was published
    found = lake.service.ports.catalog.find_published("main", TableRef("wap", table_name),
                                                      [outcome.source.identity])
    assert found[outcome.source.identity].rows == ROWS


def test_under_write_register_a_lying_file_is_invalid_with_the_reason(lake: Lake, table_name: str) -> None:
    body = lies.lie(lies.parquet_bytes(customer_rows()), lies.set_null_count(0, "my_col_1", 0))
    outcome = service_for(lake, {table_name: {"checks": [{"check": "row_count", "min": 1}], "write": "register"}}
                          ).ingest(lake.put(f"{table_name}/lying.parquet", body))
    assert outcome.status is OutcomeStatus.INVALID, outcome.message
    assert "footer statistics disagree with the pages: my_col_1 null_count 0, measured 100" in outcome.message
    assert "Fix:" in outcome.message
    assert not [b for b in lake.wap_branches() if table_name in b]


def test_a_claim_the_service_does_not_check_makes_the_file_rewritten(lake: Lake, table_name: str) -> None:
    body = lies.lie(lies.parquet_bytes(customer_rows(nulls_every=ROWS + 1)), lies.add_bloom_filter(0, "my_col_1"))
    outcome = service_for(lake, {table_name: [{"check": "row_count", "min": 1}]}).ingest(
        lake.put(f"{table_name}/bloom.parquet", body))
    assert outcome.status is OutcomeStatus.PUBLISHED, outcome.message
    assert "rewritten (its footer makes claims the service does not check: a bloom filter (column my_col_1))" in \
        outcome.message, outcome.message


def test_a_registered_files_metrics_are_measured_even_where_the_footer_is_silent(lake: Lake, table_name: str
                                                                                ) -> None:
    """A footer without statistics (some writers omit them): the file still registers, and the null count the
    audit judges and the table keeps is the one measured."""
    body = lies.lie(lies.parquet_bytes(customer_rows(rows=100, nulls_every=20)), lies.drop_statistics(0, "my_col_1"))
    outcome = service_for(lake, {table_name: [{"check": "not_null", "columns": ["my_col_1"]}]}).ingest(
        lake.put(f"{table_name}/silent.parquet", body))
    assert outcome.status is OutcomeStatus.REJECTED and "registered (" in outcome.message, outcome.message
    assert outcome.report is not None
    [nulls] = [c for c in outcome.report.checks if c.check == "not_null"]
    assert nulls.measured == "5 nulls"
    [data_file] = independent_table(lake, table_name, str(outcome.branch)).inspect.files().to_pylist()
    field = {f.name: f.field_id for f in independent_table(lake, table_name, str(outcome.branch)).schema().fields}
    assert dict(data_file["null_value_counts"])[field["my_col_1"]] == 5
    assert dict(data_file["value_counts"])[field["my_col_1"]] == 100


@pytest.mark.parametrize("write", ["auto", "rewrite"])
def test_a_nan_is_out_of_range_on_both_paths(lake: Lake, table_name: str, write: str) -> None:
    """A 100-row file with one NaN against `range 0..1000`: rejected whichever path writes it (Spark compares NaN
    above every number); before, the register path read a missing NaN count as none and published it."""
    values = pa.table({"my_col_0": pa.array(range(100), pa.int64()),
                       "my_col_2": pa.array([float("nan") if i == 42 else float(i) for i in range(100)])})
    outcome = service_for(lake, {table_name: {"checks": [{"check": "range", "column": "my_col_2", "min": 0,
                                                          "max": 1000}], "write": write}}).ingest(
        lake.put(f"{table_name}/nan.parquet", lies.parquet_bytes(values)))
    assert outcome.status is OutcomeStatus.REJECTED, outcome.message
    assert ("registered (" in outcome.message) is (write == "auto"), outcome.message
    assert outcome.report is not None
    [broken] = [c for c in outcome.report.checks if c.check == "range"]
    assert broken.measured.startswith("1 "), broken.measured
    if write == "auto":  # the committed metrics count it
        [data_file] = independent_table(lake, table_name, str(outcome.branch)).inspect.files().to_pylist()
        field = {f.name: f.field_id for f in independent_table(lake, table_name, str(outcome.branch)
                                                               ).schema().fields}
        assert dict(data_file["nan_value_counts"])[field["my_col_2"]] == 1

"""A table's layout on the real Spark, Iceberg and Nessie (issue 15, item 1): a new table gets the audits file's
partition spec, sort order and write properties before its first rows; a changed layout evolves the table on the
run's branch and is merged with the file; the audit's metadata shortcuts still answer on the partitioned table."""

from __future__ import annotations

import pytest

from tests.conftest import Lake, parquet_bytes
from wap_ingest.core.audits import suites_from
from wap_ingest.core.models import AppendResult, OutcomeStatus, TableRef

pytestmark = [pytest.mark.stack, pytest.mark.spark]
CHECKS = [{"check": "not_null", "columns": ["my_col_1"]}, {"check": "row_count", "min": 1}]


def with_layout(lake: Lake, table: str, layout: dict[str, object], **entry: object) -> object:
    suites = suites_from({"tables": {table: {"checks": CHECKS, "layout": layout} | entry}}, default_namespace="wap")
    return lake.service.replaced(suites=suites)


def described(lake: Lake, table: str) -> tuple[list[tuple[str, str]], list[tuple[str, str]], dict[str, str]]:
    from wap_ingest.adapters.engine.layout import current_partition, current_sort
    from wap_ingest.adapters.engine.tables import IcebergTables

    with IcebergTables(lake.service.ports.writer.spark) as tables:  # main as it is now, not as cached before
        iceberg = tables.iceberg_table(TableRef("wap", table), "main")
        spec = [(column, transform) for column, transform, _ in current_partition(iceberg)]
        sort = [(column, "desc" if descending else "asc") for column, descending in current_sort(iceberg)]
        return spec, sort, {str(k): str(v) for k, v in dict(iceberg.properties()).items()}


def test_a_new_table_gets_its_layout_and_a_changed_layout_evolves_it_on_the_branch(lake: Lake, table_name: str
                                                                                   ) -> None:
    first = with_layout(lake, table_name, {"partition_by": ["bucket(4, my_col_0)"], "sort_by": ["my_col_2 desc"],
                                           "target_file_size_mb": 64, "codec": "zstd"})
    outcome = first.ingest(lake.put(f"{table_name}/a.parquet", parquet_bytes(40)))  # type: ignore[attr-defined]
    assert outcome.status is OutcomeStatus.PUBLISHED, outcome.message
    spec, sort, properties = described(lake, table_name)
    assert spec == [("my_col_0", "bucket[4]")] and sort == [("my_col_2", "desc")]
    assert properties["write.target-file-size-bytes"] == str(64 * 1024 * 1024)
    assert properties["write.parquet.compression-codec"] == "zstd"

    # the metadata shortcuts still answer on a partitioned table (no row read for the row count and the nulls)
    writer = lake.service.ports.writer
    ref = TableRef("wap", table_name)
    appended = writer.find_append(ref, "main", outcome.source.identity)
    assert isinstance(appended, AppendResult)
    measured = writer.measure_appended(ref, "main", appended, first.suites.suite_for(ref).plan())  # type: ignore[attr-defined]
    assert {"row_count", "not_null:my_col_1"} <= set(measured.from_metadata)

    second = with_layout(lake, table_name, {"partition_by": ["bucket(4, my_col_0)", "truncate(2, my_col_1)"],
                                            "sort_by": ["my_col_0"]})
    main = lake.main_hash()
    again = second.ingest(lake.put(f"{table_name}/b.parquet", parquet_bytes(10)))  # type: ignore[attr-defined]
    assert again.status is OutcomeStatus.PUBLISHED, again.message
    assert lake.main_hash() != main and lake.count(f"wap.{table_name}") == 50
    spec, sort, _ = described(lake, table_name)
    assert spec == [("my_col_0", "bucket[4]"), ("my_col_1", "truncate[2]")] and sort == [("my_col_0", "asc")]


def dictionary_pages(lake: Lake, table: str, source_key: str) -> dict[str, bool]:
    """Per column, whether the data file the service wrote for `source_key` has a dictionary page."""
    import io

    import pyarrow.parquet as pq

    spark = lake.service.ports.writer.spark
    spark.catalog.refreshTable(f"nessie.wap.{table}")
    [path] = [r[0] for r in spark.sql(f"SELECT e.data_file.file_path FROM nessie.wap.{table}.entries e JOIN "
                                      f"nessie.wap.{table}.snapshots s ON e.snapshot_id = s.snapshot_id WHERE "
                                      f"s.summary['wap.source.key'] = '{source_key}'").collect()]
    bucket, key = path.removeprefix("s3://").split("/", 1)
    metadata = pq.ParquetFile(io.BytesIO(lake.s3.get_object(Bucket=bucket, Key=key)["Body"].read())).metadata
    group = metadata.row_group(0)
    return {group.column(i).path_in_schema: group.column(i).has_dictionary_page for i in range(group.num_columns)}


def test_dictionary_off_writes_those_columns_without_a_dictionary_and_leaving_one_out_brings_it_back(
        lake: Lake, table_name: str) -> None:
    kinds = {"kind": ["a", "b"] * 20, "tag": ["x", "y", "z", "x"] * 10}  # few values: parquet-mr keeps a dictionary
    off = with_layout(lake, table_name, {"dictionary_off": ["kind"]}, write="rewrite")
    first = off.ingest(lake.put(f"{table_name}/a.parquet", parquet_bytes(40, extra=kinds)))  # type: ignore[attr-defined]
    assert first.status is OutcomeStatus.PUBLISHED, first.message
    _, _, properties = described(lake, table_name)
    assert properties["write.parquet.dict-encoding-enabled.column.kind"] == "false"
    pages = dictionary_pages(lake, table_name, f"{table_name}/a.parquet")
    assert pages["kind"] is False and pages["tag"] is True

    back = with_layout(lake, table_name, {"dictionary_off": ["tag"]}, write="rewrite")
    second = back.ingest(lake.put(f"{table_name}/b.parquet", parquet_bytes(40, extra=kinds)))  # type: ignore[attr-defined]
    assert second.status is OutcomeStatus.PUBLISHED, second.message
    _, _, properties = described(lake, table_name)
    assert "write.parquet.dict-encoding-enabled.column.kind" not in properties
    assert properties["write.parquet.dict-encoding-enabled.column.tag"] == "false"
    pages = dictionary_pages(lake, table_name, f"{table_name}/b.parquet")
    assert pages["kind"] is True and pages["tag"] is False


@pytest.mark.parametrize(
    ("layout", "phrase"),
    [({"partition_by": ["days(ts)"]}, "not a column or a transform"), ({"codec": "brotli"}, "codec must be one of"),
     ({"sort_by": ["a sideways"]}, "asc or desc"), ({"partition": ["a"]}, "unknown key(s) partition"),
     ({"dictionary_off": ["a.b"]}, "not a column name"), ({"dictionary_off": ["a", "a"]}, "names a column twice"),
     ({"dictionary_off": "a"}, "dictionary_off must be a list")],
)
def test_a_bad_layout_fails_when_the_audits_are_loaded_naming_the_table(layout: dict[str, object],
                                                                        phrase: str) -> None:
    from wap_ingest.core.errors import AuditSuiteError

    with pytest.raises(AuditSuiteError, match="table 't'") as caught:
        suites_from({"tables": {"t": {"checks": CHECKS, "layout": layout}}}, default_namespace="wap")
    assert phrase in str(caught.value)

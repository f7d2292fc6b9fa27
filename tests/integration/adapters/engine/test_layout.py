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


def with_layout(lake: Lake, table: str, layout: dict[str, object]) -> object:
    suites = suites_from({"tables": {table: {"checks": CHECKS, "layout": layout}}}, default_namespace="wap")
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


@pytest.mark.parametrize(
    ("layout", "phrase"),
    [({"partition_by": ["days(ts)"]}, "not a column or a transform"), ({"codec": "brotli"}, "codec must be one of"),
     ({"sort_by": ["a sideways"]}, "asc or desc"), ({"partition": ["a"]}, "unknown key(s) partition")],
)
def test_a_bad_layout_fails_when_the_audits_are_loaded_naming_the_table(layout: dict[str, object],
                                                                        phrase: str) -> None:
    from wap_ingest.core.errors import AuditSuiteError

    with pytest.raises(AuditSuiteError, match="table 't'") as caught:
        suites_from({"tables": {"t": {"checks": CHECKS, "layout": layout}}}, default_namespace="wap")
    assert phrase in str(caught.value)

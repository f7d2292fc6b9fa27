"""The session catalog's table cache is per run, never across runs (issue 17, item 2), on the real Spark, Iceberg
and Nessie: within one `IcebergTables` every use of a table shares one load; after it, a table another writer
committed to is read as it is now, not as this process last saw it."""

from __future__ import annotations

import pytest

from tests.conftest import Lake, parquet_bytes
from wap_ingest.core.models import OutcomeStatus, TableRef

pytestmark = [pytest.mark.stack, pytest.mark.spark]


def test_a_run_loads_a_table_once_and_the_next_run_sees_what_another_writer_committed(lake: Lake, table_name: str
                                                                                      ) -> None:
    from wap_ingest.adapters.engine.tables import IcebergTables

    assert lake.service.ingest(lake.put(f"{table_name}/a.parquet", parquet_bytes(5))).status is \
        OutcomeStatus.PUBLISHED
    spark, table = lake.service.ports.writer.spark, TableRef("wap", table_name)
    with IcebergTables(spark) as run:
        loaded = run.iceberg_table(table, "main")
        seen = int(loaded.currentSnapshot().snapshotId())
        assert run.iceberg_table(table, "main") is loaded  # one load per run
        assert run.schema(table, "main").names == ["my_col_0", "my_col_1", "my_col_2"]
        # another writer commits to main meanwhile (its own cache entry: a different name for the same table)
        spark.createDataFrame(spark.table(f"nessie.wap.{table_name}").limit(1).collect()).writeTo(
            f"nessie.wap.{table_name}").append()
        assert int(run.iceberg_table(table, "main").currentSnapshot().snapshotId()) == seen  # this run's view
    with IcebergTables(spark) as next_run:
        now = next_run.iceberg_table(table, "main").currentSnapshot()
        assert int(now.snapshotId()) != seen and int(now.parentId()) == seen  # loaded again: the other commit

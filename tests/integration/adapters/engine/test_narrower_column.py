"""A file whose column is wider than the table's (bigint into int): Spark's ANSI store assignment writes it while
its values fit and stops at the first one that does not. That stop is the file against the table, so the service
says so (INVALID, the column, the types and the fix, nothing on main), not an engine failure;
the next file that fits is published (the CI run of f34d1dd met this through two tests sharing a table)."""

from __future__ import annotations

import io

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tests.conftest import Lake, parquet_bytes
from wap_ingest.core.models import OutcomeStatus

pytestmark = [pytest.mark.stack, pytest.mark.spark]


def bigints(*values: int) -> bytes:
    sink = io.BytesIO()
    pq.write_table(pa.table({"my_col_0": pa.array(values, pa.int64()),
                        "my_col_1": pa.array([f"v{i}" for i in range(len(values))], pa.string()),
                        "my_col_2": pa.array([0.5] * len(values), pa.float64())}), sink)
    return sink.getvalue()


def test_a_value_past_the_tables_int_column_is_refused_as_drift_and_the_next_file_is_published(
        lake: Lake, table_name: str) -> None:
    first = lake.service.ingest(lake.put(f"{table_name}/ints.parquet", parquet_bytes(3)))  # my_col_0 int
    assert first.status is OutcomeStatus.PUBLISHED, first.message

    key = f"{table_name}/too-big.parquet"
    refused = lake.service.ingest(lake.put(key, bigints(1, 2**31)))
    assert refused.status is OutcomeStatus.INVALID, refused.message
    for phrase in (f"s3://{lake.inbox_bucket}/{key}", f"wap.{table_name}", "my_col_0: int in the table, bigint in "
                   "the file", "`my_col_0` due to an overflow", "Fix: widen the table's column"):
        assert phrase in refused.message, refused.message
    assert lake.count(f"wap.{table_name}") == 3  # nothing of it on main

    fits = lake.service.ingest(lake.put(f"{table_name}/fits.parquet", bigints(7, 2**31 - 1)))
    assert fits.status is OutcomeStatus.PUBLISHED, fits.message
    assert lake.count(f"wap.{table_name}") == 5

"""The batch path on the real stack: one Spark read, one snapshot and one Nessie merge for a table's small files;
files that cannot join the batch or fail their audit run alone with their own outcome."""

from __future__ import annotations

import json

import pytest

from tests.conftest import Lake, parquet_bytes
from wap_ingest.core.errors import WapError
from wap_ingest.core.ingest import Item
from wap_ingest.core.models import IngestOutcome, OutcomeStatus, TableRef

pytestmark = [pytest.mark.stack, pytest.mark.spark]


def csv(rows: int, start: int, nulls: int = 0, header: str = "my_col_0,my_col_1,my_col_2") -> bytes:
    lines = [header] + [f"{i},{'' if i - start < nulls else f'v{i}'},{i / 2}" for i in range(start, start + rows)]
    return ("\n".join(lines) + "\n").encode()


def test_a_batch_publishes_in_one_merge_and_each_odd_file_has_its_own_fate(lake: Lake, table_name: str) -> None:
    good = [lake.put(f"{table_name}/g{i}.csv", csv(5, start=100 * i)) for i in range(4)]
    nulls = lake.put(f"{table_name}/nulls.csv", csv(5, start=900, nulls=2))
    other_header = lake.put(f"{table_name}/other.csv", csv(5, start=1000, header="a,b,c"))
    corrupt = lake.put(f"{table_name}/corrupt.parquet", b"PAR1 this is not parquet")
    also_good = lake.put(f"{table_name}/p.parquet", parquet_bytes(3))  # another format: runs alone, publishes
    before = lake.main_hash()
    items = [Item(s) for s in [*good, nulls, other_header, corrupt, also_good]]
    results = lake.service.ingest_all(items)
    assert all(isinstance(r, IngestOutcome) for r in results), [r for r in results if isinstance(r, WapError)]
    outcomes = [r for r in results if isinstance(r, IngestOutcome)]
    assert [o.status for o in outcomes] == [OutcomeStatus.PUBLISHED] * 4 + [
        OutcomeStatus.REJECTED, OutcomeStatus.INVALID, OutcomeStatus.INVALID, OutcomeStatus.PUBLISHED]
    assert [o.rows for o in outcomes[:4]] == [5, 5, 5, 5]
    assert "other.csv" in outcomes[5].message and "corrupt.parquet" in outcomes[6].message

    log = lake.service.ports.catalog.publications(TableRef("wap", table_name))
    batch = [p for p in log if "wap.sources" in p.properties]
    assert len(batch) == 1  # the four CSV files: one merge
    listed = json.loads(batch[0].properties["wap.sources"])
    assert sorted(item["key"] for item in listed) == sorted(s.key for s in good)
    assert all(item["rows"] == 5 for item in listed)
    assert lake.main_hash() != before
    assert lake.count(f"wap.{table_name}") == 4 * 5 + 3

    [branch] = [b for b in lake.wap_branches() if table_name in b]
    assert branch == outcomes[4].branch
    # the batch's rows (on main when the rejected file ran alone, before the Parquet file did) + its own
    assert lake.count(f"wap.{table_name}", ref=branch) == 4 * 5 + 5

    again = lake.service.ingest_all([Item(s) for s in good])
    assert [r.status for r in again if isinstance(r, IngestOutcome)] == [OutcomeStatus.DUPLICATE] * 4
    alone = lake.service.ingest(good[2])  # the one-file path finds a file a batch published
    assert alone.status is OutcomeStatus.DUPLICATE and alone.rows == 5
    assert lake.count(f"wap.{table_name}") == 23

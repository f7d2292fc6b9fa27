"""A registered file's commit from Python (adapters/catalog/tables.py BranchTables) on the real Nessie, moto and Spark:
the table keeps its Iceberg history (Nessie's Iceberg REST endpoint would keep only the current snapshot), the
engine reads what it committed, and a commit on a branch that moved since the table was read is a conflict that
leaves nothing behind."""

from __future__ import annotations

from typing import Any

import pytest

from tests.conftest import Lake, parquet_bytes
from wap_ingest.bootstrap import builders
from wap_ingest.core.errors import StaleHashError
from wap_ingest.core.models import OutcomeStatus, TableRef

pytestmark = [pytest.mark.stack, pytest.mark.spark]


def test_registered_commits_keep_the_tables_history_and_the_engine_reads_them(lake: Lake, table_name: str) -> None:
    for n in range(3):  # the first makes the table (the engine), each is committed from Python
        outcome = lake.service.ingest(lake.put(f"{table_name}/{n}.parquet", parquet_bytes(n + 2)))
        assert outcome.status is OutcomeStatus.PUBLISHED and "registered (" in outcome.message, outcome.message
    spark = lake.service.ports.writer.spark
    spark.catalog.refreshTable(f"nessie.wap.{table_name}")
    snapshots = spark.sql(f"SELECT snapshot_id, parent_id, summary FROM nessie.wap.{table_name}.snapshots "
                          f"ORDER BY committed_at").collect()
    assert [int(s["summary"]["added-records"]) for s in snapshots] == [2, 3, 4]
    assert [s["parent_id"] for s in snapshots[1:]] == [s["snapshot_id"] for s in snapshots[:-1]]  # one chain
    oldest = snapshots[0]["snapshot_id"]  # time travel to the first registered snapshot
    assert spark.sql(f"SELECT count(*) AS n FROM nessie.wap.{table_name} VERSION AS OF {oldest}").collect()[0]["n"] == 2
    assert lake.count(f"wap.{table_name}") == 9


def test_a_commit_on_a_branch_the_table_moved_on_is_refused_and_leaves_no_metadata(lake: Lake,
                                                                                      table_name: str) -> None:
    assert lake.service.ingest(lake.put(f"{table_name}/0.parquet", parquet_bytes(3))).status is OutcomeStatus.PUBLISHED
    catalog, table = lake.service.ports.catalog, TableRef("wap", table_name)
    branch = f"test-{table_name}"
    catalog.create_branch(branch, catalog.reference_hash("main"))
    tables = builders.branch_tables_for(lake.service.settings, objects=lake.service.objects)
    assert tables.load(TableRef("wap", f"{table_name}_none"), branch) is None
    first, second = tables.load(table, branch), tables.load(table, branch)
    assert first is not None and second is not None
    with first.transaction() as transaction:
        transaction.set_properties({"test.first": "1"})
    metadata = f"{first.location().removeprefix('s3://lake/')}/metadata/"
    before = {o["Key"] for o in lake.s3.list_objects_v2(Bucket="lake", Prefix=metadata)["Contents"]}
    with pytest.raises(StaleHashError), second.transaction() as transaction:
        transaction.set_properties({"test.second": "1"})
    after = {o["Key"] for o in lake.s3.list_objects_v2(Bucket="lake", Prefix=metadata)["Contents"]}
    assert after == before  # the refused commit's metadata file was removed
    reread = tables.load(table, branch)
    assert reread is not None and reread.properties.get("test.first") == "1" and "test.second" not in reread.properties
    assert len(reread.metadata.snapshots) == len(first.metadata.snapshots) >= 1


def test_a_table_this_process_committed_is_loaded_without_reading_its_metadata_file_again(
        lake: Lake, table_name: str) -> None:
    """What a commit wrote is kept by its location: the next load of that location (a warm function's next file)
    reads no metadata file, and what it has is exactly what the file holds. A metadata file another process wrote is
    read from S3."""
    from pyiceberg.serializers import FromInputFile

    assert lake.service.ingest(lake.put(f"{table_name}/0.parquet", parquet_bytes(3))).status is OutcomeStatus.PUBLISHED
    catalog, table = lake.service.ports.catalog, TableRef("wap", table_name)
    branch = f"test-{table_name}"
    catalog.create_branch(branch, catalog.reference_hash("main"))
    tables = builders.branch_tables_for(lake.service.settings, objects=lake.service.objects)
    loaded = tables.load(table, branch)
    assert loaded is not None and tables.written(table, loaded.metadata_location) is None  # the engine wrote it: read
    with loaded.transaction() as transaction:
        transaction.set_properties({"test.kept": "1"})
    committed = loaded.metadata_location
    reads: list[str] = []
    io = tables.file_io()
    original = io.new_input
    io.new_input = lambda location: reads.append(location) or original(location)
    try:
        again = tables.load(table, branch)
    finally:
        io.new_input = original
    assert again is not None and again.metadata_location == committed and committed not in reads, reads
    assert again.metadata == FromInputFile.table_metadata(io.new_input(committed))  # the file, as kept
    assert again.properties["test.kept"] == "1"
    other = builders.branch_tables_for(lake.service.settings, objects=lake.service.objects)
    assert other.written(table, committed) is None  # another process (here: another instance) reads the file
    assert (seen := other.load(table, branch)) is not None and seen.metadata == again.metadata
    with again.transaction() as transaction:  # one kept per table: the newest
        transaction.set_properties({"test.kept": "2"})
    assert tables.written(table, committed) is None and tables.written(table, again.metadata_location) is not None


def test_a_transaction_works_its_metadata_out_once_per_update_and_commits_what_pyiceberg_would(
        lake: Lake, table_name: str) -> None:
    """PyIceberg's Transaction applies its updates to the whole metadata, and deep-copies it, each time a snapshot
    producer asks (some 30 times an append); a loaded table's transaction does it once per update, and the commit is
    the same: the rows appended, the snapshot's summary, the table's history."""
    import pyarrow as pa
    from pyiceberg.table import Transaction

    assert lake.service.ingest(lake.put(f"{table_name}/0.parquet", parquet_bytes(3))).status is OutcomeStatus.PUBLISHED
    catalog, table = lake.service.ports.catalog, TableRef("wap", table_name)
    tables = builders.branch_tables_for(lake.service.settings, objects=lake.service.objects)
    rows = pa.table({"my_col_0": pa.array([7], pa.int32()), "my_col_1": ["x"], "my_col_2": [1.5]})
    worked_out: list[int] = []
    original = Transaction.table_metadata.fget  # type: ignore[attr-defined]

    def counted(self: Any) -> Any:
        worked_out.append(len(self._updates))
        return original(self)

    Transaction.table_metadata = property(counted)  # type: ignore[method-assign,assignment]
    try:
        found: dict[str, Any] = {}
        for way in ("kept", "pyiceberg"):
            branch = f"test-{way}-{table_name}"
            catalog.create_branch(branch, catalog.reference_hash("main"))
            loaded = tables.load(table, branch)
            assert loaded is not None
            worked_out.clear()
            with (loaded.transaction() if way == "kept" else Transaction(loaded)) as transaction:
                transaction.append(rows)
            found[way] = (len(worked_out), loaded.scan().to_arrow().num_rows, len(loaded.metadata.snapshots),
                          {k: v for k, v in loaded.current_snapshot().summary.additional_properties.items()
                           if "size" not in k})
    finally:
        Transaction.table_metadata = property(original)  # type: ignore[method-assign,assignment]
    kept, plain = found["kept"], found["pyiceberg"]
    assert kept[1:] == plain[1:] and kept[1] == 4, found  # the same commit: 3 rows and the new one
    assert kept[0] <= 3 and plain[0] >= 10, found

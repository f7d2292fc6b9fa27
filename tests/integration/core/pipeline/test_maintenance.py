"""`wap maintain` on the real Spark, Iceberg and Nessie (issue 15, items 2, 3 and 5): 80 small files ingested one by
one are compacted through a WAP branch merged into main (same rows, same checksum, fewer files, a faster full scan);
the ledger still answers for a redelivered file after the maintenance dropped its snapshot; a maintenance that loses
the race to a concurrent ingestion retries from main and keeps the ingestion's rows; a dry run changes nothing."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from benchmarks import history

from tests.conftest import Lake, parquet_bytes
from wap_ingest.core.audits import suites_from
from wap_ingest.core.ledger import LEDGER_NAMESPACE
from wap_ingest.core.maintenance import MaintenanceReport
from wap_ingest.core.models import OutcomeStatus, SourceObject, TableRef

pytestmark = [pytest.mark.stack, pytest.mark.spark]
CHECKS = [{"check": "not_null", "columns": ["my_col_1"]}]
FILES = 80  # past 2 x keep_snapshots (the ingestion's trim) and far past min_input_files


def configured(lake: Lake, table: str, maintenance: dict[str, int]) -> Any:
    suites = suites_from({"tables": {table: {"checks": CHECKS, "maintenance": maintenance}}},
                         default_namespace="wap")
    return lake.service.replaced(suites=suites)


def checksum(lake: Lake, table: str) -> tuple[int, int]:
    return history.checksum(lake.service.ports.writer.spark, table)


def full_scan(lake: Lake, table: str) -> float:
    return history.full_scan_s(lake.service.ports.writer.spark, table)


@dataclass
class Compacted:
    table: str
    sources: list[SourceObject]
    before_sum: tuple[int, int]
    after_sum: tuple[int, int]
    scan_before: float
    scan_after: float
    report: MaintenanceReport
    main_before: str


@pytest.fixture(scope="module")
def compacted(lake: Lake) -> Iterator[Compacted]:
    import uuid

    table = f"t_{uuid.uuid4().hex[:10]}"
    service = configured(lake, table, {"min_input_files": 5, "keep_snapshots": 20})
    sources = []
    for i in range(FILES):  # one load each: one small data file each
        outcome = service.ingest(lake.put(f"{table}/f{i:03}.parquet", parquet_bytes(5)))
        assert outcome.status is OutcomeStatus.PUBLISHED, outcome.message
        sources.append(outcome.source)
    before_sum, scan_before, main_before = checksum(lake, table), full_scan(lake, table), lake.main_hash()
    (report,) = service.maintain(TableRef("wap", table))
    assert isinstance(report, MaintenanceReport), report
    yield Compacted(table, sources, before_sum, checksum(lake, table), scan_before, full_scan(lake, table), report,
                    main_before)


def test_eighty_small_files_are_compacted_with_the_same_rows_and_a_faster_scan(compacted: Compacted,
                                                                                    lake: Lake) -> None:
    report, before, after = compacted.report, compacted.report.before, compacted.report.after
    print(json.dumps({"files": FILES, "report": report.to_dict(), "scan_before_s": round(compacted.scan_before, 3),
                      "scan_after_s": round(compacted.scan_after, 3)}))
    assert report.status == "maintained" and report.work.compact and report.merged_hash == lake.main_hash()
    assert before.data_files == FILES and before.small_files == FILES and before.rows == FILES * 5
    assert after is not None and after.data_files < 5 and after.rows == before.rows
    assert compacted.after_sum == compacted.before_sum == (FILES * 5, compacted.before_sum[1])
    assert compacted.scan_after < compacted.scan_before
    # the ingestion kept the metadata bounded (over 2 x 20 snapshots: trimmed to 20); the maintenance left 20
    assert before.snapshots <= 40 and after.snapshots <= 20
    assert not [b for b in lake.wap_branches() if b.startswith(f"wap-{compacted.table}-")]


def test_a_redelivery_after_maintenance_is_a_duplicate_found_in_the_ledger(compacted: Compacted, lake: Lake) -> None:
    first = compacted.sources[0]
    writer = lake.service.ports.writer
    table = TableRef("wap", compacted.table)
    assert writer.find_append(table, "main", first.identity) is None  # its snapshot is gone from the metadata
    main = lake.main_hash()
    again = configured(lake, compacted.table, {}).ingest(first)
    assert again.status is OutcomeStatus.DUPLICATE, again.message
    assert lake.main_hash() == main and checksum(lake, compacted.table) == compacted.after_sum


def test_history_shows_the_maintenance_with_files_and_bytes(compacted: Compacted, lake: Lake) -> None:
    from wap_ingest.core.review import history_for

    entries = history_for(lake.service.ports.catalog, None, TableRef("wap", compacted.table), limit=5)
    assert entries[0].action == "maintained" and entries[0].hash == compacted.report.merged_hash
    assert f"{FILES} -> {compacted.report.after.data_files} data files" in str(entries[0].how)  # type: ignore[union-attr]


class RacedMaintainer:
    """The real maintainer; after its first piece of work on the branch, an ingestion publishes to the same table."""

    def __init__(self, inner: Any, ingest: Any) -> None:
        self.inner, self.ingest, self.outcome = inner, ingest, None

    def health(self, *args: Any) -> Any:
        return self.inner.health(*args)

    def maintain(self, *args: Any) -> None:
        self.inner.maintain(*args)
        if self.outcome is None:
            self.outcome = self.ingest()


def test_maintenance_under_a_concurrent_ingestion_retries_and_keeps_its_rows(lake: Lake, table_name: str) -> None:
    from wap_ingest.adapters.engine.maintenance import SparkTableMaintainer
    from wap_ingest.core.pipeline import MaintenancePorts, maintain_table

    service = configured(lake, table_name, {"min_input_files": 2})
    for i in range(6):
        assert service.ingest(lake.put(f"{table_name}/a{i}.parquet", parquet_bytes(4))).status is \
            OutcomeStatus.PUBLISHED
    late = lake.put(f"{table_name}/late.parquet", parquet_bytes(9))
    raced = RacedMaintainer(SparkTableMaintainer(lake.service.engine), lambda: service.ingest(late))
    ref = TableRef("wap", table_name)
    report = maintain_table(ref, ports=MaintenancePorts(lake.service.ports.catalog, raced),  # type: ignore[arg-type]
                            suite=service.suites.suite_for(ref), config=service.config)
    assert raced.outcome is not None and raced.outcome.status is OutcomeStatus.PUBLISHED
    assert raced.outcome.attempts == 1  # the ingestion won its race: never retried, never touched
    assert report.status == "maintained" and report.attempts == 2  # the maintenance started again from main
    assert report.before.rows == 6 * 4 + 9 and report.after is not None and report.after.rows == 33
    assert lake.count(f"wap.{table_name}") == 33
    found = lake.service.ports.catalog.find_published("main", ref, [raced.outcome.source.identity])
    assert found[raced.outcome.source.identity].rows == 9
    assert not [b for b in lake.wap_branches() if b.startswith(f"wap-{table_name}-")]


def test_a_dry_run_and_a_table_with_nothing_to_do_change_nothing(lake: Lake, table_name: str,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    service = configured(lake, table_name, {"min_input_files": 3})
    for i in range(3):
        service.ingest(lake.put(f"{table_name}/d{i}.parquet", parquet_bytes(3)))
    main = lake.main_hash()
    (dry,) = service.maintain(TableRef("wap", table_name), dry_run=True)
    assert isinstance(dry, MaintenanceReport) and dry.status == "dry run" and dry.work.compact
    assert "would compact" in dry.message and lake.main_hash() == main
    # --all: every table on main, never a ledger's key. The suite's stack holds hundreds of tables by now: the
    # catalog's real listing is narrowed to this table, and a key in the ledger's namespace is added to it (the
    # catalog lists only Iceberg tables; the filter is there should it ever list one).
    catalog = service.ports.catalog
    listing = catalog.list_tables
    monkeypatch.setattr(catalog, "list_tables", lambda ref: [
        *(t for t in listing(ref) if t.name == table_name), TableRef(LEDGER_NAMESPACE, "entries")])
    everything = service.maintain(None, dry_run=True)
    assert [r.table if isinstance(r, MaintenanceReport) else r for r in everything] == [f"wap.{table_name}"]
    quiet = configured(lake, table_name, {"min_input_files": 50})
    (idle,) = quiet.maintain(TableRef("wap", table_name))
    assert isinstance(idle, MaintenanceReport) and idle.status == "nothing to do" and lake.main_hash() == main
    assert not [b for b in lake.wap_branches() if b.startswith(f"wap-{table_name}-")]

"""The sweep's rules (core.pipeline.sweep) on the in-memory lake (tests/fake_lake_files.py): what is removed, what is
kept and why, and what stops it before anything is removed."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from tests.fake_lake_files import FakeLakeFiles
from tests.fakes import FakeDecisionLog
from wap_ingest.core.lake_files import FilesSwept, SweepPolicy, age_text, under
from wap_ingest.core.models import TableRef
from wap_ingest.core.pipeline import Sweep, sweep_table

TABLE = TableRef("wap", "orders")
NOW = datetime(2026, 11, 27, 12, 0, tzinfo=UTC)
GRACE = 3 * 86_400.0
OLD = NOW - timedelta(days=4)


@pytest.fixture
def lake() -> FakeLakeFiles:
    return FakeLakeFiles(clock=lambda: OLD)  # everything the catalog made is older than the grace period


def sweep_of(lake: FakeLakeFiles, decisions: FakeDecisionLog | None = None, *, dry_run: bool = False,
             warehouse: str = "s3://lake/warehouse") -> FilesSwept:
    return sweep_table(TABLE, Sweep(lake, SweepPolicy(GRACE, warehouse), NOW, decisions, now=lambda: NOW),
                       dry_run=dry_run)


def discarded_run(lake: FakeLakeFiles, name: str = "wap-orders-run") -> set[str]:
    """A run's branch with one append, then deleted: the files it made (data, manifest, metadata)."""
    before = set(lake.objects)
    lake.branch(name)
    lake.append(TABLE, name)
    lake.drop(name)
    return set(lake.objects) - before


def test_a_discarded_runs_files_are_removed_and_everything_live_is_kept(lake: FakeLakeFiles) -> None:
    location = lake.add_table(TABLE)
    published = lake.append(TABLE)
    leaked = discarded_run(lake)
    lake.branch("wap-orders-review")
    reviewed = lake.append(TABLE, "wap-orders-review")
    lake.branch("tagged")
    tagged = lake.append(TABLE, "tagged")
    lake.tag("v1", "tagged")
    lake.drop("tagged")
    replaced = lake.append(TABLE)
    lake.overwrite(TABLE)  # `replaced` is needed by an older commit of main only
    decisions = FakeDecisionLog()
    swept = sweep_of(lake, decisions)
    assert swept.status == "removed" and {f.path for f in swept.removable} == leaked == set(lake.removed)
    assert {published, reviewed, tagged, replaced} <= set(lake.objects)
    assert all(under(p, location) for p in lake.removed)
    (record,) = decisions.records
    assert (record.table, record.action, record.actor, record.branch) == ("wap.orders", "swept", "wap maintain", "")
    assert record.reason.startswith("removed 3 file(s)") and "older than 3d" in record.reason
    assert swept.recorded_at is not None


def test_a_dry_run_lists_the_files_and_removes_nothing(lake: FakeLakeFiles) -> None:
    lake.add_table(TABLE)
    lake.append(TABLE)
    leaked = discarded_run(lake)
    decisions = FakeDecisionLog()
    swept = sweep_of(lake, decisions, dry_run=True)
    assert swept.status == "dry run" and {f.path for f in swept.removable} == leaked
    assert leaked <= set(lake.objects) and not lake.removed and not decisions.records
    assert swept.describe().startswith("would remove 3 file(s)")


def test_a_file_younger_than_the_grace_period_is_kept(lake: FakeLakeFiles) -> None:
    location = lake.add_table(TABLE)
    lake.put(f"{location}/data/in-flight.parquet", at=NOW - timedelta(days=3) + timedelta(seconds=1))
    old = lake.put(f"{location}/data/leftover.parquet", at=NOW - timedelta(days=3) - timedelta(seconds=1))
    swept = sweep_of(lake)
    assert [f.path for f in swept.removable] == [old] and swept.too_young == 1
    assert "1 unreferenced file(s) younger than 3d kept" in swept.describe()


def test_nothing_outside_the_tables_own_location_is_touched(lake: FakeLakeFiles) -> None:
    location = lake.add_table(TABLE)
    sibling = lake.put(f"{location}_quarantine/data/other.parquet", at=OLD)
    elsewhere = lake.put("s3://lake/wap-decisions/wap.orders/x.json", at=OLD)
    assert sweep_of(lake).status == "nothing to remove"
    assert {sibling, elsewhere} <= set(lake.objects)


def test_the_catalog_down_aborts_and_removes_nothing(lake: FakeLakeFiles) -> None:
    lake.add_table(TABLE)
    leaked = discarded_run(lake)
    lake.down = True
    swept = sweep_of(lake)
    assert swept.status == "aborted" and "nothing was removed" in swept.message and "unreachable" in swept.message
    assert leaked <= set(lake.objects)


def test_a_missing_metadata_file_aborts_and_removes_nothing(lake: FakeLakeFiles) -> None:
    lake.add_table(TABLE)
    lake.append(TABLE)
    leaked = discarded_run(lake)
    lake.lose(lake.metadata_of(TABLE))
    swept = sweep_of(lake)
    assert swept.status == "aborted" and "is not there" in swept.message
    assert leaked <= set(lake.objects)


def test_a_needed_file_missing_from_the_listing_aborts(lake: FakeLakeFiles) -> None:
    lake.add_table(TABLE)
    data = lake.append(TABLE)
    leaked = discarded_run(lake)
    lake.lose(data)  # the table is damaged, or the catalog's paths and the listing differ
    swept = sweep_of(lake)
    assert swept.status == "aborted" and data in swept.message and "nothing was removed" in swept.message
    assert leaked <= set(lake.objects)


def test_a_location_outside_the_warehouse_is_not_swept(lake: FakeLakeFiles) -> None:
    lake.add_table(TABLE)
    leaked = discarded_run(lake)
    swept = sweep_of(lake, warehouse="s3://lake/elsewhere")
    assert swept.status == "aborted" and "not inside the warehouse s3://lake/elsewhere" in swept.message
    assert leaked <= set(lake.objects)


def test_a_table_no_reference_has_is_nothing_to_remove(lake: FakeLakeFiles) -> None:
    assert sweep_of(lake).status == "nothing to remove"


def test_ages_are_written_in_the_largest_whole_unit() -> None:
    assert [age_text(s) for s in (259_200, 7200, 90, 30, 1.5)] == ["3d", "2h", "90s", "30s", "1.5s"]


def test_maintain_table_sweeps_after_the_maintenance_and_defers_the_sweep_out_of_time(lake: FakeLakeFiles) -> None:
    from tests.unit.core.pipeline.test_maintenance import CONFIG, SMALL, FakeMaintainer, catalog_with_table, suite
    from wap_ingest.core.pipeline import MaintenancePorts, maintain_table

    lake.add_table(TABLE)
    leaked = discarded_run(lake)
    catalog = catalog_with_table()
    ports = MaintenancePorts(catalog, FakeMaintainer(catalog, SMALL))
    sweep = Sweep(lake, SweepPolicy(GRACE, "s3://lake/warehouse"), NOW, now=lambda: NOW)
    before = catalog.refs["main"]  # time for the maintenance, none left once it merged
    late = maintain_table(TABLE, ports=ports, suite=suite(), config=CONFIG, sweep=sweep,
                          out_of_time=lambda: catalog.refs["main"] != before)
    assert late.status == "maintained" and late.swept is not None and late.swept.status == "deferred"
    assert leaked <= set(lake.objects)
    report = maintain_table(TABLE, ports=ports, suite=suite(), config=CONFIG, sweep=sweep, dry_run=True)
    assert report.status == "dry run" and report.swept is not None and report.swept.status == "dry run"
    report = maintain_table(TABLE, ports=ports, suite=suite(), config=CONFIG, sweep=sweep)
    assert report.swept is not None and report.swept.status == "removed" and not leaked & set(lake.objects)
    assert report.to_dict()["swept"]["files"][0]["path"] in leaked  # type: ignore[index]
    assert maintain_table(TABLE, ports=ports, suite=suite(), config=CONFIG).swept is None  # the EMR job's


def test_the_maintain_command_lists_the_files_and_history_shows_the_sweep() -> None:
    from wap_ingest.core.lake_files import StoredFile
    from wap_ingest.core.maintenance import MaintenanceReport, MaintenanceWork, TableHealth
    from wap_ingest.core.review import HistoryEntry
    from wap_ingest.entrypoints.maintain_cli import _failed, _line
    from wap_ingest.entrypoints.ops_cli import _history_line

    leftover = StoredFile("s3://lake/warehouse/wap/orders_1/data/x.parquet", 1234, OLD)
    swept = FilesSwept("wap.orders", "dry run", (leftover,), listed=5, referenced=4, grace_seconds=GRACE)
    report = MaintenanceReport("wap.orders", "dry run", MaintenanceWork(), TableHealth(), swept=swept)
    text = _line(report)
    assert "files: would remove 1 file(s) (1,234 bytes; 0 metadata, 1 data)" in text
    assert "would remove s3://lake/warehouse/wap/orders_1/data/x.parquet (1,234 bytes, written 2026-11-23" in text
    assert not _failed(report) and _failed(MaintenanceReport("wap.orders", "nothing to do", MaintenanceWork(),
                                                             TableHealth(), swept=FilesSwept("wap.orders", "aborted")))
    entry = HistoryEntry(at=NOW, action="swept", how="by hand", branch="", actor="wap maintain",
                         reason=swept.describe(), source=None, rows=None, hash=None)
    assert _history_line(entry).endswith("swept by wap maintain: " + swept.describe())

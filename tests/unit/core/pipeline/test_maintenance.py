"""The maintenance core (core.maintenance, core.pipeline.maintain) on the in-memory catalog: the settings and their
errors, the thresholds, the branch-and-merge discipline (a conflict retries the maintenance from main, rows that
changed merge nothing), a dry run, and a large table sent to EMR. The real engine: integration/test_maintenance."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from tests.fakes import FakeCatalog
from wap_ingest.core.audits import suites_from
from wap_ingest.core.branches import RunKind, parse_branch
from wap_ingest.core.errors import AuditSuiteError, DeferredError, EngineError, OutOfTimeError
from wap_ingest.core.history import history_context
from wap_ingest.core.maintenance import (
    MAINTENANCE,
    MaintenanceSettings,
    MaintenanceWork,
    TableHealth,
    maintenance_from,
    summary_line,
    work_for,
)
from wap_ingest.core.pipeline import MaintenancePorts, PipelineConfig, maintain_table
from wap_ingest.core.ports import MaintenanceJobs, TableMaintainer

TABLE = "wap.orders"


def suite(**maintenance: int) -> Any:
    return suites_from({"tables": {"orders": {"checks": [], "maintenance": maintenance}}},
                       default_namespace="wap").suite_for(_ref())


def _ref() -> Any:
    from wap_ingest.core.models import TableRef

    return TableRef("wap", "orders")


class FakeMaintainer(TableMaintainer):
    """Health from a script; the work commits to the table on the branch (and, once, a rival commit to main)."""

    def __init__(self, catalog: FakeCatalog, health: TableHealth, *, rival: bool = False, lose_rows: bool = False):
        self.catalog, self.state, self.rival, self.lose_rows = catalog, health, rival, lose_rows
        self.worked: list[str] = []

    def health(self, table: Any, ref: str, small_file_bytes: int) -> TableHealth | None:
        content = self.catalog.contents(ref).get(TABLE)
        if content is None:
            return None
        return self.done if content.get("compacted") else self.state

    def trim_snapshots(self, table: Any, branch: str, keep: int) -> int:
        return 0  # the ingestion's trim: not this suite's subject (integration/test_maintenance)

    def maintain(self, table: Any, branch: str, work: MaintenanceWork, settings: MaintenanceSettings,
                 layout: Any) -> None:
        self.worked.append(branch)
        self.catalog.commit(branch, {TABLE: {"snapshots": [], "columns": (), "compacted": True}})
        if self.rival:  # an ingestion publishes to the table meanwhile
            self.rival = False
            self.catalog.commit("main", {TABLE: {"snapshots": [1], "columns": ()}})
        self.done = replace(self.state, data_files=1, small_files=0, rows=self.state.rows - self.lose_rows)


class Jobs(MaintenanceJobs):
    def __init__(self) -> None:
        self.submitted: list[str] = []

    def submit_maintenance(self, table: Any) -> str:
        self.submitted.append(table.qualified)
        return "run-1"


def catalog_with_table() -> FakeCatalog:
    catalog = FakeCatalog()
    catalog.commit("main", {"wap": {"type": "namespace"}, TABLE: {"snapshots": [], "columns": ()}})
    return catalog


CONFIG = PipelineConfig(default_namespace="wap", sleep=lambda _s: None)
SMALL = TableHealth(rows=100, data_files=50, data_bytes=5000, small_files=50, manifests=3, snapshots=10)


def test_settings_are_validated_with_the_table_named() -> None:
    assert maintenance_from({"min_input_files": 3}, "t") == MaintenanceSettings(min_input_files=3)
    for raw, phrase in [({"min_files": 3}, "unknown key(s) min_files"), ({"keep_snapshots": 1}, "from 2 to"),
                        ({"small_file_mb": True}, "whole number"), ([1], "must be a mapping")]:
        with pytest.raises(AuditSuiteError, match="table 't'") as info:
            maintenance_from(raw, "t")
        assert phrase in str(info.value)
    assert suite(max_manifests=7).maintenance.max_manifests == 7


def test_the_work_follows_the_thresholds() -> None:
    settings = MaintenanceSettings(min_input_files=5, max_manifests=20, keep_snapshots=50)
    assert not work_for(TableHealth(small_files=4, manifests=20, snapshots=50), settings)
    work = work_for(TableHealth(small_files=5, manifests=21, snapshots=60), settings)
    assert work == MaintenanceWork(compact=True, rewrite_manifests=True, remove_snapshots=10)


def test_a_maintenance_is_merged_from_its_own_branch_and_the_branch_is_gone() -> None:
    catalog = catalog_with_table()
    maintainer = FakeMaintainer(catalog, SMALL)
    report = maintain_table(_ref(), ports=MaintenancePorts(catalog, maintainer), suite=suite(), config=CONFIG)
    assert report.status == "maintained" and report.attempts == 1 and report.merged_hash == catalog.refs["main"]
    assert catalog.contents("main")[TABLE]["compacted"] and report.after == replace(SMALL, data_files=1,
                                                                                     small_files=0)
    run = parse_branch(maintainer.worked[0])
    assert run is not None and run.kind is RunKind.MAINTAIN and run.table_in("wap") == _ref()
    assert list(catalog.refs) == ["main"]
    merged = catalog.commits[catalog.refs["main"]]
    assert merged.properties["wap.table"] == TABLE and "50 -> 1 data files" in str(summary_line(merged.properties))


def test_a_concurrent_ingestion_makes_the_maintenance_start_again_from_main() -> None:
    catalog = catalog_with_table()
    maintainer = FakeMaintainer(catalog, SMALL, rival=True)
    report = maintain_table(_ref(), ports=MaintenancePorts(catalog, maintainer), suite=suite(), config=CONFIG)
    assert report.attempts == 2 and len(maintainer.worked) == 2 and list(catalog.refs) == ["main"]
    history = [c.message for c in catalog.commits.values()]
    assert sum(m.startswith("wap: maintain") for m in history) == 1  # the first attempt merged nothing


def test_rows_that_changed_merge_nothing() -> None:
    catalog = catalog_with_table()
    main = catalog.refs["main"]
    with pytest.raises(EngineError, match="held 100 rows before and 99 after; nothing was merged"):
        maintain_table(_ref(), ports=MaintenancePorts(catalog, FakeMaintainer(catalog, SMALL, lose_rows=True)),
                       suite=suite(), config=CONFIG)
    assert catalog.refs == {"main": main}


def test_a_maintenance_out_of_time_is_deferred_and_leaves_no_branch() -> None:
    """The transaction's time guard, as for files and loads: with no time left the table is not started (no branch
    is made); when time runs out while the table is measured, its branch is deleted before any work on it."""
    catalog = catalog_with_table()
    main = catalog.refs["main"]
    maintainer = FakeMaintainer(catalog, SMALL)
    ports = MaintenancePorts(catalog, maintainer)
    with pytest.raises(OutOfTimeError, match="not started") as info:
        maintain_table(_ref(), ports=ports, suite=suite(), config=CONFIG, out_of_time=lambda: True)
    assert isinstance(info.value, DeferredError)  # not a failure: the schedule lists it as deferred
    assert catalog.refs == {"main": main} and not [c for c in catalog.calls if c.startswith("create_branch")]
    answers = iter([False, True])  # time to start the attempt, none left for the work once the table is measured
    with pytest.raises(OutOfTimeError, match=r"maintenance of wap\.orders"):
        maintain_table(_ref(), ports=ports, suite=suite(), config=CONFIG, out_of_time=lambda: next(answers, True))
    assert [c for c in catalog.calls if c.startswith("create_branch")] and maintainer.worked == []
    assert catalog.refs == {"main": main}  # its branch is gone, main never moved


def test_a_dry_run_and_a_large_table_on_emr_merge_nothing() -> None:
    catalog = catalog_with_table()
    main = catalog.refs["main"]
    dry = maintain_table(_ref(), ports=MaintenancePorts(catalog, FakeMaintainer(catalog, SMALL)), suite=suite(),
                         config=CONFIG, dry_run=True)
    assert dry.status == "dry run" and "would compact" in dry.message and catalog.refs == {"main": main}
    jobs = Jobs()
    big = replace(SMALL, data_bytes=2 * 1024 * 1024)
    sent = maintain_table(_ref(), ports=MaintenancePorts(catalog, FakeMaintainer(catalog, big), jobs),
                          suite=suite(emr_above_mb=1), config=CONFIG)
    assert sent.status == "sent to EMR" and sent.job_run == "run-1" and jobs.submitted == [TABLE]
    here = maintain_table(_ref(), ports=MaintenancePorts(catalog, FakeMaintainer(catalog, big), jobs),
                          suite=suite(emr_above_mb=1), config=CONFIG, here=True)  # the EMR job itself
    assert here.status == "maintained" and jobs.submitted == [TABLE]


def test_the_audit_history_skips_maintenance_merges() -> None:
    catalog = catalog_with_table()
    for rows in (10, 20):
        branch = catalog.create_branch(f"wap-x-{rows}", catalog.refs["main"])
        catalog.commit(branch.name, {TABLE: {"snapshots": [rows], "columns": ()}})
        catalog.merge(catalog.find_branch(branch.name), "main", catalog.refs["main"], "load",  # type: ignore[arg-type]
                      {"wap.table": TABLE, "wap.rows": str(rows)})
        maintain_table(_ref(), ports=MaintenancePorts(catalog, FakeMaintainer(catalog, SMALL)), suite=suite(),
                       config=CONFIG)
    checked = suites_from({"tables": {"orders": [{"check": "row_count_vs_history", "last": 2, "factor": 10}]}},
                          default_namespace="wap").suite_for(_ref())
    assert history_context(checked, _ref(), catalog, "main").history == (20, 10)
    assert any(MAINTENANCE in c.properties for c in catalog.commits.values())

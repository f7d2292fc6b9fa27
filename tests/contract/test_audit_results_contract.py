"""One behaviour suite for the AuditResults port (issue 36), run against the in-memory fake and LakeAuditResults on the
real stack (PyIceberg tables committed to Nessie branches, files in moto's S3): rows recorded on a branch are read
back there with every column, are not on main until the branch is merged, appends accumulate in one table per audited
table, two tables' results merge from two branches without a conflict, and the history reads metric rows only,
newest first."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta

import pytest

from tests.fakes import FakeAuditResults, FakeCatalog
from wap_ingest.core.audit_results import METRIC_CHECK, ResultRow, history_of, results_table
from wap_ingest.core.models import Branch, TableRef
from wap_ingest.core.ports import AuditResults, CatalogBranches

AT = datetime(2026, 11, 28, 12, 0, tzinfo=UTC)


@dataclass
class Harness:
    catalog: CatalogBranches
    results: AuditResults
    another: AuditResults  # another process's adapter on the same catalog (its appends are not `results`' own)

    def branch(self) -> Branch:
        name = f"contract-results-{uuid.uuid4().hex[:10]}"
        created = self.catalog.create_branch(name, self.catalog.reference_hash("main"))
        self.catalog.ensure_namespace(name, "wap_meta")
        return Branch(name, self.catalog.reference_hash(created.name))

    def merge(self, name: str) -> str:
        return self.catalog.merge(Branch(name, self.catalog.reference_hash(name)), "main",
                                  self.catalog.reference_hash("main"), "merge results", {})


@pytest.fixture(params=["fake", pytest.param("lake", marks=pytest.mark.stack)])
def harness(request: pytest.FixtureRequest) -> Iterator[Harness]:
    if request.param == "fake":
        catalog = FakeCatalog()
        catalog.ensure_namespace("main", "wap_ledger")  # Nessie's main needs a first commit to merge into
        yield Harness(catalog, FakeAuditResults(catalog), FakeAuditResults(catalog))
        return
    from wap_ingest.adapters.catalog import LakeAuditResults

    service = request.getfixturevalue("lake").service
    service.catalog.ensure_namespace("main", "wap_ledger")
    yield Harness(service.catalog, service.audit_results,
                  LakeAuditResults(service.audit_results.tables, service.settings.warehouse))


def table() -> TableRef:
    return TableRef("contract", f"t_{uuid.uuid4().hex[:8]}")


def row(target: TableRef, load: str, metric: str | None, value: float | None, at: datetime,
        branch: str = "b") -> ResultRow:
    check = METRIC_CHECK if metric else "not_null"
    return ResultRow(target.qualified, load, f"s3://inbox/{load}", "v1" if metric else None, branch, check,
                     metric or "email", "email", metric, value, "3" if metric else "3 nulls",
                     "" if metric else "0 nulls", "measured" if metric else "failed", None if metric else "error", at)


def by_check(rows: list[ResultRow]) -> list[ResultRow]:
    return sorted(rows, key=lambda r: r.check)


def test_rows_recorded_on_a_branch_read_back_there_and_reach_main_with_its_merge(harness: Harness) -> None:
    target, branch = table(), harness.branch()
    rows = [row(target, "load-1", None, None, AT, branch.name),
            row(target, "load-1", "null_share(email)", 0.25, AT, branch.name)]
    harness.results.record(branch.name, target, rows)
    assert by_check(harness.results.rows(target, branch.name)) == by_check(rows)
    assert harness.results.rows(target, "main") == []
    harness.merge(branch.name)
    assert by_check(harness.results.rows(target, "main")) == by_check(rows)


def test_appends_accumulate_and_the_history_is_the_metric_rows_newest_first(harness: Harness) -> None:
    target, branch = table(), harness.branch()
    for i in range(4):
        at = AT + timedelta(minutes=i)
        harness.results.record(branch.name, target, [row(target, f"load-{i}", "row_count", float(10 + i), at),
                                                     row(target, f"load-{i}", None, None, at)])
    harness.results.record(branch.name, target, [])  # nothing to record: no commit, no table change
    assert len(harness.results.rows(target, branch.name)) == 8
    assert harness.results.history(target, branch.name, {"row_count": 3, "mean(x)": 5}) == {
        "row_count": (13.0, 12.0, 11.0), "mean(x)": ()}
    assert harness.results.history(table(), branch.name, {"row_count": 3}) == {"row_count": ()}


def test_two_tables_results_merge_from_two_branches_without_a_conflict(harness: Harness) -> None:
    first, second = table(), table()
    one, two = harness.branch(), harness.branch()
    harness.results.record(one.name, first, [row(first, "a", "row_count", 1.0, AT)])
    harness.results.record(two.name, second, [row(second, "b", "row_count", 2.0, AT)])
    assert results_table(first) != results_table(second)
    harness.merge(one.name)
    harness.merge(two.name)  # a different key: main moved, but not under it
    assert harness.results.history(first, "main", {"row_count": 5}) == {"row_count": (1.0,)}
    assert harness.results.history(second, "main", {"row_count": 5}) == {"row_count": (2.0,)}


def test_a_value_missing_or_a_text_with_quotes_is_kept_as_it_is(harness: Harness) -> None:
    target, branch = table(), harness.branch()
    odd = replace(row(target, "it's", None, None, AT), measured="3 rows like 'x'", severity="warn", column=None)
    harness.results.record(branch.name, target, [odd])
    assert harness.results.rows(target, branch.name) == [odd]


def drop_load(harness: Harness, target: TableRef, branch: str, load: str) -> None:
    """Remove a load's rows from the results table on `branch` (not an append: what a rewrite of the table does)."""
    if isinstance(harness.results, FakeAuditResults):
        assert isinstance(harness.catalog, FakeCatalog)
        key = results_table(target).qualified
        content = harness.catalog.contents(branch)[key]
        kept = [(sid, [r for r in rows if r.load != load], props) for sid, rows, props in content["snapshots"]]
        harness.catalog.commit(branch, {key: {"columns": (), "snapshots": kept}})
        return
    loaded = harness.results.tables.load(results_table(target), branch)  # type: ignore[attr-defined]
    loaded.delete(delete_filter=f"load = '{load}'")


def test_the_history_follows_every_change_of_the_table_as_a_full_read_does(harness: Harness,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    target, branch = table(), harness.branch()
    wanted = {"row_count": 10, "mean(x)": 10}
    files_read: list[str] = []  # the lake's adapter: the data files it read one by one (the appends since)
    if not isinstance(harness.results, FakeAuditResults):
        from wap_ingest.adapters.catalog import audit_results as lake

        reading = lake._metric_rows_of
        monkeypatch.setattr(lake, "_metric_rows_of", lambda t, path: files_read.append(path) or reading(t, path))

    def expected() -> dict[str, tuple[float, ...]]:
        return history_of(((r.load, r.metric or "", r.value, r.recorded_at) for r in
                           harness.results.rows(target, branch.name) if r.check == METRIC_CHECK), wanted)

    def load(i: int) -> list[ResultRow]:
        at = AT + timedelta(minutes=i)
        return [row(target, f"load-{i}", "row_count", float(i), at), row(target, f"load-{i}", "mean(x)", i / 2, at),
                row(target, f"load-{i}", None, None, at)]

    harness.another.record(branch.name, target, load(0) + load(1))
    assert harness.results.history(target, branch.name, wanted) == expected() == {"row_count": (1.0, 0.0),
                                                                                  "mean(x)": (0.5, 0.0)}
    assert harness.results.history(target, branch.name, wanted) == expected()  # nothing changed since
    for i in (2, 3):  # another process's appends since the last read: only their files are read
        harness.another.record(branch.name, target, load(i))
        assert harness.results.history(target, branch.name, wanted) == expected()
    if not isinstance(harness.results, FakeAuditResults):
        assert len(files_read) == 2  # one file per append, not the table
    harness.results.record(branch.name, target, load(5))  # its own append: its rows kept, no file read
    assert harness.results.history(target, branch.name, wanted) == expected()
    assert len(files_read) in (0, 2)
    assert harness.results.history(target, branch.name, wanted)["row_count"] == (5.0, 3.0, 2.0, 1.0, 0.0)
    drop_load(harness, target, branch.name, "load-2")  # not an append: read again in full
    harness.another.record(branch.name, target, load(4))
    assert harness.results.history(target, branch.name, wanted) == expected()
    assert len(files_read) in (0, 2)  # after a delete: the table read in full, no file one by one
    assert harness.results.history(target, branch.name, wanted)["row_count"] == (5.0, 4.0, 3.0, 1.0, 0.0)
    assert harness.results.history(target, "main", wanted) == {"row_count": (), "mean(x)": ()}  # main: no table


@pytest.mark.stack
def test_the_lakes_results_table_lists_a_bounded_history_and_keeps_every_row(lake: object) -> None:
    """LakeAuditResults alone (the fake has no metadata file): with keep_snapshots 2, the metadata file lists at most
    twice that before an append drops all but the newest two (and the new one); every row stays, the history too."""
    from wap_ingest.adapters.catalog import LakeAuditResults

    service = lake.service  # type: ignore[attr-defined]
    results = LakeAuditResults(service.audit_results.tables, service.settings.warehouse, keep_snapshots=2)
    harness, target = Harness(service.catalog, results, results), table()
    branch, listed = harness.branch(), []
    for i in range(7):
        at = AT + timedelta(minutes=i)
        results.record(branch.name, target, [row(target, f"load-{i}", "row_count", float(i), at)])
        if i == 2:
            assert results.history(target, branch.name, {"row_count": 10}) == {"row_count": (2.0, 1.0, 0.0)}
        listed.append(len(results.tables.load(results_table(target), branch.name).metadata.snapshots))
    assert listed == [1, 2, 3, 4, 5, 3, 4]
    assert results.history(target, branch.name, {"row_count": 10}) == {"row_count": tuple(float(i) for i in
                                                                                         range(6, -1, -1))}
    assert sorted(r.load for r in results.rows(target, branch.name)) == [f"load-{i}" for i in range(7)]


def test_its_own_loads_merged_into_main_are_read_back_without_a_file(harness: Harness,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """A warm function's stream of loads: each recorded on its branch and merged; the next history read of main
    takes the rows the adapter appended itself from memory (the lake's adapter reads no data file)."""
    files_read: list[str] = []
    if not isinstance(harness.results, FakeAuditResults):
        from wap_ingest.adapters.catalog import audit_results as lake

        reading = lake._metric_rows_of
        monkeypatch.setattr(lake, "_metric_rows_of", lambda t, path: files_read.append(path) or reading(t, path))
    target, wanted = table(), {"row_count": 10}
    for i in range(3):
        branch = harness.branch()
        harness.results.record(branch.name, target, [row(target, f"load-{i}", "row_count", float(i),
                                                         AT + timedelta(minutes=i))])
        harness.merge(branch.name)
        assert harness.results.history(target, "main", wanted) == {"row_count": tuple(float(j) for j in
                                                                                   range(i, -1, -1))}
    assert files_read == []
    branch = harness.branch()  # another process's load: its file is read
    harness.another.record(branch.name, target, [row(target, "load-9", "row_count", 9.0, AT + timedelta(hours=1))])
    harness.merge(branch.name)
    assert harness.results.history(target, "main", wanted) == {"row_count": (9.0, 2.0, 1.0, 0.0)}
    if not isinstance(harness.results, FakeAuditResults):
        assert len(files_read) == 1

"""Every audited load's measurements kept as a results table (issue 36, item 1) and the anomaly checks reading them
back (item 2), on the fakes: the rows a load writes, where they go with the load (main when published, only the
branch when rejected, main after a reviewed publish), one results key per table (no conflicts between tables), the
history newest first, and twenty clean loads then a shifted one rejected with the band's figures."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from tests.fakes import FakeAuditResults, FakeCatalog, FakeObjectStore, FakeReportStore, FakeWriter, run_one
from wap_ingest.core import merge_plan
from wap_ingest.core.audit_results import METRIC_CHECK, history_of, metrics_of, results_table, rows_for
from wap_ingest.core.audits import suites_from
from wap_ingest.core.errors import InvalidTableNameError
from wap_ingest.core.measurements import ColumnProfile, Measurements
from wap_ingest.core.models import AuditReport, CheckResult, CheckStatus, OutcomeStatus, SourceObject, TableRef
from wap_ingest.core.naming import table_for_key, table_ref_from
from wap_ingest.core.pipeline import PipelineConfig, Ports, Transactions, run_wap
from wap_ingest.core.review import publish_branch

T = TableRef("wap", "orders")
AT = datetime(2026, 11, 28, 12, 0, tzinfo=UTC)


def test_a_loads_rows_are_one_per_check_and_one_per_metric() -> None:
    source = SourceObject("inbox", "orders/a.parquet", version_id="v1")
    measured = Measurements(row_count=10, null_counts={"email": 2}, columns=("email", "amount"),
                            profile={"amount": ColumnProfile(0.0, 7.0, 1.0, 9.0, 4.5)})
    report = AuditReport("wap.orders", 10, (CheckResult("not_null", "email", CheckStatus.FAILED, "2 nulls",
                                                        "0 nulls"),))
    rows = rows_for(T, source, report, measured, "wap-b", AT)
    check, *metrics = rows
    assert (check.check, check.target, check.column, check.verdict, check.measured, check.threshold) == (
        "not_null", "email", "email", "failed", "2 nulls", "0 nulls")
    assert {(r.metric, r.value) for r in metrics} == {
        ("row_count", 10.0), ("null_share(email)", 0.2), ("null_share(amount)", 0.0), ("distinct(amount)", 7.0),
        ("min(amount)", 1.0), ("max(amount)", 9.0), ("mean(amount)", 4.5)}
    assert all(r.check == METRIC_CHECK and r.verdict == "measured" for r in metrics)
    assert {(r.table, r.load, r.source, r.object_version, r.branch, r.recorded_at) for r in rows} == {
        ("wap.orders", source.identity, source.uri, "v1", "wap-b", AT)}


def test_figures_a_load_does_not_have_are_left_out() -> None:
    measured = Measurements(row_count=0, null_counts={"a": 0}, profile={"a": ColumnProfile(None, None)})
    assert metrics_of(measured) == [("row_count", None, 0.0)]
    nan = Measurements(row_count=2, profile={"x": ColumnProfile(0.0, 2.0, float("nan"), float("inf"), 1.0)})
    assert {n for n, _, _ in metrics_of(nan)} == {"row_count", "null_share(x)", "distinct(x)", "mean(x)"}


def test_history_is_newest_first_bounded_and_one_value_per_load() -> None:
    rows = [(f"load{i}", "row_count", float(i), AT + timedelta(minutes=i)) for i in range(10)]
    rows += [("load9", "row_count", 99.0, AT + timedelta(minutes=30)), ("x", "other", 1.0, AT)]
    assert history_of(rows, {"row_count": 4, "mean(a)": 3}) == {"row_count": (99.0, 8.0, 7.0, 6.0), "mean(a)": ()}


def test_a_tables_results_live_in_the_reserved_namespace_which_no_key_can_route_to() -> None:
    assert results_table(T) == TableRef("wap_meta", "wap__orders")
    with pytest.raises(InvalidTableNameError, match="reserved for the service's audit results"):
        table_for_key("wap_meta.wap__orders/x.parquet", default_namespace="wap")
    with pytest.raises(InvalidTableNameError, match="reserved for the service's audit results"):
        table_ref_from("wap_meta.wap__orders", default_namespace="wap", source="--table")  # wap ingest, audits file
    assert table_ref_from("wap_meta.wap__orders", default_namespace="wap", source="--table",
                          results=True) == results_table(T)  # an operator reads or maintains it
    with pytest.raises(InvalidTableNameError, match="ledger"):
        table_ref_from("wap_ledger.x", default_namespace="wap", source="--table", results=True)


class Lake:
    def __init__(self, document: dict[str, Any]) -> None:
        self.catalog, self.objects = FakeCatalog(), FakeObjectStore()
        self.results = FakeAuditResults(self.catalog)
        self.reports = FakeReportStore()
        self.ports = Ports(catalog=self.catalog, writer=FakeWriter(self.catalog, self.objects), objects=self.objects,
                           reports=self.reports, results=self.results)
        self.suites = suites_from(document, default_namespace="wap")
        self.now = AT
        self.config = PipelineConfig(default_namespace="wap", sleep=lambda _s: None, clock=self.tick)

    def tick(self) -> float:
        self.now += timedelta(seconds=1)
        return self.now.timestamp()

    def load(self, key: str, rows: list[dict[str, Any]]) -> Any:
        return run_one(self.objects.put("inbox", key, rows), ports=self.ports, suites=self.suites,
                       config=self.config)


def emails(n: int, nulls: int) -> list[dict[str, Any]]:
    return [{"id": i, "email": None if i < nulls else f"u{i}@x"} for i in range(n)]


NULL_SHARE = {"check": "anomaly", "metric": "null_share(email)", "last": 30, "min_loads": 5}


def test_twenty_clean_loads_then_one_with_ten_times_the_nulls_is_rejected_with_the_band() -> None:
    lake = Lake({"tables": {"orders": [NULL_SHARE]}})
    for i in range(20):
        outcome = lake.load(f"orders/clean-{i}.parquet", emails(100, 2 + i % 3))
        assert outcome.status is OutcomeStatus.PUBLISHED, outcome.message
    assert len(lake.results.history(T, "main", {"null_share(email)": 30})["null_share(email)"]) == 20
    shifted = lake.load("orders/shifted.parquet", emails(100, 30))
    assert shifted.status is OutcomeStatus.REJECTED
    [result] = shifted.report.checks
    assert result.check == "anomaly" and result.status is CheckStatus.FAILED
    assert "null_share(email) = 0.3" in result.measured and "from the median 0.03" in result.measured
    assert "4 x MAD" in result.expected and "last 20 loads" in result.expected
    on_main = lake.results.rows(T, "main")
    assert {r.load for r in on_main} == {lake.objects.head("inbox", f"orders/clean-{i}.parquet").identity
                                        for i in range(20)}
    kept = [r for r in lake.results.rows(T, shifted.branch) if r.source.endswith("shifted.parquet")]
    assert {(r.check, r.verdict) for r in kept} >= {("anomaly", "failed"), (METRIC_CHECK, "measured")}


def test_until_min_loads_exist_the_check_passes_and_says_so() -> None:
    lake = Lake({"tables": {"orders": [NULL_SHARE]}})
    first = lake.load("orders/a.parquet", emails(10, 9))
    assert first.status is OutcomeStatus.PUBLISHED
    assert "0 earlier loads, too few to judge" in first.report.checks[0].measured


def test_a_rejected_loads_rows_reach_main_only_with_its_reviewed_publish() -> None:
    lake = Lake({"tables": {"orders": [{"check": "not_null", "columns": ["email"]}]}})
    lake.load("orders/good.parquet", emails(10, 0))
    bad = lake.load("orders/bad.parquet", emails(10, 3))
    assert bad.status is OutcomeStatus.REJECTED
    assert {r.source for r in lake.results.rows(T, "main")} == {"s3://inbox/orders/good.parquet"}
    assert {r.source for r in lake.results.rows(T, bad.branch)} == {"s3://inbox/orders/good.parquet",
                                                                    "s3://inbox/orders/bad.parquet"}
    publish_branch(Transactions(lake.catalog, lake.config), bad.branch, reason="checked by hand", actor="op",
                   source_of=lambda _t, _b: {}, reaudit=None)
    published = lake.results.rows(T, "main")
    assert {r.source for r in published} == {"s3://inbox/orders/good.parquet", "s3://inbox/orders/bad.parquet"}
    assert ("not_null", "failed") in {(r.check, r.verdict) for r in published if r.source.endswith("bad.parquet")}


def test_the_results_key_is_in_the_plan_and_different_tables_use_different_keys() -> None:
    lake = Lake({"tables": {"orders": [{"check": "row_count", "min": 1}], "lines": [{"check": "row_count", "min": 1}]}})
    objects = [lake.objects.put("inbox", "orders/a.parquet", emails(3, 0)),
               lake.objects.put("inbox", "lines/a.parquet", [{"id": 1}])]
    outcomes = run_wap(objects, ports=lake.ports, suites=lake.suites, config=lake.config)
    assert all(o.status is OutcomeStatus.PUBLISHED for o in outcomes)  # type: ignore[union-attr]
    keys = {k for k in lake.catalog.contents("main") if k.startswith("wap_meta.")}
    assert keys == {"wap_meta.wap__orders", "wap_meta.wap__lines"}
    plan = merge_plan.plan_for("h", [T, results_table(T)], ["wap_meta"], [], quarantine=True, quarantined=[T])
    assert plan.tables == {("wap", "orders"), ("wap", "orders_quarantine"), ("wap_meta", "wap__orders")}


def test_a_dry_run_judges_against_the_history_and_records_nothing() -> None:
    from wap_ingest.core.dry_run import DryRunStatus, audit_without_publishing

    lake = Lake({"tables": {"orders": [NULL_SHARE]}})
    for i in range(6):
        lake.load(f"orders/clean-{i}.parquet", emails(100, 2 + i % 2))
    before = lake.results.rows(T, "main")
    dry = audit_without_publishing(lake.objects.put("inbox", "orders/shifted.parquet", emails(100, 40)),
                                   ports=lake.ports, suites=lake.suites, config=lake.config)
    assert dry.status is DryRunStatus.FAILED and dry.report is not None
    assert "null_share(email) = 0.4" in dry.report.checks[0].measured
    assert lake.results.rows(T, "main") == before
    plain = Lake({"tables": {"orders": [NULL_SHARE]}})
    plain.ports = Ports(catalog=plain.catalog, writer=FakeWriter(plain.catalog, plain.objects), objects=plain.objects)
    assert plain.load("orders/a.parquet", emails(10, 1)).status is OutcomeStatus.PUBLISHED
    assert not any(k.startswith("wap_meta.") for k in plain.catalog.contents("main"))


def test_a_load_of_several_tables_records_each_tables_results_in_its_own_table() -> None:
    import json

    from tests.fakes import FakeEventSink, FakeNotifier
    from wap_ingest.core.ingest import Item, ingest

    lake = Lake({"tables": {"orders": [{"check": "row_count", "min": 1}], "lines": [{"check": "row_count", "min": 1}]}})
    lake.objects.put("inbox", "_pending/orders/o.parquet", emails(4, 0))
    lake.objects.put("inbox", "_pending/lines/l.parquet", [{"id": 2}])
    listed = json.dumps({"files": ["_pending/orders/o.parquet", "_pending/lines/l.parquet"]}).encode()
    [outcome] = ingest([Item(lake.objects.put("inbox", "_loads/m.json", listed))], ports=lake.ports,
                       suites=lake.suites, config=lake.config, notifier=FakeNotifier(), events=FakeEventSink())
    assert outcome.status is OutcomeStatus.PUBLISHED  # type: ignore[union-attr]
    assert lake.results.history(T, "main", {"row_count": 5}) == {"row_count": (4.0,)}
    assert lake.results.history(TableRef("wap", "lines"), "main", {"row_count": 5}) == {"row_count": (1.0,)}


class _Meeting:
    """The history read and the write each wait (up to 5 s) for the other to have started: they meet only if the
    pipeline runs them at once (one after the other, the first waits in vain)."""

    def __init__(self) -> None:
        import threading

        self.reading, self.writing = threading.Event(), threading.Event()
        self.met: list[str] = []

    def read(self) -> None:
        self.reading.set()
        self.met.append("read" if self.writing.wait(5) else "read alone")

    def write(self) -> None:
        self.writing.set()
        self.met.append("write" if self.reading.wait(5) else "write alone")


@pytest.mark.parametrize("path", ["file", "load"])
def test_the_history_is_read_beside_the_write(path: str) -> None:
    import json

    from tests.fakes import FakeEventSink, FakeNotifier
    from wap_ingest.core.ingest import Item, ingest

    lake = Lake({"tables": {"orders": [NULL_SHARE]}})
    meeting = _Meeting()
    history, append = lake.results.history, lake.ports.writer.append

    def read(*args: Any) -> Any:
        meeting.read()
        return history(*args)

    def write(*args: Any) -> Any:
        meeting.write()
        return append(*args)

    lake.results.history = read  # type: ignore[method-assign]
    lake.ports.writer.append = write  # type: ignore[method-assign]
    if path == "file":
        outcome = lake.load("orders/a.parquet", emails(10, 0))
    else:
        lake.objects.put("inbox", "_pending/orders/o.parquet", emails(4, 0))
        listed = json.dumps({"files": ["_pending/orders/o.parquet"]}).encode()
        [outcome] = ingest([Item(lake.objects.put("inbox", "_loads/m.json", listed))], ports=lake.ports,
                           suites=lake.suites, config=lake.config, notifier=FakeNotifier(), events=FakeEventSink())
    assert outcome.status is OutcomeStatus.PUBLISHED, outcome.message  # type: ignore[union-attr]
    assert sorted(meeting.met) == ["read", "write"]


def test_a_history_read_that_fails_fails_the_audit_that_waits_for_it() -> None:
    from wap_ingest.core.errors import CatalogUnavailableError
    from wap_ingest.core.history import history_beside

    lake = Lake({"tables": {"orders": [NULL_SHARE]}})

    def broken(*_args: Any) -> Any:
        raise CatalogUnavailableError("nessie is down")

    lake.results.history = broken  # type: ignore[method-assign]
    wait = history_beside(lake.suites.suite_for(T), T, lake.catalog, "main", lake.results)
    with pytest.raises(CatalogUnavailableError, match="nessie is down"):
        wait()
    with pytest.raises(CatalogUnavailableError, match="nessie is down"):  # as when the read came first
        lake.load("orders/a.parquet", emails(10, 0))
    assert not any(k.startswith("wap.orders") for k in lake.catalog.contents("main"))

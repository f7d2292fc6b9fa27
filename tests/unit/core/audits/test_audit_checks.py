"""Every check type evaluated on measurements (no engine), severities, the compact alert, and the pipeline's
use of them against the fakes: warn publishes and alerts, error rejects and keeps the report, history counts."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from tests.fakes import FakeCatalog, FakeObjectStore, FakeReportStore, FakeWriter, run_one
from tests.paths import ROOT
from wap_ingest.core.alerts import AlertKind, alert_for_outcome
from wap_ingest.core.audits import AuditContext, audit, suites_from
from wap_ingest.core.errors import AuditSuiteError
from wap_ingest.core.measurements import Measurements
from wap_ingest.core.models import AuditReport, CheckStatus, OutcomeStatus, TableRef
from wap_ingest.core.pipeline import PipelineConfig, Ports

T = TableRef("wap", "t")
NOW = datetime(2026, 1, 2, 12, 0, tzinfo=UTC)


def suite(*checks: dict[str, Any]):  # type: ignore[no-untyped-def]
    return suites_from({"tables": {"t": list(checks)}}, default_namespace="wap").suite_for(T)


def micros(moment: datetime) -> int:
    return int(moment.timestamp() * 1_000_000)


def test_each_check_reads_its_measurement_and_severity_decides_failed_or_warned() -> None:
    s = suite(
        {"check": "unique", "columns": ["id"]},
        {"check": "accepted_values", "column": "status", "values": ["a", "b"], "severity": "warn"},
        {"check": "range", "column": "amount", "min": 0},
        {"check": "regex", "column": "code", "pattern": "[A-Z]+"},
        {"check": "schema", "columns": {"id": "long", "amount": "double"}},
        {"check": "freshness", "column": "ts", "max_age": "24h"},
        {"check": "custom_sql", "sql": "SELECT * FROM new_rows WHERE amount > 10", "name": "big"},
        {"check": "row_count_vs_history", "factor": 3, "last": 5},
    )
    plan = s.plan()
    assert plan.unique_keys == (("id",),) and plan.existing_keys == (("id",),)
    assert [r.key for r in plan.rules] == ["accepted_values:status", "range:amount", "regex:code"]
    assert plan.max_columns == ("ts",) and plan.queries == ("SELECT * FROM new_rows WHERE amount > 10",)
    measured = Measurements(
        row_count=40, columns=("id", "status", "amount", "code", "ts"),
        types={"id": "bigint", "status": "string", "amount": "int", "code": "string", "ts": "timestamp"},
        duplicates={("id",): 2}, existing={("id",): 0},
        violations={"accepted_values:status": 3, "range:amount": 0, "regex:code": 1},
        newest={"ts": micros(NOW - timedelta(hours=30))},
        query_rows={"SELECT * FROM new_rows WHERE amount > 10": 0},
        samples={"unique:id": ({"id": "7", "count": "3"},), "regex:code": ({"code": "ab"},)},
    )
    report = audit(s, T, measured, AuditContext(now=NOW, history=(10, 10, 10)))
    assert [(c.check, c.target, c.status.value, c.measured) for c in report.checks] == [
        ("unique", "id", "failed", "2 rows repeat a key of the new rows"),
        ("unique", "id vs main", "passed", "0 new rows have a key already on main"),
        ("accepted_values", "status", "warned", "3 rows outside"),
        ("range", "amount", "passed", "0 rows outside"),
        ("regex", "code", "failed", "1 rows outside"),
        ("schema", "columns", "failed", "amount is int, not double"),
        ("freshness", "ts", "failed", "newest 2026-01-01T06:00:00+00:00 (1d 6h old)"),
        ("custom_sql", "big", "passed", "0 rows returned"),
        ("row_count_vs_history", "rows", "failed", "40 rows = 4.00x the average 10 of the last 3 loads"),
    ]
    assert report.checks[0].samples == ({"id": "7", "count": "3"},) and report.checks[1].samples == ()
    assert report.checks[8].expected == "between 3 and 30 rows (factor 3)"
    assert not report.passed and len(report.warnings) == 1
    assert AuditReport.from_dict(report.to_dict()) == report


def test_history_needs_enough_loads_and_missing_columns_fail_instead_of_crashing() -> None:
    s = suite({"check": "row_count_vs_history", "factor": 2, "min_loads": 2},
              {"check": "freshness", "column": "ts", "max_age": "1h", "severity": "warn"},
              {"check": "range", "column": "nope", "max": 1})
    report = audit(s, T, Measurements(row_count=5, columns=("a",)), AuditContext(now=NOW, history=(100,)))
    assert [(c.status, c.measured) for c in report.checks] == [
        (CheckStatus.PASSED, "5 rows; 1 earlier loads, too few to compare"),
        (CheckStatus.WARNED, "column missing"),
        (CheckStatus.FAILED, "column missing"),
    ]


@pytest.mark.parametrize(
    ("check", "phrase"),
    [
        ({"check": "unique"}, "check #2 (unique): key 'columns' must be a non-empty list"),
        ({"check": "unique", "columns": ["a`b"]}, "key 'columns': 'a`b' is not a column name"),
        ({"check": "unique", "columns": ["a"], "against_main": "yes"}, "key 'against_main' must be true or false"),
        ({"check": "accepted_values", "column": "a"}, "key 'values' must be a non-empty list"),
        ({"check": "accepted_values", "values": [1]}, "(accepted_values): key 'column' is required"),
        ({"check": "range", "column": "a"}, "(range): give 'min', 'max' or both"),
        ({"check": "range", "column": "a", "min": "0"}, "key 'min' must be a number"),
        ({"check": "regex", "column": "a", "pattern": "("}, "key 'pattern' is not a valid regular expression"),
        ({"check": "schema", "columns": ["a"]}, "key 'columns' must map each required column to its type"),
        ({"check": "schema", "columns": {"a": "varchar"}}, "column 'a' has type 'varchar'"),
        ({"check": "schema", "columns": {"a": "int"}, "new_columns": "maybe"}, "key 'new_columns' must be"),
        ({"check": "freshness", "column": "ts", "max_age": "a day"}, "(freshness): max_age 'a day' is not a duration"),
        ({"check": "freshness", "column": "ts"}, "key 'max_age' is required"),
        ({"check": "custom_sql", "sql": "DELETE FROM new_rows"}, "key 'sql' must be one SELECT"),
        ({"check": "custom_sql", "sql": "SELECT * FROM other"}, "over the view `new_rows`"),
        ({"check": "custom_sql", "sql": "SELECT * FROM new_rows; DROP TABLE x"}, "key 'sql' must be one SELECT"),
        ({"check": "row_count_vs_history", "factor": 1}, "key 'factor' must be a number greater than 1"),
        ({"check": "row_count_vs_history", "factor": 2, "last": 0}, "key 'last' must be an integer >= 1"),
        ({"check": "not_null", "columns": ["a"], "severity": "fatal"}, "key 'severity' must be 'error'"),
        ({"check": "range", "column": "a", "max": 1, "maximum": 2}, "unknown key(s) maximum; allowed: column, max"),
    ],
)
def test_invalid_checks_name_table_check_and_key(check: dict[str, Any], phrase: str) -> None:
    with pytest.raises(AuditSuiteError) as info:
        suites_from({"tables": {"orders": [{"check": "row_count", "min": 1}, check]}}, default_namespace="wap")
    assert "audits file: table 'orders', check #2" in str(info.value)
    assert phrase in str(info.value)


def test_two_schema_checks_are_refused() -> None:
    schema = {"check": "schema", "columns": {"a": "int"}}
    with pytest.raises(AuditSuiteError, match="table 't': more than one schema check"):
        suite(schema, schema)


def test_the_shipped_audits_file_is_valid_and_documents_every_check() -> None:

    from wap_ingest.bootstrap import load_suites
    from wap_ingest.core.audits import ALLOWED_KEYS

    path = ROOT / "audits.yml"
    suites = load_suites(path, "wap")
    kinds = {c.kind for s in suites.by_table.values() for c in s.checks}
    assert kinds == set(ALLOWED_KEYS)


class Lake:
    def __init__(self, checks: list[dict[str, Any]]) -> None:
        self.catalog = FakeCatalog()
        self.objects = FakeObjectStore()
        self.reports = FakeReportStore()
        self.ports = Ports(self.catalog, FakeWriter(self.catalog, self.objects), self.objects, self.reports)
        self.suites = suites_from({"tables": {"t": checks}}, default_namespace="wap")
        self.config = PipelineConfig(default_namespace="wap", sleep=lambda _: None)

    def run(self, key: str, n: int, nulls: int = 0):  # type: ignore[no-untyped-def]
        source = self.objects.put("source", key, [{"a": None if i < nulls else i} for i in range(n)])
        return run_one(source, ports=self.ports, suites=self.suites, config=self.config)


def test_warn_publishes_with_an_alert_and_error_rejects_with_a_stored_report() -> None:
    lake = Lake([{"check": "not_null", "columns": ["a"], "severity": "warn"},
                 {"check": "row_count_vs_history", "factor": 2, "min_loads": 1},
                 {"check": "row_count", "max": 50}])
    assert lake.run("t/1.parquet", 10).status is OutcomeStatus.PUBLISHED
    warned = lake.run("t/2.parquet", 12, nulls=2)
    assert warned.status is OutcomeStatus.PUBLISHED and warned.report is not None
    alert = alert_for_outcome(warned)
    assert alert is not None and alert.kind is AlertKind.WARNED
    assert "WARNED not_null(a): measured 2 nulls, expected 0 nulls" in alert.text
    assert lake.reports.saved == {}

    rejected = lake.run("t/3.parquet", 60)  # 60 rows: more than 50, and 5.45x the average of 10 and 12
    assert rejected.status is OutcomeStatus.REJECTED and rejected.branch and rejected.report is not None
    assert [c.measured for c in rejected.report.failures] == [
        "60 rows = 5.45x the average 11 of the last 2 loads", "60 rows"]
    assert lake.reports.saved[rejected.branch]["report"] == rejected.report.to_dict()
    assert f"Report: memory://{rejected.branch}.json." in rejected.message
    alert = alert_for_outcome(rejected)
    assert alert is not None and "FAILED row_count(rows): measured 60 rows, expected &lt;= 50" in alert.text
    assert "1 other check(s) passed" in alert.text

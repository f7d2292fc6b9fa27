from __future__ import annotations

from typing import Any

import pytest

from wap_ingest.core.audits import DEFAULT_SUITE, audit, suites_from
from wap_ingest.core.errors import AuditSuiteError
from wap_ingest.core.measurements import Measurements
from wap_ingest.core.models import TableRef

T = TableRef("wap", "t")


def suite(*checks: dict[str, Any]):  # type: ignore[no-untyped-def]
    return suites_from({"tables": {"t": list(checks)}}, default_namespace="wap").suite_for(T)


def test_not_null_and_row_count_measure_and_report() -> None:
    s = suite({"check": "not_null", "columns": ["a", "B"]}, {"check": "row_count", "min": 2, "max": 5})
    assert s.plan().null_count_columns == ("a", "B")
    report = audit(s, T, Measurements(row_count=6, null_counts={"a": 0, "b": 2}, columns=("a", "b")))
    assert [(c.check, c.target, c.status.value, c.measured, c.expected) for c in report.checks] == [
        ("not_null", "a", "passed", "0 nulls", "0 nulls"),
        ("not_null", "B", "failed", "2 nulls", "0 nulls"),
        ("row_count", "rows", "failed", "6 rows", ">= 2 and <= 5"),
    ]
    assert not report.passed
    assert report.to_dict()["passed"] is False


def test_not_null_on_a_missing_column_fails_instead_of_crashing() -> None:
    report = audit(suite({"check": "not_null", "columns": ["zzz"]}), T, Measurements(row_count=1, columns=("a",)))
    assert report.failures[0].measured == "column missing"


def test_a_passing_report() -> None:
    report = audit(suite({"check": "row_count", "min": 1}), T, Measurements(row_count=1))
    assert report.passed and report.failures == ()


def test_default_suite_applies_to_unlisted_tables() -> None:
    suites = suites_from({"tables": {"t": []}}, default_namespace="wap")
    assert suites.suite_for(TableRef("wap", "other")) is DEFAULT_SUITE
    assert suites_from(None, default_namespace="wap").suite_for(T) is DEFAULT_SUITE


def test_qualified_table_names_and_defaults() -> None:
    suites = suites_from(
        {"tables": {"raw.events": [{"check": "row_count", "max": 9}]}, "defaults": []}, default_namespace="wap"
    )
    assert suites.suite_for(TableRef("raw", "events")).checks
    assert suites.suite_for(T).checks == ()


@pytest.mark.parametrize(
    ("document", "phrase"),
    [
        ([], "top level must be a mapping"),
        ({"tabels": {}}, "unknown top-level key(s) tabels"),
        ({"tables": {"t": {"check": "not_null"}}}, "table 't': expected a list of checks"),
        ({"tables": {"t": [{"check": "nope"}]}}, "table 't', check #1 (nope): unknown check 'nope'"),
        ({"tables": {"t": [{"check": "not_null"}]}}, "check #1 (not_null): key 'columns'"),
        ({"tables": {"t": [{"check": "not_null", "columns": []}]}}, "key 'columns'"),
        ({"tables": {"t": [{"check": "not_null", "columns": ["a"], "colums": 1}]}}, "unknown key(s) colums"),
        ({"tables": {"t": [{"check": "row_count", "min": 1}, {"check": "row_count"}]}}, "check #2 (row_count)"),
        ({"tables": {"t": [{"check": "row_count", "min": -1}]}}, "key 'min' must be a non-negative integer"),
        ({"tables": {"t": [{"check": "row_count", "min": "3"}]}}, "key 'min'"),
        ({"tables": {"t": [{"check": "row_count", "min": 5, "max": 1}]}}, "'min' (5) is greater than 'max' (1)"),
        ({"tables": {"bad-name": []}}, "not a valid identifier"),
        ({"tables": {"t": ["not_null"]}}, "each check is a mapping"),
    ],
)
def test_invalid_suites_fail_with_a_precise_message(document: Any, phrase: str) -> None:
    with pytest.raises(AuditSuiteError) as info:
        suites_from(document, default_namespace="wap")
    assert phrase in str(info.value)

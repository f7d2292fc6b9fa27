"""The `anomaly` check (issue 36, item 2) on measurements and a history given in the context (no engine): its plan,
its verdict's words, the loads it asks for, and the audits file's errors."""

from __future__ import annotations

from typing import Any

import pytest

from wap_ingest.core.audits import Anomaly, AuditContext, audit, suites_from
from wap_ingest.core.errors import AuditSuiteError
from wap_ingest.core.measurements import ColumnProfile, MeasurementPlan, Measurements
from wap_ingest.core.models import CheckStatus, TableRef

T = TableRef("wap", "t")
CLEAN = tuple(0.02 + 0.001 * ((i * 7) % 5 - 2) for i in range(20))  # 0.018 .. 0.022, newest first


def suite(*checks: dict[str, Any]):  # type: ignore[no-untyped-def]
    return suites_from({"tables": {"t": list(checks)}}, default_namespace="wap").suite_for(T)


def test_a_null_share_ten_times_the_usual_fails_with_the_value_the_band_and_the_threshold() -> None:
    s = suite({"check": "anomaly", "metric": "null_share(email)", "min_loads": 5})
    assert s.plan() == MeasurementPlan(null_count_columns=("email",))  # the files' metrics answer it
    context = AuditContext(metrics={"null_share(email)": CLEAN})
    usual = audit(s, T, Measurements(row_count=1000, null_counts={"email": 21}, columns=("email",)), context)
    shifted = audit(s, T, Measurements(row_count=1000, null_counts={"email": 200}, columns=("email",)), context)
    assert usual.checks[0].status is CheckStatus.PASSED
    [result] = shifted.checks
    assert result.status is CheckStatus.FAILED and result.target == "null_share(email)"
    assert result.measured.startswith("null_share(email) = 0.2, +") and "from the median 0.02" in result.measured
    assert result.expected.startswith("between ") and "4 x MAD x 1.4826" in result.expected
    assert "last 20 loads" in result.expected


def test_warn_severity_warns_and_too_few_loads_pass_saying_so() -> None:
    s = suite({"check": "anomaly", "metric": "row_count", "min_loads": 5, "severity": "warn", "method": "zscore",
               "threshold": 3})
    warned = audit(s, T, Measurements(row_count=10_000), AuditContext(metrics={"row_count": (100.0, 101.0, 99.0,
                                                                                             100.0, 102.0)}))
    assert warned.checks[0].status is CheckStatus.WARNED and "standard deviation" in warned.checks[0].expected
    early = audit(s, T, Measurements(row_count=10_000), AuditContext(metrics={"row_count": (100.0,)}))
    assert early.checks[0].status is CheckStatus.PASSED
    assert "1 earlier loads, too few to judge" in early.checks[0].measured


def test_profile_metrics_read_the_columns_profile_and_ask_for_it() -> None:
    s = suite({"check": "anomaly", "metric": "mean(amount)", "last": 10, "min_loads": 3})
    assert s.plan().profile_columns == ("amount",) and s.plan().reads_rows
    measured = Measurements(row_count=50, columns=("Amount",), profile={"Amount": ColumnProfile(mean=100.2)})
    recent = tuple(1e9 + i for i in range(10))  # newest first: the last 10 loads
    history = {"mean(amount)": recent + tuple(100.0 + (i % 3) / 2 for i in range(20))}
    [result] = audit(s, T, measured, AuditContext(metrics=history)).checks
    assert result.status is CheckStatus.FAILED and "mean(amount) = 100.2" in result.measured  # the older loads: unread
    assert "last 10 loads" in result.expected
    everything = suite({"check": "anomaly", "metric": "mean(amount)", "last": 30, "min_loads": 3})
    [judged] = audit(everything, T, measured, AuditContext(metrics=history)).checks
    assert judged.status is CheckStatus.PASSED  # with all 30, most loads sit near 100


def test_a_missing_column_fails_and_a_load_without_the_figure_passes_unjudged() -> None:
    s = suite({"check": "anomaly", "metric": "max(ts)"})
    [missing] = audit(s, T, Measurements(row_count=5, columns=("a",)), AuditContext()).checks
    assert missing.status is CheckStatus.FAILED and missing.measured == "column missing"
    [empty] = audit(s, T, Measurements(row_count=0, columns=("ts",)), AuditContext(metrics={"max(ts)": (1.0,) * 9})
                    ).checks
    assert empty.status is CheckStatus.PASSED and "no value in this load" in empty.measured


def test_the_suite_asks_for_each_metrics_longest_history() -> None:
    s = suite({"check": "anomaly", "metric": "row_count", "last": 12},
              {"check": "anomaly", "metric": "row_count", "last": 40, "threshold": 6},
              {"check": "anomaly", "metric": "distinct(id)"})
    assert s.history_metrics == {"row_count": 40, "distinct(id)": 30}
    assert all(isinstance(c, Anomaly) for c in s.checks)


@pytest.mark.parametrize(("check", "phrase"), [
    ({"check": "anomaly"}, "key 'metric': metric must be row_count or one of null_share(column)"),
    ({"check": "anomaly", "metric": "median(a)"}, "metric 'median' is not one of"),
    ({"check": "anomaly", "metric": "row_count", "method": "iqr"}, "key 'method' must be mad"),
    ({"check": "anomaly", "metric": "row_count", "threshold": 0}, "key 'threshold' must be a number of spreads"),
    ({"check": "anomaly", "metric": "row_count", "threshold": True}, "key 'threshold' must be a number of spreads"),
    ({"check": "anomaly", "metric": "row_count", "last": 0}, "key 'last' must be a whole number of loads"),
    ({"check": "anomaly", "metric": "row_count", "last": 3, "min_loads": 5}, "'min_loads' (5) is greater than"),
    ({"check": "anomaly", "metric": "row_count", "band": 3}, "unknown key(s) band; allowed: last, method, metric"),
])
def test_invalid_anomaly_checks_name_the_table_the_check_and_the_key(check: dict[str, Any], phrase: str) -> None:
    with pytest.raises(AuditSuiteError) as info:
        suites_from({"tables": {"orders": [{"check": "row_count", "min": 1}, check]}}, default_namespace="wap")
    assert "audits file: table 'orders', check #2 (anomaly)" in str(info.value) and phrase in str(info.value)

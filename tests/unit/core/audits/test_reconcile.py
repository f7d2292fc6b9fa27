"""The `reconcile` check (issue 36, item 3) on the fakes: the audits file's keys and their allow list, the verdict's
words, a header whose total disagrees with its lines rejected and one that agrees published, a tolerance, an other
table that does not exist, and a multi-table load whose lines and header arrive together (the lines written first,
whatever the manifest's order)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.fakes import FakeEventSink, FakeNotifier
from tests.unit.core.audits.test_references import Lake as ReferencesLake
from wap_ingest.core.audits import Reconcile, audit, suites_from
from wap_ingest.core.errors import AuditSuiteError
from wap_ingest.core.ingest import Item, ingest
from wap_ingest.core.measurements import MeasurementPlan, Measurements, Reconciliation
from wap_ingest.core.models import CheckStatus, OutcomeStatus, TableRef

HEADERS = TableRef("wap", "headers")
RECONCILE = {"check": "reconcile", "aggregate": "sum(total)", "table": "lines", "against": "sum(amount)"}
NAME = "sum(total) = wap.lines.sum(amount)"


def suites(tables: dict[str, Any]) -> Any:
    return suites_from({"tables": tables}, default_namespace="wap")


def test_the_aggregates_are_parsed_by_allow_list_and_the_table_qualified() -> None:
    [check] = suites({"headers": [RECONCILE]}).suite_for(HEADERS).checks
    assert check == Reconcile(Reconciliation(("sum", "total"), "wap.lines", ("sum", "amount")))
    assert check.plan() == MeasurementPlan(reconciliations=(check.reconciliation,))
    assert check.plan().reads_rows
    [other] = suites({"headers": [RECONCILE | {"aggregate": "COUNT( * )", "against": "count(Line Id)",
                                               "table": "erp.Lines", "tolerance": 2}]}).suite_for(HEADERS).checks
    assert other == Reconcile(Reconciliation(("count", None), "erp.lines", ("count", "Line Id")), 2.0)
    assert other.reconciliation.name == "count(*) = erp.lines.count(Line Id)"


@pytest.mark.parametrize(("change", "phrase"), [
    ({"aggregate": "median(total)"}, "key 'aggregate' must be one of count(column), sum(column)"),
    ({"aggregate": "sum(total); drop table x"}, "key 'aggregate' must be one of"),
    ({"aggregate": "sum(a) + sum(b)"}, "key 'aggregate' must be one of"),
    ({"against": "sum(abs(amount))"}, "key 'against' must be one of"),
    ({"against": "sum(*)"}, "key 'against': only count takes *"),
    ({"against": "sum(a.b)"}, "key 'against': 'a.b' is not a column name"),
    ({"aggregate": None}, "key 'aggregate' must be one of"),
    ({"table": "x.y.z"}, "key 'table' must name a table"),
    ({"tolerance": -1}, "key 'tolerance' must be a number >= 0"),
    ({"tolerance": True}, "key 'tolerance' must be a number >= 0"),
    ({"where": "x"}, "unknown key(s) where"),
])
def test_a_bad_reconcile_check_fails_at_start_up(change: dict[str, Any], phrase: str) -> None:
    with pytest.raises(AuditSuiteError, match="table 'headers', check #1 \\(reconcile\\)") as caught:
        suites({"headers": [RECONCILE | change]})
    assert phrase in str(caught.value)


def test_the_verdict_gives_both_figures_and_the_difference() -> None:
    suite = suites({"headers": [RECONCILE | {"tolerance": 0.5}]}).suite_for(HEADERS)
    [failed] = audit(suite, HEADERS, Measurements(row_count=1, reconciled={NAME: (10.0, 12.0)})).checks
    assert failed.status is CheckStatus.FAILED and failed.target == NAME
    assert failed.measured == "sum(total) = 10, wap.lines's sum(amount) = 12 (difference -2)"
    assert failed.expected == "sum(total) = sum(amount) of wap.lines within 0.5"
    [near] = audit(suite, HEADERS, Measurements(row_count=1, reconciled={NAME: (10.0, 10.4)})).checks
    assert near.status is CheckStatus.PASSED
    absent = audit(suite, HEADERS, Measurements(row_count=1, reconciled={NAME: (10.0, None)},
                                                absent=("wap.lines",)))
    assert absent.checks[0].status is CheckStatus.FAILED
    assert absent.checks[0].measured == "wap.lines does not exist on main"
    empty = audit(suite, HEADERS, Measurements(row_count=1, reconciled={NAME: (None, None)}))
    assert empty.checks[0].status is CheckStatus.PASSED  # min/max/avg of no rows on both sides: no value either
    warned = suites({"headers": [RECONCILE | {"severity": "warn"}]}).suite_for(HEADERS)
    assert audit(warned, HEADERS, Measurements(row_count=1, reconciled={NAME: (1.0, 2.0)})).passed


class Lake(ReferencesLake):
    """test_references' lake (fakes, this module's suites), with a manifest load."""

    def manifest(self, key: str, files: dict[str, list[dict[str, Any]]]) -> Any:
        for name, rows in files.items():
            self.objects.put("inbox", name, rows)
        listed = json.dumps({"files": list(files)}).encode()
        [outcome] = ingest([Item(self.objects.put("inbox", key, listed))], ports=self.ports, suites=self.suites,
                           config=self.config, notifier=FakeNotifier(), events=FakeEventSink())
        return outcome


TABLES = {"lines": [{"check": "row_count", "min": 1}], "headers": [RECONCILE]}


def test_the_headers_total_after_the_load_is_reconciled_with_the_lines() -> None:
    lake = Lake(TABLES)
    assert lake.load("lines/a.parquet", [{"amount": 5}, {"amount": 7}]).status is OutcomeStatus.PUBLISHED
    good = lake.load("headers/a.parquet", [{"order": 1, "total": 12}])
    assert good.status is OutcomeStatus.PUBLISHED, good.message
    assert lake.load("lines/b.parquet", [{"amount": 3}]).status is OutcomeStatus.PUBLISHED
    bad = lake.load("headers/b.parquet", [{"order": 2, "total": 4}])  # 12 + 4 against 15: the table, not the file
    assert bad.status is OutcomeStatus.REJECTED
    assert bad.report.failures[0].measured == "sum(total) = 16, wap.lines's sum(amount) = 15 (difference 1)"
    assert lake.load("headers/c.parquet", [{"order": 3, "total": 3}]).status is OutcomeStatus.PUBLISHED  # 15


def test_a_table_to_reconcile_with_that_does_not_exist_rejects_the_load() -> None:
    outcome = Lake(TABLES).load("headers/early.parquet", [{"order": 1, "total": 0}])
    assert outcome.status is OutcomeStatus.REJECTED
    assert outcome.report.failures[0].measured == "wap.lines does not exist on main"


def test_a_load_brings_the_lines_and_their_header_together_in_any_order() -> None:
    lake = Lake(TABLES)
    outcome = lake.manifest("_loads/m.json", {"_pending/headers/h.parquet": [{"order": 1, "total": 9}],
                                              "_pending/lines/l.parquet": [{"amount": 4}, {"amount": 5}]})
    assert outcome.status is OutcomeStatus.PUBLISHED, outcome.message
    assert [p.table for p in outcome.parts] == ["wap.headers", "wap.lines"]
    wrong = lake.manifest("_loads/m2.json", {"_pending/headers/h2.parquet": [{"order": 2, "total": 1}],
                                             "_pending/lines/l2.parquet": [{"amount": 2}]})
    assert wrong.status is OutcomeStatus.REJECTED
    assert "sum(total) = 10, wap.lines's sum(amount) = 11" in wrong.parts[0].report.failures[0].measured


def test_a_text_column_under_sum_min_max_or_avg_is_the_audits_files_mistake() -> None:
    lake = Lake({"lines": [{"check": "row_count", "min": 1}],
                 "headers": [RECONCILE | {"aggregate": "max(order)", "against": "max(amount)"}]})
    assert lake.load("lines/a.parquet", [{"amount": 5}]).status is OutcomeStatus.PUBLISHED
    with pytest.raises(AuditSuiteError, match="max\\(order\\) of a text column"):
        lake.load("headers/a.parquet", [{"order": "A-1", "total": 5}])

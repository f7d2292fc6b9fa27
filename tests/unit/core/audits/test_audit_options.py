"""The table entry's mapping form (`checks`, `samples`, `mask`) and `strict_tables`, on the core and on fakes."""

from __future__ import annotations

from typing import Any

import pytest

from tests.fakes import FakeCatalog, FakeObjectStore, FakeWriter, rows_on
from wap_ingest.core.audits import suites_from
from wap_ingest.core.audits.suite import masked_value
from wap_ingest.core.errors import AuditSuiteError, RefusedEventError
from wap_ingest.core.measurements import Measurements
from wap_ingest.core.models import CheckResult, CheckStatus, OutcomeStatus, TableRef
from wap_ingest.core.pipeline import PipelineConfig, Ports, run_wap

NOT_NULL = {"check": "not_null", "columns": ["email"]}
SAMPLES = ({"email": "ann@example.com", "id": "1"}, {"email": "bob@example.com", "id": "2"})


def report_for(entry: Any) -> CheckResult:
    from wap_ingest.core.audits import audit

    suites = suites_from({"tables": {"people": entry}}, default_namespace="wap")
    table = TableRef("wap", "people")
    measured = Measurements(row_count=2, null_counts={"email": 2}, columns=("email", "id"),
                            samples={"not_null:email": SAMPLES})
    [result] = audit(suites.suite_for(table), table, measured).checks
    assert result.status is CheckStatus.FAILED
    return result


def test_the_list_form_and_the_mapping_form_are_the_same_suite() -> None:
    listed = suites_from({"tables": {"people": [NOT_NULL]}}, default_namespace="wap")
    mapped = suites_from({"tables": {"people": {"checks": [NOT_NULL]}}}, default_namespace="wap")
    assert listed == mapped


def test_samples_are_kept_by_default_dropped_with_samples_false_and_not_measured() -> None:
    assert report_for([NOT_NULL]).samples == SAMPLES
    assert report_for({"checks": [NOT_NULL], "samples": False}).samples == ()
    suites = suites_from({"tables": {"people": {"checks": [NOT_NULL], "samples": False}}}, default_namespace="wap")
    assert suites.suite_for(TableRef("wap", "people")).plan().samples == 0


def test_masked_columns_are_hashed_and_stay_comparable() -> None:
    shown = report_for({"checks": [NOT_NULL], "mask": ["EMAIL"]}).samples  # names are case-insensitive
    assert [s["id"] for s in shown] == ["1", "2"]
    assert [s["email"] for s in shown] == [masked_value("ann@example.com"), masked_value("bob@example.com")]
    assert all("example.com" not in s["email"] and s["email"].startswith("sha256:") for s in shown)


@pytest.mark.parametrize(("entry", "phrase"), [
    ({"checks": [NOT_NULL], "sample": False}, "unknown key(s) sample"),
    ({"checks": [NOT_NULL], "samples": "no"}, "key 'samples' must be true or false"),
    ({"checks": [NOT_NULL], "mask": "email"}, "key 'mask' must be a list of column names"),
    ({"checks": [NOT_NULL], "mask": ["a.b"]}, "mask"),
    ({"checks": "not_null"}, "expected a list of checks"),
])
def test_a_bad_mapping_entry_names_the_table_and_the_key(entry: Any, phrase: str) -> None:
    with pytest.raises(AuditSuiteError) as info:
        suites_from({"tables": {"people": entry}}, default_namespace="wap")
    assert phrase in str(info.value) and "'people'" in str(info.value)


def test_strict_tables_refuses_an_unlisted_table_with_the_fix() -> None:
    suites = suites_from({"strict_tables": True, "tables": {"orders": [NOT_NULL]}}, default_namespace="wap")
    suites.check_listed(TableRef("wap", "orders"), "s3://b/orders/x.csv")
    with pytest.raises(RefusedEventError) as info:
        suites.check_listed(TableRef("wap", "ordres"), "s3://b/ordres/x.csv")
    assert "s3://b/ordres/x.csv" in str(info.value) and "wap.ordres" in str(info.value)
    assert "Fix" in str(info.value) and "wap.orders" in str(info.value)
    loose = suites_from({"tables": {"orders": [NOT_NULL]}}, default_namespace="wap")
    loose.check_listed(TableRef("wap", "ordres"), "s3://b/ordres/x.csv")  # not strict: any table
    with pytest.raises(AuditSuiteError, match="'strict_tables' must be true or false"):
        suites_from({"strict_tables": "yes", "tables": {}}, default_namespace="wap")


def test_a_typo_in_a_prefix_creates_no_table_but_an_explicit_table_is_the_operators_choice() -> None:
    catalog, objects = FakeCatalog(), FakeObjectStore()
    ports = Ports(catalog=catalog, writer=FakeWriter(catalog, objects), objects=objects)
    suites = suites_from({"strict_tables": True, "tables": {"orders": [{"check": "row_count", "min": 1}]}},
                         default_namespace="wap")
    config = PipelineConfig(default_namespace="wap", sleep=lambda _s: None)
    typo = objects.put("src", "ordres/a.csv", [{"id": 1}])
    (outcome,) = run_wap([typo], ports=ports, suites=suites, config=config)
    assert outcome.status is OutcomeStatus.INVALID and "strict_tables" in outcome.message  # type: ignore[union-attr]
    assert "wap.ordres" not in catalog.contents("main") and catalog.list_branches("wap-") == []
    (explicit,) = run_wap([typo], ports=ports, suites=suites, config=config, table=TableRef("wap", "orders"))
    assert explicit.status is OutcomeStatus.PUBLISHED and len(rows_on(catalog, "main", "wap.orders")) == 1  # type: ignore[union-attr]

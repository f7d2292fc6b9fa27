"""The `references` check (issue 36, item 3) on the fakes: the audits file's key, its verdict's words, a file whose
values are no keys of the other table rejected, a referenced table that does not exist, and a multi-table load whose
keys and the rows pointing at them arrive together (the referenced table written first, whatever the manifest's
order)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.fakes import FakeCatalog, FakeEventSink, FakeNotifier, FakeObjectStore, FakeWriter, run_one
from wap_ingest.core.audits import References, audit, suites_from
from wap_ingest.core.errors import AuditSuiteError
from wap_ingest.core.ingest import Item, ingest
from wap_ingest.core.measurements import MeasurementPlan, Measurements, Reference
from wap_ingest.core.models import CheckStatus, OutcomeStatus, TableRef
from wap_ingest.core.pipeline import PipelineConfig, Ports

ORDERS = TableRef("sales", "orders")
REFERENCE = {"check": "references", "column": "customer_id", "table": "customers", "key": "id"}


def suites(tables: dict[str, Any]) -> Any:
    return suites_from({"tables": tables}, default_namespace="wap")


def test_a_bare_table_is_the_audited_tables_namespace_and_a_qualified_one_is_kept() -> None:
    [check] = suites({"sales.orders": [REFERENCE]}).suite_for(ORDERS).checks
    assert check == References(Reference("customer_id", "sales.customers", "id"))
    assert check.plan() == MeasurementPlan(references=(Reference("customer_id", "sales.customers", "id"),))
    [other] = suites({"sales.orders": [REFERENCE | {"table": "crm.Customers"}]}).suite_for(ORDERS).checks
    assert isinstance(other, References) and other.reference.table == "crm.customers"


@pytest.mark.parametrize(("change", "phrase"), [
    ({"table": "crm.customers.x"}, "key 'table' must name a table"),
    ({"table": "cust-omers"}, "key 'table' must name a table"),
    ({"key": "a.b"}, "key 'key': 'a.b' is not a column name"),
    ({"column": None}, "key 'column'"),
    ({"where": "x"}, "unknown key(s) where"),
])
def test_a_bad_references_check_fails_at_start_up(change: dict[str, Any], phrase: str) -> None:
    with pytest.raises(AuditSuiteError, match="table 'orders', check #1 \\(references\\)") as caught:
        suites({"orders": [REFERENCE | change]})
    assert phrase in str(caught.value)


def test_the_verdict_names_the_rows_the_table_and_the_key() -> None:
    suite = suites({"orders": [REFERENCE]}).suite_for(TableRef("wap", "orders"))
    name = "customer_id in wap.customers.id"
    measured = Measurements(row_count=9, columns=("customer_id",), missing={name: 2},
                            samples={f"references:{name}": ({"customer_id": "77"},)})
    [result] = audit(suite, TableRef("wap", "orders"), measured).checks
    assert result.status is CheckStatus.FAILED and result.target == name
    assert result.measured == "2 rows with a customer_id that is no id of wap.customers"
    assert result.expected == "every non-null customer_id is a id of wap.customers"
    assert result.samples == ({"customer_id": "77"},)
    absent = audit(suite, TableRef("wap", "orders"), Measurements(row_count=3, columns=("customer_id",),
                                                                  missing={name: 3}, absent=("wap.customers",)))
    assert absent.checks[0].measured.endswith("(wap.customers does not exist on main)")
    gone = audit(suite, TableRef("wap", "orders"), Measurements(row_count=3, columns=("id",)))
    assert gone.checks[0].measured == "column missing"


class Lake:
    def __init__(self, tables: dict[str, Any]) -> None:
        self.catalog, self.objects = FakeCatalog(), FakeObjectStore()
        self.ports = Ports(catalog=self.catalog, writer=FakeWriter(self.catalog, self.objects), objects=self.objects)
        self.suites = suites(tables)
        self.config = PipelineConfig(default_namespace="wap", sleep=lambda _s: None)

    def load(self, key: str, rows: list[dict[str, Any]]) -> Any:
        return run_one(self.objects.put("inbox", key, rows), ports=self.ports, suites=self.suites,
                       config=self.config)


TABLES = {"customers": [{"check": "unique", "columns": ["id"]}], "orders": [REFERENCE]}


def test_a_file_with_an_unknown_customer_is_rejected_and_one_with_known_ones_published() -> None:
    lake = Lake(TABLES)
    assert lake.load("customers/c.parquet", [{"id": i} for i in range(5)]).status is OutcomeStatus.PUBLISHED
    good = lake.load("orders/good.parquet", [{"order": 1, "customer_id": 3}, {"order": 2, "customer_id": None}])
    assert good.status is OutcomeStatus.PUBLISHED, good.message
    bad = lake.load("orders/bad.parquet", [{"order": 3, "customer_id": 4}, {"order": 4, "customer_id": 99}])
    assert bad.status is OutcomeStatus.REJECTED
    assert bad.report.failures[0].measured == "1 rows with a customer_id that is no id of wap.customers"


def test_rows_pointing_at_a_table_that_does_not_exist_are_all_missing() -> None:
    lake = Lake(TABLES)
    outcome = lake.load("orders/early.parquet", [{"order": 1, "customer_id": 3}])
    assert outcome.status is OutcomeStatus.REJECTED
    assert outcome.report.failures[0].measured.endswith("(wap.customers does not exist on main)")


def test_a_load_brings_the_keys_and_the_rows_pointing_at_them_together_in_any_order() -> None:
    lake = Lake(TABLES)
    lake.objects.put("inbox", "_pending/orders/o.parquet", [{"order": 1, "customer_id": 7}])
    lake.objects.put("inbox", "_pending/customers/c.parquet", [{"id": 7}])
    listed = json.dumps({"files": ["_pending/orders/o.parquet", "_pending/customers/c.parquet"]}).encode()
    [outcome] = ingest([Item(lake.objects.put("inbox", "_loads/m.json", listed))], ports=lake.ports,
                       suites=lake.suites, config=lake.config, notifier=FakeNotifier(), events=FakeEventSink())
    assert outcome.status is OutcomeStatus.PUBLISHED, outcome.message  # type: ignore[union-attr]
    assert [p.table for p in outcome.parts] == ["wap.orders", "wap.customers"]  # type: ignore[union-attr]
    lake.objects.put("inbox", "_pending/orders/o2.parquet", [{"order": 2, "customer_id": 8}])
    listed = json.dumps({"files": ["_pending/orders/o2.parquet"]}).encode()
    [rejected] = ingest([Item(lake.objects.put("inbox", "_loads/m2.json", listed))], ports=lake.ports,
                        suites=lake.suites, config=lake.config, notifier=FakeNotifier(), events=FakeEventSink())
    assert rejected.status is OutcomeStatus.REJECTED  # type: ignore[union-attr]

"""Listing WAP branches by table and age, and pruning the old ones, on the fake catalog."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from tests.fakes import FakeCatalog
from wap_ingest.core.alerts import AlertKind, alert_for_prune
from wap_ingest.core.models import Branch, TableRef
from wap_ingest.core.review import open_branches, prune_branches

NOW = datetime(2026, 1, 15, tzinfo=UTC)


def catalog_with(ages: dict[str, timedelta]) -> FakeCatalog:
    catalog = FakeCatalog()
    catalog.ensure_namespace("main", "wap")
    for name, age in ages.items():
        catalog.create_branch(name, catalog.reference_hash("main"))
        head = catalog.commit(name, {f"t-{name}": 1})
        catalog.times[head] = NOW - age
    return catalog


def test_filters_by_table_and_age_oldest_first() -> None:
    catalog = catalog_with({"wap-wap-orders-aa-1": timedelta(days=20), "wap-wap-orders-bb-1": timedelta(hours=1),
                            "wap-wap-users-cc-1": timedelta(days=30), "wap-scratch": timedelta(days=99)})
    everything = open_branches(catalog, now=NOW, default_namespace="wap")
    assert [b.name for b in everything] == ["wap-wap-users-cc-1", "wap-wap-orders-aa-1", "wap-wap-orders-bb-1"]
    assert everything[0].age(NOW) == timedelta(days=30)
    orders = open_branches(catalog, now=NOW, default_namespace="wap", table=TableRef("wap", "orders"))
    assert [b.name for b in orders] == ["wap-wap-orders-aa-1", "wap-wap-orders-bb-1"]
    old = open_branches(catalog, now=NOW, default_namespace="wap", older_than=timedelta(days=14))
    assert [b.name for b in old] == ["wap-wap-users-cc-1", "wap-wap-orders-aa-1"]


def test_prune_deletes_at_the_listed_hash_and_leaves_moved_branches() -> None:
    catalog = catalog_with({"wap-wap-orders-aa-1": timedelta(days=20), "wap-wap-users-cc-1": timedelta(days=30)})
    stale = open_branches(catalog, now=NOW, default_namespace="wap", older_than=timedelta(days=14))
    assert prune_branches(catalog, stale, dry_run=True).discarded == tuple(stale)
    assert catalog.find_branch("wap-wap-orders-aa-1") is not None  # a dry run changes nothing
    catalog.commit("wap-wap-orders-aa-1", {"late": 1})  # someone wrote to it after it was listed
    pruned = prune_branches(catalog, stale, dry_run=False)
    assert [b.name for b in pruned.discarded] == ["wap-wap-users-cc-1"]
    assert [b.name for b, _ in pruned.skipped] == ["wap-wap-orders-aa-1"]
    assert catalog.find_branch("wap-wap-users-cc-1") is None
    assert isinstance(catalog.find_branch("wap-wap-orders-aa-1"), Branch)


def test_prune_alert_summarises() -> None:
    alert = alert_for_prune([("wap-wap-a-1-1", "wap.a"), ("wap-wap-b-2-1", "wap.b")],
                            reason="pruned: older than 14d", actor="ops", skipped=1)
    assert alert.kind is AlertKind.MAINTENANCE and "2 open branch(es)" in alert.title
    assert ("Tables", "wap.a, wap.b") in alert.fields and ("Reason", "pruned: older than 14d") in alert.fields
    assert "wap-wap-b-2-1 (wap.b)" in alert.details and "left alone" in alert.details[-1]

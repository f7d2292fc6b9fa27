"""Listing WAP branches by table and age, and pruning the old ones, on the fake catalog: names of earlier versions
and the current scheme's (core/branches.py: every kind of run, the default namespace and another)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from tests.fakes import FakeCatalog
from wap_ingest.core.alerts import AlertKind, alert_for_prune
from wap_ingest.core.branches import RunKind, parse_branch, run_branch_name
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


ORDERS, SALES = TableRef("wap", "orders"), TableRef("sales", "orders")
OLD, YOUNG = timedelta(days=20), timedelta(hours=1)


def named(kind: RunKind, table: TableRef, about: str, age: timedelta) -> str:
    """A branch as the service names it today for a run of `kind` started `age` ago."""
    return run_branch_name(kind, table, about, started=(NOW - age).timestamp(), default_namespace="wap")


def test_prune_removes_abandoned_branches_of_every_current_kind_and_keeps_the_young_ones() -> None:
    """A lone file's and a load's branch kept for review, a group's, a maintenance's and a dry run's left by a run
    that died, in the default namespace and in another: each old one is listed and pruned; the branches kept for
    review today, a WAP-prefixed branch that is not a run's, and other branches stay."""
    abandoned = {named(kind, table, f"{kind.name}-{table}", OLD) for kind in RunKind for table in (ORDERS, SALES)}
    assert {(run.kind, run.table_in("wap")) for run in map(parse_branch, abandoned) if run is not None} == {
        (kind, table) for kind in RunKind for table in (ORDERS, SALES)}
    kept = {named(RunKind.FILE, ORDERS, "rejected today", YOUNG), named(RunKind.LOAD, SALES, "load today", YOUNG)}
    catalog = catalog_with(dict.fromkeys(abandoned, OLD) | dict.fromkeys(kept, YOUNG) |
                           {"wap-scratch": OLD, "feature-x": OLD})
    stale = open_branches(catalog, now=NOW, default_namespace="wap", older_than=timedelta(days=14))
    assert {b.name for b in stale} == abandoned
    sales = open_branches(catalog, now=NOW, default_namespace="wap", table=SALES, older_than=timedelta(days=14))
    assert {b.name for b in sales} == {n for n in abandoned if n.startswith("wap-sales.orders-")} and len(sales) == 5
    pruned = prune_branches(catalog, stale, dry_run=False)
    assert {b.name for b in pruned.discarded} == abandoned and pruned.skipped == ()
    assert set(catalog.refs) == {"main", "wap-scratch", "feature-x", *kept}

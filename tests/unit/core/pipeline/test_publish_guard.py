"""`wap publish` (and the Slack buttons: the same `publish_branch`) publishes only a branch the service kept for review,
with its run's recorded plan, whose changes are exactly that plan (issue 33, item 3), on the fake catalog: a dry
run's branch that rolls a table back, a maintenance's or a group's branch, a branch without a plan; and a real kept
branch with a commit after the plan commit (a table rolled back, a planted ledger entry, an extra table) or a
foreign commit during its run, are each refused naming the branch, the key and the commit, and main's hash does not
move. Through the real stack: tests/integration/core/test_publish_guard_stack.py."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.fakes import FakeCatalog, FakeObjectStore, FakeWriter, rows_on, run_one
from tests.kept_branches import keep_for_review
from wap_ingest.core import lineage
from wap_ingest.core.audits import suites_from
from wap_ingest.core.branches import RunKind, run_branch_name
from wap_ingest.core.errors import CatalogError
from wap_ingest.core.ledger import LEDGER_NAMESPACE, entry_for, ledger_key
from wap_ingest.core.models import OutcomeStatus, SourceObject, TableRef
from wap_ingest.core.pipeline import PipelineConfig, Ports, Transactions
from wap_ingest.core.review import publish_branch

TABLE = TableRef("wap", "orders")
SUITES = suites_from({"tables": {"orders": [{"check": "not_null", "columns": ["id"]}]}}, default_namespace="wap")
CONFIG = PipelineConfig(default_namespace="wap", sleep=lambda _s: None)


class Lake:
    """Two files published into wap.orders (two snapshots on main), and a third one rejected (its branch kept)."""

    def __init__(self) -> None:
        self.catalog, self.objects = FakeCatalog(), FakeObjectStore()
        self.ports = Ports(catalog=self.catalog, writer=FakeWriter(self.catalog, self.objects), objects=self.objects)
        for n in (1, 2):
            assert self.ingest(f"orders/good{n}.parquet", [{"id": i} for i in range(5)]).status is \
                OutcomeStatus.PUBLISHED
        self.main = self.catalog.reference_hash("main")

    def ingest(self, key: str, rows: list[dict[str, Any]]) -> Any:
        return run_one(self.objects.put("source", key, rows), ports=self.ports, suites=SUITES, config=CONFIG)

    def rejected(self) -> str:
        outcome = self.ingest("orders/nulls.parquet", [{"id": None}, {"id": 1}])
        assert outcome.status is OutcomeStatus.REJECTED and outcome.branch
        self.rejected_source: SourceObject = outcome.source
        return str(outcome.branch)

    def previous_table(self) -> Any:
        """wap.orders as main held it before the second file: its previous metadata."""
        first_publish = self.catalog.commits[self.main].parent
        assert first_publish is not None
        return self.catalog.commits[first_publish].contents[TABLE.qualified]

    def publish(self, branch: str) -> Any:
        return publish_branch(Transactions(self.catalog, CONFIG), branch, reason="looks fine", actor="operator",
                              source_of=lambda _t, _b: {}, reaudit=None)

    def unchanged(self) -> None:
        assert self.catalog.reference_hash("main") == self.main
        assert len(rows_on(self.catalog, "main", TABLE.qualified)) == 10


@pytest.fixture
def lake() -> Iterator[Lake]:
    yield Lake()


def planted(table: TableRef, identity: str) -> dict[str, Any]:
    """A ledger entry saying `identity` is published into `table` (so it would be skipped as a duplicate)."""
    entry = entry_for(table, identity, f"s3://source/{identity}", 5, "wap-x", 0.0)
    return {f"{LEDGER_NAMESPACE}.{entry.key}": {"type": "namespace", "properties": entry.properties()}}


def dry_run_branch(lake: Lake) -> str:
    name = run_branch_name(RunKind.DRY_RUN, TABLE, "a dry run", started=1.0, default_namespace="wap")
    lake.catalog.create_branch(name, lake.main)
    return name


@pytest.mark.parametrize("what", ["rollback", "ledger", "table"])
def test_a_dry_run_branch_is_never_published(lake: Lake, what: str) -> None:
    """The operator may create and commit on a dry run's branch (catalog_authz): whatever it holds, no publish."""
    name = dry_run_branch(lake)
    lake.catalog.committer = "wap-operator"
    change = {"rollback": {TABLE.qualified: lake.previous_table()},
              "ledger": planted(TABLE, "source/orders/future.parquet#e9"),
              "table": {"wap.extra": {"columns": ("id",), "snapshots": []}}}[what]
    lake.catalog.commit(name, change, "by hand")
    with pytest.raises(CatalogError, match=rf"refusing to publish '{name}': it is a dry run's branch.*"
                                           rf"wap discard {name} --reason"):
        lake.publish(name)
    lake.unchanged()
    assert lake.catalog.find_branch(name) is not None  # left for whoever discards it


@pytest.mark.parametrize(("kind", "said"), [(RunKind.MAINTAIN, "a maintenance run's branch"),
                                            (RunKind.BATCH, "a group's branch")])
def test_a_maintenance_or_group_branch_is_never_published(lake: Lake, kind: RunKind, said: str) -> None:
    name = run_branch_name(kind, TABLE, "x", started=1.0, default_namespace="wap")
    lake.catalog.create_branch(name, lake.main)
    lake.catalog.commit(name, {TABLE.qualified: lake.previous_table()}, "rolled back")
    with pytest.raises(CatalogError, match=said):
        lake.publish(name)
    lake.unchanged()


def test_a_file_branch_without_the_transactions_plan_is_refused(lake: Lake) -> None:
    """A branch named like a file's, made by hand (or kept before plans were recorded): nothing tells the
    service's changes from anyone else's, so it is refused with the fix (discard, ingest again)."""
    name = run_branch_name(RunKind.FILE, TABLE, "source/orders/x.parquet#e1", started=1.0, default_namespace="wap")
    lake.catalog.create_branch(name, lake.main)
    lake.catalog.commit(name, {TABLE.qualified: lake.previous_table()}, "rolled back",
                        lineage.source_properties(SourceObject("source", "orders/x.parquet", etag="e1")))
    with pytest.raises(CatalogError, match=r"carries no plan recorded by the service.*wap discard .*wap ingest"):
        lake.publish(name)
    lake.unchanged()


@pytest.mark.parametrize(("what", "key"), [("rollback", "wap.orders"), ("ledger", LEDGER_NAMESPACE),
                                           ("table", "wap.extra")])
def test_a_commit_after_the_plan_on_a_kept_branch_is_refused_naming_the_key_and_commit(
        lake: Lake, what: str, key: str) -> None:
    """A real rejected file's branch, then one commit made with the service's credentials (or with the catalog's
    authentication off): the key/content check refuses it, naming the key and the commit; nothing is merged."""
    name = lake.rejected()
    change = {"rollback": {TABLE.qualified: lake.previous_table()},
              "ledger": planted(TABLE, "source/orders/future.parquet#e9"),
              "table": {"wap.extra": {"columns": ("id",), "snapshots": []}}}[what]
    foreign = lake.catalog.commit(name, change, "by hand")
    with pytest.raises(CatalogError, match=rf"refusing to merge branch '{name}'.*{key}.*commit {foreign[:12]}") \
            as refused:
        lake.publish(name)
    assert f"wap discard {name}" in str(refused.value) and "main is unchanged" in str(refused.value)
    lake.unchanged()


def test_a_foreign_commit_during_the_run_makes_the_kept_branch_unpublishable(lake: Lake,
                                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """A commit by someone else while the run writes (before the plan commit): outside the plan, and not by the
    principal that made the plan commit."""
    written = lake.ports.writer.append

    def append(spec: Any, source: Any, fmt: Any) -> Any:
        appended = written(spec, source, fmt)
        lake.catalog.committer = "wap-operator"
        lake.catalog.commit(spec.branch, {"wap.extra": {"columns": (), "snapshots": []}}, "sneaked in")
        lake.catalog.committer = ""
        return appended

    monkeypatch.setattr(lake.ports.writer, "append", append)
    name = lake.rejected()
    with pytest.raises(CatalogError, match=r"wap\.extra: not in the run's plan.*sneaked in.*by wap-operator"):
        lake.publish(name)
    lake.unchanged()


def test_a_kept_load_publishes_its_tables_and_ledger_entries(lake: Lake) -> None:
    """The plan of a load: two tables, a namespace it created, its ledger entries; exactly that merges."""
    sales = TableRef("sales", "lines")
    one, two = SourceObject("source", "_pending/orders/a.parquet", etag="a"), SourceObject(
        "source", "_pending/lines/b.parquet", etag="b")
    name = keep_for_review(lake.catalog, [(TABLE, one, 3), (sales, two, 4)])
    decision = lake.publish(name)
    assert decision.merged_hash == lake.catalog.reference_hash("main") != lake.main
    found = lake.catalog.find_published("main", TABLE, [one.identity]) | lake.catalog.find_published(
        "main", sales, [two.identity])
    assert set(found) == {one.identity, two.identity} and lake.catalog.has_namespace("main", "sales")


def test_a_kept_branch_whose_ledger_entry_was_replaced_is_refused(lake: Lake) -> None:
    name = lake.rejected()
    key = f"{LEDGER_NAMESPACE}.{ledger_key(TABLE.qualified, lake.rejected_source.identity)}"
    assert key in lake.catalog.contents(name)
    lake.catalog.commit(name, {key: {"type": "namespace", "properties": {"wap.ledger.table": "wap.orders"}}}, "edit")
    with pytest.raises(CatalogError, match=rf"{key}: it holds a namespace .*, not the ledger entry of "
                                           rf"{lake.rejected_source.identity} in wap.orders, changed by commit") as no:
        lake.publish(name)
    assert "a commit made after the service's plan commit" in str(no.value)
    lake.unchanged()

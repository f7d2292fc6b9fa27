"""The CatalogBranches port's behaviour suite, continued (tests/contract/test_catalog_contract.py holds the rest and the
fixture): what a branch changed since its base and its commit log, which the transaction's merge check reads
(core.merge_plan), against the in-memory fake and the real Nessie adapter alike."""

from __future__ import annotations

from typing import Any

import pytest

from tests.contract.test_catalog_contract import branch_with_table, catalog, put_table, unique
from tests.fakes import FakeCatalog
from wap_ingest.core.errors import BranchNotFoundError
from wap_ingest.core.ledger import LedgerEntry
from wap_ingest.core.ports import CatalogBranches

__all__ = ["catalog"]  # the suite's fixture: the fake, and the Nessie adapter on the stack



def table_value(catalog: CatalogBranches, ref: str, namespace: str, table: str) -> Any:
    """The table's entry on `ref` as stored (to put it back later), read outside the port."""
    if isinstance(catalog, FakeCatalog):
        return catalog.contents(ref)[f"{namespace}.{table}"]
    payload = catalog._v2("post", f"trees/{ref}/contents", "test", {  # type: ignore[attr-defined]
        "requestedKeys": [{"elements": [namespace, table]}]})
    return payload["contents"][0]["content"]


def put_value(catalog: CatalogBranches, branch: str, key: tuple[str, ...], value: Any) -> str:
    """Commit `value` (a stored entry; None: delete the key) at `key` on `branch`, outside the port; the new head."""
    if isinstance(catalog, FakeCatalog):
        return catalog.commit(branch, {".".join(key): value}, "by hand")
    operation = {"type": "DELETE", "key": {"elements": list(key)}} if value is None else {
        "type": "PUT", "key": {"elements": list(key)}, "content": value}
    head = catalog.reference_hash(branch)
    done = catalog._v2("post", f"trees/{branch}@{head}/history/commit", "test", {  # type: ignore[attr-defined]
        "commitMeta": {"message": "by hand"}, "operations": [operation]})
    return str(done["targetBranch"]["hash"])


def moved_table(catalog: CatalogBranches, value: Any, marker: str) -> Any:
    """The same table (its content id) at another metadata file: what an Iceberg commit makes."""
    if isinstance(catalog, FakeCatalog):
        return {**value, "snapshots": [*value["snapshots"], marker]}
    location = value["metadataLocation"].replace(".metadata.json", f"-{marker}.metadata.json")
    return {**value, "metadataLocation": location}


def test_changes_are_every_key_the_branch_changed_with_both_contents(catalog: CatalogBranches) -> None:
    ns, other = unique("ns"), unique("ns")
    catalog.ensure_namespace("main", ns)
    put_table(catalog, "main", ns, "kept")
    put_table(catalog, "main", ns, "gone")
    put_table(catalog, "main", ns, "same")
    base = catalog.reference_hash("main")
    branch = catalog.create_branch(unique("contract-c"), base)
    kept = table_value(catalog, "main", ns, "kept")
    put_value(catalog, branch.name, (ns, "kept"), moved_table(catalog, kept, "m1"))
    put_value(catalog, branch.name, (ns, "gone"), None)
    put_table(catalog, branch.name, ns, "new")
    catalog.ensure_namespace(branch.name, other)
    same = table_value(catalog, "main", ns, "same")
    put_value(catalog, branch.name, (ns, "same"), moved_table(catalog, same, "m2"))
    head = put_value(catalog, branch.name, (ns, "same"), same)  # and back: no change
    found = catalog.changes(branch.name, base)
    assert found.head == head == catalog.reference_hash(branch.name)
    by_key = {c.key: c for c in found.changes}
    assert set(by_key) == {(ns, "kept"), (ns, "gone"), (ns, "new"), (other,)}
    changed = by_key[(ns, "kept")]
    assert changed.before is not None and changed.after is not None and changed.after.type == "ICEBERG_TABLE"
    assert changed.before.id == changed.after.id and changed.before.metadata_location != \
        changed.after.metadata_location
    assert by_key[(ns, "gone")].after is None and by_key[(ns, "gone")].before is not None
    assert by_key[(ns, "new")].before is None and by_key[(ns, "new")].after is not None
    assert by_key[(other,)].after is not None and by_key[(other,)].after.type == "NAMESPACE"
    assert catalog.changes(branch.name, head).changes == ()


def test_changes_show_ledger_entries_and_a_merge_keeps_content_ids(catalog: CatalogBranches) -> None:
    ns = unique("ns")
    base = catalog.ensure_namespace("main", ns)
    branch = branch_with_table(catalog, base, ns, "t")
    entry = LedgerEntry(f"{ns}.t", "inbox/t/a.csv#e1", "s3://inbox/t/a.csv", 3, branch.name,
                        "2026-11-24T00:00:00+00:00")
    head = catalog.record_published(branch.name, [entry], {"wap.x": "1"})
    found = {c.key: c.after for c in catalog.changes(branch.name, base).changes}
    ledger = found[("wap_ledger", entry.key)]
    assert ledger is not None and ledger.type == "NAMESPACE" and dict(ledger.properties) == entry.properties()
    merged = catalog.merge(head, "main", base, "publish", {})
    on_main = {c.key: c.after for c in catalog.changes("main", base).changes}
    table = on_main[(ns, "t")]
    assert table is not None and found[(ns, "t")] is not None and table.id == found[(ns, "t")].id  # type: ignore
    assert catalog.reference_hash("main") == merged


def test_changes_of_a_missing_branch_or_since_an_unknown_hash_are_not_found(catalog: CatalogBranches) -> None:
    base = catalog.ensure_namespace("main", unique("ns"))
    with pytest.raises(BranchNotFoundError):
        catalog.changes(unique("contract-missing"), base)
    branch = catalog.create_branch(unique("contract-u"), base)
    with pytest.raises(BranchNotFoundError):
        catalog.changes(branch.name, "0123456789abcdef" * 4)


def test_the_commit_log_names_each_commits_keys_parent_and_properties(catalog: CatalogBranches) -> None:
    ns = unique("ns")
    base = catalog.ensure_namespace("main", ns)
    branch = branch_with_table(catalog, base, ns, "t")
    entry = LedgerEntry(f"{ns}.t", "inbox/t/a.csv#e1", "s3://inbox/t/a.csv", 3, branch.name,
                        "2026-11-24T00:00:00+00:00")
    head = catalog.record_published(branch.name, [entry], {"wap.plan.base": base})
    log = catalog.commit_log(branch.name, until=base)
    assert [c.hash for c in log] == [head.hash, branch.hash]
    assert log[0].parent == branch.hash and log[1].parent == base
    assert ("wap_ledger", entry.key) in log[0].keys and (ns, "t") in log[1].keys and (ns, "t") not in log[0].keys
    assert log[0].properties["wap.plan.base"] == base and log[0].message and log[0].committer == ""  # no auth here
    assert [c.hash for c in catalog.commit_log(branch.name, limit=1)] == [head.hash]
    assert [c.hash for c in catalog.commit_log(branch.name, until=branch.hash)] == [head.hash]
    assert len(catalog.commit_log(branch.name, limit=3)) == 3  # on into main's history
    with pytest.raises(BranchNotFoundError):
        catalog.commit_log(unique("contract-missing"))

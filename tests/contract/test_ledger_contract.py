"""The ledger half of the CatalogBranches port (record_published, find_published), one suite for the in-memory fake
and the real Nessie adapter: entries ride the branch into main with the merge, are found by key, and a second
publication of the same version conflicts instead of landing twice."""

from __future__ import annotations

import pytest

from tests.contract.test_catalog_contract import catalog, put_table, unique  # noqa: F401  (the fixture)
from wap_ingest.core.errors import BranchNotFoundError, CatalogError, MergeConflictError
from wap_ingest.core.ledger import LedgerEntry, entries_for
from wap_ingest.core.models import SourceObject, TableRef
from wap_ingest.core.ports import CatalogBranches

AT = 1_800_000_000.0


def _sources(n: int, prefix: str = "f") -> list[SourceObject]:
    return [SourceObject("inbox", f"t/{prefix}{i}.csv", 10, f"etag{i}") for i in range(n)]


def test_entries_reach_main_with_the_merge_and_are_found_by_identity(catalog: CatalogBranches) -> None:  # noqa: F811
    table = TableRef(unique("ns"), "orders")
    base = catalog.ensure_namespace("main", table.namespace)
    one, two = _sources(2)
    branch = catalog.create_branch(unique("contract-l"), base)
    head = catalog.record_published(branch.name, entries_for(table, [(one, 5), (two, 7)], branch.name, AT))
    assert head.name == branch.name and head.hash != base
    assert catalog.find_published("main", table, [one.identity]) == {}  # not before the merge
    on_branch = catalog.find_published(branch.name, table, [one.identity, two.identity])
    assert {i: e.rows for i, e in on_branch.items()} == {one.identity: 5, two.identity: 7}
    catalog.merge(head, "main", base, "publish", {})
    found = catalog.find_published("main", table, [one.identity, two.identity, "inbox/t/other.csv#x"])
    assert set(found) == {one.identity, two.identity}
    assert found[one.identity] == LedgerEntry(table.qualified, one.identity, one.uri, 5, branch.name,
                                              "2027-01-15T08:00:00+00:00")
    assert catalog.find_published("main", TableRef(table.namespace, "other"), [one.identity]) == {}  # per table
    assert catalog.find_published("main", table, []) == {}


def test_two_publications_of_one_version_are_serialized_by_the_table_not_the_ledger(
        catalog: CatalogBranches) -> None:  # noqa: F811
    """Nessie merges namespace entries without a conflict (the merged side's wins), so a ledger entry alone would not
    stop a second publication: every publication also changes its table, and that key conflicts."""
    table = TableRef(unique("ns"), "orders")
    base = catalog.ensure_namespace("main", table.namespace)
    (source,) = _sources(1)
    heads = []
    for _ in range(2):  # two deliveries of one version, both past the lookup before either merged
        branch = catalog.create_branch(unique("contract-l"), base)
        put_table(catalog, branch.name, table.namespace, table.name)
        heads.append(catalog.record_published(branch.name, entries_for(table, [(source, 3)], branch.name, AT)))
    merged = catalog.merge(heads[0], "main", base, "first", {})
    with pytest.raises(MergeConflictError):
        catalog.merge(heads[1], "main", base, "second", {})
    assert catalog.reference_hash("main") == merged
    assert catalog.find_published("main", table, [source.identity])[source.identity].branch == heads[0].name
    alone = catalog.create_branch(unique("contract-l"), base)  # the ledger entry alone: no conflict, it is merged
    head = catalog.record_published(alone.name, entries_for(table, [(source, 3)], alone.name, AT))
    catalog.merge(head, "main", merged, "entry alone", {})
    assert catalog.find_published("main", table, [source.identity])[source.identity].branch == alone.name


def test_recording_again_on_the_same_branch_is_refused_and_other_entries_still_record(
        catalog: CatalogBranches) -> None:  # noqa: F811
    table = TableRef(unique("ns"), "orders")
    base = catalog.ensure_namespace("main", table.namespace)
    first, second = _sources(2, prefix=unique("g"))
    branch = catalog.create_branch(unique("contract-l"), base)
    catalog.record_published(branch.name, entries_for(table, [(first, 1)], branch.name, AT))
    with pytest.raises(CatalogError):
        catalog.record_published(branch.name, entries_for(table, [(first, 1)], branch.name, AT))
    catalog.record_published(branch.name, entries_for(table, [(second, 2)], branch.name, AT))  # namespace exists
    assert set(catalog.find_published(branch.name, table, [first.identity, second.identity])) == {
        first.identity, second.identity}


def test_one_lookup_answers_for_many_identities(catalog: CatalogBranches) -> None:  # noqa: F811
    table = TableRef(unique("ns"), "orders")
    base = catalog.ensure_namespace("main", table.namespace)
    sources = _sources(300)
    branch = catalog.create_branch(unique("contract-l"), base)
    head = catalog.record_published(branch.name, entries_for(table, [(s, 1) for s in sources[::2]], branch.name, AT))
    catalog.merge(head, "main", base, "publish", {})
    found = catalog.find_published("main", table, [s.identity for s in sources])
    assert set(found) == {s.identity for s in sources[::2]}


def test_the_ledger_of_an_unknown_reference_is_not_found(catalog: CatalogBranches) -> None:  # noqa: F811
    (source,) = _sources(1)
    with pytest.raises(BranchNotFoundError):
        catalog.find_published(unique("contract-missing"), TableRef("ns", "t"), [source.identity])
    with pytest.raises(BranchNotFoundError):
        catalog.record_published(unique("contract-missing"), entries_for(TableRef("ns", "t"), [(source, 1)], "b", AT))

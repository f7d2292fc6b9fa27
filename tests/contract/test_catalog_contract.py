"""One behaviour suite for the CatalogBranches port, run against the in-memory fake and the real Nessie adapter:
the fake is only trusted because it passes the same tests as the real thing. Every method of the port (what a branch
changed and its commit log, which the merge check reads: tests/contract/test_catalog_changes_contract.py)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator, Mapping
from datetime import UTC, datetime, timedelta

import pytest

from tests.fakes import FakeCatalog
from wap_ingest.core.errors import (
    BranchExistsError,
    BranchNotFoundError,
    CatalogError,
    MergeConflictError,
    StaleHashError,
)
from wap_ingest.core.ledger import LedgerEntry
from wap_ingest.core.models import Branch, TableRef
from wap_ingest.core.ports import CatalogBranches

NO_ANCESTOR = "2e1cfa82b035c26cbbbdae632cea070514eb8b773f616aaeaf668e2f0be8f10d"  # Nessie's "beginning of time"
CLOCK_SKEW = timedelta(seconds=5)  # the Nessie server's clock against this process's


@pytest.fixture(params=["fake", pytest.param("nessie", marks=pytest.mark.stack)])
def catalog(request: pytest.FixtureRequest) -> Iterator[CatalogBranches]:
    if request.param == "fake":
        yield FakeCatalog()
        return
    from wap_ingest.adapters.catalog.nessie import NessieBranches

    env = request.getfixturevalue("stack_env")
    yield NessieBranches(env["NESSIE_ENDPOINT"], timeout=10)


def unique(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex[:8]}"


def put_table(catalog: CatalogBranches, branch: str, namespace: str, table: str) -> str:
    """Commit a new table entry on `branch` (what a Spark append does), outside the port; returns the head."""
    if isinstance(catalog, FakeCatalog):
        return catalog.commit(branch, {f"{namespace}.{table}": {"columns": (), "snapshots": []}})
    from pynessie.model import ContentKey, IcebergTable, Put

    client = catalog._client  # type: ignore[attr-defined]
    head = catalog.reference_hash(branch)
    location = f"s3://lake/warehouse/{namespace}/{table}/metadata/{uuid.uuid4().hex}.metadata.json"
    content = IcebergTable(id=None, metadata_location=location, snapshot_id=1, schema_id=0, spec_id=0,
                           sort_order_id=0)
    return str(client.commit(branch, head, "put table", None, Put(ContentKey([namespace, table]), content)).hash_)


def has_table(catalog: CatalogBranches, ref: str, namespace: str, table: str) -> bool:
    """Whether `ref` holds the table entry, read outside the port."""
    if isinstance(catalog, FakeCatalog):
        return f"{namespace}.{table}" in catalog.contents(ref)
    from pynessie.error import NessieNotFoundException
    from pynessie.model import ContentKey

    try:
        catalog._client.get_content(ref, ContentKey([namespace, table]))  # type: ignore[attr-defined]
    except NessieNotFoundException:
        return False
    return True


def root_hash(catalog: CatalogBranches) -> str:
    """The hash before any commit (a reference there has no commit)."""
    if isinstance(catalog, FakeCatalog):
        cursor = catalog.reference_hash("main")
        while (parent := catalog.commits[cursor].parent) is not None:
            cursor = parent
        return cursor
    return NO_ANCESTOR


def branch_with_table(catalog: CatalogBranches, base: str, namespace: str, table: str) -> Branch:
    """A WAP branch from `base` that added `table`, at its head."""
    branch = catalog.create_branch(unique("contract-w"), base)
    return Branch(branch.name, put_table(catalog, branch.name, namespace, table))


# --- references -----------------------------------------------------------------------------------------


def test_branch_lifecycle(catalog: CatalogBranches) -> None:
    head = catalog.ensure_namespace("main", unique("ns"))
    name = unique("contract-b")
    assert catalog.find_branch(name) is None
    branch = catalog.create_branch(name, head)
    assert branch == Branch(name, head) and catalog.reference_hash(name) == head
    assert catalog.find_branch(name) == branch
    with pytest.raises(BranchExistsError):
        catalog.create_branch(name, head)
    catalog.delete_branch(branch)
    assert catalog.find_branch(name) is None
    with pytest.raises(BranchNotFoundError):
        catalog.reference_hash(name)
    with pytest.raises(BranchNotFoundError):
        catalog.delete_branch(branch)


def test_a_branch_from_an_unknown_hash_is_refused(catalog: CatalogBranches) -> None:
    with pytest.raises(BranchNotFoundError):
        catalog.create_branch(unique("contract-x"), "0123456789abcdef" * 4)


def test_list_branches_by_prefix_in_name_order(catalog: CatalogBranches) -> None:
    head = catalog.ensure_namespace("main", unique("ns"))
    prefix = unique("contract-l")
    second = catalog.create_branch(f"{prefix}-b", head)
    first = catalog.create_branch(f"{prefix}-a", head)
    assert catalog.list_branches(prefix) == [first, second]
    assert catalog.list_branches(f"{prefix}-b") == [second]
    assert catalog.list_branches(unique("nothing-starts-so")) == []
    everything = catalog.list_branches()
    assert {"main", first.name, second.name} <= {b.name for b in everything}
    assert [b.name for b in everything] == sorted(b.name for b in everything)


def test_ensure_namespace_is_idempotent_and_moves_only_its_branch(catalog: CatalogBranches) -> None:
    ns = unique("ns")
    first = catalog.ensure_namespace("main", ns)
    assert catalog.ensure_namespace("main", ns) == first == catalog.reference_hash("main")
    branch = catalog.create_branch(unique("contract-n"), first)
    on_branch = catalog.ensure_namespace(branch.name, unique("ns"))
    assert on_branch != first and catalog.reference_hash(branch.name) == on_branch
    assert catalog.reference_hash("main") == first
    with pytest.raises(BranchNotFoundError):
        catalog.ensure_namespace(unique("contract-missing"), ns)


def test_delete_with_a_stale_hash_is_refused(catalog: CatalogBranches) -> None:
    base = catalog.ensure_namespace("main", unique("ns"))
    branch = catalog.create_branch(unique("contract-s"), base)
    moved = catalog.ensure_namespace(branch.name, unique("ns"))
    assert moved != branch.hash
    with pytest.raises(StaleHashError):
        catalog.delete_branch(branch)
    assert catalog.reference_hash(branch.name) == moved  # still there
    catalog.delete_branch(Branch(branch.name, moved))
    assert catalog.find_branch(branch.name) is None


def _time(catalog: CatalogBranches, name: str) -> datetime:
    head = catalog.head_commit(name)
    assert head is not None
    return datetime.fromisoformat(head.committed_at.replace("Z", "+00:00"))


def test_head_commit_is_the_head_with_its_time(catalog: CatalogBranches) -> None:
    before = datetime.now(UTC)
    head = catalog.ensure_namespace("main", unique("ns"))
    after = datetime.now(UTC)
    branch = catalog.create_branch(unique("contract-t"), head)
    found = catalog.head_commit(branch.name)
    assert found is not None and found.hash == head
    when = _time(catalog, branch.name)
    assert when.tzinfo is not None and before - CLOCK_SKEW <= when <= after + CLOCK_SKEW
    assert catalog.head_commit("main") is not None
    ns = unique("ns")
    catalog.ensure_namespace(branch.name, ns)
    assert _time(catalog, branch.name) >= when
    with pytest.raises(BranchNotFoundError):
        catalog.head_commit(unique("contract-missing"))


def test_a_branch_without_a_commit_has_no_head_commit(catalog: CatalogBranches) -> None:
    empty = catalog.create_branch(unique("contract-e"), root_hash(catalog))
    assert catalog.head_commit(empty.name) is None


def test_the_ledger_commit_carries_its_properties_on_the_branch_head(catalog: CatalogBranches) -> None:
    """What a kept branch would publish rides its ledger commit (core.pipeline.transaction): read back from the
    head commit, exactly."""
    ns = unique("ns")
    branch = catalog.create_branch(unique("contract-k"), catalog.ensure_namespace("main", ns))
    entry = LedgerEntry(f"{ns}.t", "inbox/t/a.csv#e1", "s3://inbox/t/a.csv", 3, branch.name,
                        "2026-11-24T00:00:00+00:00")
    head = catalog.record_published(branch.name, [entry], {"wap.pending.wap.table": f"{ns}.t", "wap.x": "1"})
    found = catalog.head_commit(branch.name)
    assert found is not None and found.hash == head.hash
    assert found.properties["wap.pending.wap.table"] == f"{ns}.t" and found.properties["wap.x"] == "1"
    assert catalog.find_published(branch.name, TableRef(ns, "t"), [entry.identity])[entry.identity].rows == 3


def test_list_branches_reads_every_page(catalog: CatalogBranches) -> None:
    prefix = unique("contract-p")
    made = [catalog.create_branch(f"{prefix}-{i:03}", root_hash(catalog)) for i in range(260)]
    assert catalog.list_branches(prefix) == sorted(made, key=lambda b: b.name)


# --- merges ---------------------------------------------------------------------------------------------


def test_merge_publishes_and_a_conflicting_merge_is_refused(catalog: CatalogBranches) -> None:
    ns = unique("ns")
    base = catalog.ensure_namespace("main", ns)
    first = branch_with_table(catalog, base, ns, "shared")
    second = branch_with_table(catalog, base, ns, "shared")
    merged = catalog.merge(first, "main", base, "publish first", {"k": "v"})
    assert catalog.reference_hash("main") == merged != base
    assert has_table(catalog, "main", ns, "shared")
    with pytest.raises(MergeConflictError):
        catalog.merge(second, "main", base, "publish second", {})
    assert catalog.reference_hash("main") == merged


def test_merge_onto_a_main_that_changed_another_table_keeps_both(catalog: CatalogBranches) -> None:
    ns = unique("ns")
    base = catalog.ensure_namespace("main", ns)
    one = branch_with_table(catalog, base, ns, "first")
    two = branch_with_table(catalog, base, ns, "second")
    moved = catalog.merge(one, "main", base, "one", {})
    after = catalog.merge(two, "main", base, "two", {})  # expects `base`; main moved, but not on this table
    assert catalog.reference_hash("main") == after != moved
    assert has_table(catalog, "main", ns, "first") and has_table(catalog, "main", ns, "second")
    assert not has_table(catalog, one.name, ns, "second")  # the branches are unchanged


def test_merge_with_the_current_hash_after_a_direct_commit_on_main(catalog: CatalogBranches) -> None:
    ns = unique("ns")
    base = catalog.ensure_namespace("main", ns)
    branch = branch_with_table(catalog, base, ns, "mine")
    direct = catalog.ensure_namespace("main", unique("ns"))  # main moves after the branch was made
    merged = catalog.merge(branch, "main", direct, "mine", {})
    assert merged != direct and has_table(catalog, "main", ns, "mine")


# --- publications ---------------------------------------------------------------------------------------


def publish(catalog: CatalogBranches, table: TableRef, message: str, props: Mapping[str, str] | None = None) -> str:
    """Merge a branch that changed one new entry into main, stamped for `table`; returns main's new head."""
    base = catalog.ensure_namespace("main", table.namespace)
    branch = branch_with_table(catalog, base, table.namespace, unique("t"))
    return catalog.merge(branch, "main", base, message, {"wap.table": table.qualified, **(props or {})})


def test_publications_are_the_merges_for_one_table_newest_first(catalog: CatalogBranches) -> None:
    ns = unique("ns")
    mine, other = TableRef(ns, "mine"), TableRef(ns, "other")
    heads = [publish(catalog, mine, f"publish {i}", {"wap.n": str(i)}) for i in range(3)]
    other_head = publish(catalog, other, "publish other")
    catalog.ensure_namespace("main", unique("ns"))  # a commit that published nothing
    found = catalog.publications(mine)
    assert [p.hash for p in found] == heads[::-1]
    assert [p.message for p in found] == ["publish 2", "publish 1", "publish 0"]
    for n, publication in zip((2, 1, 0), found, strict=True):
        assert {"wap.table": mine.qualified, "wap.n": str(n)}.items() <= publication.properties.items()
    times = [datetime.fromisoformat(p.committed_at.replace("Z", "+00:00")) for p in found]
    assert all(t.tzinfo is not None for t in times) and times == sorted(times, reverse=True)
    assert [p.hash for p in catalog.publications(mine, limit=2)] == heads[:0:-1]
    assert [p.hash for p in catalog.publications(other)] == [other_head]
    assert catalog.publications(TableRef(ns, "never")) == []


def test_publications_of_every_table_in_one_read(catalog: CatalogBranches) -> None:
    ns = unique("ns")
    first = publish(catalog, TableRef(ns, "a"), "publish a")
    catalog.ensure_namespace("main", unique("ns"))  # a commit that published nothing
    load = publish(catalog, TableRef(ns, "b"), "a load", {"wap.tables": f",{ns}.b,{ns}.c,"})
    found = catalog.publications(None, limit=2)
    assert [p.hash for p in found] == [load, first]
    assert catalog.publications(None, limit=1)[0].properties["wap.tables"] == f",{ns}.b,{ns}.c,"
    assert [p.hash for p in catalog.publications(TableRef(ns, "c"))] == [load]


def test_publications_on_another_branch(catalog: CatalogBranches) -> None:
    table = TableRef(unique("ns"), "t")
    publish(catalog, table, "on main")
    branch = catalog.create_branch(unique("contract-p"), catalog.reference_hash("main"))
    assert [p.message for p in catalog.publications(table, on=branch.name)] == ["on main"]  # its history
    empty = catalog.create_branch(unique("contract-p"), root_hash(catalog))
    assert catalog.publications(table, on=empty.name) == []
    with pytest.raises(CatalogError):
        catalog.publications(table, on=unique("contract-missing"))


def test_an_invalid_branch_name_is_refused(catalog: CatalogBranches) -> None:
    head = catalog.reference_hash("main")
    for name in ("bad..name", "1starts-with-a-digit", "ends-with-a-dot.", "has space"):
        with pytest.raises(CatalogError):
            catalog.create_branch(name, head)


def test_merging_a_branch_that_changed_nothing_makes_no_commit(catalog: CatalogBranches) -> None:
    table = TableRef(unique("ns"), "t")
    base = catalog.ensure_namespace("main", table.namespace)
    empty = catalog.create_branch(unique("contract-z"), base)
    assert catalog.merge(empty, "main", base, "nothing", {"wap.table": table.qualified}) == base
    assert catalog.reference_hash("main") == base and catalog.publications(table) == []


def test_merge_takes_the_branch_at_the_given_hash(catalog: CatalogBranches) -> None:
    ns = unique("ns")
    base = catalog.ensure_namespace("main", ns)
    branch = branch_with_table(catalog, base, ns, "early")
    put_table(catalog, branch.name, ns, "late")  # the branch moves on after `branch` was read
    catalog.merge(branch, "main", base, "early only", {})
    assert has_table(catalog, "main", ns, "early") and not has_table(catalog, "main", ns, "late")


def test_a_merge_from_a_missing_branch_or_onto_an_unknown_hash_is_not_found(catalog: CatalogBranches) -> None:
    ns = unique("ns")
    base = catalog.ensure_namespace("main", ns)
    gone = branch_with_table(catalog, base, ns, "gone")
    catalog.delete_branch(gone)
    with pytest.raises(BranchNotFoundError):
        catalog.merge(gone, "main", base, "gone", {})
    branch = branch_with_table(catalog, base, ns, "kept")
    with pytest.raises(BranchNotFoundError):
        catalog.merge(branch, "main", "0123456789abcdef" * 4, "unknown expected hash", {})
    assert catalog.reference_hash("main") == base and not has_table(catalog, "main", ns, "kept")


NESSIE_PAGE = 250  # the most log entries Nessie returns in one page


def test_publications_beyond_one_page_of_history(catalog: CatalogBranches) -> None:
    table = TableRef(unique("ns"), "t")
    for n in range(NESSIE_PAGE + 5):
        publish(catalog, table, f"publish {n}")
    found = catalog.publications(table, limit=1000)
    assert len(found) == NESSIE_PAGE + 5 and found[-1].message == "publish 0"


def test_has_namespace_says_whether_a_ref_has_it(catalog: CatalogBranches) -> None:
    ns = unique("ns")
    assert not catalog.has_namespace("main", ns)
    branch = catalog.create_branch(unique("contract-n"), catalog.reference_hash("main"))
    catalog.ensure_namespace(branch.name, ns)
    assert catalog.has_namespace(branch.name, ns) and not catalog.has_namespace("main", ns)
    catalog.ensure_namespace("main", ns)
    assert catalog.has_namespace("main", ns)

"""One behaviour suite for the CatalogBranches port, run against the in-memory fake and the real
Nessie adapter: the fake is only trusted because it passes the same tests as the real thing."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

from tests.fakes import FakeCatalog
from wap_ingest.core.errors import BranchExistsError, BranchNotFoundError, MergeConflictError, StaleHashError
from wap_ingest.core.ports import CatalogBranches


@pytest.fixture(params=["fake", pytest.param("nessie", marks=pytest.mark.stack)])
def catalog(request: pytest.FixtureRequest) -> Iterator[CatalogBranches]:
    if request.param == "fake":
        yield FakeCatalog()
        return
    from wap_ingest.adapters.nessie import NessieBranches

    env = request.getfixturevalue("stack_env")
    yield NessieBranches(env["NESSIE_ENDPOINT"], timeout=10)


def unique(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex[:8]}"


def put_table(catalog: CatalogBranches, branch: str, namespace: str, table: str) -> str:
    """Commit a table entry on `branch` (what a Spark append does), outside the port; returns the head."""
    if isinstance(catalog, FakeCatalog):
        return catalog.commit(branch, {f"{namespace}.{table}": {"columns": (), "snapshots": []}})
    from pynessie.model import ContentKey, IcebergTable, Put

    client = catalog._client  # type: ignore[attr-defined]
    head = catalog.reference_hash(branch)
    location = f"s3://lake/warehouse/{namespace}/{table}/metadata/{uuid.uuid4().hex}.metadata.json"
    content = IcebergTable(id=None, metadata_location=location, snapshot_id=1, schema_id=0, spec_id=0,
                           sort_order_id=0)
    return str(client.commit(branch, head, "put table", None, Put(ContentKey([namespace, table]), content)).hash_)


def test_branch_lifecycle(catalog: CatalogBranches) -> None:
    head = catalog.ensure_namespace("main", unique("ns"))
    name = unique("contract-b")
    assert catalog.find_branch(name) is None
    branch = catalog.create_branch(name, head)
    assert branch.hash == head and catalog.reference_hash(name) == head
    assert catalog.find_branch(name) == branch
    assert name in [b.name for b in catalog.list_branches("contract-")]
    with pytest.raises(BranchExistsError):
        catalog.create_branch(name, head)
    catalog.delete_branch(branch)
    assert catalog.find_branch(name) is None
    with pytest.raises(BranchNotFoundError):
        catalog.reference_hash(name)


def test_ensure_namespace_is_idempotent(catalog: CatalogBranches) -> None:
    ns = unique("ns")
    first = catalog.ensure_namespace("main", ns)
    assert catalog.ensure_namespace("main", ns) == first == catalog.reference_hash("main")


def test_delete_with_a_stale_hash_is_refused(catalog: CatalogBranches) -> None:
    base = catalog.ensure_namespace("main", unique("ns"))
    branch = catalog.create_branch(unique("contract-s"), base)
    moved = catalog.ensure_namespace(branch.name, unique("ns"))
    assert moved != branch.hash
    with pytest.raises(StaleHashError):
        catalog.delete_branch(branch)
    catalog.delete_branch(type(branch)(branch.name, moved))


def test_merge_publishes_and_conflicting_merges_are_refused(catalog: CatalogBranches) -> None:
    ns = unique("ns")
    base = catalog.ensure_namespace("main", ns)
    first = catalog.create_branch(unique("contract-m"), base)
    second = catalog.create_branch(unique("contract-m"), base)
    first_head = put_table(catalog, first.name, ns, "shared")
    second_head = put_table(catalog, second.name, ns, "shared")
    merged = catalog.merge(type(first)(first.name, first_head), "main", base, "publish first", {"k": "v"})
    assert catalog.reference_hash("main") == merged != base
    with pytest.raises(MergeConflictError):
        catalog.merge(type(second)(second.name, second_head), "main", base, "publish second", {})
    assert catalog.reference_hash("main") == merged


def test_merges_of_unrelated_content_both_succeed(catalog: CatalogBranches) -> None:
    ns = unique("ns")
    base = catalog.ensure_namespace("main", ns)
    one = catalog.create_branch(unique("contract-u"), base)
    two = catalog.create_branch(unique("contract-u"), base)
    one_head = put_table(catalog, one.name, ns, "first")
    two_head = put_table(catalog, two.name, ns, "second")
    catalog.merge(type(one)(one.name, one_head), "main", base, "one", {})
    after = catalog.merge(type(two)(two.name, two_head), "main", base, "two", {})
    assert catalog.reference_hash("main") == after

"""The Nessie error table (adapters/catalog/errors.py) on the real server: each status and error code Nessie 0.99
really answers, through pynessie's v1 calls and the adapter's own REST v2 calls alike, and the message that names the
call, the server, its answer and the fix. (401 and 403: tests/integration/adapters/catalog/test_nessie_auth.py and
test_catalog_roles.py; no answer: test_pipeline_stack.py. Row by row over every code:
tests/unit/adapters/catalog/test_nessie_errors.py.)
"""

from __future__ import annotations

import uuid

import pytest
from pynessie.model import ContentKey

from tests.contract.test_catalog_contract import put_table
from wap_ingest.adapters.catalog.nessie import NessieBranches
from wap_ingest.core.errors import (
    BranchExistsError,
    BranchNotFoundError,
    CatalogError,
    ConfigError,
    MergeConflictError,
    StaleHashError,
)
from wap_ingest.core.ledger import entries_for
from wap_ingest.core.models import Branch, SourceObject, TableRef

pytestmark = [pytest.mark.stack]


@pytest.fixture
def catalog(stack_env: dict[str, str]) -> NessieBranches:
    return NessieBranches(stack_env["NESSIE_ENDPOINT"], timeout=10)


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def test_a_missing_reference_is_not_found_in_every_call(catalog: NessieBranches) -> None:
    gone, table = unique("errors-gone"), TableRef("wap", "t")
    source = SourceObject("inbox", "t/a.csv", 1, "e")
    head = catalog.reference_hash("main")
    calls = {
        "reference_hash (v1)": lambda: catalog.reference_hash(gone),
        "delete_branch (v1)": lambda: catalog.delete_branch(Branch(gone, head)),
        "head_commit": lambda: catalog.head_commit(gone),
        "publications": lambda: catalog.publications(table, on=gone),
        "list_tables": lambda: catalog.list_tables(gone),
        "find_published": lambda: catalog.find_published(gone, table, [source.identity]),
        "record_published": lambda: catalog.record_published(gone, entries_for(table, [(source, 1)], gone, 0.0)),
        "merge": lambda: catalog.merge(Branch(gone, head), "main", head, "m", {}),
    }
    for name, call in calls.items():
        with pytest.raises(BranchNotFoundError) as info:
            call()
        assert "REFERENCE_NOT_FOUND" in str(info.value) and "Fix: check the name" in str(info.value), name
    with pytest.raises(BranchNotFoundError, match=r"answered HTTP 404 REFERENCE_NOT_FOUND: Commit '0123"):
        catalog.create_branch(unique("errors-x"), "0123456789abcdef" * 4)


def test_one_conflict_code_two_meanings(catalog: NessieBranches) -> None:
    """REFERENCE_CONFLICT: a branch no longer at the expected hash (stale), or a merge whose table changed on main."""
    ns = f"ns_{uuid.uuid4().hex[:8]}"
    base = catalog.ensure_namespace("main", ns)
    branch = catalog.create_branch(unique("errors-s"), base)
    catalog.ensure_namespace(branch.name, f"{ns}_moved")
    with pytest.raises(StaleHashError, match=r"no longer at the expected hash.*409 REFERENCE_CONFLICT"):
        catalog.delete_branch(branch)  # v1
    first, second = (catalog.create_branch(unique("errors-m"), base) for _ in range(2))
    heads = [Branch(b.name, put_table(catalog, b.name, ns, "shared")) for b in (first, second)]
    catalog.merge(heads[0], "main", base, "first", {})
    with pytest.raises(MergeConflictError, match=r"changed the same content.*409 REFERENCE_CONFLICT: The following "
                                                 r"keys have been changed in conflict"):
        catalog.merge(heads[1], "main", base, "second", {})  # v2


def test_an_existing_branch_a_bad_name_and_missing_content(catalog: NessieBranches) -> None:
    name = unique("errors-e")
    catalog.create_branch(name, catalog.reference_hash("main"))
    with pytest.raises(BranchExistsError, match=r"409 REFERENCE_ALREADY_EXISTS: Named reference .* already exists"):
        catalog.create_branch(name, catalog.reference_hash("main"))
    with pytest.raises(CatalogError, match=r"as invalid.*400 BAD_REQUEST.*Reference name must") as bad:
        catalog.create_branch("bad..name", catalog.reference_hash("main"))
    assert type(bad.value) is CatalogError
    with pytest.raises(CatalogError, match=r"no such table or namespace.*404 CONTENT_NOT_FOUND") as missing, \
            catalog._translated("reading a table"):
        catalog._client.get_content("main", ContentKey(["wap", f"none_{uuid.uuid4().hex[:8]}"]))
    assert type(missing.value) is CatalogError  # not a missing branch: nothing to retry from main


def test_a_url_that_is_not_nessies_api_is_a_setting(stack_env: dict[str, str]) -> None:
    wrong = NessieBranches(f"{stack_env['NESSIE_ENDPOINT']}/not-nessie", timeout=10)
    with pytest.raises(ConfigError, match=r"not Nessie's API.*answered HTTP 404.*Fix: set NESSIE_ENDPOINT"):
        wrong.reference_hash("main")  # v1
    with pytest.raises(ConfigError, match=r"not Nessie's API.*Fix: set NESSIE_ENDPOINT"):
        wrong.head_commit("main")  # v2

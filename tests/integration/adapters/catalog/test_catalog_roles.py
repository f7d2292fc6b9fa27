"""The catalog's roles (wap_ingest.adapters.catalog.authz) enforced by a real Nessie 0.99 with authorization on.

Three OAuth2 clients of the local OIDC issuer, one per role (scope nessie/<role>); Nessie gets the rules as
environment variables, as the deployed container does. What each test tries is in its name and docstring.
"""

from __future__ import annotations

import secrets
from collections.abc import Iterator

import pytest
import requests

from tests.integration.auth_stack import AuthLake, running_auth_lake
from wap_ingest.adapters.catalog.authz import OPERATOR, READER, ROLES, SERVICE, scope_for
from wap_ingest.adapters.catalog.nessie import NessieBranches
from wap_ingest.adapters.catalog.oauth2 import BearerAuth, ClientCredentials, TokenProvider
from wap_ingest.core.errors import WapError
from wap_ingest.core.models import Branch
from wap_stack.oidc import Issuer, OidcClient, running_issuer

pytestmark = [pytest.mark.stack]

SECRETS = {role: secrets.token_urlsafe(24) for role in ROLES}


@pytest.fixture(scope="module")
def issuer() -> Iterator[Issuer]:
    clients = {f"wap-{role}": OidcClient(SECRETS[role], (scope_for(role),)) for role in ROLES}
    with running_issuer(clients) as running:
        yield running


@pytest.fixture(scope="module")
def lake(issuer: Issuer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[AuthLake]:
    with running_auth_lake(tmp_path_factory.mktemp("roles-stack"), issuer, authorization=True) as running:
        yield running


def auth_for(issuer: Issuer, role: str) -> BearerAuth:
    credentials = ClientCredentials(issuer.token_endpoint, f"wap-{role}", SECRETS[role], scope_for(role))
    return BearerAuth(TokenProvider(credentials, timeout=10))


def catalog(lake: AuthLake, issuer: Issuer, role: str) -> NessieBranches:
    return NessieBranches(lake.nessie_url, timeout=10, auth=auth_for(issuer, role))


def wap_branch(lake: AuthLake, issuer: Issuer) -> Branch:
    """A `wap-*` branch the service made and committed a namespace to (after making sure of the table's
    namespace on `main`, as the pipeline does: a direct commit of the service to `main`)."""
    service = catalog(lake, issuer, SERVICE)
    main = service.ensure_namespace("main", "wap")
    branch = service.create_branch(f"wap-roles-t-{secrets.token_hex(4)}", main)
    head = service.ensure_namespace(branch.name, f"ns{secrets.token_hex(3)}")
    return Branch(branch.name, head)


def v2(lake: AuthLake, issuer: Issuer, role: str, method: str, path: str, **kwargs: object) -> requests.Response:
    return requests.request(method, f"{lake.nessie_url}/api/v2/{path}", auth=auth_for(issuer, role), timeout=10,
                            **kwargs)  # type: ignore[arg-type]


def test_service_branches_commits_merges_and_deletes_a_wap_branch(lake: AuthLake, issuer: Issuer) -> None:
    service = catalog(lake, issuer, SERVICE)
    branch = wap_branch(lake, issuer)
    main = service.reference_hash("main")
    merged = service.merge(branch, "main", main, "wap: publish", {"wap.test": "roles"})
    assert merged != main
    service.delete_branch(Branch(branch.name, service.reference_hash(branch.name)))
    assert service.find_branch(branch.name) is None


def test_service_cannot_create_a_branch_outside_wap(lake: AuthLake, issuer: Issuer) -> None:
    service = catalog(lake, issuer, SERVICE)
    with pytest.raises(WapError, match="403"):
        service.create_branch(f"scratch-{secrets.token_hex(4)}", service.reference_hash("main"))


def test_reader_reads_main_but_cannot_branch_or_commit(lake: AuthLake, issuer: Issuer) -> None:
    reader = catalog(lake, issuer, READER)
    main = reader.reference_hash("main")
    with pytest.raises(WapError, match="403"):
        reader.create_branch(f"wap-reader-{secrets.token_hex(4)}", main)
    with pytest.raises(WapError, match="403"):
        reader.ensure_namespace("main", f"reader{secrets.token_hex(3)}")
    branch = wap_branch(lake, issuer)
    with pytest.raises(WapError, match="403"):  # and it cannot see the branches in progress
        reader.reference_hash(branch.name)


def test_operator_deletes_wap_branches_but_cannot_merge_them_itself(lake: AuthLake, issuer: Issuer) -> None:
    """The operator publishes by asking the service (tests/integration/stack/test_stack_auth_publish.py): a merge into
    `main` is authorized as a direct commit, so the operator gets neither."""
    operator = catalog(lake, issuer, OPERATOR)
    branch = wap_branch(lake, issuer)
    main = operator.reference_hash("main")
    with pytest.raises(WapError, match="403"):
        operator.merge(branch, "main", main, "wap: approved by operator", {})
    assert operator.reference_hash("main") == main
    operator.delete_branch(branch)
    assert operator.find_branch(branch.name) is None


def test_operator_cannot_branch_or_commit_to_wap_branches(lake: AuthLake, issuer: Issuer) -> None:
    operator = catalog(lake, issuer, OPERATOR)
    with pytest.raises(WapError, match="403"):
        operator.create_branch(f"wap-op-{secrets.token_hex(4)}", operator.reference_hash("main"))
    branch = wap_branch(lake, issuer)
    with pytest.raises(WapError, match="403"):
        operator.ensure_namespace(branch.name, f"op{secrets.token_hex(3)}")


def test_operator_cannot_delete_content_on_main(lake: AuthLake, issuer: Issuer) -> None:
    """A direct commit that removes a namespace from `main` needs DELETE_ENTITY there: no role has it."""
    service = catalog(lake, issuer, SERVICE)
    branch = wap_branch(lake, issuer)
    service.merge(branch, "main", service.reference_hash("main"), "wap: publish", {})
    entries = v2(lake, issuer, OPERATOR, "GET", "trees/main/entries").json()["entries"]
    key = entries[0]["name"]
    main = service.reference_hash("main")
    body = {"commitMeta": {"message": "drop"}, "operations": [{"type": "DELETE", "key": key}]}
    for role in (OPERATOR, SERVICE):
        answer = v2(lake, issuer, role, "POST", f"trees/main@{main}/history/commit", json=body)
        assert answer.status_code == 403, (role, answer.text)


def test_operator_cannot_add_content_to_main_directly(lake: AuthLake, issuer: Issuer) -> None:
    main = catalog(lake, issuer, OPERATOR).reference_hash("main")
    key = {"elements": [f"direct{secrets.token_hex(3)}"]}
    body = {"commitMeta": {"message": "direct"}, "operations": [
        {"type": "PUT", "key": key, "content": {"type": "NAMESPACE", "elements": key["elements"]}}]}
    answer = v2(lake, issuer, OPERATOR, "POST", f"trees/main@{main}/history/commit", json=body)
    assert answer.status_code == 403, answer.text


@pytest.mark.parametrize("role", ROLES)
def test_nobody_reassigns_or_deletes_main(lake: AuthLake, issuer: Issuer, role: str) -> None:
    service = catalog(lake, issuer, SERVICE)
    branch = wap_branch(lake, issuer)
    main = service.reference_hash("main")
    assign = v2(lake, issuer, role, "PUT", f"trees/main@{main}",
                json={"type": "BRANCH", "name": branch.name, "hash": branch.hash})
    assert assign.status_code == 403, assign.text
    delete = v2(lake, issuer, role, "DELETE", f"trees/main@{main}")
    assert delete.status_code in (400, 403), delete.text  # Nessie itself never deletes its default branch (400)
    assert service.reference_hash("main") == main

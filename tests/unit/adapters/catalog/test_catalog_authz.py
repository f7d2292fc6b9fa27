"""The catalog's roles are written once (wap_ingest.adapters.catalog.authz) and deployed as written: the Nessie
container's environment carries exactly those rules, and Cognito's scopes and app clients are exactly those roles."""

from __future__ import annotations

import re

from infra.provision import auth, documents

from wap_ingest.adapters.catalog import authz as catalog_authz
from wap_ingest.adapters.catalog.authz import RULES, nessie_environment, nessie_properties, scope_for
from wap_stack.auth import with_auth

RENDER = {"DbHost": "h", "DbPort": "5432", "DbName": "n", "DbUser": "u", "Region": "us-east-1",
          "UserPoolId": "pool", "NessieClientId": "client"}


def test_the_deployed_container_gets_exactly_the_rules() -> None:
    text = (documents.INFRA_DIR / "nessie-service.yml").read_text()
    environment = documents.load_rendered("nessie-service.yml", RENDER | _placeholders(text))[
        "containers"]["nessie"]["environment"]
    deployed = {k: v for k, v in environment.items() if k.startswith("NESSIE_SERVER_AUTHORIZATION")
                or k == "QUARKUS_OIDC_ROLES_ROLE_CLAIM_PATH"}
    assert deployed == nessie_environment()


def _placeholders(text: str) -> dict[str, str]:
    return {name: "x" for name in re.findall(r"\$\{(\w+)\}", text) if name not in RENDER}


def test_rules_use_only_variables_bound_for_every_check() -> None:
    """`contentType` is unbound for repository-config checks and `path` is empty for reference checks: a rule
    that names them fails (HTTP 500) or means nothing there."""
    for rule_id, rule in RULES.items():
        assert re.fullmatch(r"[a-z]+", rule_id)  # survives the environment-variable mapping
        words = set(re.findall(r"\b([a-zA-Z]+)\b(?![('])", re.sub(r"'[^']*'", "", rule)))
        assert words <= {"roles", "op", "ref", "in", "startsWith"}, (rule_id, words)


def test_no_rule_grants_assigning_or_deleting_main() -> None:
    for rule in RULES.values():
        assert "ASSIGN_REFERENCE_TO_HASH" not in rule
        if "DELETE_REFERENCE" in rule:
            assert "ref.startsWith('wap-')" in rule


def test_cognito_scopes_and_clients_are_the_roles() -> None:
    settings = auth.auth_settings()
    server = settings["resource_server"]["Identifier"]
    assert server == catalog_authz.RESOURCE_SERVER
    assert {f"{server}/{s['ScopeName']}" for s in settings["resource_server"]["Scopes"]} == {
        scope_for(role) for role in catalog_authz.ROLES}
    assert auth.ROLES == catalog_authz.ROLES
    assert settings["roles"] == {role: [scope_for(role)] for role in catalog_authz.ROLES}


def test_the_local_stack_passes_the_same_rules_before_the_jar() -> None:
    command = with_auth(["java", "-Xmx1g", "-jar", "nessie.jar"], "http://127.0.0.1:1")
    assert command[-2:] == ["-jar", "nessie.jar"]
    for name, value in nessie_properties().items():
        assert f"-D{name}={value}" in command
    assert "-Dnessie.server.authentication.enabled=true" in command

"""Nessie authentication: a Cognito user pool as the OIDC identity provider, a resource server `nessie` with
one scope per catalog role (service, operator, reader), and one confidential app client (client-credentials
grant) per role: `<prefix>-ingest` (service: the function and EMR jobs), `<prefix>-operator`, `<prefix>-reader`.
Each secret goes to SSM as a SecureString and is never printed. Existing resources are brought to these
scopes (the resource server's scopes, each client's allowed scopes)."""

from __future__ import annotations

from typing import Any

from botocore.exceptions import ClientError

from infra.provision import documents, secrets
from infra.provision.context import Client, Context, Outcome

SERVICE = "service"
# wap_ingest/adapters/catalog/authz.py's roles; scopes in infra/nessie-auth.yml
ROLES = ("service", "operator", "reader")

_POOL = "cognito user pool"


def auth_settings() -> dict[str, Any]:
    settings: dict[str, Any] = documents.load("nessie-auth.yml")
    return settings


def find_pool(idp: Client, name: str) -> str | None:
    for page in idp.get_paginator("list_user_pools").paginate(PaginationConfig={"PageSize": 60}):
        for pool in page.get("UserPools", []):
            if pool.get("Name") == name:
                return str(pool["Id"])
    return None


def find_client(idp: Client, pool_id: str, name: str) -> str | None:
    for page in idp.get_paginator("list_user_pool_clients").paginate(UserPoolId=pool_id):
        for client in page.get("UserPoolClients", []):
            if client.get("ClientName") == name:
                return str(client["ClientId"])
    return None


def token_endpoint(domain: str, region: str) -> str:
    return f"https://{domain}.auth.{region}.amazoncognito.com/oauth2/token"


def issuer(region: str, pool_id: str) -> str:
    return f"https://cognito-idp.{region}.amazonaws.com/{pool_id}"


def _ensure_pool(ctx: Context, idp: Client) -> str | None:
    name = ctx.names.user_pool
    pool_id = find_pool(idp, name)
    if pool_id is not None:
        ctx.report(Outcome.UNCHANGED, _POOL, name)
        return pool_id
    created: dict[str, str] = {}

    def create() -> None:
        response = idp.create_user_pool(
            PoolName=name,
            AdminCreateUserConfig={"AllowAdminCreateUserOnly": True},
            UserPoolTags={"wap:prefix": ctx.names.prefix},
        )
        created["id"] = response["UserPool"]["Id"]

    ctx.pending(create, _POOL, name, "OIDC issuer for Nessie")
    return created.get("id")


def _ensure_domain(ctx: Context, idp: Client, pool_id: str | None) -> None:
    domain = ctx.names.user_pool_domain(ctx.account.account_id)
    ctx.state["NessieTokenEndpoint"] = token_endpoint(domain, ctx.account.region)
    found = idp.describe_user_pool_domain(Domain=domain).get("DomainDescription", {})
    if found.get("UserPoolId") and found["UserPoolId"] == pool_id:
        ctx.report(Outcome.UNCHANGED, "cognito domain", domain)
        return
    if found.get("UserPoolId"):
        ctx.report(Outcome.SKIPPED, "cognito domain", domain, "taken by another user pool: delete it first")
        return
    ctx.pending(lambda: idp.create_user_pool_domain(Domain=domain, UserPoolId=pool_id), "cognito domain", domain)


def _ensure_resource_server(ctx: Context, idp: Client, pool_id: str | None) -> None:
    spec = auth_settings()["resource_server"]
    kind, name = "cognito resource server", spec["Identifier"]
    wanted = sorted(scope["ScopeName"] for scope in spec["Scopes"])
    if pool_id is not None:
        try:
            found = idp.describe_resource_server(UserPoolId=pool_id, Identifier=spec["Identifier"])
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") != "ResourceNotFoundException":
                raise
        else:
            have = sorted(scope["ScopeName"] for scope in found["ResourceServer"].get("Scopes", []))
            changes = [f"scopes {', '.join(have) or '-'} -> {', '.join(wanted)}"] if have != wanted else []
            ctx.converge(changes, lambda: idp.update_resource_server(UserPoolId=pool_id, **spec), kind, name)
            return
    ctx.pending(lambda: idp.create_resource_server(UserPoolId=pool_id, **spec), kind, name,
                f"scopes: {', '.join(wanted)}")


def client_name(ctx: Context, role: str) -> str:
    return ctx.names.user_pool_client if role == SERVICE else f"{ctx.names.prefix}-{role}"


def secret_parameter(ctx: Context, role: str) -> str:
    if role == SERVICE:
        return ctx.names.nessie_client_secret_parameter
    return f"/{ctx.names.prefix}/nessie-{role}-client-secret"


def _ensure_client(ctx: Context, idp: Client, pool_id: str | None, role: str) -> str | None:
    kind, name = "cognito app client", client_name(ctx, role)
    settings = auth_settings()["app_client"] | {"AllowedOAuthScopes": auth_settings()["roles"][role]}
    client_id = find_client(idp, pool_id, name) if pool_id is not None else None
    if client_id is not None:
        found = idp.describe_user_pool_client(UserPoolId=pool_id, ClientId=client_id)["UserPoolClient"]
        have = sorted(found.get("AllowedOAuthScopes", []))
        changes = [f"scopes {' '.join(have)} -> {' '.join(settings['AllowedOAuthScopes'])}"] if have != sorted(
            settings["AllowedOAuthScopes"]) else []
        update = {k: v for k, v in settings.items() if k != "GenerateSecret"}  # an update resets what it omits
        ctx.converge(changes, lambda: idp.update_user_pool_client(UserPoolId=pool_id, ClientId=client_id,
                                                                  ClientName=name, **update), kind, name)
        return client_id
    created: dict[str, str] = {}

    def create() -> None:
        response = idp.create_user_pool_client(UserPoolId=pool_id, ClientName=name, **settings)
        created["id"] = response["UserPoolClient"]["ClientId"]

    ctx.pending(create, kind, name, f"client credentials, role {role}")
    return created.get("id")


def _store_secret(ctx: Context, idp: Client, pool_id: str | None, client_id: str | None, role: str) -> Outcome:
    name = secret_parameter(ctx, role)
    if pool_id is None or client_id is None:
        return ctx.report(Outcome.WOULD_CREATE, "ssm parameter", name, "SecureString")
    described = idp.describe_user_pool_client(UserPoolId=pool_id, ClientId=client_id)["UserPoolClient"]
    return secrets.put_secret(ctx, name, str(described["ClientSecret"]), f"Nessie OAuth2 client secret ({role})")


def ensure_nessie_auth(ctx: Context) -> Outcome:
    idp = ctx.clients("cognito-idp")
    pool_id = _ensure_pool(ctx, idp)
    _ensure_domain(ctx, idp, pool_id)
    _ensure_resource_server(ctx, idp, pool_id)
    ctx.state["UserPoolId"] = pool_id or "<pending>"
    outcome = Outcome.UNCHANGED
    for role in ROLES:  # the service first: its outcome is the step's
        client_id = _ensure_client(ctx, idp, pool_id, role)
        key = "NessieClientId" if role == SERVICE else f"Nessie{role.capitalize()}ClientId"
        ctx.state[key] = client_id or "<pending>"
        stored = _store_secret(ctx, idp, pool_id, client_id, role)
        outcome = stored if role == SERVICE else outcome
    return outcome


def remove_nessie_auth(ctx: Context) -> Outcome:
    for role in ROLES:
        secrets.remove_parameter(ctx, secret_parameter(ctx, role))
    idp = ctx.clients("cognito-idp")
    pool_id = find_pool(idp, ctx.names.user_pool)
    domain = ctx.names.user_pool_domain(ctx.account.account_id)
    owned = pool_id is not None and idp.describe_user_pool_domain(Domain=domain).get("DomainDescription", {}).get(
        "UserPoolId"
    ) == pool_id
    ctx.removal(owned, lambda: idp.delete_user_pool_domain(Domain=domain, UserPoolId=pool_id), "cognito domain", domain)
    return ctx.removal(
        pool_id is not None, lambda: idp.delete_user_pool(UserPoolId=pool_id), _POOL, ctx.names.user_pool,
        "with its app client and resource server",
    )

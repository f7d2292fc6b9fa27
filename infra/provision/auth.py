"""Nessie authentication: a Cognito user pool as the OIDC identity provider, a resource server with the
`nessie/catalog` scope, and one confidential app client (client-credentials grant) for the ingest
function and EMR jobs. Its secret goes to SSM as a SecureString and is never printed."""

from __future__ import annotations

from typing import Any

from botocore.exceptions import ClientError

from infra.provision import documents, secrets
from infra.provision.context import Client, Context, Outcome

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
    if pool_id is not None:
        try:
            idp.describe_resource_server(UserPoolId=pool_id, Identifier=spec["Identifier"])
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") != "ResourceNotFoundException":
                raise
        else:
            ctx.report(Outcome.UNCHANGED, kind, name)
            return
    ctx.pending(lambda: idp.create_resource_server(UserPoolId=pool_id, **spec), kind, name, "scopes: catalog")


def _ensure_client(ctx: Context, idp: Client, pool_id: str | None) -> str | None:
    kind, name = "cognito app client", ctx.names.user_pool_client
    client_id = find_client(idp, pool_id, name) if pool_id is not None else None
    if client_id is not None:
        ctx.report(Outcome.UNCHANGED, kind, name)
        return client_id
    created: dict[str, str] = {}

    def create() -> None:
        response = idp.create_user_pool_client(UserPoolId=pool_id, ClientName=name, **auth_settings()["app_client"])
        created["id"] = response["UserPoolClient"]["ClientId"]

    ctx.pending(create, kind, name, "client credentials")
    return created.get("id")


def ensure_nessie_auth(ctx: Context) -> Outcome:
    idp = ctx.clients("cognito-idp")
    pool_id = _ensure_pool(ctx, idp)
    _ensure_domain(ctx, idp, pool_id)
    _ensure_resource_server(ctx, idp, pool_id)
    client_id = _ensure_client(ctx, idp, pool_id)
    ctx.state["UserPoolId"] = pool_id or "<pending>"
    ctx.state["NessieClientId"] = client_id or "<pending>"
    name = ctx.names.nessie_client_secret_parameter
    if pool_id is None or client_id is None:
        return ctx.report(Outcome.WOULD_CREATE, "ssm parameter", name, "SecureString")
    described = idp.describe_user_pool_client(UserPoolId=pool_id, ClientId=client_id)["UserPoolClient"]
    return secrets.put_secret(ctx, name, str(described["ClientSecret"]), "Nessie OAuth2 client secret (wap-lake)")


def remove_nessie_auth(ctx: Context) -> Outcome:
    secrets.remove_parameter(ctx, ctx.names.nessie_client_secret_parameter)
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

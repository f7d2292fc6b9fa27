"""The Nessie database's password, out of the container's environment.

The password lives in the SSM SecureString `/<prefix>/nessie/db-password`. A Lightsail container has no IAM
role, so the Nessie image's entry point (docker/nessie/entrypoint.sh) reads the parameter itself at start, with
the access key of a dedicated IAM user `<prefix>-nessie-secrets` whose only policy is `ssm:GetParameter` on that
one parameter (and `kms:Decrypt` through SSM for it): the bootstrap credential, given to the container as
WAP_SECRETS_ACCESS_KEY_ID / WAP_SECRETS_SECRET_ACCESS_KEY.

The key's secret is stored nowhere but in the Lightsail deployment: a later `create` reuses the key that the
service's deployment holds while IAM still has it, and makes a new one (then deletes the old ones once the new
deployment is submitted) when none is usable or when WAP_ROTATE_NESSIE_KEY=1. Keys that no deployment holds are
useless (their secret is gone) and are deleted.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote

from botocore.exceptions import ClientError

from infra.provision import documents, secrets
from infra.provision.context import Client, Context, Outcome, ProvisionError

_USER = "iam user"
_KEY = "iam access key"
POLICY_FILE = "iam/nessie-secrets-policy.json"
KEY_ID_VARIABLE = "WAP_SECRETS_ACCESS_KEY_ID"
KEY_SECRET_VARIABLE = "WAP_SECRETS_SECRET_ACCESS_KEY"
ROTATE_VARIABLE = "WAP_ROTATE_NESSIE_KEY"
IAM_KEY_LIMIT = 2  # access keys per IAM user


@dataclass(frozen=True)
class AccessKey:
    """The key to deploy. `retire`: the user's other keys, deleted once a deployment with this key is submitted."""

    key_id: str
    secret: str
    retire: tuple[str, ...] = ()

    def __repr__(self) -> str:  # never the secret
        return f"AccessKey({self.key_id!r}, retire={self.retire!r})"


def policy_name(ctx: Context) -> str:
    return f"{ctx.names.nessie_secrets_user}-policy"


def policy(ctx: Context) -> str:
    return documents.policy_json(documents.load_rendered(POLICY_FILE, ctx.template_values()))


def ensure_password_parameter(ctx: Context, password: str) -> Outcome:
    return secrets.put_secret(ctx, ctx.names.nessie_db_password_parameter, password,
                              "wap-lake Nessie database password (read by the Nessie container at start)")


def _missing(exc: ClientError) -> bool:
    return bool(exc.response.get("Error", {}).get("Code") == "NoSuchEntity")


def _user_exists(iam: Client, name: str) -> bool:
    try:
        iam.get_user(UserName=name)
        return True
    except ClientError as exc:
        if _missing(exc):
            return False
        raise


def _user_policy(iam: Client, user: str, name: str) -> str | None:
    try:
        document = iam.get_user_policy(UserName=user, PolicyName=name)["PolicyDocument"]
    except ClientError as exc:
        if _missing(exc):
            return None
        raise
    if isinstance(document, str):  # IAM returns the document URL-encoded (boto3 decodes it for some clients)
        document = json.loads(unquote(document))
    return documents.policy_json(document)


def ensure_user(ctx: Context) -> Outcome:
    """The IAM user with its one inline policy (no console access, no group, no managed policy)."""
    iam, name, document = ctx.clients("iam"), ctx.names.nessie_secrets_user, policy(ctx)

    def put_policy() -> None:
        iam.put_user_policy(UserName=name, PolicyName=policy_name(ctx), PolicyDocument=document)

    def create() -> None:
        iam.create_user(UserName=name, Tags=[{"Key": "wap:prefix", "Value": ctx.names.prefix}])
        put_policy()

    if not _user_exists(iam, name):
        return ctx.pending(create, _USER, name,
                           f"inline policy {policy_name(ctx)}: reads {ctx.names.nessie_db_password_parameter} only")
    ctx.detail(f"user ARN {ctx.account.user_arn(name)}")
    changes = [] if _user_policy(iam, name, policy_name(ctx)) == document else [f"inline policy {policy_name(ctx)}"]
    return ctx.converge(changes, put_policy, _USER, name)


def deployed_keys(deployments: Iterable[Mapping[str, Any] | None]) -> dict[str, str]:
    """Access key id -> secret, as the given Lightsail deployments' containers hold them (first one first)."""
    found: dict[str, str] = {}
    for deployment in deployments:
        for container in ((deployment or {}).get("containers") or {}).values():
            environment = container.get("environment") or {}
            key_id, secret = environment.get(KEY_ID_VARIABLE), environment.get(KEY_SECRET_VARIABLE)
            if key_id and secret:
                found.setdefault(str(key_id), str(secret))
    return found


def _keys(iam: Client, user: str) -> dict[str, str]:
    """The user's access keys: id -> status (none while the user does not exist, as in a dry run)."""
    try:
        metadata = iam.list_access_keys(UserName=user)["AccessKeyMetadata"]
    except ClientError as exc:
        if _missing(exc):
            return {}
        raise
    return {str(k["AccessKeyId"]): str(k["Status"]) for k in metadata}


def _rotate(ctx: Context) -> bool:
    return ctx.environ.get(ROTATE_VARIABLE, "").strip().lower() in ("1", "true", "yes")


def _delete_key(ctx: Context, iam: Client, user: str, key_id: str, why: str) -> None:
    ctx.removal(True, lambda: iam.delete_access_key(UserName=user, AccessKeyId=key_id), _KEY, key_id, why)


def access_key(ctx: Context, deployed: Mapping[str, str]) -> AccessKey | None:
    """The key to put in the deployment (None in a dry run that would create one)."""
    iam, user = ctx.clients("iam"), ctx.names.nessie_secrets_user
    keys = _keys(iam, user)
    usable = [key_id for key_id in deployed if keys.get(key_id) == "Active"]
    if usable and not _rotate(ctx):
        key_id = usable[0]
        for stale in [k for k in keys if k not in deployed]:
            _delete_key(ctx, iam, user, stale, "held by no deployment: its secret is gone")
        ctx.report(Outcome.UNCHANGED, _KEY, key_id, f"of {user}, as deployed")
        return AccessKey(key_id, deployed[key_id])
    why = f"rotation ({ROTATE_VARIABLE})" if usable else "no deployed key is usable"
    if ctx.dry_run:
        ctx.report(Outcome.WOULD_CREATE, _KEY, f"for {user}", why)
        return None
    for stale in [k for k in keys if k not in deployed][: max(0, len(keys) - IAM_KEY_LIMIT + 1)]:
        _delete_key(ctx, iam, user, stale, "held by no deployment: makes room for the new key")
        del keys[stale]
    if len(keys) >= IAM_KEY_LIMIT:
        raise ProvisionError(f"{_USER} {user} already has {len(keys)} access keys, all deployed; "
                             "wait for the container service's deployment to finish and run create again.")
    created = iam.create_access_key(UserName=user)["AccessKey"]
    ctx.report(Outcome.CREATED, _KEY, str(created["AccessKeyId"]), f"of {user}: {why}")
    return AccessKey(str(created["AccessKeyId"]), str(created["SecretAccessKey"]), retire=tuple(keys))


def retire(ctx: Context, key: AccessKey) -> None:
    """After the deployment with `key` was submitted: delete the keys it replaces."""
    iam, user = ctx.clients("iam"), ctx.names.nessie_secrets_user
    for old in key.retire:
        _delete_key(ctx, iam, user, old, f"replaced by {key.key_id}")


def remove(ctx: Context) -> Outcome:
    """The user (with its keys and policy), then the password parameter."""
    iam, user = ctx.clients("iam"), ctx.names.nessie_secrets_user

    def delete() -> None:
        for key_id in _keys(iam, user):
            iam.delete_access_key(UserName=user, AccessKeyId=key_id)
        for name in iam.list_user_policies(UserName=user).get("PolicyNames", []):
            iam.delete_user_policy(UserName=user, PolicyName=name)
        iam.delete_user(UserName=user)

    ctx.removal(_user_exists(iam, user), delete, _USER, user, "with its access keys")
    return secrets.remove_parameter(ctx, ctx.names.nessie_db_password_parameter)

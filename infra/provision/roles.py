"""IAM roles: the Lambda execution role, the EMR Serverless job execution role and the operators' role, each with
one inline policy rendered from infra/iam/ (no AWS managed policy: every statement is scoped to our resources).

The operator role is assumed by the account's IAM users under their own user name (its trust policy requires
`sts:RoleSessionName` = `${aws:username}`), so the session name in a publish request's verified ARN names the
person (docs/deploy.md, "How an operator publishes")."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote

from botocore.exceptions import ClientError

from infra.provision import documents
from infra.provision.context import Client, Context, Outcome

_KIND = "iam role"


@dataclass(frozen=True)
class RoleSpec:
    name: str
    trust_file: str
    policy_file: str
    description: str

    @property
    def policy_name(self) -> str:
        return f"{self.name}-policy"


def lambda_role(ctx: Context) -> RoleSpec:
    return RoleSpec(ctx.names.lambda_role, "iam/lambda-trust-policy.json", "iam/lambda-policy.json",
                    "wap-lake ingest Lambda function")


def emr_job_role(ctx: Context) -> RoleSpec:
    return RoleSpec(ctx.names.emr_job_role, "iam/emr-job-trust-policy.json", "iam/emr-job-policy.json",
                    "wap-lake EMR Serverless job runs")


def operator_role(ctx: Context) -> RoleSpec:
    return RoleSpec(ctx.names.operator_role, "iam/operator-trust-policy.json", "iam/operator-policy.json",
                    "wap-lake operators: publish requests to the ingest queue")


def _document(value: Any) -> str:
    """IAM returns documents URL-encoded strings or dicts depending on the client; compare canonical JSON."""
    if isinstance(value, str):
        value = json.loads(unquote(value))
    return documents.policy_json(value)


def get_role(iam: Client, name: str) -> dict[str, Any] | None:
    try:
        return dict(iam.get_role(RoleName=name)["Role"])
    except ClientError as exc:
        if exc.response.get("Error", {}).get("Code") == "NoSuchEntity":
            return None
        raise


def _inline_policy(iam: Client, role: str, policy: str) -> str | None:
    try:
        return _document(iam.get_role_policy(RoleName=role, PolicyName=policy)["PolicyDocument"])
    except ClientError as exc:
        if exc.response.get("Error", {}).get("Code") == "NoSuchEntity":
            return None
        raise


def _ensure(ctx: Context, spec: RoleSpec) -> Outcome:
    iam, values = ctx.clients("iam"), ctx.template_values()
    trust = documents.policy_json(documents.load_rendered(spec.trust_file, values))
    policy = documents.policy_json(documents.load_rendered(spec.policy_file, values))
    role = get_role(iam, spec.name)

    def create() -> None:
        iam.create_role(RoleName=spec.name, AssumeRolePolicyDocument=trust, Description=spec.description,
                        Tags=[{"Key": "wap:prefix", "Value": ctx.names.prefix}])
        iam.put_role_policy(RoleName=spec.name, PolicyName=spec.policy_name, PolicyDocument=policy)

    if role is None:
        return ctx.pending(create, _KIND, spec.name, f"inline policy {spec.policy_name}")
    ctx.detail(f"role ARN {role['Arn']}")
    changes = []
    if _document(role["AssumeRolePolicyDocument"]) != trust:
        changes.append("trust policy")
    if _inline_policy(iam, spec.name, spec.policy_name) != policy:
        changes.append(f"inline policy {spec.policy_name}")

    def apply() -> None:
        iam.update_assume_role_policy(RoleName=spec.name, PolicyDocument=trust)
        iam.put_role_policy(RoleName=spec.name, PolicyName=spec.policy_name, PolicyDocument=policy)

    return ctx.converge(changes, apply, _KIND, spec.name)


def ensure_emr_job_role(ctx: Context) -> Outcome:
    return _ensure(ctx, emr_job_role(ctx))


def ensure_lambda_role(ctx: Context) -> Outcome:
    return _ensure(ctx, lambda_role(ctx))


def ensure_operator_role(ctx: Context) -> Outcome:
    return _ensure(ctx, operator_role(ctx))


def _delete(iam: Client, name: str) -> None:
    for policy in iam.list_role_policies(RoleName=name).get("PolicyNames", []):
        iam.delete_role_policy(RoleName=name, PolicyName=policy)
    for attached in iam.list_attached_role_policies(RoleName=name).get("AttachedPolicies", []):
        iam.detach_role_policy(RoleName=name, PolicyArn=attached["PolicyArn"])
    iam.delete_role(RoleName=name)


def _remove(ctx: Context, spec: RoleSpec) -> Outcome:
    iam = ctx.clients("iam")
    exists = get_role(iam, spec.name) is not None
    return ctx.removal(exists, lambda: _delete(iam, spec.name), _KIND, spec.name)


def remove_lambda_role(ctx: Context) -> Outcome:
    return _remove(ctx, lambda_role(ctx))


def remove_emr_job_role(ctx: Context) -> Outcome:
    return _remove(ctx, emr_job_role(ctx))


def remove_operator_role(ctx: Context) -> Outcome:
    return _remove(ctx, operator_role(ctx))

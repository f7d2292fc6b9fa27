"""The local stack's AWS identities for people: `wap stack env --role operator|reader` gives a shell the credentials
of moto's IAM role `wap-<role>`, assumed through moto's STS under the OS user's name, as a person assumes
`<prefix>-operator` in AWS (setup_aws.py). A publish request signed in that shell is verified by the stack's STS as
arn:aws:sts::123456789012:assumed-role/wap-operator/<user>, and the stack's function serves requests of
`wap-operator` only (WAP_PUBLISH_PRINCIPALS, `publish_principals`). The service role keeps the stack's plain
credentials.

moto's STS names the caller from the access key it issued; it checks the signature only when moto enforces IAM, so
the function records such an actor as unverified (adapters/publish_requests.StsRequesters.actor).
"""

from __future__ import annotations

import getpass
import json
import re
from typing import Any

from wap_ingest.adapters.catalog import OPERATOR, READER
from wap_ingest.core.errors import ConfigError
from wap_stack.components import ACCESS_KEY, SECRET_KEY

ACCOUNT = "123456789012"  # moto's default account
PEOPLE = (OPERATOR, READER)  # the roles a person's shell takes; the service uses the stack's own credentials
_TRUST = {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "sts:AssumeRole",
                                                  "Principal": {"AWS": f"arn:aws:iam::{ACCOUNT}:root"}}]}


def role_name(role: str) -> str:
    return f"wap-{role}"


def role_arn(role: str) -> str:
    return f"arn:aws:iam::{ACCOUNT}:role/{role_name(role)}"


def publish_principals(iam_operator: str | None = None) -> str:
    """WAP_PUBLISH_PRINCIPALS of the stack's function: the operator role, and with `wap stack up --iam` the IAM
    user whose keys `wap stack env --role operator` gives there (wap_stack/iam.py)."""
    user = f",arn:aws:iam::{ACCOUNT}:user/{iam_operator}" if iam_operator else ""
    return role_arn(OPERATOR) + user


def session_name() -> str:
    """The OS user's name as an STS session name ([\\w+=,.@-], 2 to 64 characters)."""
    name = re.sub(r"[^\w+=,.@-]", "-", getpass.getuser())[:64]
    return name if len(name) >= 2 else f"{name}-user"


def role_credentials(moto_url: str, region: str, role: str) -> dict[str, str]:
    """AWS_* variables with `role`'s temporary credentials from the stack's STS (the role is made on first use)."""
    import boto3

    if role not in PEOPLE:
        raise ConfigError(f"no AWS role for {role!r} on the local stack; use one of {', '.join(PEOPLE)}.")
    clients: dict[str, Any] = {name: boto3.client(name, endpoint_url=moto_url, region_name=region,
                                                  aws_access_key_id=ACCESS_KEY, aws_secret_access_key=SECRET_KEY)
                               for name in ("iam", "sts")}
    iam = clients["iam"]
    try:
        iam.get_role(RoleName=role_name(role))
    except iam.exceptions.NoSuchEntityException:
        iam.create_role(RoleName=role_name(role), AssumeRolePolicyDocument=json.dumps(_TRUST),
                        Description=f"the local stack's {role}")
    found = clients["sts"].assume_role(RoleArn=role_arn(role), RoleSessionName=session_name())["Credentials"]
    return {"AWS_ACCESS_KEY_ID": found["AccessKeyId"], "AWS_SECRET_ACCESS_KEY": found["SecretAccessKey"],
            "AWS_SESSION_TOKEN": found["SessionToken"]}

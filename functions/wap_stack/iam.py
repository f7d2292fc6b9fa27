"""`wap stack up --iam`: the local stack with IAM enforced by moto, each process with the policy it has in AWS.

moto runs as wap_stack/moto_iam.py (IAM decisions as AWS makes them for the services the code calls, each one written to
<state dir>/iam-decisions.jsonl). Once moto is up, the stack makes one IAM user per principal, each with one inline
policy and an access key (in <state dir>/iam.json, mode 0600):

  function  infra/iam/lambda-policy.json   the function and its SQS worker (Lambda's event source mapping uses the
                                           function's execution role)
  emr-job   infra/iam/emr-job-policy.json  an EMR Serverless job run (the tests run one as the role would)
  operator  infra/iam/operator-policy.json `wap branches/show/publish/discard/history/dlq ...`
  nessie    the local catalog server's own access to the warehouse (not a deployed principal)
  admin     everything: the stack's own set-up and status, and `wap stack env` (a producer, a developer)

The policy files are rendered as setup_aws.py renders them (infra/provision/documents.py, the same placeholders),
with the local stack's resources as values. When the stack is up, moto is told to check every request from then on.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from wap_ingest.core.errors import ConfigError
from wap_stack.components import ACCESS_KEY, EVENT_BUS, EVENTS_QUEUE, FUNCTION_NAME, HOST, SECRET_KEY, WAREHOUSE
from wap_stack.config import StackConfig, repo_root

ACCOUNT_ID = "123456789012"  # moto's default account
ADMIN, FUNCTION, EMR_JOB, OPERATOR, NESSIE_SERVER = "admin", "function", "emr-job", "operator", "nessie"
POLICY_FILES = {FUNCTION: "iam/lambda-policy.json", EMR_JOB: "iam/emr-job-policy.json",
                OPERATOR: "iam/operator-policy.json"}
PRINCIPALS = (ADMIN, FUNCTION, EMR_JOB, OPERATOR, NESSIE_SERVER)
EMR_ROLE = "wap-emr-job-role"  # as wap_stack/emr.py registers it
SLACK_TOKEN_PARAMETER = "/wap/slack-token"  # not used locally (the sink's token is given directly)


def user_for(principal: str) -> str:
    return f"wap-stack-{principal}"


def credentials_file(state_dir: Path) -> Path:
    return state_dir / "iam.json"


def decisions_file(state_dir: Path) -> Path:
    return state_dir / "iam-decisions.jsonl"


def iam_enabled(state_dir: Path) -> bool:
    return credentials_file(state_dir).is_file()


def moto_command(config: StackConfig, python: str) -> list[str]:
    return [python, "-m", "wap_stack.moto_iam", "--decisions", str(decisions_file(config.state_dir)),
            "-H", HOST, "-p", str(config.moto_port)]


def _client(config: StackConfig, service: str, principal: str | None = None) -> Any:
    import boto3

    keys = principal_environment(config.state_dir, principal) if principal else {}
    return boto3.client(service, endpoint_url=f"http://{HOST}:{config.moto_port}", region_name=config.region,
                        aws_access_key_id=keys.get("AWS_ACCESS_KEY_ID", ACCESS_KEY),
                        aws_secret_access_key=keys.get("AWS_SECRET_ACCESS_KEY", SECRET_KEY))


def _write(path: Path, document: Mapping[str, Any]) -> None:
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(descriptor, "w") as out:
        json.dump(document, out)


def create_users(config: StackConfig) -> None:
    """One IAM user and access key per principal (before moto enforces anything); the admin's policy at once."""
    iam = _client(config, "iam")
    keys: dict[str, dict[str, str]] = {}
    for principal in PRINCIPALS:
        user = user_for(principal)
        iam.create_user(UserName=user)
        key = iam.create_access_key(UserName=user)["AccessKey"]
        keys[principal] = {"user": user, "access_key_id": key["AccessKeyId"],
                           "secret_access_key": key["SecretAccessKey"]}
    admin = {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "*", "Resource": "*"}]}
    iam.put_user_policy(UserName=user_for(ADMIN), PolicyName="admin", PolicyDocument=json.dumps(admin))
    config.state_dir.mkdir(parents=True, exist_ok=True)
    _write(credentials_file(config.state_dir), {"principals": keys})


def principal_environment(state_dir: Path, principal: str) -> dict[str, str]:
    """AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY of `principal` ({} for a stack without --iam)."""
    try:
        document = json.loads(credentials_file(state_dir).read_text())
    except FileNotFoundError:
        return {}
    try:
        keys = document["principals"][principal]
    except KeyError as exc:
        raise ConfigError(f"unknown principal {principal!r} of the stack's IAM. Fix: use one of "
                          f"{', '.join(PRINCIPALS)}.") from exc
    return {"AWS_ACCESS_KEY_ID": keys["access_key_id"], "AWS_SECRET_ACCESS_KEY": keys["secret_access_key"]}


def policy_values(config: StackConfig, record: Mapping[str, Any]) -> dict[str, str]:
    """The placeholders setup_aws.py fills (infra/provision/context.py `template_values`), for the local stack."""
    from wap_stack.auth import secret_parameter_for
    from wap_stack.slack_workspace import SIGNING_SECRET_PARAMETER

    region, account = config.region, ACCOUNT_ID

    def arn(service: str, resource: str) -> str:
        return f"arn:aws:{service}:{region}:{account}:{resource}"

    application = str(record.get("emr_application_id") or "none")
    return {
        "Partition": "aws", "Region": region, "AccountId": account, "Prefix": "wap",
        "SourceBucket": config.source_bucket, "SourceBucketArn": f"arn:aws:s3:::{config.source_bucket}",
        "LakeBucket": config.lake_bucket, "LakeBucketArn": f"arn:aws:s3:::{config.lake_bucket}",
        "WarehousePrefix": WAREHOUSE,
        "QueueArn": arn("sqs", EVENTS_QUEUE),
        "DeadLetterQueueArn": arn("sqs", f"{EVENTS_QUEUE}-dlq"),
        "EventBusArn": arn("events", f"event-bus/{EVENT_BUS}"),
        "FunctionName": FUNCTION_NAME,
        "SlackFunctionName": "wap-slack-actions",
        "EmrApplicationName": "wap-lake-local",
        "EmrApplicationArn": arn("emr-serverless", f"/applications/{application}"),
        "EmrJobRoleArn": f"arn:aws:iam::{account}:role/{EMR_ROLE}",
        "SlackTokenParameterArn": arn("ssm", f"parameter/{SLACK_TOKEN_PARAMETER.lstrip('/')}"),
        "SlackSigningSecretParameterArn": arn("ssm", f"parameter/{SIGNING_SECRET_PARAMETER.lstrip('/')}"),
        "NessieClientSecretParameterArn": arn("ssm", f"parameter/{secret_parameter_for('service').lstrip('/')}"),
        "OperatorClientSecretParameterArn": arn("ssm", f"parameter/{secret_parameter_for('operator').lstrip('/')}"),
        "NessieService": "nessie-wap",
    }


def _documents() -> Any:
    """infra/provision/documents.py of this checkout (setup_aws.py's renderer; infra/ is not an installed package)."""
    import importlib
    import sys

    root = str(repo_root())
    if root not in sys.path:
        sys.path.append(root)
    return importlib.import_module("infra.provision.documents")


def rendered_policy(principal: str, values: Mapping[str, str]) -> dict[str, Any]:
    documents = _documents()

    if principal == NESSIE_SERVER:  # the local catalog server: the warehouse, as a REST catalog's signer needs
        lake, warehouse = values["LakeBucketArn"], values["WarehousePrefix"]
        return {"Version": "2012-10-17", "Statement": [
            {"Effect": "Allow", "Action": ["s3:ListBucket", "s3:GetBucketLocation"], "Resource": lake},
            {"Effect": "Allow", "Action": ["s3:GetObject", "s3:PutObject", "s3:DeleteObject"],
             "Resource": f"{lake}/{warehouse}/*"}]}
    policy: dict[str, Any] = documents.load_rendered(POLICY_FILES[principal], values)
    return policy


def attach_policies(config: StackConfig, record: Mapping[str, Any]) -> None:
    """Each principal's one inline policy (the function's names the EMR application, registered by now)."""
    iam = _client(config, "iam")
    values = policy_values(config, record)
    for principal in (FUNCTION, EMR_JOB, OPERATOR, NESSIE_SERVER):
        iam.put_user_policy(UserName=user_for(principal), PolicyName=principal,
                            PolicyDocument=json.dumps(rendered_policy(principal, values)))


def enforce(config: StackConfig) -> None:
    """From now on moto authenticates and authorizes every request (its /moto-api/reset-auth)."""
    import requests

    with requests.Session() as session:
        session.trust_env = False
        answer = session.post(f"http://{HOST}:{config.moto_port}/moto-api/reset-auth", data=b"0", timeout=10)
    answer.raise_for_status()


def nessie_secret_settings(config: StackConfig) -> list[str]:
    """The local Nessie's S3 key, as JVM options: the key id, and an @argfile (mode 0600) that holds the secret, so
    that the secret is on neither its command line nor its log."""
    keys = principal_environment(config.state_dir, NESSIE_SERVER)
    argfile = config.state_dir / "nessie-s3.args"
    _write_text(argfile, f"-Dwap-secrets.s3.secret={keys['AWS_SECRET_ACCESS_KEY']}\n")
    return [f"-Dwap-secrets.s3.name={keys['AWS_ACCESS_KEY_ID']}", f"@{argfile}"]


def _write_text(path: Path, text: str) -> None:
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(descriptor, "w") as out:
        out.write(text)


def forget(state_dir: Path, *, keep_decisions: bool = False) -> None:
    """Delete the keys (and, unless kept for reading after `down`, the decisions) of a stack."""
    credentials_file(state_dir).unlink(missing_ok=True)
    (state_dir / "nessie-s3.args").unlink(missing_ok=True)
    if not keep_decisions:
        decisions_file(state_dir).unlink(missing_ok=True)


def read_decisions(state_dir: Path) -> list[dict[str, Any]]:
    path = decisions_file(state_dir)
    if not path.is_file():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]

"""The harness of the setup_aws.py tests (test_setup_aws*.py, test_dead_letter_alarm_setup.py): a real moto server
(HTTP, own port), setup_aws run in-process, readers of what it made, and the Lightsail stubs. What the tests try:
create, create again (nothing changes),
delete; the refusal to delete data without --force; --dry-run; the Nessie container's access key reused,
rotated and replaced. Lightsail, which moto lacks, goes through botocore's Stubber, which checks every request
against the Lightsail service model; every request sent to Lightsail is kept, to check that none holds the
database password."""

from __future__ import annotations

import copy
import io
import json
from collections.abc import Iterator
from contextlib import redirect_stdout
from dataclasses import dataclass
from typing import Any

import boto3
import pytest
import setup_aws
from botocore.stub import ANY, Stubber
from infra.provision.names import Account, ResourceNames
from moto.server import ThreadedMotoServer

from wap_stack.moto_emr import accept_emr_spark_labels
from wap_stack.processes import free_port

ACCOUNT = Account("123456789012", "us-east-1")
SLACK_TOKEN = "xoxb-not-a-real-token-0001"
DB_PASSWORD = "db-password-never-printed"
NESSIE_URL = "https://nessie-it.abc123.us-east-1.cs.amazonlightsail.com/"
NESSIE_IMAGE = ":nessie-itest.nessie.3"  # as `aws lightsail push-container-image` names a pushed image
JDBC_TLS = "?sslmode=verify-full&sslrootcert=/opt/wap/rds-global-bundle.pem"


@pytest.fixture(scope="module")
def moto_url() -> Iterator[str]:
    patch = pytest.MonkeyPatch()
    for name, value in {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
                        "AWS_SESSION_TOKEN": "testing", "AWS_DEFAULT_REGION": "us-east-1"}.items():
        patch.setenv(name, value)
    patch.delenv("AWS_ENDPOINT_URL", raising=False)
    patch.delenv("AWS_PROFILE", raising=False)
    port = free_port()
    accept_emr_spark_labels()  # the application's emr-spark-8.1.0, which moto's own check refuses
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.stop()
        patch.undo()


@dataclass
class Run:
    code: int
    out: str


def run(moto_url: str, names: ResourceNames, *args: str, lightsail: Any = None, slack: str | None = None,
        image: str | None = NESSIE_IMAGE, environ: dict[str, str] | None = None) -> Run:
    argv = ["-n", names.nessie_service, "--prefix", names.prefix, "--source-bucket", names.source_bucket,
            "--lake-bucket", names.lake_bucket, "--endpoint-url", moto_url, "--region", ACCOUNT.region, *args]
    environ = dict(environ or {}) | ({"SLACK_TOKEN": slack} if slack else {})
    if image:
        environ["WAP_NESSIE_IMAGE"] = image
    out = io.StringIO()
    with redirect_stdout(out):
        code = setup_aws.main(argv, environ=environ, overrides={"lightsail": lightsail} if lightsail else None)
    return Run(code, out.getvalue())


def client(moto_url: str, service: str) -> Any:
    return boto3.client(service, endpoint_url=moto_url, region_name=ACCOUNT.region)


def names_for(prefix: str) -> ResourceNames:
    return ResourceNames.build(prefix, f"{prefix}-source-bkt", f"{prefix}-lake-bkt", f"nessie-{prefix}")


# --- Lightsail through the Stubber ---------------------------------------------------------------------

class Capture:
    """An expected parameter that matches anything and keeps what was sent."""

    value: Any = None

    def __eq__(self, other: object) -> bool:
        self.value = other
        return True

    __hash__ = None  # type: ignore[assignment]


def _not_found(stub: Stubber, operation: str, params: dict[str, Any]) -> None:
    stub.add_client_error(operation, service_error_code="NotFoundException", http_status_code=404,
                          expected_params=params)


def _database(names: ResourceNames, state: str = "available") -> dict[str, Any]:
    return {"relationalDatabase": {
        "name": names.nessie_database, "state": state, "masterDatabaseName": "nessie", "masterUsername": "nessie",
        "masterEndpoint": {"address": "ls-abc.czowadgeezqi.us-east-1.rds.amazonaws.com", "port": 5432},
    }}


def _service(names: ResourceNames, deployment: dict[str, Any]) -> dict[str, Any]:
    return {"containerServices": [{
        "containerServiceName": names.nessie_service, "state": "RUNNING", "power": "small", "scale": 1,
        "url": NESSIE_URL, "currentDeployment": {"state": "ACTIVE", "version": 1, **deployment},
    }]}


def stub_first_create(stub: Stubber, names: ResourceNames, captured: Capture) -> None:
    db = {"relationalDatabaseName": names.nessie_database}
    _not_found(stub, "get_relational_database", db)
    stub.add_response("create_relational_database", {"operations": []}, {
        **db, "relationalDatabaseBlueprintId": "postgres_16", "relationalDatabaseBundleId": "micro_2_0",
        "masterDatabaseName": "nessie", "masterUsername": "nessie", "publiclyAccessible": False, "tags": ANY,
    })
    stub.add_response("get_relational_database", _database(names), db)
    stub.add_response("get_relational_database_master_user_password", {"masterUserPassword": DB_PASSWORD},
                      {**db, "passwordVersion": "CURRENT"})
    _not_found(stub, "get_container_services", {"serviceName": names.nessie_service})
    stub.add_response("create_container_service", {"containerService": {"containerServiceName": names.nessie_service}},
                      {"serviceName": names.nessie_service, "power": "small", "scale": 1, "tags": ANY,
                       "deployment": captured})
    stub.add_response("get_container_services", {"containerServices": [{
        "containerServiceName": names.nessie_service, "state": "DEPLOYING", "url": NESSIE_URL}]},
        {"serviceName": names.nessie_service})


def stub_second_create(stub: Stubber, names: ResourceNames, deployment: dict[str, Any]) -> None:
    db = {"relationalDatabaseName": names.nessie_database}
    stub.add_response("get_relational_database", _database(names), db)
    stub.add_response("get_relational_database_master_user_password", {"masterUserPassword": DB_PASSWORD},
                      {**db, "passwordVersion": "CURRENT"})
    stub.add_response("get_container_services", _service(names, deployment), {"serviceName": names.nessie_service})


def stub_delete(stub: Stubber, names: ResourceNames, deployment: dict[str, Any]) -> None:
    service, db = {"serviceName": names.nessie_service}, {"relationalDatabaseName": names.nessie_database}
    stub.add_response("get_container_services", _service(names, deployment), service)
    stub.add_response("delete_container_service", {}, service)
    stub.add_response("get_relational_database", _database(names), db)
    stub.add_response("delete_relational_database", {"operations": []},
                      {**db, "skipFinalSnapshot": False, "finalRelationalDatabaseSnapshotName": ANY})


@pytest.fixture
def lightsail() -> Iterator[tuple[Any, Stubber]]:
    ls = boto3.client("lightsail", region_name=ACCOUNT.region)
    sent: list[dict[str, Any]] = []
    ls.meta.events.register("provide-client-params.lightsail.*",
                            lambda params, **_: sent.append(copy.deepcopy(params)))
    ls.sent_to_lightsail = sent  # every request's parameters, for the checks below
    with Stubber(ls) as stub:
        yield ls, stub


def assert_password_never_sent(ls: Any) -> None:
    """No request to Lightsail (deployments included) carries the database password."""
    assert ls.sent_to_lightsail
    for params in ls.sent_to_lightsail:
        assert DB_PASSWORD not in json.dumps(params), params


# --- what exists -------------------------------------------------------------------------------------

def snapshot(moto_url: str, names: ResourceNames) -> dict[str, Any]:
    """The settings of every resource setup_aws.py makes in moto (None where it does not exist)."""
    return {
        "buckets": {b: _bucket(moto_url, b) for b in (names.source_bucket, names.lake_bucket)},
        "queues": {q: _queue(moto_url, q) for q in (names.queue, names.dead_letter_queue)},
        "notification": _notification(moto_url, names),
        "ecr": _repository(moto_url, names.ecr_repository),
        "emr": _application(moto_url, names.emr_application),
        "roles": {r: _role(moto_url, r) for r in (names.lambda_role, names.emr_job_role, names.operator_role)},
        "parameters": {p: _parameter(moto_url, p) for p in (names.slack_token_parameter,
                       names.nessie_client_secret_parameter, names.nessie_db_password_parameter)},
        "user_pool": _user_pool(moto_url, names.user_pool),
        "secrets_user": _user(moto_url, names.nessie_secrets_user),
    }


def _user(moto_url: str, name: str) -> dict[str, Any] | None:
    iam = client(moto_url, "iam")
    if name not in [u["UserName"] for u in iam.list_users()["Users"]]:
        return None
    policies = iam.list_user_policies(UserName=name)["PolicyNames"]
    return {
        "policies": {p: iam.get_user_policy(UserName=name, PolicyName=p)["PolicyDocument"] for p in policies},
        "attached": iam.list_attached_user_policies(UserName=name)["AttachedPolicies"],
        "keys": sorted(k["AccessKeyId"] for k in iam.list_access_keys(UserName=name)["AccessKeyMetadata"]),
    }


def _bucket(moto_url: str, bucket: str) -> dict[str, Any] | None:
    s3 = client(moto_url, "s3")
    if bucket not in [b["Name"] for b in s3.list_buckets().get("Buckets", [])]:
        return None
    sse = s3.get_bucket_encryption(Bucket=bucket)["ServerSideEncryptionConfiguration"]["Rules"]
    return {
        "versioning": s3.get_bucket_versioning(Bucket=bucket).get("Status"),
        "public_access_block": s3.get_public_access_block(Bucket=bucket)["PublicAccessBlockConfiguration"],
        "sse": [r["ApplyServerSideEncryptionByDefault"]["SSEAlgorithm"] for r in sse],
        "policy": json.loads(s3.get_bucket_policy(Bucket=bucket)["Policy"]),
    }


def _queue(moto_url: str, name: str) -> dict[str, str] | None:
    sqs = client(moto_url, "sqs")
    urls = sqs.list_queues(QueueNamePrefix=name).get("QueueUrls", [])
    url = next((u for u in urls if u.rsplit("/", 1)[1] == name), None)
    if url is None:
        return None
    attributes = dict(sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"])
    return {k: v for k, v in attributes.items() if not k.startswith("Approximate")}


def _notification(moto_url: str, names: ResourceNames) -> Any:
    s3 = client(moto_url, "s3")
    if _bucket(moto_url, names.source_bucket) is None:
        return None
    return s3.get_bucket_notification_configuration(Bucket=names.source_bucket).get("QueueConfigurations")


def _repository(moto_url: str, name: str) -> dict[str, Any] | None:
    repos = client(moto_url, "ecr").describe_repositories().get("repositories", [])
    repo = next((r for r in repos if r["repositoryName"] == name), None)
    return None if repo is None else {k: repo[k] for k in ("imageScanningConfiguration", "imageTagMutability")}


def _application(moto_url: str, name: str) -> dict[str, Any] | None:
    emr = client(moto_url, "emr-serverless")
    apps = [a for a in emr.list_applications()["applications"] if a["name"] == name and a["state"] != "TERMINATED"]
    if not apps:
        return None
    app = emr.get_application(applicationId=apps[0]["id"])["application"]
    return {k: app.get(k) for k in ("applicationId", "arn", "releaseLabel", "type", "autoStopConfiguration")}


def _role(moto_url: str, name: str) -> dict[str, Any] | None:
    iam = client(moto_url, "iam")
    if name not in [r["RoleName"] for r in iam.list_roles()["Roles"]]:
        return None
    policies = iam.list_role_policies(RoleName=name)["PolicyNames"]
    return {
        "trust": iam.get_role(RoleName=name)["Role"]["AssumeRolePolicyDocument"],
        "policies": {p: iam.get_role_policy(RoleName=name, PolicyName=p)["PolicyDocument"] for p in policies},
        "attached": iam.list_attached_role_policies(RoleName=name)["AttachedPolicies"],
    }


def _parameter(moto_url: str, name: str) -> dict[str, Any] | None:
    found = client(moto_url, "ssm").describe_parameters(
        ParameterFilters=[{"Key": "Name", "Values": [name]}]
    )["Parameters"]
    return None if not found else {"Type": found[0]["Type"], "Version": found[0]["Version"]}


def _user_pool(moto_url: str, name: str) -> str | None:
    pools = client(moto_url, "cognito-idp").list_user_pools(MaxResults=60)["UserPools"]
    return next((p["Id"] for p in pools if p["Name"] == name), None)


def _statements(policy: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {s["Sid"]: s for s in policy["Statement"]}


# --- the tests ---------------------------------------------------------------------------------------

def assert_created(moto_url: str, names: ResourceNames, state: dict[str, Any]) -> None:
    for bucket in state["buckets"].values():
        assert bucket is not None
        assert bucket["versioning"] == "Enabled"
        assert bucket["public_access_block"] == dict.fromkeys(
            ("BlockPublicAcls", "IgnorePublicAcls", "BlockPublicPolicy", "RestrictPublicBuckets"), True
        )
        assert bucket["sse"] == ["AES256"]
        assert _statements(bucket["policy"])["DenyInsecureTransport"]["Effect"] == "Deny"

    queue, dlq = state["queues"][names.queue], state["queues"][names.dead_letter_queue]
    assert int(queue["VisibilityTimeout"]) == 6 * 900
    redrive = json.loads(queue["RedrivePolicy"])
    assert redrive["deadLetterTargetArn"] == dlq["QueueArn"] == ACCOUNT.queue_arn(names.dead_letter_queue)
    assert int(redrive["maxReceiveCount"]) == 5
    send = _statements(json.loads(queue["Policy"]))["SourceBucketSendsObjectCreatedEvents"]
    assert send["Principal"] == {"Service": "s3.amazonaws.com"}
    assert send["Condition"]["ArnEquals"]["aws:SourceArn"] == ACCOUNT.bucket_arn(names.source_bucket)
    assert queue["SqsManagedSseEnabled"] == "true"

    [notification] = state["notification"]
    assert notification["QueueArn"] == queue["QueueArn"]
    assert notification["Events"] == ["s3:ObjectCreated:*"]

    assert state["ecr"] == {"imageScanningConfiguration": {"scanOnPush": True}, "imageTagMutability": "IMMUTABLE"}
    app = state["emr"]
    assert app["releaseLabel"] == "emr-spark-8.1.0"  # Spark 4.1, as the function (test_engine_versions.py)
    assert app["type"].upper() == "SPARK"

    lambda_role, job_role = state["roles"][names.lambda_role], state["roles"][names.emr_job_role]
    assert lambda_role["attached"] == [] and job_role["attached"] == []
    assert lambda_role["trust"]["Statement"][0]["Principal"] == {"Service": "lambda.amazonaws.com"}
    assert job_role["trust"]["Statement"][0]["Principal"] == {"Service": "emr-serverless.amazonaws.com"}
    lambda_policy = _statements(lambda_role["policies"][f"{names.lambda_role}-policy"])
    assert lambda_policy["SubmitLargeFileJobs"]["Resource"] == app["arn"]
    assert lambda_policy["PassEmrJobRoleOnly"]["Resource"] == ACCOUNT.role_arn(names.emr_job_role)
    assert lambda_policy["ConsumeIngestQueue"]["Resource"] == queue["QueueArn"]
    assert ACCOUNT.parameter_arn(names.slack_token_parameter) in lambda_policy["ReadSecretParameters"]["Resource"]
    # publish requests: only the operator role (and S3's notifications) may send to the queue; the role is assumed
    # under the IAM user's own name
    deny = _statements(json.loads(queue["Policy"]))["NobodyElseSends"]
    assert deny["Effect"] == "Deny" and deny["Action"] == "sqs:SendMessage"
    assert deny["Condition"]["ArnNotEquals"]["aws:PrincipalArn"] == [ACCOUNT.role_arn(names.operator_role),
                                                                     ACCOUNT.role_arn(names.lambda_role)]
    operator = state["roles"][names.operator_role]
    assert operator is not None and operator["attached"] == []
    assert operator["trust"]["Statement"][0]["Condition"] == {"StringEquals": {"sts:RoleSessionName":
                                                                               "${aws:username}"}}
    operator_policy = _statements(operator["policies"][f"{names.operator_role}-policy"])
    assert operator_policy["AskTheServiceToPublishAndRedrive"]["Resource"] == queue["QueueArn"]

    for parameter in state["parameters"].values():
        assert parameter is not None and parameter["Type"] == "SecureString"
    assert state["user_pool"] is not None

    user = state["secrets_user"]
    assert user is not None and user["attached"] == []
    assert len(user["keys"]) == 1
    [policy] = user["policies"].values()
    statements = _statements(policy)
    parameter_arn = ACCOUNT.parameter_arn(names.nessie_db_password_parameter)
    assert statements["ReadNessieDatabasePassword"]["Action"] == "ssm:GetParameter"
    assert statements["ReadNessieDatabasePassword"]["Resource"] == parameter_arn
    decrypt = statements["DecryptNessieDatabasePasswordViaSsm"]
    assert decrypt["Action"] == "kms:Decrypt"
    assert decrypt["Condition"]["StringEquals"] == {"kms:ViaService": f"ssm.{ACCOUNT.region}.amazonaws.com",
                                                    "kms:EncryptionContext:PARAMETER_ARN": parameter_arn}
    assert len(statements) == 2


def assert_deployment(names: ResourceNames, deployment: dict[str, Any], key_id: str) -> None:
    """The deployment names the password's parameter and the reader's key, and holds no password."""
    container = deployment["containers"]["nessie"]
    env = container["environment"]
    assert container["image"] == NESSIE_IMAGE
    assert "QUARKUS_DATASOURCE_POSTGRESQL_PASSWORD" not in env
    assert DB_PASSWORD not in json.dumps(deployment)
    assert env["QUARKUS_DATASOURCE_POSTGRESQL_JDBC_URL"].endswith(f"5432/nessie{JDBC_TLS}")
    assert env["WAP_DB_PASSWORD_PARAMETER"] == names.nessie_db_password_parameter
    assert env["AWS_REGION"] == ACCOUNT.region
    assert env["WAP_SECRETS_ACCESS_KEY_ID"] == key_id
    assert env["WAP_SECRETS_SECRET_ACCESS_KEY"]

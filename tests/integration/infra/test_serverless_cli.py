"""serverless.yml validated by the real Serverless Framework v3 CLI, offline (dummy credentials): `print`, `package`
and the strict validation. The CLI is installed with `npm ci` into ./node_modules (git-ignored; `make deploy-tools`
does the same) the first time; scratch configurations are written to a temporary project, never the repository."""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
from infra.provision import documents

from tests.unit.project.test_deploy_files import DIGEST_URI, IMAGE_URI, ROOT, SERVERLESS_YML, _collect, fake_context


@pytest.fixture(scope="module")
def scratch(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A temporary project with what serverless.yml reads (its `${file(...)}`s), for modified configurations."""
    project = tmp_path_factory.mktemp("serverless-project")
    (project / "infra").mkdir()
    shutil.copy(ROOT / "infra" / "ingest-queue.yml", project / "infra" / "ingest-queue.yml")
    return project


# --- the real Serverless Framework v3 CLI, offline ----------------------------------------------------

@pytest.fixture(scope="module")
def serverless_cli() -> Path:
    """The CLI, installed once: the workers that run this module and test_template_rules.py at the same time take
    turns (`npm ci` empties node_modules first, so two at once failed each other with ENOTEMPTY)."""
    cli = ROOT / "node_modules" / ".bin" / "serverless"
    lock = ROOT / ".cache" / "npm-ci.lock"
    lock.parent.mkdir(parents=True, exist_ok=True)
    with lock.open("w") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        if not cli.exists():
            npm = shutil.which("npm")
            if npm is None:
                pytest.skip("npm is not installed: the Serverless Framework CLI cannot be installed (needs Node.js)")
            subprocess.run([npm, "ci", "--no-audit", "--no-fund"], cwd=ROOT, check=True, timeout=600,
                           capture_output=True)
    return cli


TOKEN_ENDPOINT = "https://idp.example.com/oauth2/token"


def run_serverless(
    cli: Path, home: Path, *args: str, extra: dict[str, str] | None = None, cwd: Path = ROOT
) -> subprocess.CompletedProcess[str]:
    env = {
        "PATH": os.environ.get("PATH", ""), "HOME": str(home), "AWS_ACCESS_KEY_ID": "dummy",
        "AWS_SECRET_ACCESS_KEY": "dummy", "AWS_REGION": "us-east-1", "SLS_TELEMETRY_DISABLED": "1",
        "SLS_NOTIFICATIONS_MODE": "off", "SOURCE_BUCKET": "src-bucket", "LAKE_BUCKET": "lake-bucket",
        "NESSIE_ENDPOINT": "https://nessie.example.com", "WAP_NESSIE_CLIENT_ID": "client-id-1",
        "WAP_EMR_APPLICATION_ID": "00fexample",
        # set: its default needs ${aws:accountId}, i.e. an STS call (see the test of the default below)
        "WAP_NESSIE_TOKEN_ENDPOINT": TOKEN_ENDPOINT,
    }
    env = {name: value for name, value in (env | (extra or {})).items() if value}  # "": unset it
    return subprocess.run([str(cli), *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=180,
                          check=False)


def test_serverless_print_succeeds(serverless_cli: Path, tmp_path: Path) -> None:
    result = run_serverless(serverless_cli, tmp_path, "print", "--format", "json", f"--param=imageUri={IMAGE_URI}:v1")

    assert result.returncode == 0, result.stdout + result.stderr
    printed = json.loads(result.stdout)
    assert printed["functions"]["ingest"]["image"]["uri"] == f"{IMAGE_URI}:v1"
    env = printed["provider"]["environment"]
    assert env["LAKE_BUCKET"] == "lake-bucket"
    assert (env["WAP_NESSIE_TOKEN_ENDPOINT"], env["WAP_NESSIE_CLIENT_ID"], env["WAP_NESSIE_SCOPE"]) == (
        TOKEN_ENDPOINT, "client-id-1", "nessie/service"
    )
    assert env["WAP_NESSIE_CLIENT_SECRET_PARAMETER"] == "/wap/nessie-client-secret"


def test_the_token_endpoint_defaults_to_the_cognito_domain_setup_aws_creates(
    serverless_cli: Path, tmp_path: Path, scratch: Path
) -> None:
    """The default uses ${aws:accountId} (STS, not reachable offline): checked with the account id from the env."""
    from infra.provision.auth import token_endpoint

    text = SERVERLESS_YML.read_text()
    assert "${aws:accountId}" in text
    (scratch / "serverless.yml").write_text(text.replace("${aws:accountId}", "${env:TEST_ACCOUNT_ID}"))
    result = run_serverless(serverless_cli, tmp_path, "print", "--format", "json", f"--param=imageUri={IMAGE_URI}:v1",
                            "--param=prefix=acme", "--region=eu-west-1", cwd=scratch,
                            extra={"TEST_ACCOUNT_ID": "123456789012", "WAP_NESSIE_TOKEN_ENDPOINT": ""})

    assert result.returncode == 0, result.stdout + result.stderr
    env = json.loads(result.stdout)["provider"]["environment"]
    names = fake_context("acme").names
    assert env["WAP_NESSIE_TOKEN_ENDPOINT"] == token_endpoint(names.user_pool_domain("123456789012"), "eu-west-1")
    assert env["WAP_NESSIE_CLIENT_SECRET_PARAMETER"] == names.nessie_client_secret_parameter


def test_serverless_package_compiles_the_function_and_its_queue_trigger(serverless_cli: Path, tmp_path: Path) -> None:
    out = tmp_path / "package"
    result = run_serverless(
        serverless_cli, tmp_path, "package", "--package", str(out), f"--param=imageUri={DIGEST_URI}"
    )

    assert result.returncode == 0, result.stdout + result.stderr
    template = json.loads((out / "cloudformation-template-update-stack.json").read_text())
    resources = template["Resources"]
    functions = {r["Properties"]["FunctionName"]: r["Properties"] for r in resources.values()
                 if r["Type"] == "AWS::Lambda::Function"}
    assert set(functions) == {"wap-ingest", "wap-slack-actions"}
    function, slack = functions["wap-ingest"], functions["wap-slack-actions"]
    [mapping] = [r["Properties"] for r in resources.values() if r["Type"] == "AWS::Lambda::EventSourceMapping"]
    assert function["PackageType"] == "Image" and function["Code"]["ImageUri"] == DIGEST_URI
    # the interactivity endpoint: the same image, its own handler, behind the HTTP API route Slack posts to
    assert slack["Code"]["ImageUri"] == DIGEST_URI
    assert slack["ImageConfig"]["Command"] == ["wap_ingest.entrypoints.slack_interactivity.handler"]
    [route] = [r["Properties"] for r in resources.values() if r["Type"] == "AWS::ApiGatewayV2::Route"]
    assert route["RouteKey"] == "POST /slack/actions" and route.get("AuthorizationType", "NONE") == "NONE"
    [permission] = [r["Properties"] for r in resources.values() if r["Type"] == "AWS::Lambda::Permission"
                    and "execute-api" in json.dumps(r["Properties"].get("SourceArn"))]
    assert "SlackLambdaFunction" in json.dumps(permission["FunctionName"])  # only the API invokes the endpoint
    assert slack["Environment"]["Variables"]["WAP_SLACK_SIGNING_SECRET_PARAMETER"] == "/wap/slack-signing-secret"
    assert "WAP_SLACK_SIGNING_SECRET" not in slack["Environment"]["Variables"]  # the secret itself: never
    assert (function["MemorySize"], function["Timeout"], function["EphemeralStorage"]["Size"]) == (4096, 900, 4096)
    assert mapping["FunctionResponseTypes"] == ["ReportBatchItemFailures"]
    assert mapping["BatchSize"] == 100 and mapping["MaximumBatchingWindowInSeconds"] == 1
    receives = documents.load("ingest-queue.yml")["max_receive_count"]
    assert str(function["Environment"]["Variables"]["WAP_MAX_RECEIVES"]) == str(receives)
    for ref in _collect(template, "Ref"):
        assert ref.startswith("AWS::") or ref in resources, ref
    for target in _collect(template, "Fn::GetAtt"):
        assert target[0] in resources, target
    assert not any(r["Type"] == "AWS::IAM::Role" for r in resources.values())  # the role is setup_aws.py's


def test_serverless_print_rejects_an_invalid_property(serverless_cli: Path, tmp_path: Path, scratch: Path) -> None:
    """configValidationMode: error is in force: a misspelt property stops the CLI."""
    (scratch / "serverless.yml").write_text(SERVERLESS_YML.read_text().replace("    memorySize:", "    memorySise:"))
    result = run_serverless(serverless_cli, tmp_path, "print", f"--param=imageUri={IMAGE_URI}:v1", cwd=scratch)

    assert result.returncode != 0
    assert "memorySise" in result.stdout + result.stderr

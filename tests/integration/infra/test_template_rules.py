"""The CloudFormation template that `serverless package` writes (the real Serverless Framework v3 CLI, offline),
linted by cfn-lint against the resource specifications, and held to these rules (docs/deploy.md, "The template"):

1. Encryption: every S3 bucket has default encryption (SSE-S3 or SSE-KMS).
2. Public access blocked: every S3 bucket blocks public ACLs and policies (all four settings of its
   PublicAccessBlockConfiguration true).
3. TLS only: every S3 bucket has a bucket policy that denies every `s3:` action on the bucket and its objects when
   `aws:SecureTransport` is false.
4. IAM: the template makes no IAM principal or policy (every `AWS::IAM::*` is setup_aws.py's, scoped from
   infra/iam/ and enforced by tests/e2e/test_iam_enforced.py); the function runs as setup_aws.py's role
   `<prefix>-lambda-exec`; every `AWS::Lambda::Permission` names the one source (SourceArn) allowed to invoke it.
5. The dead-letter queue's alarm is present: the function subscribes to the topic `<prefix>-alarms`, which the
   alarm setup_aws.py puts on the dead-letter queue's depth notifies (and setup_aws.py's plan makes both).

Each rule is also shown to catch a template that breaks it.
"""

from __future__ import annotations

import copy
import json
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from infra.provision import alarms, plan

from tests.integration.infra.test_serverless_cli import run_serverless, scratch, serverless_cli  # noqa: F401 (fixtures)
from tests.unit.project.test_deploy_files import DIGEST_URI, ROOT, SERVERLESS_YML, _collect, fake_context

Template = dict[str, Any]
TEMPLATE_FILE = "cloudformation-template-update-stack.json"
CFN_LINT = Path(sys.executable).with_name("cfn-lint")


def package(cli: Path, home: Path, out: Path, cwd: Path | None = None) -> Path:
    result = run_serverless(cli, home, "package", "--package", str(out), f"--param=imageUri={DIGEST_URI}",
                            cwd=cwd or ROOT)
    assert result.returncode == 0, result.stdout + result.stderr
    return out / TEMPLATE_FILE


@pytest.fixture(scope="module")
def template_file(serverless_cli: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:  # noqa: F811
    return package(serverless_cli, tmp_path_factory.mktemp("home"), tmp_path_factory.mktemp("package"))


@pytest.fixture
def template(template_file: Path) -> Template:
    loaded: Template = json.loads(template_file.read_text())
    return loaded


def cfn_lint(path: Path) -> list[dict[str, Any]]:
    """cfn-lint's errors and warnings (its informational rules are not run) as JSON matches."""
    result = subprocess.run([str(CFN_LINT), "--format", "json", "--", str(path)], capture_output=True, text=True,
                            timeout=300, check=False)
    assert result.returncode in (0, 2, 4, 6), result.stdout + result.stderr  # 2 errors, 4 warnings, 6 both
    matches: list[dict[str, Any]] = json.loads(result.stdout or "[]")
    return matches


def _lines(matches: list[dict[str, Any]]) -> list[str]:
    return [f"{m['Rule']['Id']} {m['Message']} ({m['Location']['Path']})" for m in matches]


# --- the rules ---------------------------------------------------------------------------------------

def _of_type(template: Template, kind: str) -> dict[str, dict[str, Any]]:
    return {name: r for name, r in template["Resources"].items() if r["Type"] == kind}


def _refers_to(value: Any, name: str) -> bool:
    return value == {"Ref": name} or name in json.dumps(value)


def encryption(template: Template) -> Iterator[str]:
    for name, bucket in _of_type(template, "AWS::S3::Bucket").items():
        rules = bucket.get("Properties", {}).get("BucketEncryption", {}).get("ServerSideEncryptionConfiguration", [])
        algorithms = {r.get("ServerSideEncryptionByDefault", {}).get("SSEAlgorithm") for r in rules}
        if not algorithms & {"AES256", "aws:kms", "aws:kms:dsse"}:
            yield f"bucket {name} has no default encryption (BucketEncryption)"


PUBLIC_ACCESS_FLAGS = ("BlockPublicAcls", "BlockPublicPolicy", "IgnorePublicAcls", "RestrictPublicBuckets")


def public_access_blocked(template: Template) -> Iterator[str]:
    for name, bucket in _of_type(template, "AWS::S3::Bucket").items():
        block = bucket.get("Properties", {}).get("PublicAccessBlockConfiguration", {})
        open_flags = [flag for flag in PUBLIC_ACCESS_FLAGS if block.get(flag) is not True]
        if open_flags:
            yield f"bucket {name} does not block public access ({', '.join(open_flags)} not true)"


def _denies_insecure_transport(statement: dict[str, Any], bucket: str) -> bool:
    actions = statement.get("Action")
    actions = [actions] if isinstance(actions, str) else actions or []
    resources = json.dumps(statement.get("Resource"))
    secure = statement.get("Condition", {}).get("Bool", {}).get("aws:SecureTransport")
    return (statement.get("Effect") == "Deny" and statement.get("Principal") in ("*", {"AWS": "*"})
            and "s3:*" in actions and str(secure).lower() == "false" and _refers_to(statement.get("Resource"), bucket)
            and '"/*"' in resources)


def tls_only(template: Template) -> Iterator[str]:
    policies = _of_type(template, "AWS::S3::BucketPolicy").values()
    for name in _of_type(template, "AWS::S3::Bucket"):
        statements = [s for p in policies if p["Properties"].get("Bucket") == {"Ref": name}
                      for s in p["Properties"].get("PolicyDocument", {}).get("Statement", [])]
        if not any(_denies_insecure_transport(s, name) for s in statements):
            yield f"bucket {name} has no policy denying s3:* on it and its objects without TLS (aws:SecureTransport)"


def iam(template: Template, prefix: str = "wap") -> Iterator[str]:
    for name, resource in template["Resources"].items():
        if resource["Type"].startswith("AWS::IAM::"):
            yield f"{name} is an {resource['Type']}: IAM belongs to setup_aws.py (infra/iam/)"
    role = fake_context(prefix).names.lambda_role
    for name, function in _of_type(template, "AWS::Lambda::Function").items():
        if not json.dumps(function["Properties"].get("Role")).endswith(f':role/{role}"}}'):
            yield f"function {name} does not run as setup_aws.py's role {role}"
    for name, permission in _of_type(template, "AWS::Lambda::Permission").items():
        if not permission["Properties"].get("SourceArn"):
            yield f"permission {name} lets {permission['Properties'].get('Principal')} invoke from any source"


def dead_letter_alarm(template: Template, prefix: str = "wap") -> Iterator[str]:
    ctx = fake_context(prefix)
    spec = alarms.alarm_spec(ctx)
    subscriptions = [s["Properties"] for s in _of_type(template, "AWS::SNS::Subscription").values()]
    topic_end = f'"{ctx.names.alarm_topic}"]]}}'
    if not any(s.get("Protocol") == "lambda" and json.dumps(s.get("TopicArn")).endswith(topic_end)
               for s in subscriptions):
        yield f"the function is not subscribed to the alarm topic {ctx.names.alarm_topic}"
    if spec["AlarmActions"] != [alarms.topic_arn(ctx)] or spec["Dimensions"] != [
            {"Name": "QueueName", "Value": ctx.names.dead_letter_queue}]:
        yield f"setup_aws.py's alarm does not watch {ctx.names.dead_letter_queue} and notify {ctx.names.alarm_topic}"
    made = {step.create for step in plan.STEPS}
    if not {alarms.ensure_alarm_topic, alarms.ensure_dead_letter_alarm} <= made:
        yield "setup_aws.py's plan does not make the alarm topic and the dead-letter queue's alarm"


RULES: dict[str, Callable[[Template], Iterator[str]]] = {
    "encryption": encryption, "public access blocked": public_access_blocked, "TLS only": tls_only, "IAM": iam,
    "dead-letter queue alarm": dead_letter_alarm,
}


# --- tests -------------------------------------------------------------------------------------------

def test_cfn_lint_finds_nothing_in_the_packaged_template(template_file: Path) -> None:
    assert _lines(cfn_lint(template_file)) == []


def test_cfn_lint_fails_a_template_against_the_specification(
    serverless_cli: Path, scratch: Path, tmp_path: Path  # noqa: F811
) -> None:
    """The lint is real: raw CloudFormation that serverless.yml may carry (`resources:`, which the Serverless CLI passes
    through unchecked) with a timeout Lambda does not allow and a retention SQS does not allow fails."""
    text = SERVERLESS_YML.read_text()
    assert text.count("\nresources:\n  extensions:\n") == 1 and text.rstrip().endswith("[W3005]")  # the last section
    stray = text.replace("\nresources:\n  extensions:\n", "\nresources:\n  extensions:\n    IngestLambdaFunction:\n"
                         "      Properties:\n        Timeout: 1200\n") + (
        "  Resources:\n    StrayQueue:\n      Type: AWS::SQS::Queue\n      Properties:\n"
        "        MessageRetentionPeriod: 30\n")
    (scratch / "serverless.yml").write_text(stray)
    found = _lines(cfn_lint(package(serverless_cli, tmp_path / "home", tmp_path / "out", cwd=scratch)))

    assert any(line.startswith("E") and "1200" in line and "Timeout" in line for line in found), found
    assert any(line.startswith("E") and "MessageRetentionPeriod" in line for line in found), found


@pytest.mark.parametrize("rule", RULES)
def test_the_template_keeps_the_rule(template: Template, rule: str) -> None:
    assert list(RULES[rule](template)) == []


def _break(template: Template, rule: str) -> Template:
    broken = copy.deepcopy(template)
    resources = broken["Resources"]
    [bucket] = [name for name, r in resources.items() if r["Type"] == "AWS::S3::Bucket"]
    if rule == "encryption":
        del resources[bucket]["Properties"]["BucketEncryption"]
    elif rule == "public access blocked":
        resources[bucket]["Properties"]["PublicAccessBlockConfiguration"]["RestrictPublicBuckets"] = False
    elif rule == "TLS only":
        [policy] = [r for r in resources.values() if r["Type"] == "AWS::S3::BucketPolicy"]
        policy["Properties"]["PolicyDocument"]["Statement"][0]["Condition"]["Bool"]["aws:SecureTransport"] = True
    elif rule == "IAM":
        resources["Extra"] = {"Type": "AWS::IAM::Role", "Properties": {}}
        [permission] = [r for r in resources.values() if r["Type"] == "AWS::Lambda::Permission"][:1]
        del permission["Properties"]["SourceArn"]
    elif rule == "dead-letter queue alarm":
        for name in [n for n, r in resources.items() if r["Type"] == "AWS::SNS::Subscription"]:
            del resources[name]
    return broken


@pytest.mark.parametrize("rule", RULES)
def test_each_rule_catches_a_template_that_breaks_it(template: Template, rule: str) -> None:
    assert list(RULES[rule](_break(template, rule)))
    assert [r for r in RULES if list(RULES[r](_break(template, rule)))] == [rule]


def test_the_rules_read_every_statement_and_reference(template: Template) -> None:
    """No rule is vacuous on this template: it holds a bucket, its policy, a permission and a subscription."""
    kinds = {r["Type"] for r in template["Resources"].values()}
    assert {"AWS::S3::Bucket", "AWS::S3::BucketPolicy", "AWS::Lambda::Permission", "AWS::SNS::Subscription"} <= kinds
    assert "*" not in [a for s in _collect(template, "Statement") for st in s for a in [st.get("Action")]
                       if st.get("Effect") == "Allow"]

"""Recovery of the large files' EMR runs never rests on one event, as deployed: `serverless package` (the real
Serverless Framework v3 CLI, offline) compiles the EMR state-change rule with delivery retries, the function's
asynchronous invocations with Lambda's retries, and the daily schedule that sweeps the runs; and the function's IAM
policy lets the sweep list the records and cancel a run stuck past its limit."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from infra.provision import documents

from tests.integration.infra.test_serverless_cli import run_serverless, serverless_cli  # noqa: F401 (fixture)
from tests.unit.project.test_deploy_files import DIGEST_URI


def test_the_state_change_event_and_the_schedule_are_retried_and_the_sweep_runs_daily(
    serverless_cli: Path, tmp_path: Path  # noqa: F811 (the fixture)
) -> None:
    out = tmp_path / "package"
    result = run_serverless(serverless_cli, tmp_path, "package", "--package", str(out),
                            f"--param=imageUri={DIGEST_URI}")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "deprecation" not in (result.stdout + result.stderr).lower()
    resources: dict[str, Any] = json.loads((out / "cloudformation-template-update-stack.json").read_text())["Resources"]
    rules = [r["Properties"] for r in resources.values() if r["Type"] == "AWS::Events::Rule"]

    [ended] = [r for r in rules if r.get("EventPattern", {}).get("source") == ["aws.emr-serverless"]]
    [target] = ended["Targets"]
    assert target["RetryPolicy"] == {"MaximumEventAgeInSeconds": 86400, "MaximumRetryAttempts": 185}
    [invoke] = [r["Properties"] for r in resources.values() if r["Type"] == "AWS::Lambda::EventInvokeConfig"
                and r["Properties"]["FunctionName"] == {"Ref": "IngestLambdaFunction"}]  # not the Slack endpoint's
    assert invoke["MaximumRetryAttempts"] == 2  # a failed asynchronous invocation (a cold start, S3 down) again
    [schedule] = [r for r in rules if "ScheduleExpression" in r]
    assert schedule["ScheduleExpression"] == "rate(1 day)"
    assert json.loads(schedule["Targets"][0]["Input"]) == {"wap_maintain": "all"}  # lambda_operations.on_schedule


def test_the_functions_policy_allows_what_the_sweep_does() -> None:
    statements = documents.load("iam/lambda-policy.json")["Statement"]

    def allowed(action: str, resource: str, prefix: str | None = None) -> bool:
        for s in statements:
            actions = [s["Action"]] if isinstance(s["Action"], str) else s["Action"]
            resources = [s["Resource"]] if isinstance(s["Resource"], str) else s["Resource"]
            prefixes = s.get("Condition", {}).get("StringLike", {}).get("s3:prefix")
            if s["Effect"] == "Allow" and action in actions and resource in resources and (
                    prefixes is None or any(p.rstrip("*") == (prefix or "")[:len(p.rstrip("*"))] for p in prefixes)):
                return True
        return False

    assert allowed("s3:ListBucket", "${LakeBucketArn}", prefix="wap-emr/")  # the sweep lists every record
    assert allowed("s3:PutObject", "${LakeBucketArn}/wap-emr/*")  # conditional writes need nothing more
    assert allowed("emr-serverless:CancelJobRun", "${EmrApplicationArn}/jobruns/*")  # a run stuck past its limit
    assert allowed("emr-serverless:GetJobRun", "${EmrApplicationArn}/jobruns/*")

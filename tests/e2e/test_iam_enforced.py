"""IAM enforced: the event path, the EMR job and the operator's commands, each with only the policy it has in AWS.

A stack of its own (`wap stack up --iam --auth`): moto checks every request once the stack is up (local/iam.py,
local/moto_iam.py). The function and its SQS worker hold infra/iam/lambda-policy.json, an EMR job run (run here as the
local runner runs it) infra/iam/emr-job-policy.json, `wap branches/show/history/discard/publish/dlq` the operator's
infra/iam/operator-policy.json, all rendered by setup_aws.py's renderer. Files go S3 -> SQS -> the function as a
producer drops them: a clean one (published), one with nulls (rejected, its branch open), a corrupt one (INVALID),
a large one (an EMR job run), and a message that is not an event (retried with the function's back-off, then
dead-lettered). moto writes each decision down; the tests then hold each policy to both sides of least privilege:
  missing: no request of the principal was denied (sqs:GetQueueUrl was, before it was granted);
  excess:  every action of every statement was used by some request, but for the few listed in NOT_EXERCISED, each
           with the reason this run cannot use it.
"""

from __future__ import annotations

import io
import json
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import boto3
import pytest
import requests

from tests import bad_inputs
from tests.conftest import AUDITS, LARGE_FILE_BYTES, parquet_bytes
from tests.waiting import wait_for
from wap_ingest.adapters.dead_letters import PEEK_SECONDS
from wap_ingest.core.publish_requests import QUEUE_VARIABLE
from wap_ingest.local import iam
from wap_ingest.local.auth import role_environment
from wap_ingest.local.config import repo_root
from wap_ingest.local.emr import spark_submit_command
from wap_ingest.local.slack_sink import read_messages
from wap_ingest.local.stack import StackConfig, StackState, free_port_block, free_ports, start_stack, stop_stack
from wap_ingest.local.state import stack_environment

pytestmark = [pytest.mark.stack, pytest.mark.spark]
ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts"

_NOT_FOUND = ("S3 answers a read of a missing key with 404 NoSuchKey only to a caller allowed s3:ListBucket, else "
              "403 AccessDenied; the code tells a file deleted before its download (INVALID) by that 404. moto "
              "answers 404 without asking")
_NOT_FOUND_LAKE = ("Iceberg's S3FileIO asks whether a file exists before it writes it (HEAD, expecting 404): S3 "
                   "answers 404 only to a caller allowed s3:ListBucket, else 403 and the write fails; moto answers "
                   "404 without asking")
_VERSION = ("the event names the object's version in AWS (a versioned bucket), and reading a version is "
            "s3:GetObjectVersion; moto's notifications carry no versionId, so the current version is read")
_UNCOMMITTED = ("Iceberg deletes the files of a write whose commit failed (Spark's abort of an append or a compaction "
                "that lost its commit); every commit here succeeds, and nothing else deletes warehouse files "
                "(snapshot trimming is metadata only)")
_SLACK = ("the Slack interactivity endpoint's and its actions' calls (same role): this run clicks no button; "
          "tests/e2e/test_slack_channel.py and tests/integration/test_slack_interactivity.py click them on a stack "
          "without --iam")
_MULTIPART = "S3FileIO aborts a multipart upload (files above its part size) that it cannot complete: a failure path"
# (principal, statement Sid, action): granted, never used by this run, and why it cannot be here.
NOT_EXERCISED = {
    ("function", "WriteOwnLogs", "logs:CreateLogStream"): "written by the Lambda service for the function, not by it",
    ("function", "WriteOwnLogs", "logs:PutLogEvents"): "written by the Lambda service for the function, not by it",
    ("function", "DecryptSecretParametersViaSsm", "kms:Decrypt"): "SSM decrypts SecureStrings with KMS on the "
    "caller's behalf; moto's SSM calls no KMS",
    ("emr-job", "DecryptSecretParametersViaSsm", "kms:Decrypt"): "SSM decrypts SecureStrings with KMS on the "
    "caller's behalf; moto's SSM calls no KMS",
    ("operator", "DecryptOwnCatalogClientSecretViaSsm", "kms:Decrypt"): "SSM decrypts SecureStrings with KMS on the "
    "caller's behalf; moto's SSM calls no KMS",
    ("function", "PassEmrJobRoleOnly", "iam:PassRole"): "checked by EMR Serverless at StartJobRun; moto checks no "
    "PassRole",
    ("function", "ListSourceBucket", "s3:ListBucket"): _NOT_FOUND,
    ("emr-job", "ListSourceBucket", "s3:ListBucket"): _NOT_FOUND,
    ("function", "ReadSourceObjects", "s3:GetObjectVersion"): _VERSION,
    ("emr-job", "ReadSourceObjects", "s3:GetObjectVersion"): _VERSION,
    ("function", "ReadWriteLakeWarehouse", "s3:AbortMultipartUpload"): _MULTIPART,
    ("emr-job", "ReadWriteLakeWarehouse", "s3:AbortMultipartUpload"): _MULTIPART,
    ("function", "ListLakeWarehouse", "s3:ListBucket"): _NOT_FOUND_LAKE,
    ("emr-job", "ListLakeWarehouseAndEmrPrefixes", "s3:ListBucket"): _NOT_FOUND_LAKE,
    ("function", "LargeFileRecordsAndAuditReports", "s3:DeleteObject"): "adapters/emr.py `_release`: a claim is "
    "dropped when the first submission of a large file fails, so the retried event submits it again: a failure path",
    ("function", "ReadWriteLakeWarehouse", "s3:DeleteObject"): _UNCOMMITTED,
    ("emr-job", "ReadWriteLakeWarehouse", "s3:DeleteObject"): _UNCOMMITTED,
    ("function", "AnswerPublishRequests", "s3:GetObject"): "a publish request's claim is read back only when it was "
    "written first by another delivery of the same request (SQS delivers at least once; "
    "tests/integration/test_publish_signatures.py runs that path); each request here is delivered once",
    ("emr-job", "StagingCopiesRecordsAndReports", "s3:DeleteObject"): "the job deletes the copy of a source the "
    "function staged under wap-staging/ (adapters/s3.py `copy_to`); this run's large file was read in place",
    ("emr-job", "WriteJobLogs", "s3:PutObject"): "EMR Serverless writes the driver's logs to the run's logUri as the "
    "job role; the local run keeps them on disk",
    ("function", "HandSlackActionsAndDeadLettersToIngestQueue", "sqs:SendMessage"): _SLACK,
    ("function", "ShowAndRedriveDeadLetters", "sqs:GetQueueUrl"): _SLACK,
    ("function", "ShowAndRedriveDeadLetters", "sqs:ReceiveMessage"): _SLACK,
    ("function", "ShowAndRedriveDeadLetters", "sqs:DeleteMessage"): _SLACK,
    ("function", "RememberSlackRequests", "s3:PutObject"): _SLACK,
    ("function", "CancelStuckLargeFileJobs", "emr-serverless:CancelJobRun"): "the sweep cancels only a run hung past "
    "its limit (tests/integration/test_emr_sweep.py runs that path); no run hangs here",
}




@dataclass
class Run:
    config: StackConfig
    state: StackState
    outcomes: dict[str, str]  # file -> the function's status for it
    cli: dict[str, subprocess.CompletedProcess[str]]  # ops command -> its result
    emr_job: subprocess.CompletedProcess[bytes] | None
    maintenance: Any
    dead_lettered: bool  # the message that is not an event reached the dead-letter queue, retried with back-off

    def decisions(self) -> list[dict[str, Any]]:
        return iam.read_decisions(self.config.state_dir)

    def of(self, principal: str) -> list[dict[str, Any]]:
        user = f":user/{iam.user_for(principal)}"
        return [d for d in self.decisions() if d["principal"].endswith(user)]


def _worker_statuses(config: StackConfig) -> list[str]:
    log = config.state_dir / "logs" / "worker.log"
    lines = [json.loads(x) for x in log.read_text().splitlines() if x.startswith("{")]
    return [o["object"].rsplit("/", 1)[-1] for line in lines for o in line.get("objects") or []]


def _worker_outcomes(config: StackConfig) -> dict[str, str]:
    log = config.state_dir / "logs" / "worker.log"
    lines = [json.loads(x) for x in log.read_text().splitlines() if x.startswith("{")]
    return {o["object"].rsplit("/", 1)[-1]: o["status"] for line in lines for o in line.get("objects") or []}


def _csv(rows: int) -> bytes:
    out = io.StringIO()
    out.write("my_col_0,my_col_1,my_col_2\n")
    for i in range(rows):
        out.write(f"{i},value-{i:012d}-{'x' * 20},{i / 2}\n")
    return out.getvalue().encode()


def _principal_env(state: StackState, principal: str, work: Path) -> dict[str, str]:
    env = os.environ | stack_environment(state) | iam.principal_environment(state.state_dir, principal)
    env |= {"WAP_AUDITS_FILE": str(AUDITS), "WAP_WORK_DIR": str(work)}
    if principal == iam.OPERATOR:
        env |= role_environment(state.state_dir, "operator") | {QUEUE_VARIABLE: str(state.queue_url)}
    return env


def _wap(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "wap_ingest.entrypoints.cli", *args], env=env, capture_output=True,
                          text=True, timeout=600, check=False)


def _client(state: StackState, service: str, principal: str) -> Any:
    keys = iam.principal_environment(state.state_dir, principal)
    return boto3.client(service, endpoint_url=state.moto_url, region_name=state.region,
                        aws_access_key_id=keys["AWS_ACCESS_KEY_ID"],
                        aws_secret_access_key=keys["AWS_SECRET_ACCESS_KEY"])


def _run_emr_job(state: StackState, table: str, work: Path) -> subprocess.CompletedProcess[bytes]:
    """The job run the function submitted for the large file, run as the local runner runs it, as the EMR job role
    (which EMR Serverless also uses to fetch the entry point and the package)."""
    emr, s3 = _client(state, "emr-serverless", iam.ADMIN), _client(state, "s3", iam.EMR_JOB)

    def runs() -> list[dict[str, Any]]:
        try:
            return list(emr.list_job_runs(applicationId=state.emr_application_id).get("jobRuns", []))
        except emr.exceptions.ResourceNotFoundException:  # moto: no job run yet
            return []

    [listed] = wait_for(runs, f"the job run of {table}")
    job = emr.get_job_run(applicationId=state.emr_application_id, jobRunId=listed["id"])["jobRun"]
    job_dir = work / job["jobRunId"]
    (job_dir / "spark").mkdir(parents=True, exist_ok=True)
    command, driver_env = spark_submit_command(job, s3, job_dir, repo_root() / ".cache" / "jars" / "spark")
    env = os.environ | stack_environment(state) | iam.principal_environment(state.state_dir, iam.EMR_JOB) | driver_env
    return subprocess.run(command, env=env, capture_output=True, timeout=900, check=False)


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Run]:
    moto, nessie, management, slack = free_ports(4)
    function = free_port_block(2, avoid=(moto, nessie, management, slack))
    config = StackConfig(state_dir=tmp_path_factory.mktemp("iam-stack"), moto_port=moto, nessie_port=nessie,
                         nessie_management_port=management, slack_port=slack, lambda_port=function,
                         runtime_port=function + 1, auth=True, iam=True)
    work = tmp_path_factory.mktemp("iam-work")
    patch = pytest.MonkeyPatch()
    for name, value in (("WAP_AUDITS_FILE", str(AUDITS)), ("WAP_LARGE_FILE_BYTES", str(LARGE_FILE_BYTES)),
                        ("WAP_RETRY_BASE_SECONDS", "1"), ("WAP_RETRY_MAX_SECONDS", "4")):
        patch.setenv(name, value)
    patch.delenv("WAP_SOURCE_BUCKETS", raising=False)
    try:
        state = start_stack(config)
        try:
            yield _exercise(config, state, work)
        finally:
            stop_stack(config)
            ARTIFACTS.mkdir(exist_ok=True)  # the decisions, to read after a failure
            shutil.copy(iam.decisions_file(config.state_dir), ARTIFACTS / "iam-decisions.jsonl")
    finally:
        patch.undo()


def _exercise(config: StackConfig, state: StackState, work: Path) -> Run:
    s3, sqs = _client(state, "s3", iam.ADMIN), _client(state, "sqs", iam.ADMIN)  # a producer; the test's eyes
    files = {"iam_clean/clean.parquet": parquet_bytes(20), "iam_nulls/nulls.parquet": parquet_bytes(10, nulls=2),
             "iam_corrupt/corrupt.parquet": bad_inputs.parquet_corrupt_page(), "iam_large/large.csv": _csv(60_000)}
    assert len(files["iam_large/large.csv"]) > LARGE_FILE_BYTES
    for key, body in files.items():
        s3.put_object(Bucket=state.source_bucket, Key=key, Body=body)
        wait_for(lambda key=key: key.rsplit("/", 1)[-1] in _worker_outcomes(config), f"the outcome of {key}")
    # S3 delivers at least once: the large file's event again finds its job run's record and asks EMR for its state
    event = {"Records": [{"eventSource": "aws:s3", "eventName": "ObjectCreated:Put", "s3": {
        "bucket": {"name": state.source_bucket}, "object": {"key": "iam_large/large.csv",
                                                            "size": len(files["iam_large/large.csv"])}}}]}
    sqs.send_message(QueueUrl=state.queue_url, MessageBody=json.dumps(event))
    wait_for(lambda: _worker_statuses(config).count("large.csv") >= 2, "the second delivery of the large file")
    poison = sqs.send_message(QueueUrl=state.queue_url, MessageBody="not an event")["MessageId"]

    def dead_lettered() -> bool:
        got = sqs.receive_message(QueueUrl=state.dead_letter_url, MaxNumberOfMessages=10, WaitTimeSeconds=1,
                                  VisibilityTimeout=0).get("Messages", [])
        return any(m["MessageId"] == poison for m in got)

    try:  # without its back-off (sqs:GetQueueUrl denied) it waits the whole visibility timeout: asserted below
        dead = bool(wait_for(dead_lettered, "the message that is not an event in the dead-letter queue"))
    except AssertionError:
        dead = False
    emr_job = _run_emr_job(state, "iam_large", work)
    operator = _principal_env(state, iam.OPERATOR, work)
    cli: dict[str, subprocess.CompletedProcess[str]] = {}
    cli["branches"] = _wap(operator, "branches", "--json")
    [branch] = [b["branch"] for b in json.loads(cli["branches"].stdout)["branches"] if "iam_nulls" in b["branch"]]
    cli["show"] = _wap(operator, "show", branch)
    cli["history"] = _wap(operator, "history", "iam_clean")
    cli["publish"] = _wap(operator, "publish", branch, "--no-reaudit", "--reason", "checked by hand")
    cli["dlq list"] = _wap(operator, "dlq", "list")
    time.sleep(PEEK_SECONDS + 2)  # a listed message stays hidden this long
    cli["dlq redrive"] = _wap(operator, "dlq", "redrive")
    s3.put_object(Bucket=state.source_bucket, Key="iam_nulls/more_nulls.parquet", Body=parquet_bytes(5, nulls=1))
    wait_for(lambda: "more_nulls.parquet" in _worker_outcomes(config), "the outcome of the second file with nulls")
    cli["branches again"] = _wap(operator, "branches", "--json")
    [second] = [b["branch"] for b in json.loads(cli["branches again"].stdout)["branches"] if "iam_nulls" in b["branch"]]
    cli["discard"] = _wap(operator, "discard", second, "--reason", "the producer resends it")
    # publishing the discarded branch: the function finds the discard in the decision log and refuses (exit 1)
    cli["publish discarded"] = _wap(operator, "publish", second, "--no-reaudit", "--reason", "on second thought")
    # the daily schedule's event (serverless.yml), straight to the function as EventBridge would send it
    maintenance = requests.post(str(state.invoke_url), json={"wap_maintain": "all"}, timeout=900)
    return Run(config, state, _worker_outcomes(config), cli, emr_job, maintenance.json(), dead)


def _statements(principal: str, run: Run) -> list[dict[str, Any]]:
    values = iam.policy_values(run.config, {"emr_application_id": run.state.emr_application_id})
    statements: list[dict[str, Any]] = iam.rendered_policy(principal, values)["Statement"]
    return statements


def _listed(value: str | list[str]) -> list[str]:
    return [value] if isinstance(value, str) else list(value)


def _matches(pattern: str, value: str) -> bool:
    """As IAM (and moto) match an Action or Resource: `*` any run of characters, `?` one."""
    return re.fullmatch(re.escape(pattern).replace(r"\*", ".*").replace(r"\?", "."), value) is not None


def _conditions_hold(statement: dict[str, Any], decision: dict[str, Any]) -> bool:
    """`StringLike` on `s3:prefix`, which moto does not evaluate: the decision log carries the request's prefix."""
    patterns = statement.get("Condition", {}).get("StringLike", {}).get("s3:prefix")
    if patterns is None:
        return True
    prefix = decision.get("context", {}).get("s3:prefix")
    return prefix is not None and any(_matches(p, prefix) for p in _listed(patterns))


def test_the_event_path_works_under_the_function_policy_alone(run: Run) -> None:
    assert run.outcomes["clean.parquet"] == "published"
    assert run.outcomes["nulls.parquet"] == "rejected"
    assert run.outcomes["corrupt.parquet"] == "invalid"
    assert run.outcomes["large.csv"] == "submitted"
    assert run.dead_lettered, "the message that is not an event did not reach the dead-letter queue in time"
    alerts = read_messages(run.config.alerts_file)
    assert any("dead-letter queue" in a["text"] for a in alerts)
    assert any("corrupt.parquet" in a["text"] for a in alerts)


def test_the_scheduled_maintenance_works_under_the_function_policy_alone(run: Run) -> None:
    assert "errorType" not in run.maintenance, run.maintenance


def test_the_emr_job_works_under_the_job_role_policy_alone(run: Run) -> None:
    assert run.emr_job is not None
    output = run.emr_job.stdout.decode(errors="replace")
    assert run.emr_job.returncode == 0, output[-3000:]
    assert '"status": "published"' in output, output[-3000:]


@pytest.mark.parametrize("command", ["branches", "show", "history", "publish", "dlq list", "dlq redrive", "discard"])
def test_the_operator_commands_work_under_the_operator_policy_alone(run: Run, command: str) -> None:
    result = run.cli[command]
    assert result.returncode == 0, result.stdout + result.stderr


def test_a_discarded_branch_is_refused_from_the_decision_log(run: Run) -> None:
    result = run.cli["publish discarded"]
    assert result.returncode == 1 and "was discarded by" in result.stdout + result.stderr, result.stdout + result.stderr


@pytest.mark.parametrize("principal", [iam.FUNCTION, iam.EMR_JOB, iam.OPERATOR])
def test_no_request_was_denied(run: Run, principal: str) -> None:
    """A missing permission: the code asked for something its policy does not grant."""
    denied = sorted({(d["action"], d["resource"]) for d in run.of(principal) if not d["allowed"]})
    assert denied == [], f"{principal} was denied: {denied}"
    lists = [d for d in run.of(principal) if d["action"] == "s3:ListBucket"]
    statements = [s for s in _statements(principal, run) if "s3:ListBucket" in _listed(s["Action"])]
    outside = sorted({(d["resource"], d["context"]["s3:prefix"]) for d in lists
                      if not any(any(_matches(r, d["resource"]) for r in _listed(s["Resource"]))
                                 and _conditions_hold(s, d) for s in statements)})
    assert outside == [], f"{principal} listed prefixes its policy's conditions do not allow: {outside}"
    assert run.of(principal), f"no request of {principal} was seen"


@pytest.mark.parametrize("principal", [iam.FUNCTION, iam.EMR_JOB, iam.OPERATOR])
def test_every_granted_action_was_used(run: Run, principal: str) -> None:
    """An excess permission: a statement's action that no request used (NOT_EXERCISED says why for the few that
    cannot be used here)."""
    allowed = [d for d in run.of(principal) if d["allowed"]]
    unused = []
    for statement in _statements(principal, run):
        resources = _listed(statement["Resource"])
        for action in _listed(statement["Action"]):
            used = any(_matches(action, d["action"]) and any(_matches(r, d["resource"]) for r in resources)
                       and _conditions_hold(statement, d) for d in allowed)
            key = (principal, statement["Sid"], action)
            if not used and key not in NOT_EXERCISED:
                unused.append(f"{statement['Sid']}: {action} on {resources}")
            if used and key in NOT_EXERCISED:
                unused.append(f"{statement['Sid']}: {action} is used: drop it from NOT_EXERCISED")
    assert unused == [], f"{principal}: granted but not used: {unused}"

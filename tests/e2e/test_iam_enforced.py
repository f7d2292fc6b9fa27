"""IAM enforced: the event path, the EMR job and the operator's commands, each with only the policy it has in AWS.

A stack of its own (`wap stack up --iam --auth`): moto checks every request once the stack is up (wap_stack/iam.py,
wap_stack/moto_iam.py). The function and its SQS worker hold infra/iam/lambda-policy.json, an EMR job run (run here as
the local runner runs it) infra/iam/emr-job-policy.json, `wap
branches/show/history/discard/publish/dlq/tables/prune/audit` the operator's infra/iam/operator-policy.json, all
rendered by setup_aws.py's renderer. Files go S3 -> SQS -> the function as a producer drops them: a clean one
(published), ones with nulls (rejected, their branches open), a corrupt one (INVALID), a large one (an EMR job run),
and a message that is not an event (retried with the function's back-off, then dead-lettered). The Slack interactivity
endpoint (served by the stack's Slack sink, with the function's keys: one execution role for both functions,
serverless.yml) gets signed clicks as Slack posts them: a rejected file's "Show rows" and "Discard" (its form sent with
a reason), and the dead-letter alarm's "Show" and "Redrive"; the function does the work they hand it through the ingest
queue. moto writes each decision down; the tests then hold each policy to both sides of least privilege:
  missing: no request of the principal was denied (sqs:GetQueueUrl was, before it was granted);
  excess:  every action of every statement was used on each of the statement's resources by some request, but for
           the few listed in NOT_EXERCISED (iam_not_exercised.py), each with the reason this run cannot use it.
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
from infra.provision import documents

from tests import bad_inputs
from tests.conftest import AUDITS, LARGE_FILE_BYTES, parquet_bytes
from tests.e2e.iam_not_exercised import NOT_EXERCISED
from tests.slack_channel import ALICE, Channel
from tests.waiting import wait_for
from wap_ingest.adapters.aws.dead_letters import PEEK_SECONDS
from wap_ingest.bootstrap.slack import SHOW_HIDES_SECONDS
from wap_ingest.core.publish_requests import QUEUE_VARIABLE
from wap_stack import iam
from wap_stack.auth import role_environment
from wap_stack.components import DEAD_LETTER_QUEUE
from wap_stack.config import repo_root
from wap_stack.emr import spark_submit_command
from wap_stack.runtime import invoke
from wap_stack.slack_sink import read_messages
from wap_stack.stack import StackConfig, StackState, free_port_block, free_ports, start_stack, stop_stack
from wap_stack.state import stack_environment

pytestmark = [pytest.mark.stack, pytest.mark.spark]
ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts"

@dataclass
class Run:
    config: StackConfig
    state: StackState
    outcomes: dict[str, str]  # file -> the function's status for it
    cli: dict[str, subprocess.CompletedProcess[str]]  # ops command -> its result
    emr_job: subprocess.CompletedProcess[bytes] | None
    maintenance: Any
    dead_lettered: bool  # the message that is not an event reached the dead-letter queue, retried with back-off
    slack: dict[str, Any]  # what the Slack channel showed after each click (see _act_in_slack)

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
             "iam_corrupt/corrupt.parquet": bad_inputs.parquet_corrupt_page(), "iam_large/large.csv": _csv(60_000),
             "iam_slack/slack_nulls.parquet": parquet_bytes(8, nulls=1),
             "iam_prune/prune_nulls.parquet": parquet_bytes(4, nulls=1),
             # no table prefix: INVALID for the function; the operator's `wap audit --table` dry-runs it
             "to-audit.parquet": parquet_bytes(6)}
    assert len(files["iam_large/large.csv"]) > LARGE_FILE_BYTES
    for key, body in files.items():
        s3.put_object(Bucket=state.source_bucket, Key=key, Body=body)
        wait_for(lambda key=key: key.rsplit("/", 1)[-1] in _worker_outcomes(config), f"the outcome of {key}")
    prunable_at = time.monotonic() + 61  # iam_prune's branch is older than `wap prune --older-than 1m` from then
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
    cli["history of a discard"] = _wap(operator, "history", "iam_nulls")  # the decision log's record, read back
    cli["tables"] = _wap(operator, "tables", "--json")
    time.sleep(max(0.0, prunable_at - time.monotonic()))
    cli["prune"] = _wap(operator, "prune", "--older-than", "1m", "--table", "iam_prune", "--json")
    cli["audit"] = _wap(operator, "audit", f"s3://{state.source_bucket}/to-audit.parquet", "--table", "iam_audit",
                        "--json")
    slack = _act_in_slack(state, sqs, "not an event")
    # the daily schedule's event (serverless.yml), straight to the function as EventBridge would send it
    maintenance = _invoke(state, {"wap_maintain": "all"})
    return Run(config, state, _worker_outcomes(config), cli, emr_job, maintenance, dead, slack)


def _act_in_slack(state: StackState, sqs: Any, poison: str) -> dict[str, Any]:
    """Clicks in the stack's Slack channel, which the sink signs and posts to the interactivity endpoint as Slack does
    (the endpoint: the signing secret from SSM, the replay record in S3, the ingest queue; the function, handed the
    work through the queue: the same checks, then the use case): a rejected file's "Show rows" and "Discard" (its
    form sent with a reason), then the dead-letter queue's alarm (sent to the function as SNS delivers it) and its
    "Show" and "Redrive"."""
    channel, seen = Channel.of(state), dict[str, Any]()
    alert = wait_for(lambda: channel.message_about("wap.iam_slack"), "the alert of the rejected file in Slack")
    ts = str(alert["ts"])
    seen["show rows"] = channel.click(ALICE, ts, "wap.show_rows")
    seen["rows"] = wait_for(lambda: [e for e in channel.ephemerals(ALICE) if "not_null(my_col_1)" in e],
                            "the rejected rows, privately to alice")[-1]
    seen["discard"] = channel.click(ALICE, ts, "wap.discard")
    wait_for(lambda: channel.view_of(ALICE), "alice's form")
    seen["discard form"] = channel.submit(ALICE, "the producer sends a fixed file")
    seen["discarded"] = wait_for(lambda: (m := channel.message_about("wap.iam_slack")) and m.get("edited") and m,
                                 "the alert updated")["text"]

    def dead_lettered() -> bool:  # the operator redrove it (a new message, the same body): it failed again
        got = sqs.receive_message(QueueUrl=state.dead_letter_url, MaxNumberOfMessages=10, WaitTimeSeconds=1,
                                  VisibilityTimeout=0).get("Messages", [])
        return any(m["Body"] == poison for m in got)

    wait_for(dead_lettered, "the message that is not an event in the dead-letter queue again")
    alarm = {"AlarmName": "wap-events-dlq-not-empty", "NewStateValue": "ALARM", "NewStateReason": "1 message",
             "StateChangeTime": "2026-11-25T00:00:00Z",
             "Trigger": {"Dimensions": [{"name": "QueueName", "value": DEAD_LETTER_QUEUE}]}}
    event = {"Records": [{"EventSource": "aws:sns", "Sns": {"Message": json.dumps(alarm)}}]}
    seen["alarm"] = _invoke(state, event)
    posted = wait_for(lambda: channel.message_about("wap-events-dlq-not-empty"), "the alarm's alert in Slack")
    ts = str(posted["ts"])
    seen["show"] = channel.click(ALICE, ts, "wap.show_dead_letters")
    seen["listed"] = wait_for(lambda: [e for e in channel.ephemerals(ALICE) if f"in {DEAD_LETTER_QUEUE}" in e],
                              "the dead letters, privately to alice")[-1]
    time.sleep(SHOW_HIDES_SECONDS + 1)  # the listing hid them this long
    seen["redrive"] = channel.click(ALICE, ts, "wap.redrive")
    seen["redriven"] = wait_for(lambda: (m := channel.message_about("wap-events-dlq-not-empty")) and m.get("edited")
                                and m, "the alarm's alert updated")["text"]
    seen["dead-lettered again"] = wait_for(dead_lettered, "the redriven message failing its attempts again")
    return seen


def _invoke(state: StackState, event: dict[str, Any]) -> dict[str, Any]:
    """Straight to the function, as SNS or EventBridge sends it: after the batch the worker may be running."""
    first = state.environments[0]
    return invoke(first.invoke_url, event, 900, (state.state_dir, first.lambda_name))


def _statements(principal: str, run: Run) -> list[dict[str, Any]]:
    values = iam.policy_values(run.config, {"emr_application_id": run.state.emr_application_id})
    statements: list[dict[str, Any]] = iam.rendered_policy(principal, values)["Statement"]
    return statements


def _written(principal: str) -> dict[str, list[str]]:
    """Each statement's resources as the policy file writes them (placeholders unfilled), by Sid."""
    return {s["Sid"]: _listed(s["Resource"]) for s in documents.load(iam.POLICY_FILES[principal])["Statement"]}


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


@pytest.mark.parametrize("command", ["branches", "show", "history", "publish", "dlq list", "dlq redrive", "discard",
                                     "history of a discard", "tables", "prune", "audit"])
def test_the_operator_commands_work_under_the_operator_policy_alone(run: Run, command: str) -> None:
    result = run.cli[command]
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_operators_tables_prune_and_dry_run_did_their_work(run: Run) -> None:
    tables = {t["table"]: t for t in json.loads(run.cli["tables"].stdout)["tables"]}
    assert tables["wap.iam_clean"]["rows_on_main"] == 20 and tables["wap.iam_clean"]["error"] is None, tables
    [pruned] = json.loads(run.cli["prune"].stdout)["discarded"]
    assert "iam_prune" in pruned["branch"], pruned
    audit = json.loads(run.cli["audit"].stdout)
    assert (audit["status"], audit["table"], audit["rows"]) == ("passed", "wap.iam_audit", 6), audit
    assert "iam_audit" not in run.cli["tables"].stdout  # a dry run leaves nothing behind (it ran after the listing)


def test_the_slack_endpoint_and_its_actions_work_under_the_function_policy_alone(run: Run) -> None:
    seen = run.slack
    for click in ("show rows", "discard", "discard form", "show", "redrive"):
        assert seen[click]["status"] == 200 and not seen[click].get("errors"), (click, seen[click])
    assert "my_col_1=null" in seen["rows"], seen["rows"]
    assert "Discarded by <@U0ALICE01>: the producer sends a fixed file" in seen["discarded"], seen["discarded"]
    assert "errorType" not in seen["alarm"], seen["alarm"]
    assert f"message(s) in {DEAD_LETTER_QUEUE}" in seen["listed"], seen["listed"]
    assert "Redriven by <@U0ALICE01>:" in seen["redriven"], seen["redriven"]
    assert seen["dead-lettered again"]  # it was sent back to the ingest queue, and failed there again


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
    """An excess permission: a statement's action that no request used on one of its resources (NOT_EXERCISED says
    why for the few that cannot be used here)."""
    allowed = [d for d in run.of(principal) if d["allowed"]]
    written = _written(principal)
    unused = []
    for statement in _statements(principal, run):
        sid = statement["Sid"]
        for action in _listed(statement["Action"]):
            uses = {written_as: any(_matches(action, d["action"]) and _matches(resource, d["resource"])
                                    and _conditions_hold(statement, d) for d in allowed)
                    for written_as, resource in zip(written[sid], _listed(statement["Resource"]), strict=True)}
            if (principal, sid, action) in NOT_EXERCISED:
                if any(uses.values()):
                    unused.append(f"{sid}: {action} is used: drop it from NOT_EXERCISED")
                continue
            for written_as, used in uses.items():
                key = (principal, sid, action, written_as)
                if not used and key not in NOT_EXERCISED:
                    unused.append(f"{sid}: {action} on {written_as}")
                if used and key in NOT_EXERCISED:
                    unused.append(f"{sid}: {action} on {written_as} is used: drop it from NOT_EXERCISED")
    assert unused == [], f"{principal}: granted but not used: {unused}"


def test_every_not_exercised_entry_names_a_granted_permission() -> None:
    """An entry left behind by a policy change (a statement renamed, an action or a resource removed) exempts
    nothing: it must go."""
    granted = {(p, s["Sid"], a, *extra) for p in (iam.FUNCTION, iam.EMR_JOB, iam.OPERATOR)
               for s in documents.load(iam.POLICY_FILES[p])["Statement"] for a in _listed(s["Action"])
               for extra in [(), *((r,) for r in _listed(s["Resource"]))]}
    assert sorted(set(NOT_EXERCISED) - granted) == []

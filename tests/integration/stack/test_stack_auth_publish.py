"""Publishing through the service on `wap stack up --auth`: the operator cannot merge (tests/integration/
test_stack_auth.py), so `wap publish` asks the stack's function with a request signed with the operator role's AWS
credentials and no token; the function learns the signer from STS, re-audits and merges. A reader's request, one
changed in flight, one issued too long ago and a replay by way of the dead-letter queue are each refused with a
clear answer and change nothing.
"""

from __future__ import annotations

import secrets
from pathlib import Path
from typing import Any

import pytest

from tests.integration.stack_auth_harness import role_env, stack_with_auth, wap
from wap_ingest.bootstrap import Service, catalog_for
from wap_ingest.bootstrap.config import Settings
from wap_ingest.core import lineage
from wap_stack.stack import StackConfig, StackState

pytestmark = [pytest.mark.stack]
auth_stack = pytest.fixture(scope="module", name="auth_stack")(stack_with_auth)


def ops(*argv: str) -> tuple[int, str, str]:
    from wap_ingest.entrypoints import ops_cli

    return wap(*argv, commands=ops_cli.register)


def rejected_branch(state: StackState, env: dict[str, str], table: str) -> str:
    """Drop a file with nulls (the defaults suite refuses them) and wait for the function to leave its branch: kept
    for review (its head commit carries the merge it would be), not merely created by a run still going."""
    import time

    import boto3

    from tests.conftest import parquet_bytes

    s3 = boto3.client("s3", endpoint_url=env["AWS_ENDPOINT_URL"], region_name=env["AWS_REGION"])
    s3.put_object(Bucket=state.source_bucket, Key=f"{table}/nulls.parquet", Body=parquet_bytes(10, nulls=3))
    catalog = catalog_for(Settings.from_env(env))
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline:
        for branch in catalog.list_branches(f"wap-{table}-"):
            head = catalog.head_commit(branch.name)
            if head is not None and lineage.PENDING_MESSAGE in head.properties:
                return branch.name
        time.sleep(2)
    raise AssertionError(f"no WAP branch for {table} within 240 s; logs: {state.state_dir / 'logs'}")


def fresh_operations(monkeypatch: pytest.MonkeyPatch) -> None:
    """The ops commands build their Service on first use and keep it: built here from this test's environment."""
    from wap_ingest import bootstrap

    monkeypatch.setattr(bootstrap, "_cache", {})


def send(env: dict[str, str], state: StackState, body: str) -> None:
    """Send `body` to the stack's queue with the AWS credentials of `env` (a role's shell)."""
    import boto3

    sqs = boto3.client("sqs", endpoint_url=env["AWS_ENDPOINT_URL"], region_name=env["AWS_REGION"],
                       aws_access_key_id=env["AWS_ACCESS_KEY_ID"], aws_secret_access_key=env["AWS_SECRET_ACCESS_KEY"],
                       aws_session_token=env.get("AWS_SESSION_TOKEN"))
    sqs.send_message(QueueUrl=state.queue_url, MessageBody=body)


def signed_by(env: dict[str, str], request: Any) -> Any:
    """`request` signed as `wap publish` signs it, with the AWS credentials of `env` (exported by role_env)."""
    return Service(Settings.from_env(env)).requesters.sign(request)


def logged_answers(state: StackState, request_id: str, count: int, timeout: float = 300) -> list[dict[str, Any]]:
    """The function's log lines "publish request answered" for `request_id`, once there are `count` of them."""
    import json
    import time

    deadline, found = time.monotonic() + timeout, []
    while time.monotonic() < deadline:
        found = []
        for log in sorted((state.state_dir / "logs").glob("lambda*.log")):
            for line in log.read_text(errors="replace").splitlines():
                if request_id in line and "publish request answered" in line:
                    try:
                        found.append(json.loads(line[line.index("{"):]))
                    except ValueError:
                        continue
        if len(found) >= count:
            return found
        time.sleep(2)
    raise AssertionError(f"{len(found)} of {count} answers to {request_id} logged within {timeout} s: {found}")


@pytest.mark.spark
def test_operator_publishes_through_the_service(auth_stack: tuple[StackConfig, StackState],
                                                monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """The operator cannot merge (above), so `wap publish` with the operator's environment (which names the queue
    and holds the operator role's AWS credentials) asks the service with a signed request that carries no token:
    the function learns from STS who signed it, re-audits, refuses while the rows still fail, then merges the
    audited override and records the operator's verified ARN, which `wap history` shows."""
    import json

    _, state = auth_stack
    fresh_operations(monkeypatch)
    table = f"t_{secrets.token_hex(5)}"
    operator_env = role_env("operator", monkeypatch, tmp_path)
    assert operator_env["WAP_PUBLISH_QUEUE_URL"] == state.queue_url
    assert operator_env["AWS_SESSION_TOKEN"]  # the operator role, assumed (wap_stack/aws_roles.py)
    branch = rejected_branch(state, operator_env, table)
    service = catalog_for(Settings.from_env(operator_env))
    main = service.reference_hash("main")
    operator = "arn:aws:sts::123456789012:assumed-role/wap-operator/"

    code, out, err = ops("publish", branch, "--reason", "looks fine", "--wait", "300", "--json")
    assert code == 1 and "still fails the audit" in err, err  # re-audited by the service: refused
    assert json.loads(out)["action"] == "refused" and json.loads(out)["actor"].startswith(operator)
    assert service.reference_hash("main") == main

    code, out, err = ops("publish", branch, "--no-reaudit", "--reason", "nulls expected", "--wait", "300", "--json")
    assert code == 0, err
    answer = json.loads(out)
    assert answer["action"] == "published" and answer["actor"].startswith(operator), answer
    assert "(unverified: the STS at http://127.0.0.1:" in answer["actor"]  # moto's STS checks no signature
    assert service.reference_hash("main") == answer["merged_hash"] != main
    assert service.find_branch(branch) is None
    code, out, _ = ops("history", table)
    assert code == 0 and f"reviewed publish of branch {branch} by {operator}" in out, out


@pytest.mark.spark
def test_replayed_altered_late_and_readers_requests_are_refused_and_change_nothing(
        auth_stack: tuple[StackConfig, StackState], monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Requests sent as anybody with access to the queue could: a reader's (signed with the reader role), the
    operator's signed request with its content changed in flight, the operator's issued too long ago, and the
    operator's valid request sent a second time (a replay: from the dead-letter queue, where `wap dlq list --json`
    shows it without its signature, by `wap dlq redrive`). Each is refused with a clear answer, and main and the
    branch do not move; the valid request publishes once, and its answer stays the first one."""
    import json
    import time

    import boto3

    from wap_ingest.bootstrap import results_for
    from wap_ingest.core.publish_requests import PublishRequest
    from wap_ingest.entrypoints import dlq_cli

    _, state = auth_stack
    fresh_operations(monkeypatch)
    operator_env = role_env("operator", monkeypatch, tmp_path)
    other = rejected_branch(state, operator_env, f"t_{secrets.token_hex(5)}")
    service = catalog_for(Settings.from_env(operator_env))
    main = service.reference_hash("main")
    results = results_for(Settings.from_env(operator_env))
    queue = state.queue_url.rsplit("/", 1)[-1]

    def refused(request_id: str, why: str) -> dict[str, Any]:
        answer = results.wait(request_id, 300)
        assert answer is not None and answer["action"] == "refused" and why in answer["error"], answer
        assert service.reference_hash("main") == main and service.find_branch(other) is not None
        return answer

    reader_env = role_env("reader", monkeypatch, tmp_path)
    asked = signed_by(reader_env, PublishRequest(other, "please", reaudit=False, queue=queue))
    send(reader_env, state, asked.to_body())
    answer = refused(asked.request_id, "may not publish")
    assert answer["actor"].startswith("arn:aws:sts::123456789012:assumed-role/wap-reader/")

    operator_env = role_env("operator", monkeypatch, tmp_path)
    signed = signed_by(operator_env, PublishRequest(other, "nulls expected", reaudit=False, queue=queue))
    body = signed.to_body()
    tampered = json.loads(body) | {"reason": "(changed in flight)", "request_id": secrets.token_hex(16)}
    send(operator_env, state, json.dumps(tampered))  # the operator's signature on other content
    refused(tampered["request_id"], "changed after it was signed")

    late = PublishRequest(other, "nulls expected", reaudit=False, queue=queue, issued_at=int(time.time()) - 700)
    late = signed_by(operator_env, late)
    send(operator_env, state, late.to_body())
    refused(late.request_id, "expired")

    send(operator_env, state, body)  # the valid request: published once
    published = results.wait(signed.request_id, 300)
    assert published is not None and published["action"] == "published", published
    after = service.reference_hash("main")
    assert after == published["merged_hash"] != main and service.find_branch(other) is None

    # the same message again, by way of the dead-letter queue: listed without its signature, redriven, refused
    sqs = boto3.client("sqs", endpoint_url=operator_env["AWS_ENDPOINT_URL"], region_name=operator_env["AWS_REGION"])
    sqs.send_message(QueueUrl=state.dead_letter_url, MessageBody=body)
    old_token = "eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJ3YXAtb3BlcmF0b3IifQ.c2lnbmF0dXJl"  # what the old format carried
    sqs.send_message(QueueUrl=state.dead_letter_url, MessageBody=json.dumps(
        {"kind": "wap.publish-request", "request_id": secrets.token_hex(16), "branch": other, "reason": "r",
         "reaudit": False, "token": old_token}))
    code, out, err = wap("dlq", "list", "--json", "--dlq-url", state.dead_letter_url, "--queue-url",
                         state.queue_url, commands=dlq_cli.register)
    assert code == 0, err
    assert signed.proof is not None and signed.proof.security_token
    for secret in (old_token, signed.proof.authorization, signed.proof.security_token,
                   operator_env["AWS_SECRET_ACCESS_KEY"]):
        assert secret not in out
    listed = [m["body"] for m in json.loads(out)["messages"]]
    assert any(b.get("request_id") == signed.request_id and b["proof"]["digest"] == signed.digest()
               and b["proof"]["signature"] == "(not shown)" for b in listed), listed  # shown, unsigned
    time.sleep(31)  # the listing hid them for 30 s
    code, out, err = wap("dlq", "redrive", "--json", "--dlq-url", state.dead_letter_url, "--queue-url",
                         state.queue_url, commands=dlq_cli.register)
    assert code == 0 and len(json.loads(out)["redriven"]) >= 2, (out, err)
    [first, replay] = logged_answers(state, signed.request_id, 2)
    assert (first["action"], replay["action"], replay["written"]) == ("published", "refused", False), replay
    assert "a replay, a redrive or a re-sent dead letter) did nothing" in replay["error"]
    assert results.get(signed.request_id) == published  # the answer is the first one, never overwritten
    assert service.reference_hash("main") == after

"""`wap stack up --auth`: the local stack's Nessie checks tokens of the stack's OIDC issuer and applies the
catalog's roles; `wap stack env --role R` gives a shell R's client; the stack's own function uses `service`.

What each test tries: the service role, through the project's settings and NessieBranches adapter, branches,
commits, merges into `main` and deletes its branch; a reader's environment cannot branch or commit; an
operator's can neither merge nor reassign `main` and publishes by asking the function with a signed request that
carries no token; a replayed, altered, late or reader's request is refused and changes nothing; `--role` on a
stack without auth is refused.
"""

from __future__ import annotations

import argparse
import io
import secrets
import shlex
from collections.abc import Callable, Iterator
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path
from typing import Any

import pytest
import requests

from tests.conftest import AUDITS
from wap_ingest.adapters.oauth2 import BearerAuth
from wap_ingest.bootstrap import Service, catalog_for, nessie_tokens_for
from wap_ingest.config import Settings
from wap_ingest.core import lineage
from wap_ingest.core.errors import WapError
from wap_ingest.core.models import Branch
from wap_ingest.entrypoints import stack_cli
from wap_ingest.local.auth import auth_file
from wap_ingest.local.stack import StackConfig, StackState, free_port_block, free_ports, start_stack, stop_stack

pytestmark = [pytest.mark.stack]


def wap(*argv: str, commands: Callable[[Any], None] = stack_cli.register) -> tuple[int, str, str]:
    """`wap ARGV` in this process (`commands`: the module that registers them; the stack's by default)."""
    parser = argparse.ArgumentParser(prog="wap")
    commands(parser.add_subparsers(required=True))
    args = parser.parse_args(list(argv))
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        code = args.func(args)
    return code, out.getvalue(), err.getvalue()


@pytest.fixture(scope="module")
def auth_stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[StackConfig, StackState]]:
    moto, nessie, management, slack = free_ports(4)
    function = free_port_block(2, avoid=(moto, nessie, management, slack))
    config = StackConfig(state_dir=tmp_path_factory.mktemp("auth-stack"), moto_port=moto, nessie_port=nessie,
                         nessie_management_port=management, slack_port=slack, lambda_port=function,
                         runtime_port=function + 1, auth=True)
    patch = pytest.MonkeyPatch()
    patch.setenv("WAP_AUDITS_FILE", str(AUDITS))
    patch.setenv("WAP_STACK_DIR", str(config.state_dir))  # for `wap stack env`
    for name, value in (("WAP_STACK_MOTO_PORT", moto), ("WAP_STACK_NESSIE_PORT", nessie),
                        ("WAP_STACK_NESSIE_MGMT_PORT", management), ("WAP_STACK_SLACK_PORT", slack),
                        ("WAP_STACK_LAMBDA_PORT", function), ("WAP_STACK_RUNTIME_PORT", function + 1)):
        patch.setenv(name, str(value))
    try:
        state = start_stack(config)
        try:
            yield config, state
        finally:
            stop_stack(config)
    finally:
        patch.undo()


def role_env(role: str, monkeypatch: pytest.MonkeyPatch, work: Path) -> dict[str, str]:
    """`eval "$(wap stack env --role <role>)"` in this process."""
    code, out, err = wap("stack", "env", "--role", role)
    assert code == 0, err
    env = {}
    for line in out.splitlines():
        name, _, value = line.removeprefix("export ").partition("=")
        env[name] = shlex.split(value)[0] if value else ""
    env |= {"WAP_AUDITS_FILE": str(AUDITS), "WAP_WORK_DIR": str(work)}
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    return env


def test_env_gives_each_role_its_own_client(auth_stack: tuple[StackConfig, StackState],
                                            monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    config, _ = auth_stack
    ids = {role: role_env(role, monkeypatch, tmp_path)["WAP_NESSIE_CLIENT_ID"]
           for role in ("service", "operator", "reader")}
    assert ids == {"service": "wap-service", "operator": "wap-operator", "reader": "wap-reader"}
    code, out, _ = wap("stack", "env")
    assert code == 0 and "WAP_NESSIE_CLIENT_ID=wap-service" in out  # the default: the service's own role
    assert "WAP_NESSIE_CLIENT_SECRET=" not in out  # the secret stays in (moto's) SSM
    assert auth_file(config.state_dir).stat().st_mode & 0o077 == 0


def test_service_role_branches_commits_merges_and_deletes(auth_stack: tuple[StackConfig, StackState],
                                                           monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    catalog = catalog_for(Settings.from_env(role_env("service", monkeypatch, tmp_path)))
    main = catalog.ensure_namespace("main", "wap")
    branch = catalog.create_branch(f"wap-stack-auth-{secrets.token_hex(4)}", main)
    head = catalog.ensure_namespace(branch.name, f"ns{secrets.token_hex(3)}")
    merged = catalog.merge(Branch(branch.name, head), "main", main, "wap: publish", {"wap.test": "stack-auth"})
    assert merged != main
    catalog.delete_branch(Branch(branch.name, head))
    assert catalog.find_branch(branch.name) is None


def test_reader_role_cannot_branch_or_commit(auth_stack: tuple[StackConfig, StackState],
                                             monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    catalog = catalog_for(Settings.from_env(role_env("reader", monkeypatch, tmp_path)))
    main = catalog.reference_hash("main")
    with pytest.raises(WapError, match="403"):
        catalog.create_branch(f"wap-reader-{secrets.token_hex(4)}", main)
    with pytest.raises(WapError, match="403"):
        catalog.ensure_namespace("main", f"reader{secrets.token_hex(3)}")


def test_operator_role_cannot_merge_or_reassign_main(auth_stack: tuple[StackConfig, StackState],
                                                       monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    service = catalog_for(Settings.from_env(role_env("service", monkeypatch, tmp_path)))
    main = service.ensure_namespace("main", "wap")
    branch = service.create_branch(f"wap-op-{secrets.token_hex(4)}", main)
    head = service.ensure_namespace(branch.name, f"op{secrets.token_hex(3)}")
    settings = Settings.from_env(role_env("operator", monkeypatch, tmp_path))
    operator = catalog_for(settings)
    with pytest.raises(WapError, match="403"):
        operator.create_branch(f"wap-op2-{secrets.token_hex(4)}", main)
    tokens = nessie_tokens_for(settings)
    assert tokens is not None
    answer = requests.put(f"{settings.nessie_endpoint}/api/v2/trees/main@{main}", auth=BearerAuth(tokens),
                          json={"type": "BRANCH", "name": branch.name, "hash": head}, timeout=10)
    assert answer.status_code == 403, answer.text
    with pytest.raises(WapError, match="403"):  # it asks the service instead: test_operator_publishes_through_...
        operator.merge(Branch(branch.name, head), "main", main, "wap: approved", {})
    assert service.reference_hash("main") == main


def test_role_needs_a_stack_with_auth(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("WAP_STACK_DIR", str(tmp_path))
    code, _, err = wap("stack", "env", "--role", "reader")
    assert code != 0 and "wap stack" in err


def test_decision_log_records_the_token_subject(auth_stack: tuple[StackConfig, StackState],
                                                monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """The ops commands record who the issuer says the caller is (the access token's `sub`), not WAP_ACTOR."""
    from wap_ingest.entrypoints.ops_cli import _actor

    monkeypatch.setenv("WAP_ACTOR", "somebody-else")
    assert _actor(Service(Settings.from_env(role_env("operator", monkeypatch, tmp_path)))) == "wap-operator"
    unauthenticated = {k: v for k, v in role_env("reader", monkeypatch, tmp_path).items()
                       if not k.startswith("WAP_NESSIE_")}
    for name in ("WAP_NESSIE_TOKEN_ENDPOINT", "WAP_NESSIE_CLIENT_ID", "WAP_NESSIE_CLIENT_SECRET_PARAMETER",
                 "WAP_NESSIE_SCOPE"):
        monkeypatch.delenv(name)
    assert _actor(Service(Settings.from_env(unauthenticated))) == \
        "somebody-else (unverified: no Nessie client configured)"


@pytest.mark.spark
def test_the_stacks_function_ingests_a_file_as_the_service(auth_stack: tuple[StackConfig, StackState],
                                                            monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """A file dropped in the source bucket goes through the event path (worker -> function, with the service
    role's client) to `main`, where a reader sees the new table."""
    import time

    import boto3

    from tests.conftest import parquet_bytes

    _, state = auth_stack
    env = role_env("reader", monkeypatch, tmp_path)
    table = f"t_{secrets.token_hex(5)}"
    s3 = boto3.client("s3", endpoint_url=env["AWS_ENDPOINT_URL"], region_name=env["AWS_REGION"])
    s3.put_object(Bucket=state.source_bucket, Key=f"{table}/a.parquet", Body=parquet_bytes(12))
    settings = Settings.from_env(env)
    tokens = nessie_tokens_for(settings)
    assert tokens is not None
    deadline, names = time.monotonic() + 240, set()
    while time.monotonic() < deadline and f"wap.{table}" not in names:
        time.sleep(2)
        entries = requests.get(f"{settings.nessie_endpoint}/api/v2/trees/main/entries", auth=BearerAuth(tokens),
                               timeout=10).json()["entries"]
        names = {".".join(e["name"]["elements"]) for e in entries}
    assert f"wap.{table}" in names, f"not published to main within 240 s; logs: {state.state_dir / 'logs'}"


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
    assert operator_env["AWS_SESSION_TOKEN"]  # the operator role, assumed (local/aws_roles.py)
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
    assert any(signed.request_id in b and signed.digest() in b for b in listed), listed  # shown, unsigned
    time.sleep(31)  # the listing hid them for 30 s
    code, out, err = wap("dlq", "redrive", "--json", "--dlq-url", state.dead_letter_url, "--queue-url",
                         state.queue_url, commands=dlq_cli.register)
    assert code == 0 and len(json.loads(out)["redriven"]) >= 2, (out, err)
    [first, replay] = logged_answers(state, signed.request_id, 2)
    assert (first["action"], replay["action"], replay["written"]) == ("published", "refused", False), replay
    assert "replay or a redrive and changed nothing" in replay["error"]
    assert results.get(signed.request_id) == published  # the answer is the first one, never overwritten
    assert service.reference_hash("main") == after


@pytest.mark.spark
def test_operator_runs_a_dry_run_under_the_catalog_rules(auth_stack: tuple[StackConfig, StackState],
                                                         monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """`wap audit` in the operator's environment, as a person runs it (its own process, its own Spark with the
    operator's client): the dry run's branch is one the catalog's rules let the operator create, write and delete
    (for a table whose namespace is not on main yet, too); the report comes back; main does not move and nothing
    is left. The operator still cannot create any other WAP branch."""
    import json
    import os
    import subprocess
    import sys

    import boto3

    from tests.conftest import parquet_bytes

    _, state = auth_stack
    env = role_env("operator", monkeypatch, tmp_path)
    namespace, table = f"ns{secrets.token_hex(3)}", f"t_{secrets.token_hex(5)}"
    s3 = boto3.client("s3", endpoint_url=env["AWS_ENDPOINT_URL"], region_name=env["AWS_REGION"])
    s3.put_object(Bucket=state.source_bucket, Key=f"dry/{table}.parquet", Body=parquet_bytes(8, nulls=2))
    catalog = catalog_for(Settings.from_env(env))
    main = catalog.reference_hash("main")
    for target, expected, code in ((table, "failed", 1), (f"{namespace}.{table}", "failed", 1)):
        run = subprocess.run(
            [sys.executable, "-m", "wap_ingest.entrypoints.cli", "audit", f"s3://{state.source_bucket}/dry/{table}"
             ".parquet", "--table", target, "--json"], env=os.environ | env, capture_output=True, text=True,
            timeout=600, check=False)
        assert run.returncode == code, run.stderr[-3000:]
        report = json.loads(run.stdout)
        assert report["status"] == expected and report["rows"] == 8, report
        assert [c["check"] for c in report["report"]["checks"] if c["status"] == "failed"] == ["not_null"]
    assert catalog.reference_hash("main") == main
    assert catalog.list_branches("wap-") == [b for b in catalog.list_branches("wap-") if table not in b.name]
    with pytest.raises(WapError, match="403"):  # only a dry run's own branches
        catalog.create_branch(f"wap-{table}-0123456789abcdef-f1x0a1b2c3d", main)

"""`wap stack up --auth`: the local stack's Nessie checks tokens of the stack's OIDC issuer and applies the
catalog's roles; `wap stack env --role R` gives a shell R's client; the stack's own function uses `service`.

What each test tries: the service role, through the project's settings and NessieBranches adapter, branches,
commits, merges into `main` and deletes its branch; a reader's environment cannot branch or commit; an
operator's can neither merge nor reassign `main` and publishes by asking the function; `--role` on a stack
without auth is refused.
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
        for branch in catalog.list_branches(f"wap-wap-{table}-"):
            head = catalog.head_commit(branch.name)
            if head is not None and lineage.PENDING_MESSAGE in head.properties:
                return branch.name
        time.sleep(2)
    raise AssertionError(f"no WAP branch for {table} within 240 s; logs: {state.state_dir / 'logs'}")


@pytest.mark.spark
def test_operator_publishes_through_the_service(auth_stack: tuple[StackConfig, StackState],
                                                monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """The operator cannot merge (above), so `wap publish` with the operator's environment (which names the queue)
    asks the service: the function checks the operator's token with the catalog, re-audits, refuses while the
    rows still fail, then merges the audited override and records the token's subject. A reader's request and a
    forged token are refused, and main does not move for them."""
    import json

    from wap_ingest.core.publish_requests import PublishRequest

    _, state = auth_stack
    table = f"t_{secrets.token_hex(5)}"
    operator_env = role_env("operator", monkeypatch, tmp_path)
    assert operator_env["WAP_PUBLISH_QUEUE_URL"] == state.queue_url
    branch = rejected_branch(state, operator_env, table)
    service = catalog_for(Settings.from_env(operator_env))
    main = service.reference_hash("main")

    code, out, err = ops("publish", branch, "--reason", "looks fine", "--wait", "300", "--json")
    assert code == 1 and "still fails the audit" in err, err  # re-audited by the service: refused
    assert json.loads(out)["action"] == "refused" and json.loads(out)["actor"] == "wap-operator"
    assert service.reference_hash("main") == main

    code, out, err = ops("publish", branch, "--no-reaudit", "--reason", "nulls expected", "--wait", "300", "--json")
    assert code == 0, err
    answer = json.loads(out)
    assert answer["action"] == "published" and answer["actor"] == "wap-operator", answer
    assert service.reference_hash("main") == answer["merged_hash"] != main
    assert service.find_branch(branch) is None

    # a reader asks, and a forged operator token (its payload changed, its signature not) asks
    import boto3

    reader_env = role_env("reader", monkeypatch, tmp_path)
    reader_tokens = nessie_tokens_for(Settings.from_env(reader_env))
    assert reader_tokens is not None
    head, payload, signature = reader_tokens.token().split(".")
    import base64

    claims = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
    forged = base64.urlsafe_b64encode(json.dumps(claims | {"scope": "nessie/operator"}).encode()).decode().rstrip("=")
    other = rejected_branch(state, operator_env, f"t_{secrets.token_hex(5)}")
    main = service.reference_hash("main")
    sqs = boto3.client("sqs", endpoint_url=reader_env["AWS_ENDPOINT_URL"], region_name=reader_env["AWS_REGION"])
    from wap_ingest.bootstrap import results_for

    results = results_for(Settings.from_env(reader_env))
    for token, why in ((reader_tokens.token(), "may not publish"), (f"{head}.{forged}.{signature}", "did not accept")):
        request = PublishRequest(branch=other, reason="please", reaudit=False, token=token)
        sqs.send_message(QueueUrl=state.queue_url, MessageBody=request.to_body())
        answer = results.wait(request.request_id, 300)
        assert answer is not None and answer["action"] == "refused" and why in answer["error"], answer
        assert token not in json.dumps(answer)
    assert service.reference_hash("main") == main and service.find_branch(other) is not None


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
        catalog.create_branch(f"wap-wap-{table}-0123456789abcdef-f1x0a1b2c3d", main)

"""`wap stack up --auth`: the local stack's Nessie checks tokens of the stack's OIDC issuer and applies the
catalog's roles; `wap stack env --role R` gives a shell R's client; the stack's own function uses `service`.

What each test tries: the service role, through the project's settings and NessieBranches adapter, branches,
commits, merges into `main` and deletes its branch; a reader's environment cannot branch or commit; an
operator's can neither merge nor reassign `main` (it publishes by asking the function:
tests/integration/stack/test_stack_auth_publish.py), records its token's subject as the actor, and runs a dry run under
the catalog's rules; the function ingests a file as the service; `--role` on a stack without auth is refused.
"""

from __future__ import annotations

import secrets
from pathlib import Path

import pytest
import requests

from tests.integration.stack_auth_harness import role_env, stack_with_auth, wap
from wap_ingest.adapters.catalog.oauth2 import BearerAuth
from wap_ingest.bootstrap import Service, catalog_for, nessie_tokens_for
from wap_ingest.bootstrap.config import Settings
from wap_ingest.core.errors import WapError
from wap_ingest.core.models import Branch
from wap_stack.auth import auth_file
from wap_stack.stack import StackConfig, StackState

pytestmark = [pytest.mark.stack]
auth_stack = pytest.fixture(scope="module", name="auth_stack")(stack_with_auth)


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

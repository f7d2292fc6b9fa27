"""What the operator could publish on `wap stack up --auth` (issue 33, item 3): the catalog's rules let the operator
create and commit on a dry run's branch, and `wap publish` asks the stack's function (the service) to merge. A dry
run's branch holding a table rolled back to its previous metadata file, a planted ledger entry or an extra table is
refused, and so is a rejected file's branch kept for review with one more commit made with the service's own
credentials: the answer names the branch, the key and the commit, and main's hash does not move. The same through
the stack without authentication, and the automatic path: tests/integration/core/test_publish_guard_stack.py."""

from __future__ import annotations

import json
import secrets
import time
from pathlib import Path
from typing import Any

import pytest

from tests.integration.foreign_commits import attack
from tests.integration.stack.test_stack_auth_publish import fresh_operations, rejected_branch
from tests.integration.stack_auth_harness import role_env, stack_with_auth, wap
from wap_ingest.bootstrap import catalog_for
from wap_ingest.bootstrap.config import Settings
from wap_ingest.core import merge_plan
from wap_ingest.core.branches import RunKind, run_branch_name
from wap_ingest.core.models import TableRef
from wap_stack.stack import StackConfig, StackState

pytestmark = [pytest.mark.stack, pytest.mark.spark]
auth_stack = pytest.fixture(scope="module", name="auth_stack")(stack_with_auth)
ATTACKS = ["rollback", "ledger", "table"]


def ops(*argv: str) -> tuple[int, str, str]:
    from wap_ingest.entrypoints import ops_cli

    return wap(*argv, commands=ops_cli.register)


def published(state: StackState, env: dict[str, str], table: str, files: int) -> None:
    """`files` files dropped for `table`, one after the other, each published by the stack's function (main holds
    that many metadata files of the table, one publication apart)."""
    import boto3

    from tests.conftest import parquet_bytes

    s3 = boto3.client("s3", endpoint_url=env["AWS_ENDPOINT_URL"], region_name=env["AWS_REGION"])
    catalog = catalog_for(Settings.from_env(env))
    for n in range(1, files + 1):
        s3.put_object(Bucket=state.source_bucket, Key=f"{table}/good{n}.parquet", Body=parquet_bytes(100))
        deadline = time.monotonic() + 240
        while len(catalog.publications(TableRef("wap", table), limit=5)) < n:
            assert time.monotonic() < deadline, f"file {n} of {table} not published; logs: {state.state_dir}/logs"
            time.sleep(2)


def refused(branch: str, *said: str) -> dict[str, Any]:
    """`wap publish BRANCH --no-reaudit` in the operator's shell: the service's answer, a refusal saying `said`."""
    code, out, err = ops("publish", branch, "--no-reaudit", "--reason", "looks fine", "--wait", "300", "--json")
    answer: dict[str, Any] = json.loads(out)
    assert code == 1 and answer["action"] == "refused", (out, err)
    for text in said:
        assert text in answer["error"], answer["error"]
    return answer


@pytest.fixture(scope="module")
def operator_table(auth_stack: tuple[StackConfig, StackState], tmp_path_factory: pytest.TempPathFactory
                   ) -> tuple[str, dict[str, str]]:
    """A table with two publications, and the operator's shell."""
    _, state = auth_stack
    patch = pytest.MonkeyPatch()
    try:
        env = role_env("operator", patch, tmp_path_factory.mktemp("operator"))
        table = f"t_{secrets.token_hex(5)}"
        published(state, env, table, 2)
    finally:
        patch.undo()
    return table, env


@pytest.mark.parametrize("what", ATTACKS)
def test_the_operators_dry_run_branch_is_never_published(auth_stack: tuple[StackConfig, StackState],
                                                         operator_table: tuple[str, dict[str, str]], what: str,
                                                         monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """The observed attack: a branch named like a dry run, made from main by the operator (the catalog's rules allow
    it), one commit, then `wap publish BRANCH --no-reaudit --reason ...`: refused, main unchanged, no reviewed
    publish in `wap history`."""
    table, _ = operator_table
    fresh_operations(monkeypatch)
    operator = catalog_for(Settings.from_env(role_env("operator", monkeypatch, tmp_path)))
    main = operator.reference_hash("main")
    name = run_branch_name(RunKind.DRY_RUN, TableRef("wap", table), f"attack {what}", started=time.time(),
                           default_namespace="wap")
    operator.create_branch(name, main)
    attack(operator, name, what, TableRef("wap", table))  # the catalog's rules let the operator do it
    refused(name, f"refusing to publish '{name}': it is a dry run's branch", f"wap discard {name}")
    assert operator.reference_hash("main") == main
    code, out, _ = ops("history", table)
    assert code == 0 and "reviewed publish" not in out and name not in out, out
    code, _, err = ops("discard", name, "--reason", "not a dry run")  # the fix the answer gives works
    assert code == 0 and operator.find_branch(name) is None, err


@pytest.mark.parametrize("what", ATTACKS)
def test_a_service_commit_after_the_plan_of_a_kept_branch_is_refused(auth_stack: tuple[StackConfig, StackState],
                                                                     what: str, monkeypatch: pytest.MonkeyPatch,
                                                                     tmp_path: Path) -> None:
    """A rejected file's branch, kept by the function; one more commit on it made with the service's credentials
    (anyone holding them): the key/content check refuses the publish, naming the key and the commit."""
    _, state = auth_stack
    fresh_operations(monkeypatch)
    table = f"t_{secrets.token_hex(5)}"
    operator_env = role_env("operator", monkeypatch, tmp_path)
    published(state, operator_env, table, 1)
    branch = rejected_branch(state, operator_env, table)
    service = catalog_for(Settings.from_env(role_env("service", monkeypatch, tmp_path)))
    main = service.reference_hash("main")
    planned = service.commit_log(branch, limit=1)[0]
    made = service.commit_log(branch, until=planned.properties[merge_plan.PLAN_BASE])
    assert planned.committer and {c.committer for c in made} == {planned.committer}  # Nessie names who committed
    key, foreign = attack(service, branch, what, TableRef("wap", table))
    role_env("operator", monkeypatch, tmp_path)
    answer = refused(branch, f"refusing to merge branch '{branch}'", f"{key}: ", f"commit {foreign[:12]}",
                     f"wap discard {branch}")
    assert answer["actor"].startswith("arn:aws:sts::123456789012:assumed-role/wap-operator/")
    assert service.reference_hash("main") == main and service.find_branch(branch) is not None

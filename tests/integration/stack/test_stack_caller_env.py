"""`wap stack up` from an operator's shell (issue 33): the shell where `eval "$(wap stack env --role operator)"` was run
for an `--auth` stack holds the operator's catalog client (WAP_NESSIE_*), AWS role credentials (AWS_SESSION_TOKEN),
the publish queue. A stack started from that shell must give its processes its own settings, never the caller's:
the function (no catalog authentication on this stack) then publishes a dropped file, and no process of the stack
carries any of the operator's variables. Before, the function inherited them and every file failed with a
ConfigError (the operator's client secret parameter does not exist on the new stack)."""

from __future__ import annotations

import io
import shlex
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import requests

from tests.conftest import AUDITS
from tests.integration.stack_auth_harness import stack_with_auth, wap
from tests.stacks import running_stack
from wap_stack.leftovers import owned_processes
from wap_stack.stack import StackConfig, StackState, free_port_block, free_ports, stack_environment

pytestmark = [pytest.mark.stack, pytest.mark.spark]
CANARY = "WAP_TEST_CALLERS_OWN"  # a variable of the caller's shell that no stack process may see
OPERATORS = ("WAP_NESSIE_TOKEN_ENDPOINT", "WAP_NESSIE_CLIENT_ID", "WAP_NESSIE_CLIENT_SECRET_PARAMETER",
             "WAP_NESSIE_SCOPE", "WAP_PUBLISH_QUEUE_URL", "AWS_SESSION_TOKEN")


@pytest.fixture(scope="module")
def operator_shell(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """What `eval "$(wap stack env --role operator)"` exported, on an `--auth` stack (stopped since)."""
    with contextmanager(stack_with_auth)(tmp_path_factory):
        code, out, err = wap("stack", "env", "--role", "operator")
    assert code == 0, err
    exported = {}
    for line in out.splitlines():
        name, _, value = line.removeprefix("export ").partition("=")
        exported[name] = shlex.split(value)[0] if value else ""
    assert exported["WAP_NESSIE_CLIENT_ID"] and exported["AWS_SESSION_TOKEN"], exported
    return exported


@contextmanager
def stack_from(shell: dict[str, str], tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[StackConfig,
                                                                                                   StackState]]:
    """`wap stack up` (no --auth) run from `shell`: its variables set in this process while the stack starts."""
    moto, nessie, management, slack = free_ports(4)
    function = free_port_block(2, avoid=(moto, nessie, management, slack))
    config = StackConfig(state_dir=tmp_path_factory.mktemp("caller-stack"), moto_port=moto, nessie_port=nessie,
                         nessie_management_port=management, slack_port=slack, lambda_port=function,
                         runtime_port=function + 1)
    with running_stack(config, shell | {"WAP_AUDITS_FILE": str(AUDITS), CANARY: "leaked"},
                       unset=("WAP_SOURCE_BUCKETS", "WAP_LARGE_FILE_BYTES")) as state:
        yield config, state


def environ_of(pid: int) -> dict[str, str]:
    try:
        raw = Path(f"/proc/{pid}/environ").read_bytes()
    except OSError:
        return {}
    return dict(item.split("=", 1) for item in raw.decode(errors="replace").split("\0") if "=" in item)


def rows_on_main(env: dict[str, str], table: str, timeout: float = 240.0) -> int | None:
    """The table's rows on the stack's main once it is there (PyIceberg on the metadata Nessie names), or None."""
    from pyiceberg.table import StaticTable

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        answer = requests.get(f"{env['NESSIE_ENDPOINT']}/api/v2/trees/main/contents/{table}", timeout=10)
        if answer.status_code == 200:
            loaded = StaticTable.from_metadata(answer.json()["content"]["metadataLocation"], {
                "s3.endpoint": env["AWS_ENDPOINT_URL"], "s3.region": env["AWS_REGION"],
                "s3.access-key-id": env["AWS_ACCESS_KEY_ID"], "s3.secret-access-key": env["AWS_SECRET_ACCESS_KEY"]})
            return int(loaded.scan().to_arrow().num_rows)
        time.sleep(2)
    return None


def test_a_stack_started_from_an_operators_shell_publishes_a_dropped_file(
        operator_shell: dict[str, str], tmp_path_factory: pytest.TempPathFactory) -> None:
    with stack_from(operator_shell, tmp_path_factory) as (config, state):
        carried: dict[str, Any] = {}
        processes = owned_processes(config.state_dir)
        assert len(processes) >= 5  # moto, Nessie, the Slack sink, the emulator and its runtime, the worker...
        for process in processes:
            env = environ_of(process.pid)
            found = sorted(name for name in (*OPERATORS, CANARY) if name in env)
            if found:
                carried[process.describe()] = found
        assert not carried, f"stack processes carry the caller's variables: {carried}"

        env = stack_environment(state)
        sink = io.BytesIO()
        pq.write_table(pa.table({"my_col_0": list(range(25)), "my_col_1": [f"v{i}" for i in range(25)]}), sink)
        import boto3

        s3 = boto3.client("s3", endpoint_url=env["AWS_ENDPOINT_URL"], region_name=env["AWS_REGION"],
                          aws_access_key_id=env["AWS_ACCESS_KEY_ID"],
                          aws_secret_access_key=env["AWS_SECRET_ACCESS_KEY"], aws_session_token="")
        s3.put_object(Bucket=env["SOURCE_BUCKET"], Key="customer_data_log/from-operator-shell.parquet",
                      Body=sink.getvalue())
        rows = rows_on_main(env, "wap.customer_data_log")
        log = config.state_dir / "logs" / "lambda.log"
        tail = log.read_text(errors="replace").splitlines()[-15:] if log.exists() else []
        assert rows == 25, "the dropped file was not published; the function's log ends:\n" + "\n".join(tail)

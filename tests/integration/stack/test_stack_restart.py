"""`wap stack up`, `down`, `up` as a developer runs them (the CLI, in processes of their own), up and down twice in a
row and up once more, with and without `--auth`: each `down` comes while the worker is handing a file to the
function (the moment a supervisor used to restart the environment it saw die and leave it running), and after each
the process table holds nothing of the stack and no port of it is taken. A leftover of an earlier stack is named
by `up` and cleaned by `up --clean-leftovers`; a supervisor restarts nothing while the stack is stopping."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest

from tests.waiting import wait_for
from wap_stack.components import ACCESS_KEY, SECRET_KEY
from wap_stack.config import StackConfig
from wap_stack.leftovers import owned_processes, port_holders
from wap_stack.processes import free_port_block, free_ports
from wap_stack.runtime import Supervisor
from wap_stack.state import read_in_flight

pytestmark = [pytest.mark.stack, pytest.mark.spark]
CYCLES = 2




class Checkout:
    """A developer's shell: WAP_STACK_* pointing at a folder and free ports of its own."""

    def __init__(self, state_dir: Path) -> None:
        moto, nessie, management, slack = free_ports(4)
        function = free_port_block(2)
        self.ports = [moto, nessie, management, slack, function, function + 1]
        self.state_dir = state_dir
        self.env = os.environ | {
            "WAP_STACK_DIR": str(state_dir), "WAP_STACK_MOTO_PORT": str(moto), "WAP_STACK_NESSIE_PORT": str(nessie),
            "WAP_STACK_NESSIE_MGMT_PORT": str(management), "WAP_STACK_SLACK_PORT": str(slack),
            "WAP_STACK_LAMBDA_PORT": str(function), "WAP_STACK_RUNTIME_PORT": str(function + 1),
        }
        for name in ("WAP_SOURCE_BUCKETS", "WAP_LARGE_FILE_BYTES", "WAP_STACK_AUTH", "WAP_EMR_MODE"):
            self.env.pop(name, None)

    def wap(self, *args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "wap_ingest.entrypoints.cli", "stack", *args], env=self.env,
                              capture_output=True, text=True, timeout=timeout, check=False)

    def s3(self) -> Any:
        return boto3.client("s3", endpoint_url=f"http://127.0.0.1:{self.env['WAP_STACK_MOTO_PORT']}",
                            region_name="us-east-1", aws_access_key_id=ACCESS_KEY, aws_secret_access_key=SECRET_KEY)

    def worker_log(self) -> list[dict[str, Any]]:
        log = self.state_dir / "logs" / "worker.log"
        return [json.loads(x) for x in log.read_text().splitlines() if x.startswith("{")] if log.exists() else []

    def leftovers(self) -> list[str]:
        """What the process table still holds of this stack: tagged processes, listeners on its ports, emulators
        and workers naming its ports."""
        found = [f"tagged {left.describe()}" for left in owned_processes(self.state_dir)]
        found += [f"port {port}: {holder.describe()}" for port in self.ports for holder in port_holders(port)]
        wanted = [f"127.0.0.1:{port}" for port in self.ports[4:]]
        for proc in Path("/proc").glob("[0-9]*"):
            try:
                command = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
                name = (proc / "comm").read_text()
            except OSError:
                continue
            if any(w in command for w in wanted) and "aws-lambda-rie" in command + name:
                found.append(f"emulator pid {proc.name}: {command[:100]}")
        return found


@pytest.fixture
def checkout(tmp_path: Path) -> Iterator[Checkout]:
    shell = Checkout(tmp_path / "stack")
    try:
        yield shell
    finally:
        shell.wap("down")


def csv(rows: int) -> bytes:
    return ("my_col_0,my_col_1\n" + "".join(f"{i},v{i}\n" for i in range(rows))).encode()


def busy_with_a_file(shell: Checkout, name: str) -> None:
    """Drop a file once the start-up's test event is handled, and return while the worker hands it to the function,
    as its in-flight note says. A CSV file: its rewrite starts the function's Spark (seconds), where a fitting Parquet
    file would be registered without a JVM, often within one poll of the note (the note then came and went unseen)."""
    wait_for(lambda: any(e["event"] == "batch" for e in shell.worker_log()), "the worker's first batch (test event)")
    dropped = time.time()
    shell.s3().put_object(Bucket="source", Key=f"{name}/a.csv", Body=csv(3))
    wait_for(lambda: any(b.get("state") == "running" and b["received_at"] >= dropped - 1
                         for batches in read_in_flight(shell.state_dir).values() for b in batches),
             "the worker handling the file")


@pytest.mark.parametrize("auth", [False, True], ids=["plain", "auth"])
def test_up_down_up_cycles_leave_nothing_running(checkout: Checkout, auth: bool) -> None:
    flags = ["--auth"] if auth else []
    for cycle in range(1, (CYCLES if not auth else 1) + 1):  # --auth: the same stop, with Nessie's OAuth2 server
        up = checkout.wap("up", *flags)
        assert up.returncode == 0, f"cycle {cycle}: {up.stdout}{up.stderr}"
        busy_with_a_file(checkout, f"cycle_{cycle}")
        if cycle == 1:
            status = checkout.wap("status")
            assert "a batch of 1 message(s) being handled; if not deleted, they come back at" in status.stdout
            assert "come back after 1200 s" in status.stdout

        down = checkout.wap("down")

        assert down.returncode == 0, f"cycle {cycle}: {down.stdout}{down.stderr}"
        assert down.stdout.startswith("Stopped SQS worker"), down.stdout  # the worker first
        assert checkout.leftovers() == [], f"cycle {cycle}: {down.stdout}"
        log = checkout.worker_log()
        assert not any(e["event"] == "environment_restarted" for e in log), log[-3:]
    last = checkout.wap("up", *flags)
    assert last.returncode == 0, last.stdout + last.stderr
    assert checkout.wap("down").returncode == 0
    assert checkout.leftovers() == []


def test_up_names_a_leftover_of_an_earlier_stack_and_cleans_it_when_asked(checkout: Checkout) -> None:
    assert checkout.wap("up").returncode == 0
    state_file = checkout.state_dir / "state.json"
    record = json.loads(state_file.read_text())
    state_file.unlink()  # the record is lost (a crashed `down`, a deleted folder): its processes run on

    refused = checkout.wap("up")

    assert refused.returncode == 2, refused.stdout + refused.stderr
    assert f"of an earlier local stack in {checkout.state_dir} are still running" in refused.stderr
    # moto (wap_stack.moto_queue: moto's server, its events queues served by ElasticMQ)
    assert f"pid {record['moto_pid']} (" in refused.stderr and "wap_stack.moto_queue" in refused.stderr
    assert "aws-lambda-rie" in refused.stderr
    assert "Fix: wap stack up --clean-leftovers" in refused.stderr
    cleaned = checkout.wap("up", "--clean-leftovers")
    assert cleaned.returncode == 0, cleaned.stdout + cleaned.stderr
    assert f"Stopped a leftover of an earlier stack: pid {record['moto_pid']}" in cleaned.stdout
    assert checkout.wap("down").returncode == 0
    assert checkout.leftovers() == []


def test_down_stops_a_process_of_the_stack_that_no_record_names(checkout: Checkout) -> None:
    """An environment started again after the record was read (as a supervisor did during `down`): found by the
    stack's tag on the process, stopped, and said."""
    assert checkout.wap("up").returncode == 0
    environment = os.environ | {"WAP_STACK_OWNER": str(checkout.state_dir.resolve())}
    stray = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"], env=environment,
                             start_new_session=True)
    try:
        down = checkout.wap("down")
        assert down.returncode == 0, down.stdout + down.stderr
        assert f"Stopped a process of the stack that no record named: pid {stray.pid}" in down.stdout
        assert stray.wait(timeout=10) != 0
        assert checkout.leftovers() == []
    finally:
        if stray.poll() is None:
            stray.kill()
            stray.wait()


def _environment_stand_in(port: int) -> list[str]:
    """Listens on the invoke port and carries the emulator's marker, so the supervisor takes it for one."""
    serve = ("import sys, http.server as h; "
             "h.HTTPServer(('127.0.0.1', int(sys.argv[1])), h.BaseHTTPRequestHandler).serve_forever()")
    return [sys.executable, "-c", serve, str(port), "--runtime-interface-emulator-address"]


def test_a_supervisor_restarts_nothing_while_the_stack_is_stopping(tmp_path: Path) -> None:
    invoke, runtime = free_ports(2)
    config = StackConfig(state_dir=tmp_path, lambda_port=invoke, runtime_port=runtime)
    config.state_file.write_text(json.dumps({"complete": True, "environments": []}))
    config.stopping_file.write_text("1\n")
    supervisor = Supervisor(config, "lambda", invoke, runtime, _environment_stand_in(invoke), dict(os.environ),
                            max_attempts=1, start_timeout=30)

    assert supervisor.restart("the emulator exited") is False
    assert owned_processes(tmp_path) == [] and not supervisor.failed

    config.stopping_file.unlink()
    try:
        assert supervisor.restart("the emulator exited") is True  # the same supervisor, the stack not stopping
        assert [p.pid for p in owned_processes(tmp_path)] == [supervisor.pid]
        stopping = Supervisor(config, "lambda", invoke, runtime, _environment_stand_in(invoke), dict(os.environ),
                              worker_stopping=lambda: True)
        assert stopping.restart("the emulator exited") is False  # its own worker is stopping
        assert owned_processes(tmp_path) == []  # the dead environment's processes are retired all the same
    finally:
        supervisor.retire()

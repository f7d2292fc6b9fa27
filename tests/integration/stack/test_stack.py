"""`wap stack up | status | env | down` against the real moto and Nessie processes.

Every stack here uses free ports and a temporary state folder, so it never meets a developer's stack.
One stack is started for the module (the lifecycle tests run in file order, restart its Nessie and end with
`down`). Two execution environments and the start-up failures: tests/integration/stack/test_stack_startup.py.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import subprocess
from collections.abc import Iterator
from contextlib import redirect_stderr, redirect_stdout
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import boto3
import pytest
import requests

from wap_ingest.core.errors import ConfigError
from wap_stack import cli as stack_cli
from wap_stack.stack import (
    StackConfig,
    free_port_block,
    free_ports,
    load_state,
    port_is_free,
    restart_nessie,
    stack_environment,
    stack_status,
    start_nessie,
    start_stack,
    stop_stack,
)

pytestmark = pytest.mark.stack

ENV_KEYS = {
    "WAP_EMR_APPLICATION_ID",
    "WAP_PUBLISH_PRINCIPALS",  # who the stack's function serves publish requests for
    "WAP_EVENT_BUS",  # downstream events, and the queue a rule on that bus delivers them to
    "WAP_STACK_DOWNSTREAM_QUEUE_URL",
    "WAP_EMR_EXECUTION_ROLE_ARN",
    "AWS_ENDPOINT_URL",
    "AWS_ACCESS_KEY_ID",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_REGION",
    "AWS_DEFAULT_REGION",
    "SOURCE_BUCKET",
    "LAKE_BUCKET",
    "NESSIE_ENDPOINT",
    "WAP_STACK_DIR",
    "WAP_SLACK_BASE_URL",
    "SLACK_TOKEN",
    "SLACK_CHANNEL",
    "WAP_SLACK_SIGNING_SECRET_PARAMETER",  # acting on alerts from the channel page: the local app's secret (in SSM)
    "WAP_SLACK_OPERATORS",  # and who may act
    "WAP_MAX_RECEIVES",
    "WAP_STACK_QUEUE_URL",
    "WAP_STACK_DLQ_URL",
    "WAP_QUEUE_URL",  # the ingest queue under the function's own name (a function run from the image sees it too)
}


def wap(*argv: str) -> tuple[int, str, str]:
    """Run `wap <argv>` in process (the stack commands read their settings from os.environ)."""
    parser = argparse.ArgumentParser(prog="wap")
    stack_cli.register(parser.add_subparsers(required=True))
    args = parser.parse_args(list(argv))
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        code = args.func(args)
    return code, out.getvalue(), err.getvalue()


def isolated_config(state_dir: Path, workers: int = 1) -> StackConfig:
    """Free ports; the execution environments' (2 a piece: invoke, runtime API) in one block of free ports."""
    moto, nessie, management, slack = free_ports(4)
    function = free_port_block(2 * workers, avoid=(moto, nessie, management, slack))
    return StackConfig(state_dir=state_dir, moto_port=moto, nessie_port=nessie, nessie_management_port=management,
                       slack_port=slack, lambda_port=function, runtime_port=function + 1, workers=workers)


def gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"


def processes_on(port: int) -> list[int]:
    """Pids of live processes whose command line mentions `port` (moto's `-p`, Nessie's -D...port=)."""
    found = []
    for proc in Path("/proc").glob("[0-9]*"):
        try:
            args = (proc / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if str(port).encode() in args or any(a.endswith(b"port=%d" % port) for a in args):
            found.append(int(proc.name))
    return [pid for pid in found if pid != os.getpid() and not gone(pid)]


@dataclass(frozen=True)
class Running:
    config: StackConfig
    up_code: int
    up_output: str


@pytest.fixture(scope="module")
def running(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Running]:
    config = isolated_config(tmp_path_factory.mktemp("stack"))
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("WAP_STACK_DIR", str(config.state_dir))
        patch.setenv("WAP_STACK_MOTO_PORT", str(config.moto_port))
        patch.setenv("WAP_STACK_NESSIE_PORT", str(config.nessie_port))
        patch.setenv("WAP_STACK_NESSIE_MGMT_PORT", str(config.nessie_management_port))
        patch.setenv("WAP_STACK_SLACK_PORT", str(config.slack_port))
        patch.setenv("WAP_STACK_LAMBDA_PORT", str(config.lambda_port))
        patch.setenv("WAP_STACK_RUNTIME_PORT", str(config.runtime_port))
        try:
            code, out, err = wap("stack", "up")
            assert code == 0, err
            yield Running(config, code, out)
        finally:
            stop_stack(config)


# --- one stack: up, status, env, second up, down (in this order) -------------------------------------


def test_nessie_and_the_queue_server_start_on_the_aot_caches_setup_built(running: Running) -> None:
    """`make setup` builds each JVM server's AOT cache (wap_stack/aot.py); the stack's commands name it and the JVM
    took it (it logs `[aot]` errors for a cache it cannot use, and starts without)."""
    from wap_stack.java import java_major

    recorded = json.loads(running.config.state_file.read_text())
    for name in ("nessie", "queue"):
        command = recorded[f"{name}_command"]
        major = java_major(Path(command[0]))
        if major is None or major < 25:
            pytest.skip(f"the stack's java is {major}: AOT caches need JDK 25")
        [cache] = [a.removeprefix("-XX:AOTCache=") for a in command if a.startswith("-XX:AOTCache=")]
        assert Path(cache).is_file(), cache
        log = running.config.log_for(name).read_text(errors="replace")
        assert "[aot]" not in log, log[:2000]


def test_up_reports_start_up_times_urls_logs_and_the_env_hint(running: Running) -> None:
    state = load_state(running.config)
    assert state is not None
    out = running.up_output
    assert f"moto (S3, SQS) up in {state.moto_seconds:5.1f} s  {state.moto_url}" in out
    assert f"Nessie     up in {state.nessie_seconds:5.1f} s  {state.nessie_url}" in out
    assert state.trigger_seconds is not None
    assert f"events     up in {state.trigger_seconds:5.1f} s" in out and str(state.queue_url) in out
    total = state.moto_seconds + state.nessie_seconds + state.trigger_seconds
    assert f"Local stack up in {total:.1f} s" in out
    assert str(running.config.logs_dir) in out
    assert 'eval "$(wap stack env)"' in out
    assert f"the channel, as a person uses it: http://127.0.0.1:{state.slack_port}/ " in out  # the local Slack page
    assert f"interactivity endpoint http://127.0.0.1:{state.slack_port}/slack/actions" in out
    recorded = json.loads(running.config.state_file.read_text())
    assert recorded["moto_pid"] == state.moto_pid and recorded["nessie_pid"] == state.nessie_pid
    assert recorded["source_bucket"] == "source" and recorded["lake_bucket"] == "lake"
    assert recorded["started_at"]
    assert running.config.moto_log.is_file() and running.config.nessie_log.is_file()
    assert "-Dnessie.version.store.type=ROCKSDB" in recorded["nessie_command"]
    assert f"-Dnessie.version.store.persist.rocks.database-path={running.config.nessie_store}" in (
        recorded["nessie_command"]
    )
    assert (running.config.nessie_store / "CURRENT").is_file()  # RocksDB's


def test_status_is_healthy(running: Running) -> None:
    code, out, _ = wap("stack", "status")
    assert code == 0, out
    assert out.count("(alive)") == 7 and "The local stack is running and healthy." in out
    assert str(running.config.nessie_log) in out and str(running.config.moto_log) in out

    code, out, _ = wap("stack", "status", "--json")
    report = json.loads(out)
    assert code == 0 and report["healthy"] and not report["broken"]
    assert [c["name"] for c in report["components"]] == [
        "moto (S3, SQS)", "Nessie", "queue server (ElasticMQ: the events queues)", "Slack sink",
        "Lambda runtime (emulator + awslambdaric)", "SQS worker", "keeper (restarts a crashed part)",
    ]
    assert all(c["alive"] and c["healthy"] and c["pid"] for c in report["components"])


def test_env_is_evalable_and_points_at_the_stack(running: Running) -> None:
    code, out, err = wap("stack", "env")
    assert code == 0, err
    lines = out.splitlines()
    assert len(lines) == len(ENV_KEYS) and all(line.startswith("export ") for line in lines)

    shell = subprocess.run(
        ["bash", "-c", 'eval "$1" && env -0', "bash", out],
        env={"PATH": os.environ["PATH"]},
        capture_output=True,
        check=True,
    )
    exported = dict(item.split("=", 1) for item in shell.stdout.decode().split("\0") if "=" in item)
    env = {key: exported[key] for key in ENV_KEYS}
    state = load_state(running.config)
    assert state is not None and env == stack_environment(state)
    assert env["NESSIE_ENDPOINT"] == f"http://127.0.0.1:{running.config.nessie_port}"
    assert env["WAP_STACK_DIR"] == str(running.config.state_dir)

    s3: Any = boto3.client(
        "s3",
        endpoint_url=env["AWS_ENDPOINT_URL"],
        aws_access_key_id=env["AWS_ACCESS_KEY_ID"],
        aws_secret_access_key=env["AWS_SECRET_ACCESS_KEY"],
        region_name=env["AWS_REGION"],
    )
    buckets = {bucket["Name"] for bucket in s3.list_buckets()["Buckets"]}
    assert {env["SOURCE_BUCKET"], env["LAKE_BUCKET"]} <= buckets

    nessie = env["NESSIE_ENDPOINT"]
    assert requests.get(f"{nessie}/api/v2/config", timeout=10).status_code == 200
    iceberg = requests.get(f"{nessie}/iceberg/v1/config", params={"warehouse": "warehouse"}, timeout=10)
    assert iceberg.status_code == 200, iceberg.text


def test_invoke_sends_an_event_straight_to_the_function(running: Running) -> None:
    """`wap stack invoke`: the daily schedule's event as EventBridge sends it; the function's answer, and its
    failure for an event it does not know (exit 1); an event that is not a JSON object is refused before it is sent."""
    code, out, err = wap("stack", "invoke", '{"wap_maintain": "all"}')
    assert code == 0, err
    assert "maintained" in json.loads(out)
    code, out, _ = wap("stack", "invoke", '{"hello": "world"}')
    assert code == 1 and "unrecognised event" in json.loads(out)["errorMessage"]
    for bad in ("not json", "[1, 2]"):
        code, out, err = wap("stack", "invoke", bad)
        assert code == 2 and out == "" and "not a JSON object" in err and "Fix:" in err


def test_a_second_up_is_refused(running: Running) -> None:
    before = load_state(running.config)
    code, out, err = wap("stack", "up")
    assert code != 0 and out == ""
    assert "already running" in err and "wap stack down" in err
    with pytest.raises(ConfigError, match="already running"):
        start_stack(running.config)
    assert load_state(running.config) == before
    assert before is not None and not gone(before.moto_pid) and not gone(before.nessie_pid)


def test_the_catalog_survives_a_nessie_restart(running: Running) -> None:
    """A Nessie outage mid-run: branches and tables (with their metadata in moto's S3) are there afterwards."""
    before = load_state(running.config)
    assert before is not None
    api, iceberg = f"{before.nessie_url}/api/v2", f"{before.nessie_url}/iceberg/v1"
    main = requests.get(f"{api}/trees/main", timeout=10).json()["reference"]["hash"]
    created = requests.post(f"{api}/trees", params={"name": "b1", "type": "BRANCH"},
                            json={"type": "BRANCH", "name": "main", "hash": main}, timeout=10)
    assert created.status_code == 200, created.text
    on_b1 = f"{iceberg}/b1%7Cwarehouse/namespaces"
    assert requests.post(on_b1, json={"namespace": ["ns"], "properties": {}}, timeout=10).status_code == 200
    schema = {"type": "struct", "schema-id": 0, "fields": [{"id": 1, "name": "a", "required": False, "type": "int"}]}
    table = requests.post(f"{on_b1}/ns/tables", json={"name": "t1", "schema": schema, "stage-create": False},
                          timeout=30)
    assert table.status_code == 200, table.text
    b1 = requests.get(f"{api}/trees/b1", timeout=10).json()["reference"]
    with pytest.raises(ConfigError, match="already running"):
        start_nessie(running.config)

    after = restart_nessie(running.config)

    assert after.nessie_pid != before.nessie_pid and gone(before.nessie_pid)
    assert load_state(running.config) == after and after == replace(before, nessie_pid=after.nessie_pid)
    assert requests.get(f"{api}/trees/b1", timeout=10).json()["reference"] == b1
    assert requests.get(f"{api}/trees/main", timeout=10).json()["reference"]["hash"] == main
    loaded = requests.get(f"{on_b1}/ns/tables/t1", timeout=30)
    assert loaded.status_code == 200, loaded.text
    assert loaded.json()["metadata"]["schemas"][0]["fields"][0]["name"] == "a"
    assert stack_status(running.config).healthy
    assert running.config.nessie_log.read_text().count("$ ") == 2  # the restart appended to the log


def test_down_stops_both_processes_and_discards_the_lake(running: Running) -> None:
    state = load_state(running.config)
    assert state is not None
    code, out, _ = wap("stack", "down")
    assert code == 0
    assert "discarded" in out and "in memory" in out and str(running.config.nessie_store) in out
    assert gone(state.moto_pid) and gone(state.nessie_pid)
    assert all(gone(pid) for pid in state.pids.values())
    assert not running.config.state_file.exists()
    assert not running.config.nessie_store.exists(), "the version store goes with moto's in-memory S3"
    assert port_is_free(state.moto_port) and port_is_free(state.nessie_port)

    code, out, _ = wap("stack", "status")
    assert code == 1 and "not running" in out
    code, out, err = wap("stack", "env")
    assert code == 1 and out == "" and "wap stack up" in err
    code, out, err = wap("stack", "invoke", "{}")
    assert code == 1 and out == "" and "not running" in err and "wap stack up" in err
    code, out, _ = wap("stack", "down")
    assert code == 0 and "nothing to stop" in out


# --- several execution environments ------------------------------------------------------------------

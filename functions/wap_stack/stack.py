"""The local stack: a moto S3 server and a Nessie server that live and die together, and the event path.

moto keeps S3 in memory and Nessie its version store in <state_dir>/nessie-store, and the catalog must never
outlive the object store it points at, so `start_stack` starts both (on an empty store) or neither,
`stop_stack` stops both and deletes the store, and `stack_status` reports a stack with one process dead as
broken. Pids, ports and buckets are recorded in <state_dir>/state.json (written as soon as a process is
started, so an interrupted start-up can still be cleaned up); each process writes its output to
<state_dir>/logs/<name>.log.

This module starts and stops the stack, and is the one to import from: it re-exports the rest of the
package's API. The parts live in `components` (names, host, credentials, `StackError`), `config`
(`StackConfig`), `state` (the state file, `stack_environment`), `processes` (spawning, liveness, stopping,
free ports), `java` (a Java 21+ for Nessie), `nessie` (its command, its store, restarting it), `trigger`
(the event path), `status` (health checks, `stack_status`), `teardown` (`take_down`, leftovers of an earlier stack),
`leftovers` (processes found by the stack's WAP_STACK_OWNER tag) and `iam` with `moto_iam` (`up --iam`).
"""

from __future__ import annotations

import os
import sys
import time
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from wap_ingest.adapters.aws import apply_lake_lifecycle
from wap_ingest.core.errors import ConfigError
from wap_stack import auth, iam, nessie, queue, trigger
from wap_stack.components import (
    ACCESS_KEY,
    HOST,
    KEEPER,
    LABELS,
    MOTO,
    NESSIE,
    NESSIE_VERSION,
    SECRET_KEY,
    WAREHOUSE,
    StackError,
    label,
)
from wap_stack.config import (
    StackConfig,
    check_visibility,
    config_to_json,
    default_nessie_jar,
    default_state_dir,
    repo_root,
)
from wap_stack.environment import TUNABLES, system_environment
from wap_stack.heal import Healed, heal, keeper_command
from wap_stack.java import MIN_JAVA, find_java, java_major
from wap_stack.leftovers import describe_holders, owned_processes, stop_leftovers
from wap_stack.nessie import nessie_command, restart_nessie, start_nessie, stop_nessie
from wap_stack.processes import (
    free_port,
    free_port_block,
    free_ports,
    port_is_free,
    process_alive,
    spawn,
    stop_processes,
    wait_ready,
)
from wap_stack.state import (
    LambdaEnvironment,
    StackState,
    load_state,
    read_record,
    recorded_pids,
    recorded_processes,
    stack_environment,
    start_lock,
    write_record,
)
from wap_stack.status import (
    ComponentStatus,
    StackStatus,
    moto_health,
    nessie_health,
    stack_status,
)
from wap_stack.teardown import StopReport, check_leftovers, find_leftovers, stop_stack, take_down

__all__ = [
    "ACCESS_KEY",
    "HOST",
    "LABELS",
    "MIN_JAVA",
    "MOTO",
    "NESSIE",
    "NESSIE_VERSION",
    "SECRET_KEY",
    "WAREHOUSE",
    "ComponentStatus",
    "LambdaEnvironment",
    "StackConfig",
    "StackError",
    "StackState",
    "StackStatus",
    "StopReport",
    "check_leftovers",
    "default_nessie_jar",
    "default_state_dir",
    "ensure_not_running",
    "find_java",
    "find_leftovers",
    "free_port",
    "free_port_block",
    "free_ports",
    "heal_stack",
    "java_major",
    "label",
    "load_state",
    "moto_command",
    "moto_health",
    "nessie_command",
    "nessie_health",
    "port_is_free",
    "process_alive",
    "recorded_processes",
    "repo_root",
    "restart_nessie",
    "stack_environment",
    "stack_status",
    "start_nessie",
    "start_stack",
    "stop_nessie",
    "stop_stack",
    "take_down",
]

# (setting, variable, use) of each fixed port; the execution environments' ports follow from the last two.
_PORT_VARIABLES = (
    ("moto_port", "WAP_STACK_MOTO_PORT", "moto S3 server"),
    ("nessie_port", "WAP_STACK_NESSIE_PORT", "Nessie API"),
    ("nessie_management_port", "WAP_STACK_NESSIE_MGMT_PORT", "Nessie management/health"),
    ("slack_port", "WAP_STACK_SLACK_PORT", "Slack sink"),
    ("queue_port", "WAP_STACK_QUEUE_PORT", "queue server (ElasticMQ)"),
)


def _ports(config: StackConfig) -> list[tuple[int, str, str]]:
    """(port, variable, use) of every port the stack listens on."""
    ports = [(int(getattr(config, attr)), variable, use) for attr, variable, use in _PORT_VARIABLES
             if getattr(config, attr)]  # the queue's 0: picked at `up`
    for i, (invoke, runtime) in enumerate(config.environment_ports()):
        of = "" if i == 0 else f" of execution environment {i + 1}, the variable's port + {2 * i}"
        ports += [(invoke, "WAP_STACK_LAMBDA_PORT", f"Lambda invoke API (emulator{of})"),
                  (runtime, "WAP_STACK_RUNTIME_PORT", f"Lambda runtime API (emulator{of})")]
    return ports


# --- commands ---------------------------------------------------------------------------------------


def moto_command(config: StackConfig) -> list[str]:
    return [sys.executable, "-m", "wap_stack.moto_emr", "-H", HOST, "-p", str(config.moto_port)]  # moto.server + labels


def lake_moto_command(config: StackConfig) -> list[str]:
    """moto (with IAM enforced under --iam) whose events queues are served by the queue server
    (wap_stack/moto_queue.py); `config.queue_port` is chosen."""
    base = iam.moto_command(config, sys.executable) if config.iam else moto_command(config)
    return [sys.executable, "-m", "wap_stack.moto_queue", "--queue-endpoint", queue.endpoint(config),
            "--queues", ",".join(queue.ROUTED_QUEUES), *base[3:]]  # base: python -m <module> <options>


def _create_buckets(config: StackConfig) -> None:
    import boto3  # imported here: boto3 is slow to import

    s3 = boto3.client(
        "s3",
        endpoint_url=f"http://{HOST}:{config.moto_port}",
        aws_access_key_id=ACCESS_KEY,
        aws_secret_access_key=SECRET_KEY,
        region_name=config.region,
    )
    location = {} if config.region == "us-east-1" else {"LocationConstraint": config.region}
    for bucket in (config.source_bucket, config.lake_bucket):
        try:
            if location:
                s3.create_bucket(Bucket=bucket, CreateBucketConfiguration=location)
            else:
                s3.create_bucket(Bucket=bucket)
            if bucket == config.lake_bucket:  # as setup_aws.py does (moto keeps the rules; it never expires)
                apply_lake_lifecycle(s3, bucket)
        except Exception as exc:
            raise StackError(
                f"{LABELS[MOTO]} answers but creating bucket {bucket!r} failed ({exc}). Log: {config.moto_log}"
            ) from exc


# --- checks before starting -------------------------------------------------------------------------


def ensure_not_running(config: StackConfig) -> None:
    """Raise ConfigError if a recorded stack still has live processes; forget a stale record."""
    record = read_record(config)
    if record is None:
        return
    pids = recorded_pids(record)
    alive = {name: pid for name, pid in pids.items() if process_alive(name, pid)}
    if not alive:
        config.state_file.unlink(missing_ok=True)  # stale: its processes are gone
        return
    listed = ", ".join(f"{label(name)} pid {pid}" for name, pid in alive.items())
    if record.get("complete") and len(alive) == len(pids):
        raise ConfigError(
            f"The local stack is already running ({listed}; state {config.state_file}). Use it: "
            'eval "$(wap stack env)". Or stop it first: wap stack down'
        )
    raise ConfigError(
        f"A local stack recorded in {config.state_file} is half up ({listed} alive). "
        "Fix: wap stack down, then wap stack up"
    )


def _preflight(config: StackConfig) -> Path:
    """Check everything that can be checked before starting a process; return the java for Nessie."""
    ports = _ports(config)
    if len({port for port, _, _ in ports}) != len(ports) or max(port for port, _, _ in ports) > 65535:
        raise ConfigError(
            "The stack ports must differ and be at most 65535 ("
            + ", ".join(f"{use} {port}" for port, _, use in ports)
            + "). Fix: set "
            + ", ".join(dict.fromkeys(variable for _, variable, _ in ports))
            + " (execution environment n uses WAP_STACK_LAMBDA_PORT and WAP_STACK_RUNTIME_PORT + 2(n-1))"
        )
    for port, variable, use in ports:
        if not port_is_free(port):
            raise ConfigError(
                f"Port {port} ({use}) is already in use on {HOST}{describe_holders(port)}. Fix: stop whatever "
                f"listens on it (another stack: wap stack down, with its WAP_STACK_DIR), or pick another port: "
                f"export {variable}=<free port>"
            )
    check_visibility(config.visibility_seconds, os.environ)
    if config.iam and config.emr_mode == "local":
        raise ConfigError("WAP_EMR_MODE=local and --iam together are not supported: the local EMR runner plays "
                          "the EMR service, which no policy of infra/iam/ describes. Fix: unset WAP_EMR_MODE, or "
                          "drop --iam")
    if not config.nessie_jar.is_file():
        raise ConfigError(
            f"The Nessie server jar {config.nessie_jar} does not exist. Fix: download it into "
            f"{default_nessie_jar().parent} (make jars), or export WAP_NESSIE_JAR=/path/to/"
            f"nessie-quarkus-{NESSIE_VERSION}-runner.jar"
        )
    if queue.missing_jars():
        raise ConfigError(f"The queue server's jars (ElasticMQ) are not in {queue.default_jars()}. Fix: make jars")
    return find_java(config.nessie_java, os.environ.get("JAVA_HOME"))


# --- API --------------------------------------------------------------------------------------------


def start_stack(config: StackConfig, *, clean_leftovers: bool = False) -> StackState:
    """Start moto (with both buckets), the queue server and Nessie (on empty stores), then the event path and the
    keeper; on any failure stop what was started, delete the stores and raise. A recorded stack with some parts down
    and its lake intact (moto running) gets those parts started again instead (`heal_stack`). Processes an earlier
    stack of this folder left running are named in a ConfigError, or stopped first with `clean_leftovers`."""
    with start_lock(config):
        healed = _heal(config)
        return healed[0] if healed is not None else _start(config, clean_leftovers)


def heal_stack(config: StackConfig) -> tuple[StackState, list[Healed]] | None:
    """`wap stack up` on a half-up stack: start every part that is down on its own store (wap_stack/heal.py) and
    return the stack and what was started; None if no fully started stack with a part down is recorded. ConfigError
    if the lake is lost (moto is down) or a part cannot be started again."""
    with start_lock(config):
        return _heal(config)


def _heal(config: StackConfig) -> tuple[StackState, list[Healed]] | None:
    record = read_record(config)
    if record is None or not record.get("complete"):
        return None
    pids = recorded_pids(record)
    alive = [name for name, pid in pids.items() if process_alive(name, pid)]
    if not alive or (len(alive) == len(pids) and KEEPER in pids):
        return None  # gone (a stale record), or all up: ensure_not_running says which
    healed = heal(config)
    failed = [part for part in healed if part.pid is None]
    if failed:
        raise ConfigError("; ".join(f"{label(part.name)} could not be started again ({part.error})" for part in failed)
                          + f". Logs: {config.logs_dir}. Fix: wap stack down, then wap stack up (down discards the "
                          "lake)")
    state = load_state(config)
    assert state is not None
    return state, healed


def _start(config: StackConfig, clean_leftovers: bool = False) -> StackState:
    ensure_not_running(config)
    check_leftovers(config, clean_leftovers)
    if not config.queue_port:
        config = replace(config, queue_port=free_port_block(1, avoid=[p for p, _, _ in _ports(config)]))
    java = _preflight(config)
    command = nessie_command(config, java)
    record: dict[str, Any] = {
        "complete": False,
        "state_dir": str(config.state_dir),
        "moto_pid": None,
        "nessie_pid": None,
        "moto_port": config.moto_port,
        "queue_port": config.queue_port,
        "nessie_port": config.nessie_port,
        "nessie_management_port": config.nessie_management_port,
        "source_bucket": config.source_bucket,
        "lake_bucket": config.lake_bucket,
        "region": config.region,
        "moto_log": str(config.moto_log),
        "nessie_log": str(config.nessie_log),
        "nessie_command": command,
        "started_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "visibility_seconds": config.visibility_seconds,
        "iam": config.iam,
    }
    try:
        nessie.reset_store(config)  # a new lake: the catalog and the queues start as empty as moto's S3
        queue.reset_store(config)
        iam.forget(config.state_dir)
        began = time.monotonic()
        env = system_environment() | {"MOTO_PORT": str(config.moto_port)}  # never the caller's AWS_* or MOTO_*
        record["moto_pid"] = spawn(MOTO, lake_moto_command(config), config.moto_log, env)
        write_record(config, record)
        wait_ready(
            MOTO,
            record["moto_pid"],
            config.moto_log,
            lambda: moto_health(config.moto_port),
            config.startup_timeout,
        )
        _create_buckets(config)  # before Nessie: its readiness includes the object store
        queue.write_settings(config)  # the queue server, on an empty store, before anything creates a queue
        record["queue_command"] = queue.queue_command(config, java)
        record["queue_pid"] = queue.launch(config, record["queue_command"])
        write_record(config, record)
        queue.wait_until_ready(config, record["queue_pid"])
        if config.iam:  # a user per principal now (processes get their keys), policies and enforcement at the end
            iam.create_users(config)
            settings = iam.nessie_secret_settings(config)
            command = [arg for arg in command if not arg.startswith("-Dwap-secrets.s3.")]
            at = command.index("-jar")
            command[at:at] = settings
            record["nessie_command"] = command
        if config.auth:  # Nessie checks tokens of a local issuer and applies the catalog's rules
            record["nessie_command"] = command = auth.with_auth(command, auth.start_issuer(config))
        record["moto_seconds"] = round(time.monotonic() - began, 2)
        began = time.monotonic()
        record["nessie_pid"] = nessie.launch(config, command)
        write_record(config, record)
        nessie.wait_until_ready(config, record["nessie_pid"], config.nessie_management_port)
        record["nessie_seconds"] = round(time.monotonic() - began, 2)
        began = time.monotonic()
        trigger.start_event_path(config, record)
        if config.iam:
            iam.attach_policies(config, record)
            iam.enforce(config)
        record["trigger_seconds"] = round(time.monotonic() - began, 2)
        # last: the keeper, which restarts a crashed part on its store (wap_stack/heal.py)
        record["keeper_pid"] = spawn(KEEPER, keeper_command(config), config.log_for(KEEPER), system_environment())
        state = StackState.from_json(record)
        write_record(config, {"complete": True, "config": config_to_json(config),
                              "queue_command": record["queue_command"],
                              "tunables": {n: v for n, v in os.environ.items() if n in TUNABLES}, **state.to_json()})
    except BaseException:
        stop_processes(recorded_pids(record))
        auth.stop_issuer(config)
        stop_leftovers(owned_processes(config.state_dir))
        iam.forget(config.state_dir)
        config.state_file.unlink(missing_ok=True)
        nessie.reset_store(config)
        queue.reset_store(config)
        raise
    return state

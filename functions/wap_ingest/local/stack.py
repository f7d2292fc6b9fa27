"""The local stack: a moto S3 server and a Nessie server, run as two processes that live and die together.

Both keep their state in memory, and the catalog must never outlive the object store it points at, so
`start_stack` starts both or neither, `stop_stack` stops both, and `stack_status` reports a stack with one
process dead as broken. Pids, ports and buckets are recorded in <state_dir>/state.json (written as soon as
a process is started, so an interrupted start-up can still be cleaned up); each process writes its output
to <state_dir>/logs/<component>.log.

This module starts and stops the stack, and is the one to import from: it re-exports the rest of the
package's API. The parts live in `components` (names, host, credentials, `StackError`), `state` (settings,
the state file, `stack_environment`), `processes` (spawning, liveness, stopping, free ports), `java`
(a Java 21+ for Nessie) and `status` (health checks, `stack_status`).
"""

from __future__ import annotations

import fcntl
import os
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from wap_ingest.core.errors import ConfigError
from wap_ingest.local import trigger
from wap_ingest.local.components import (
    ACCESS_KEY,
    HOST,
    LABELS,
    LAMBDA,
    MOTO,
    NESSIE,
    NESSIE_VERSION,
    SECRET_KEY,
    SLACK,
    WAREHOUSE,
    WORKER,
    StackError,
)
from wap_ingest.local.java import MIN_JAVA, find_java, java_major
from wap_ingest.local.processes import (
    free_port,
    free_ports,
    port_is_free,
    port_open,
    process_alive,
    spawn,
    stop_processes,
    wait_ready,
)
from wap_ingest.local.state import (
    StackConfig,
    StackState,
    default_nessie_jar,
    default_state_dir,
    load_state,
    read_record,
    recorded_pids,
    recorded_processes,
    repo_root,
    stack_environment,
    write_record,
)
from wap_ingest.local.status import (
    ComponentStatus,
    StackStatus,
    moto_health,
    nessie_health,
    sink_health,
    stack_status,
)

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
    "StackConfig",
    "StackError",
    "StackState",
    "StackStatus",
    "default_nessie_jar",
    "default_state_dir",
    "ensure_not_running",
    "find_java",
    "free_port",
    "free_ports",
    "java_major",
    "load_state",
    "moto_command",
    "moto_health",
    "nessie_command",
    "nessie_health",
    "port_is_free",
    "process_alive",
    "recorded_processes",
    "repo_root",
    "stack_environment",
    "stack_status",
    "start_stack",
    "stop_stack",
]

_PORT_VARIABLES = {
    "moto_port": ("WAP_STACK_MOTO_PORT", "moto S3 server"),
    "nessie_port": ("WAP_STACK_NESSIE_PORT", "Nessie API"),
    "nessie_management_port": ("WAP_STACK_NESSIE_MGMT_PORT", "Nessie management/health"),
    "slack_port": ("WAP_STACK_SLACK_PORT", "Slack sink"),
    "lambda_port": ("WAP_STACK_LAMBDA_PORT", "Lambda invoke API (emulator)"),
    "runtime_port": ("WAP_STACK_RUNTIME_PORT", "Lambda runtime API (emulator)"),
}


# --- commands ---------------------------------------------------------------------------------------


def moto_command(config: StackConfig) -> list[str]:
    return [sys.executable, "-m", "moto.server", "-H", HOST, "-p", str(config.moto_port)]


def nessie_command(config: StackConfig, java: Path) -> list[str]:
    s3 = "nessie.catalog.service.s3.default-options"
    settings = {
        "quarkus.http.host": HOST,
        "quarkus.http.port": str(config.nessie_port),
        "quarkus.management.host": HOST,
        "quarkus.management.port": str(config.nessie_management_port),
        "nessie.version.store.type": "IN_MEMORY",
        "nessie.catalog.default-warehouse": WAREHOUSE,
        f"nessie.catalog.warehouses.{WAREHOUSE}.location": f"s3://{config.lake_bucket}/{WAREHOUSE}/",
        f"{s3}.endpoint": f"http://{HOST}:{config.moto_port}/",
        f"{s3}.path-style-access": "true",
        f"{s3}.region": config.region,
        # Nessie 0.99 resolves secrets from Quarkus config: the access key names a secret whose
        # `.name`/`.secret` hold the key id and the secret key (`nessie.catalog.secrets.*` does not work).
        f"{s3}.access-key": "urn:nessie-secret:quarkus:wap-secrets.s3",
        "wap-secrets.s3.name": ACCESS_KEY,
        "wap-secrets.s3.secret": SECRET_KEY,
    }
    # C1 only and the serial GC: start-up drops from ~7 s to ~3 s; a local in-memory catalog needs no more.
    jvm = ["-Xmx1g", "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC"]
    return [str(java), *jvm, *(f"-D{k}={v}" for k, v in settings.items()), "-jar", str(config.nessie_jar)]


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
    listed = ", ".join(f"{LABELS[name]} pid {pid}" for name, pid in alive.items())
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
    ports = {attr: getattr(config, attr) for attr in _PORT_VARIABLES}
    if len(set(ports.values())) != len(ports):
        raise ConfigError(
            "The stack ports must differ ("
            + ", ".join(f"{use} {getattr(config, attr)}" for attr, (_, use) in _PORT_VARIABLES.items())
            + "). Fix: set "
            + ", ".join(var for var, _ in _PORT_VARIABLES.values())
        )
    for attr, port in ports.items():
        variable, use = _PORT_VARIABLES[attr]
        if not port_is_free(port):
            raise ConfigError(
                f"Port {port} ({use}) is already in use on {HOST}. Fix: stop whatever listens on it "
                f"(another stack: wap stack down), or pick another port: export {variable}=<free port>"
            )
    if not config.nessie_jar.is_file():
        raise ConfigError(
            f"The Nessie server jar {config.nessie_jar} does not exist. Fix: download it into "
            f"{default_nessie_jar().parent} (make jars), or export WAP_NESSIE_JAR=/path/to/"
            f"nessie-quarkus-{NESSIE_VERSION}-runner.jar"
        )
    return find_java(config.nessie_java, os.environ.get("JAVA_HOME"))


# --- API --------------------------------------------------------------------------------------------


def start_stack(config: StackConfig) -> StackState:
    """Start moto (with both buckets) and then Nessie; on any failure stop what was started and raise."""
    config.state_dir.mkdir(parents=True, exist_ok=True)
    with (config.state_dir / "up.lock").open("w") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)  # released when the file closes
        except BlockingIOError as exc:
            raise ConfigError(
                f"Another `wap stack up` is starting the stack in {config.state_dir}. Wait for it to finish, "
                "or stop it: wap stack down"
            ) from exc
        return _start(config)


def _start(config: StackConfig) -> StackState:
    ensure_not_running(config)
    java = _preflight(config)
    record: dict[str, Any] = {
        "complete": False,
        "state_dir": str(config.state_dir),
        "moto_pid": None,
        "nessie_pid": None,
        "moto_port": config.moto_port,
        "nessie_port": config.nessie_port,
        "nessie_management_port": config.nessie_management_port,
        "source_bucket": config.source_bucket,
        "lake_bucket": config.lake_bucket,
        "region": config.region,
        "moto_log": str(config.moto_log),
        "nessie_log": str(config.nessie_log),
        "started_at": datetime.now(UTC).isoformat(timespec="seconds"),
    }
    try:
        began = time.monotonic()
        env = {**os.environ, "MOTO_PORT": str(config.moto_port)}
        record["moto_pid"] = spawn(MOTO, moto_command(config), config.moto_log, env)
        write_record(config, record)
        wait_ready(
            MOTO,
            record["moto_pid"],
            config.moto_log,
            lambda: moto_health(config.moto_port),
            config.startup_timeout,
        )
        _create_buckets(config)  # before Nessie: its readiness includes the object store
        record["moto_seconds"] = round(time.monotonic() - began, 2)
        began = time.monotonic()
        record["nessie_pid"] = spawn(NESSIE, nessie_command(config, java), config.nessie_log, os.environ)
        write_record(config, record)
        wait_ready(
            NESSIE,
            record["nessie_pid"],
            config.nessie_log,
            lambda: nessie_health(config.nessie_management_port),
            config.startup_timeout,
        )
        record["nessie_seconds"] = round(time.monotonic() - began, 2)
        began = time.monotonic()
        _start_trigger(config, record)
        record["trigger_seconds"] = round(time.monotonic() - began, 2)
        state = StackState.from_json(record)
        write_record(config, {"complete": True, **state.to_json()})
    except BaseException:
        stop_processes(recorded_pids(record))
        config.state_file.unlink(missing_ok=True)
        raise
    return state


def _start_trigger(config: StackConfig, record: dict[str, Any]) -> None:
    """Queues and notification, then the Slack sink, the function under the emulator, and the worker."""
    queue_url, dead_letter_url = trigger.setup_notifications(config)
    record |= {"queue_url": queue_url, "dead_letter_url": dead_letter_url, "max_receives": config.max_receives,
               "slack_port": config.slack_port, "lambda_port": config.lambda_port}
    record["slack_pid"] = spawn(SLACK, trigger.sink_command(config), config.log_for(SLACK), os.environ)
    write_record(config, record)
    wait_ready(SLACK, record["slack_pid"], config.log_for(SLACK), lambda: sink_health(config.slack_port),
               config.startup_timeout)
    partial = StackState.from_json(record | {"moto_seconds": 0, "nessie_seconds": 0})
    env = trigger.function_environment(config, stack_environment(partial))
    record["lambda_pid"] = spawn(LAMBDA, trigger.lambda_command(config), config.log_for(LAMBDA), env)
    write_record(config, record)
    wait_ready(LAMBDA, record["lambda_pid"], config.log_for(LAMBDA), lambda: _listening(config.lambda_port),
               config.startup_timeout)
    invoke_url = str(partial.invoke_url)
    record["worker_pid"] = spawn(WORKER, trigger.worker_command(config, queue_url, invoke_url),
                                 config.log_for(WORKER), env)
    write_record(config, record)


def _listening(port: int) -> tuple[bool, str]:
    return (True, "listening") if port_open(port) else (False, "not listening yet")


def stop_stack(config: StackConfig) -> bool:
    """Stop the recorded processes (both, always) and forget the stack. True if any process was stopped."""
    record = read_record(config)
    if record is None:
        return False
    stopped = stop_processes(recorded_pids(record))
    config.state_file.unlink(missing_ok=True)
    return stopped

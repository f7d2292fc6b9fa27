"""The stack's Nessie server: its command, its on-disk version store, and stopping/starting it on its own.

Nessie keeps its version store in RocksDB under <state_dir>/nessie-store, so stopping and starting the
process (`stop_nessie`, `start_nessie`, `restart_nessie`: a catalog outage in the middle of a run) keeps
every branch, tag and table. moto keeps S3 in memory, and the catalog must live exactly as long as the
object store it points at: `up` starts from an empty store (`reset_store`) and `down` deletes it, and
Nessie is only started again while the stack's moto still runs.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from wap_ingest.core.errors import ConfigError
from wap_stack import aot
from wap_stack.components import ACCESS_KEY, HELD, HOST, LABELS, MOTO, NESSIE, SECRET_KEY, WAREHOUSE
from wap_stack.config import StackConfig
from wap_stack.environment import system_environment
from wap_stack.java import find_java
from wap_stack.processes import port_is_free, process_alive, spawn, stop_processes, wait_ready
from wap_stack.runtime import update_record
from wap_stack.state import StackState, load_state, read_record, start_lock, write_record
from wap_stack.status import nessie_health


def nessie_command(config: StackConfig, java: Path, *, cached: bool = True) -> list[str]:
    s3 = "nessie.catalog.service.s3.default-options"
    settings = {
        "quarkus.http.host": HOST,
        "quarkus.http.port": str(config.nessie_port),
        "quarkus.management.host": HOST,
        "quarkus.management.port": str(config.nessie_management_port),
        "nessie.version.store.type": "ROCKSDB",
        "nessie.version.store.persist.rocks.database-path": str(config.nessie_store),
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
    # C1 only and the serial GC: start-up drops from ~7 s to ~3 s; a local catalog needs no more.
    jvm = ["-Xmx1g", "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC"]
    command = [str(java), *jvm, *(f"-D{k}={v}" for k, v in settings.items()), "-jar", str(config.nessie_jar)]
    return aot.with_cache(NESSIE, command) if cached else command  # `make setup` builds the cache (wap_stack/aot.py)


def reset_store(config: StackConfig) -> None:
    """Delete Nessie's version store (only ever while no Nessie of this stack runs)."""
    shutil.rmtree(config.nessie_store, ignore_errors=True)


def launch(config: StackConfig, command: list[str], *, append: bool = False) -> int:
    """Spawn Nessie with `command` and return its pid; the caller records it and then calls `wait_until_ready`."""
    return spawn(NESSIE, command, config.nessie_log, system_environment(), append=append)  # its settings: -D...


def wait_until_ready(config: StackConfig, pid: int, management_port: int) -> None:
    wait_ready(NESSIE, pid, config.nessie_log, lambda: nessie_health(management_port), config.startup_timeout)


def _running_state(config: StackConfig) -> StackState:
    state = load_state(config)
    if state is None:
        raise ConfigError(f"No local stack is recorded in {config.state_dir}. Fix: wap stack up")
    return state


def stop_nessie(config: StackConfig) -> bool:
    """Stop the recorded stack's Nessie (SIGTERM, then SIGKILL); its version store stays on disk.

    The record keeps the stopped pid, so `wap stack status` reports the stack as broken until `start_nessie`, and
    notes Nessie as held (stopped on purpose: an outage a test makes), so the keeper does not start it again.
    True if Nessie was running.
    """
    state = _running_state(config)
    update_record(config, lambda record: record.update({HELD: sorted({*(record.get(HELD) or ()), NESSIE})}))
    return stop_processes({NESSIE: state.nessie_pid})


def start_nessie(config: StackConfig) -> StackState:
    """Start the recorded stack's Nessie again, with the command and ports it was started with, on the same
    version store; wait until it is ready and record its new pid. Its output is appended to its log."""
    with start_lock(config):
        state = _running_state(config)
        if process_alive(NESSIE, state.nessie_pid):
            raise ConfigError(f"{LABELS[NESSIE]} is already running (pid {state.nessie_pid}). To restart it: "
                              "restart_nessie")
        if not process_alive(MOTO, state.moto_pid):
            raise ConfigError(
                f"{LABELS[MOTO]} (pid {state.moto_pid}) is not running, and the catalog must not outlive the object "
                "store it points at. Fix: wap stack down, then wap stack up"
            )
        if not config.nessie_store.is_dir():
            raise ConfigError(
                f"Nessie's version store {config.nessie_store} is gone: the catalog would start empty while the "
                "object store still holds the lake. Fix: wap stack down, then wap stack up"
            )
        for port in (state.nessie_port, state.nessie_management_port):
            if not port_is_free(port):
                raise ConfigError(f"Port {port} (Nessie) is already in use on {HOST}: another process took it "
                                  "while Nessie was stopped. Fix: stop it, or wap stack down, then wap stack up")
        command = list(state.nessie_command) or nessie_command(config, find_java(config.nessie_java,
                                                                                   os.environ.get("JAVA_HOME")))
        pid = launch(config, command, append=True)
        record = read_record(config) or state.to_json()
        held = [name for name in record.get(HELD) or () if name != NESSIE]
        record = record | {"nessie_pid": pid, HELD: held}
        write_record(config, record)  # recorded at once: `down` stops it whatever happens
        try:
            wait_until_ready(config, pid, state.nessie_management_port)
        except BaseException:
            stop_processes({NESSIE: pid})
            raise
        return StackState.from_json(record)


def restart_nessie(config: StackConfig) -> StackState:
    """Stop the recorded stack's Nessie and start it again on the same version store, ports and command."""
    stop_nessie(config)
    return start_nessie(config)

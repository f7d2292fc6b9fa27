"""Starting the parts of a recorded stack that are not running, on their own stores, without losing the lake.

What can come back, and on what:
- the queue server (ElasticMQ): on its store, <state_dir>/queue-store (every message it held, in flight or not);
- Nessie: on its RocksDB version store, <state_dir>/nessie-store (every branch, tag and table);
- the Slack sink (its record of alerts is a file), the local EMR runner;
- an execution environment's worker, and with it its emulator if that is down too (a live worker restarts its own
  environment: wap_stack/runtime.py; nobody else touches it then);
- the keeper itself (`wap stack up` only).
What cannot: moto, whose S3 is in its memory: without it the lake is gone, and only `down` then `up` helps.

Each part is started exactly as `up` started it: the command recorded (Nessie's, the queue server's) or rebuilt from
the settings `up` recorded (`config`, `tunables`: wap_stack/config.py `config_to_json`), its output appended to its
log, its new pid recorded at once, and the restart noted under `restarts.<name>` (`wap stack status` says when and
why). Two healers never run at once (<state_dir>/heal.lock), and none while the stack is being stopped.
"""

from __future__ import annotations

import contextlib
import fcntl
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import partial
from typing import Any

from wap_ingest.core.errors import ConfigError
from wap_stack import queue, trigger
from wap_stack.components import EMR, HELD, KEEPER, LABELS, LAMBDA, MOTO, NESSIE, QUEUE, SLACK, StackError, label
from wap_stack.config import StackConfig, config_from_json
from wap_stack.environment import system_environment
from wap_stack.processes import port_open, process_alive, spawn, stop_processes, wait_ready
from wap_stack.runtime import RESTARTS, update_record
from wap_stack.state import StackState, read_record, recorded_pids, stack_environment
from wap_stack.status import nessie_health, sink_health


@dataclass(frozen=True)
class Healed:
    name: str
    pid: int | None  # None: it could not be started (see `error`)
    error: str = ""


@contextlib.contextmanager
def heal_lock(config: StackConfig, *, wait: bool = True) -> Iterator[bool]:
    """Held while healing; yields False (without holding it) if `wait` is False and another healer has it."""
    config.state_dir.mkdir(parents=True, exist_ok=True)
    with (config.state_dir / "heal.lock").open("w") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX if wait else fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            yield False
            return
        yield True


def recorded_config(record: dict[str, Any], fallback: StackConfig) -> StackConfig:
    """The settings the stack was started with (older records: `fallback`, with the record's ports)."""
    if isinstance(record.get("config"), dict):
        return config_from_json(record["config"])
    return fallback


def down_parts(record: dict[str, Any]) -> list[str]:
    """The recorded parts that are not running, but for those stopped on purpose."""
    held = set(record.get(HELD) or ())
    return [name for name, pid in recorded_pids(record).items() if name not in held and not process_alive(name, pid)]


def lake_lost(record: dict[str, Any]) -> str | None:
    """Why the lake cannot be healed (moto is gone with S3), or None."""
    pid = recorded_pids(record).get(MOTO)
    if pid is None or process_alive(MOTO, pid):
        return None
    return (f"{LABELS[MOTO]} (pid {pid}) is not running: the object store it held in memory is gone, and the catalog "
            "and the queues must not outlive it. Fix: wap stack down (discards the lake), then wap stack up")


def heal(config: StackConfig, *, keeper: bool = True, wait: bool = True, by: str = "wap stack up",
         log: Callable[[str], None] = lambda line: None) -> list[Healed]:
    """Start every recorded part that is down (in the order of the module docstring); return what was started or
    failed to start. ConfigError if the stack is not fully recorded or its lake is lost. `keeper`: also the keeper
    (`up` does; the keeper does not start itself). Nothing while the stack is being stopped, or (`wait` False)
    while another healer runs."""
    with heal_lock(config, wait=wait) as held:
        if not held:
            return []
        record = read_record(config)
        if record is None or not record.get("complete"):
            raise ConfigError(f"No fully started local stack is recorded in {config.state_dir} (an interrupted "
                              "`wap stack up`?). Fix: wap stack down, then wap stack up")
        lost = lake_lost(record)
        if lost:
            raise ConfigError(lost)
        config = recorded_config(record, config)
        healer = _Healer(config, record, log, by)
        down = set(down_parts(record))
        if keeper and KEEPER not in recorded_pids(record):
            down.add(KEEPER)  # recorded before there was a keeper: start one
        for name in _order(record, down, keeper):
            if config.stopping_file.exists():
                break
            healer.start(name)
        return healer.done


def _order(record: dict[str, Any], down: set[str], keeper: bool) -> list[str]:
    names = [n for n in (QUEUE, NESSIE, SLACK) if n in down]
    for env in record.get("environments") or ():
        if env["worker"] in down:  # a dead worker's environment: its emulator too, if that is down
            names += [n for n in (env["lambda"], env["worker"]) if n in down]
    names += [n for n in (EMR,) if n in down]
    return names + ([KEEPER] if keeper and KEEPER in down else [])


class _Healer:
    def __init__(self, config: StackConfig, record: dict[str, Any], log: Callable[[str], None], by: str) -> None:
        self.config, self.record, self.log, self.by = config, record, log, by
        self.done: list[Healed] = []
        # the caller the service's processes were started for: the system's basics here, the tunables `up` saw
        self.caller = system_environment() | dict(record.get("tunables") or {})

    def start(self, name: str) -> None:
        was = recorded_pids(self.record).get(name)
        at = datetime.now(UTC).isoformat(timespec="seconds")
        crash = f"pid {was} was not running" if was else "it was not running"
        pid = None
        try:
            command, env, ready = self._how(name)
            pid = spawn(name, command, self.config.log_for(name), env, append=True)
            self._record(name, pid, at=at, crash=crash, error="")  # at once: `down` stops it whatever happens
            wait_ready(name, pid, self.config.log_for(name), ready, self.config.startup_timeout)
        except (StackError, ConfigError, OSError, KeyError, ValueError) as exc:
            if pid is not None:
                stop_processes({name: pid})
            self._record(name, None, at=at, crash=crash, error=str(exc))
            self.done.append(Healed(name, None, str(exc)))
            self.log(f"{label(name)} could not be started again: {exc}")
            return
        self.done.append(Healed(name, pid))
        self.log(f"{label(name)} started again (pid {pid}; {crash})")

    def _how(self, name: str) -> tuple[list[str], dict[str, str], Callable[[], tuple[bool, str]]]:
        config, record = self.config, self.record
        if name == QUEUE:
            queue.write_settings(config)
            return list(record["queue_command"]), system_environment(), partial(queue.health, config.queue_port)
        if name == NESSIE:
            if not config.nessie_store.is_dir():
                raise ConfigError(f"Nessie's version store {config.nessie_store} is gone: the catalog would start "
                                  "empty beside a full object store. Fix: wap stack down, then wap stack up")
            port = int(record["nessie_management_port"])
            return list(record["nessie_command"]), system_environment(), partial(nessie_health, port)
        if name == SLACK:
            port = int(record["slack_port"])
            return (trigger.sink_command(config), trigger.sink_environment(config, self.stack_env, self.caller),
                    partial(sink_health, port))
        if name == EMR:
            return (trigger.emr_command(config, str(record["emr_application_id"])), self._function_env(LAMBDA),
                    lambda: (True, "started"))
        if name == KEEPER:
            return keeper_command(config), system_environment(), lambda: (True, "started")
        env = next(e for e in record.get("environments") or () if name in (e["lambda"], e["worker"]))
        invoke, runtime = int(env["invoke_port"]), int(env["runtime_port"])
        if name == env["lambda"]:
            return (trigger.lambda_command(config, invoke, runtime), self._function_env(name),
                    lambda: (port_open(invoke), "invoke API listening?"))
        command = trigger.worker_command(config, str(record["queue_url"]), invoke, runtime, env["lambda"])
        return command, self._function_env(env["lambda"]), lambda: (True, "polling")

    @property
    def stack_env(self) -> dict[str, str]:
        return stack_environment(StackState.from_json(self.record))

    def _function_env(self, environment: str) -> dict[str, str]:
        return trigger.function_environment(self.config, self.stack_env, environment, self.caller)

    def _record(self, name: str, pid: int | None, *, at: str, crash: str, error: str) -> None:
        def change(record: dict[str, Any]) -> None:
            previous = (record.get(RESTARTS) or {}).get(name) or {}
            count = int(previous.get("count", 0)) + (1 if pid is not None and not error else 0)
            record.setdefault(RESTARTS, {})[name] = {
                "count": count, "at": at, "crash": crash, "killed": [], "failed": pid is None, "error": error,
                "attempts": 1, "by": self.by}
            if pid is not None:
                record[f"{name}_pid"] = pid
        if pid is not None:
            self.record[f"{name}_pid"] = pid
        update_record(self.config, change)


def keeper_command(config: StackConfig) -> list[str]:
    return [sys.executable, "-m", "wap_stack.keeper", "--state-dir", str(config.state_dir)]

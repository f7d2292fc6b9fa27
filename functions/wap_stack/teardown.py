"""`wap stack down` (`take_down`), and the leftovers of an earlier stack that `wap stack up` finds first.

The keeper and the workers go first (and the EMR runner, which also starts processes), so that no keeper or
supervisor sees a part die and starts a fresh one; <state dir>/stopping tells any that still looks not to
(wap_stack/runtime.py, wap_stack/heal.py).
Then every recorded process (read again: a restart records its new pid), then whatever still carries the stack's
WAP_STACK_OWNER tag (wap_stack/leftovers.py: a restarted environment not yet recorded, a runtime or JVM that left its
group). Last, every port the stack listened on must be free again.
"""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from wap_ingest.core.errors import ConfigError
from wap_stack import auth, iam, nessie, queue
from wap_stack.components import EMR, KEEPER, WORKER, component_of
from wap_stack.config import StackConfig
from wap_stack.leftovers import Leftover, describe_holders, owned_processes, stop_leftovers
from wap_stack.processes import port_is_free, process_alive, stop_processes
from wap_stack.state import read_record, recorded_pids


def stop_stack(config: StackConfig) -> bool:
    """`take_down`; True if any process was stopped."""
    return bool(take_down(config))


def take_down(config: StackConfig) -> StopReport:
    """Stop everything the stack started (in the order the module docstring gives), delete Nessie's version store
    and the stack's keys, and forget the stack."""
    record = read_record(config)
    config.state_dir.mkdir(parents=True, exist_ok=True)
    config.stopping_file.write_text(f"{os.getpid()}\n")
    try:
        first = {n: p for n, p in recorded_pids(record or {}).items() if component_of(n) in (KEEPER, WORKER, EMR)}
        stopped = [n for n, p in first.items() if process_alive(n, p)]
        stop_processes(first)
        record = read_record(config) or record or {}
        rest = {n: p for n, p in recorded_pids(record).items() if n not in first}
        stopped += [n for n, p in rest.items() if process_alive(n, p)]
        stop_processes(rest)
        auth.stop_issuer(config)
        swept = stop_leftovers(owned_processes(config.state_dir))
        nessie.reset_store(config)  # the catalog and the queues go with the object store (moto's S3 was in memory)
        queue.reset_store(config)
        shutil.rmtree(config.state_dir / "in-flight", ignore_errors=True)
        iam.forget(config.state_dir, keep_decisions=True)  # the keys go; the decisions stay to be read
        taken = _ports_still_taken(record)
        config.state_file.unlink(missing_ok=True)
    finally:
        config.stopping_file.unlink(missing_ok=True)
    return StopReport(tuple(stopped), tuple(swept), tuple(taken))


@dataclass(frozen=True)
class StopReport:
    stopped: tuple[str, ...]  # the recorded processes that were running, by name
    swept: tuple[Leftover, ...]  # processes of the stack that no record named (e.g. a restarted environment)
    taken: tuple[str, ...]  # ports of the stack still taken afterwards, described with their holder

    def __bool__(self) -> bool:
        return bool(self.stopped or self.swept)


def _recorded_ports(record: Mapping[str, Any]) -> list[int]:
    ports = [record.get(key) for key in ("moto_port", "nessie_port", "nessie_management_port", "slack_port",
                                         "queue_port")]
    for env in record.get("environments") or ():
        ports += [env.get("invoke_port"), env.get("runtime_port")]
    return [int(port) for port in ports if isinstance(port, int)]


def _ports_still_taken(record: Mapping[str, Any], wait: float = 5.0) -> list[str]:
    """The stack's ports that something still listens on (after up to `wait` s), each with its holder."""
    deadline = time.monotonic() + wait
    while True:
        taken = [port for port in _recorded_ports(record) if not port_is_free(port)]
        if not taken or time.monotonic() >= deadline:
            return [f"{port}{describe_holders(port)}" for port in taken]
        time.sleep(0.2)


def find_leftovers(config: StackConfig) -> list[Leftover]:
    """Processes an earlier stack of this folder started that still run although no live stack is recorded."""
    record = read_record(config)
    if record is not None and any(process_alive(n, p) for n, p in recorded_pids(record).items()):
        return []  # a recorded stack runs: ensure_not_running says so
    return owned_processes(config.state_dir)


def check_leftovers(config: StackConfig, clean: bool) -> list[Leftover]:
    """Raise ConfigError naming the leftovers of an earlier stack of this folder, or stop them if `clean`."""
    leftovers = find_leftovers(config)
    if leftovers and not clean:
        listed = "; ".join(left.describe() for left in leftovers)
        raise ConfigError(
            f"{len(leftovers)} process(es) of an earlier local stack in {config.state_dir} are still running: "
            f"{listed}. Fix: wap stack up --clean-leftovers (stops them first), or wap stack down"
        )
    return stop_leftovers(leftovers)

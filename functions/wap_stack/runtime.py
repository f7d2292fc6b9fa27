"""A Lambda execution environment that recovers from a crash as Lambda's do: its SQS worker supervises it.

An execution environment is the Runtime Interface Emulator (its pid is recorded as `lambda`, `lambda-2`, ...),
the runtime it starts (`python -m awslambdaric`, in a process group of its own) and the Spark JVM that runtime
starts. When the runtime dies during an invocation, the emulator answers `Runtime.ExitError`; when the emulator
itself dies, the invocation's connection breaks. Either way Lambda throws the environment away and the next
invocation gets a fresh one (a cold start), and the messages of the crashed batch are not deleted: they come
back once their visibility timeout passes.

`Supervisor` does the same for the local stack: it kills every process of the dead environment (the emulator's
group and every process that carries the environment's runtime API address, so no runtime or JVM is orphaned),
starts a fresh emulator, records its pid and the crash in the state file (`restarts.<name>`: count, time, exit),
which `wap stack status` reports. A restart that keeps failing is given up after `max_attempts` tries and
recorded as failed: the stack is then broken, for real.

One invocation at a time: the emulator serves one, and a second that comes meanwhile does not wait or get refused, it
makes the emulator panic (aws-lambda-runtime-interface-emulator#97: `AlreadyReserved`, then a nil pointer), which
breaks both invocations' connections. Lambda would hand the second to another environment; here every invocation of
an environment holds its slot (`one_invocation`, a lock file beside the state): the worker's batches and `invoke`,
which sends an event straight to the function as SNS or EventBridge would (`wap stack invoke`).

A supervisor never restarts an environment while the stack is being stopped (`wap stack down` writes
<state dir>/stopping before it stops anything, and stops the workers first) or while its own worker is stopping:
the environment it saw die was stopped on purpose, and a fresh one would outlive the stack.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import signal
import time
from collections.abc import Callable, Iterator, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from wap_stack.components import StackError, label
from wap_stack.config import StackConfig
from wap_stack.processes import _CHILDREN, port_open, process_alive, spawn, wait_ready
from wap_stack.state import read_record, write_record

CRASH_ERROR = "Runtime.ExitError"  # what the emulator answers when the runtime exits during an invocation
RESTARTS = "restarts"  # the record's key: {<lambda name>: {"count", "at", "exit", "failed", "error"}}


@contextlib.contextmanager
def record_lock(config: StackConfig) -> Iterator[None]:
    """Held while a worker reads, changes and writes the state file (several workers may restart at once)."""
    config.state_dir.mkdir(parents=True, exist_ok=True)
    with (config.state_dir / "record.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
        yield


def update_record(config: StackConfig, change: Callable[[dict[str, Any]], None]) -> None:
    with record_lock(config):
        record = read_record(config)
        if record is None:  # the stack was taken down meanwhile: nothing to record
            return
        change(record)
        write_record(config, record)


@contextlib.contextmanager
def one_invocation(state_dir: Path, name: str) -> Iterator[None]:
    """Held for one invocation of the environment `name`; a second invocation waits for it (see the docstring)."""
    (state_dir / "invoking").mkdir(parents=True, exist_ok=True)
    with (state_dir / "invoking" / f"{name}.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
        yield


def invoke(url: str, event: Mapping[str, Any], timeout: float,
           slot: tuple[Path, str] | None = None) -> dict[str, Any]:
    """Send `event` to the emulator at `url`, holding the environment's slot (state dir, environment name) when
    given; the function's answer (a failed invocation's `errorType` and `errorMessage` included). Raises what
    requests raises, and ValueError for an answer that is not JSON."""
    import requests

    with one_invocation(*slot) if slot is not None else contextlib.nullcontext():
        reply = requests.post(url, json=dict(event), timeout=timeout)
    answer: Any = reply.json() if reply.content else {}
    return answer if isinstance(answer, dict) else {"errorMessage": f"unexpected response {reply.text[:200]}"}


def exit_description(message: str) -> str:
    """How the runtime ended, from the emulator's `Runtime exited with error: signal: killed` (Go's wording)."""
    detail = message.rsplit("Runtime exited with error:", 1)[-1].strip() if "Runtime exited" in message else ""
    if detail.startswith("signal:"):
        name = detail.removeprefix("signal:").strip().lower()
        for sig in signal.Signals:
            if (signal.strsignal(sig) or "").lower() == name:
                return f"exit signal {int(sig)} ({sig.name})"
        return f"exit {detail}"
    return detail or "exit status unknown"


def _returncode_description(code: int | None) -> str:
    if code is None:
        return "exit status unknown (the emulator was not started by this worker)"
    if code < 0:
        return f"exit signal {-code} ({signal.Signals(-code).name})"
    return f"exit status {code}"


def environment_processes(runtime_port: int, host: str = "127.0.0.1") -> list[int]:
    """Pids of the processes of the environment whose runtime API is host:runtime_port: the emulator sets
    AWS_LAMBDA_RUNTIME_API for its runtime, and the runtime's children (the Spark JVM) inherit it."""
    marker = f"AWS_LAMBDA_RUNTIME_API={host}:{runtime_port}".encode()
    found = []
    for proc in Path("/proc").glob("[0-9]*"):
        try:
            environ = (proc / "environ").read_bytes()
        except OSError:
            continue
        if marker in environ.split(b"\0") and int(proc.name) != os.getpid():
            found.append(int(proc.name))
    return found


def _kill_group_of(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(os.getpgid(pid), signal.SIGKILL)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.kill(pid, signal.SIGKILL)


class Supervisor:
    """Keeps one execution environment (`name`: `lambda`, `lambda-2`, ...) running for its worker."""

    def __init__(self, config: StackConfig, name: str, invoke_port: int, runtime_port: int, command: list[str],
                 env: Mapping[str, str], *, max_attempts: int = 3, start_timeout: float = 30.0,
                 worker_stopping: Callable[[], bool] = lambda: False) -> None:
        self.config = config
        self.name = name
        self.invoke_port = invoke_port
        self.runtime_port = runtime_port
        self.command = command
        self.env = dict(env)
        self.max_attempts = max_attempts
        self.start_timeout = start_timeout
        self.failed = False  # gave up: restarts kept failing
        self.worker_stopping = worker_stopping
        record = read_record(config) or {}
        self.pid = int(record.get(f"{name}_pid") or 0)

    def alive(self) -> bool:
        return process_alive(self.name, self.pid)

    def stopping(self) -> bool:
        """True while the stack is being stopped (or is gone) or this worker is stopping: no restart then."""
        return self.worker_stopping() or self.config.stopping_file.exists() or not self.config.state_file.exists()

    def crash_in(self, response: Mapping[str, Any]) -> str | None:
        """How the environment crashed during the invocation that gave `response`, or None if it did not."""
        if response.get("errorType") == CRASH_ERROR:
            return f"the runtime exited ({exit_description(str(response.get('errorMessage', '')))})"
        if not self.alive():
            return self.gone()
        return None

    def gone(self) -> str:
        child = _CHILDREN.get(self.pid)
        code = child.poll() if child is not None else None
        return f"the emulator (pid {self.pid}) exited ({_returncode_description(code)})"

    def retire(self) -> list[int]:
        """Kill every process of the environment (emulator, runtime, JVM); return the pids that were alive."""
        pids = environment_processes(self.runtime_port)
        if self.pid and process_alive(self.name, self.pid):
            pids.append(self.pid)
        for pid in pids:
            _kill_group_of(pid)
        child = _CHILDREN.pop(self.pid, None)
        if child is not None:
            with contextlib.suppress(Exception):
                child.wait(timeout=5)
        deadline = time.monotonic() + 5
        while environment_processes(self.runtime_port) and time.monotonic() < deadline:
            time.sleep(0.1)
        return pids

    def restart(self, crash: str) -> bool:
        """Replace the crashed environment by a fresh one; False if that keeps failing (recorded as failed) or the
        stack or the worker is stopping (the dead environment's processes are killed all the same)."""
        at = datetime.now(UTC).isoformat(timespec="seconds")
        killed = self.retire()
        error = ""
        for attempt in range(1, self.max_attempts + 1):
            if self.stopping():
                return False
            try:
                self._start()
            except StackError as exc:
                error = f"attempt {attempt}: {exc}"
                self.retire()
                time.sleep(min(2.0 * attempt, 5.0))
                continue
            self._record(at=at, crash=crash, killed=killed, failed=False, error="")
            return True
        self.failed = True
        self._record(at=at, crash=crash, killed=killed, failed=True, error=error)
        return False

    def _start(self) -> None:
        self.pid = spawn(self.name, self.command, self.config.log_for(self.name), self.env, append=True)
        wait_ready(self.name, self.pid, self.config.log_for(self.name), self._listening, self.start_timeout)

    def _listening(self) -> tuple[bool, str]:
        return (True, "listening") if port_open(self.invoke_port) else (False, "not listening yet")

    def _record(self, *, at: str, crash: str, killed: list[int], failed: bool, error: str) -> None:
        def change(record: dict[str, Any]) -> None:
            previous = (record.get(RESTARTS) or {}).get(self.name) or {}
            count = int(previous.get("count", 0)) + (0 if failed else 1)
            record.setdefault(RESTARTS, {})[self.name] = {
                "count": count, "at": at, "crash": crash, "killed": sorted(killed), "failed": failed,
                "error": error, "attempts": self.max_attempts,
            }
            if not failed:
                record[f"{self.name}_pid"] = self.pid

        update_record(self.config, change)


def restart_summary(name: str, restarts: Mapping[str, Any]) -> str:
    """What `wap stack status` says about an environment's crashes: '', or e.g. 'restarted after a crash at
    <time> (the runtime exited (exit signal 9 (SIGKILL))), 1 restart'."""
    info = restarts.get(name)
    if not info:
        return ""
    count = int(info.get("count", 0))
    plural = "restart" if count == 1 else "restarts"
    if info.get("failed"):
        return (f"{label(name)} crashed at {info.get('at')} ({info.get('crash')}) and could not be restarted in "
                f"{info.get('attempts')} attempts (last error: {info.get('error')}); {count} earlier {plural}")
    return f"restarted after a crash at {info.get('at')} ({info.get('crash')}), {count} {plural}"

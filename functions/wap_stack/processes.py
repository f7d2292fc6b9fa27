"""The stack's processes: spawning them, telling whether they still run, stopping them; free ports.

Each component runs in its own process group (so stopping it also stops anything it forked) and writes
its output to its log. A recorded pid counts as the component only while its command line still names it.
Every spawned process carries its stack's folder in WAP_STACK_OWNER (wap_stack/leftovers.py), and so do its children.

Free ports are picked outside the kernel's ephemeral range (/proc/sys/net/ipv4/ip_local_port_range). A port found by
binding to port 0 comes from that range, from which the kernel also gives every outgoing connection its local port:
in the tens of seconds before the component that needs it starts (moto and Nessie start first), a connection could
take it (a seen failure: the second emulator's "address already in use" in rapid.startRuntimeAPI).
"""

from __future__ import annotations

import contextlib
import os
import random
import shlex
import signal
import socket
import subprocess
import time
from collections.abc import Callable, Collection, Mapping
from pathlib import Path

from wap_stack.components import (
    EMR,
    HOST,
    KEEPER,
    LAMBDA,
    MOTO,
    NESSIE,
    OIDC,
    QUEUE,
    SLACK,
    WORKER,
    StackError,
    component_of,
    label,
)
from wap_stack.leftovers import OWNER_VARIABLE, owner_tag

# A recorded pid is only "ours" while its command line still contains this (guards against pid reuse).
_MARKERS: dict[str, tuple[str, ...]] = {
    MOTO: ("moto.server", "wap_stack.moto_iam", "wap_stack.moto_emr", "wap_stack.moto_queue"),
    NESSIE: ("nessie.version.store.type",),
    SLACK: ("wap_stack.slack_sink",),
    LAMBDA: ("--runtime-interface-emulator-address",),
    WORKER: ("wap_stack.worker",),
    OIDC: ("wap_stack.oidc",),
    EMR: ("wap_stack.emr",),
    QUEUE: ("org.elasticmq.server.Main",),
    KEEPER: ("wap_stack.keeper",),
}
_STOP_GRACE = 10.0
_POLL = 0.2

# Processes started by this interpreter. A child that exits stays a zombie (and looks alive to kill(pid, 0))
# until its parent waits for it, so children are polled and reaped through their Popen objects.
_CHILDREN: dict[int, subprocess.Popen[bytes]] = {}
_OUTSIDE_EPHEMERAL_FROM = 30000  # ports below the kernel's ephemeral range are picked from here up
_HANDED: set[int] = set()  # ports this process handed out already (a picked port is not picked twice)


# --- ports ------------------------------------------------------------------------------------------


def _candidates() -> list[range]:
    """The ports no outgoing connection is given: outside the kernel's ephemeral range."""
    try:
        low, high = (int(x) for x in Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split())
    except (OSError, ValueError):
        low, high = 32768, 60999  # Linux's default; elsewhere (macOS: 49152-65535) the picks stay below it anyway
    ranges = [range(_OUTSIDE_EPHEMERAL_FROM, low), range(high + 1, 65536)]
    return [r for r in ranges if len(r) > 0] or [range(20000, 30000)]


def _pick(count: int, avoid: Collection[int]) -> int | None:
    """A base p with p..p+count-1 free, outside the ephemeral range, not handed out before and not in `avoid`."""
    ranges = _candidates()
    weights = [len(r) for r in ranges]
    for _ in range(500):
        span = random.choices(ranges, weights)[0]
        if len(span) < count:
            continue
        base = random.randrange(span.start, span.stop - count + 1)
        block = set(range(base, base + count))
        if not block & (_HANDED | set(avoid)) and all(port_is_free(port) for port in block):
            _HANDED.update(block)
            return base
    return None


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on, outside the ephemeral range (see the module docstring)."""
    return free_port_block(1)


def free_ports(count: int) -> list[int]:
    """`count` distinct free ports."""
    return [free_port() for _ in range(count)]


def free_port_block(count: int, avoid: Collection[int] = ()) -> int:
    """A port p such that p, p+1, ..., p+count-1 are all free right now and none is in `avoid`."""
    base = _pick(count, avoid)
    if base is None:
        raise StackError(f"Found no {count} consecutive free ports on {HOST}.")
    return base


def port_open(port: int, timeout: float = 1.0) -> bool:
    """True once something accepts TCP connections on 127.0.0.1:port."""
    try:
        with socket.create_connection((HOST, port), timeout=timeout):
            return True
    except OSError:
        return False


def port_is_free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as the servers do: TIME_WAIT is fine
        try:
            sock.bind((HOST, port))
        except OSError:
            return False
        return True


# --- starting ---------------------------------------------------------------------------------------


def spawn(name: str, command: list[str], log: Path, env: Mapping[str, str], *, append: bool = False,
          owner: Path | None = None) -> int:
    """Start process `name` in its own process group, its output going to `log` (appended to it if `append`,
    as when a component is restarted); return its pid. It carries WAP_STACK_OWNER=`owner` (default: the stack folder
    of a log in <state dir>/logs/)."""
    log.parent.mkdir(parents=True, exist_ok=True)
    owner = owner or (log.parent.parent if log.parent.name == "logs" else log.parent)
    env = {**env, OWNER_VARIABLE: owner_tag(owner)}
    with log.open("ab" if append else "wb") as out:
        out.write(f"$ {shlex.join(command)}\n".encode())
        out.flush()
        try:
            child = subprocess.Popen(
                command,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                env=dict(env),
                start_new_session=True,  # its own process group: `down` stops it and anything it forked
            )
        except OSError as exc:
            raise StackError(f"{label(name)} could not be started ({exc}). Log: {log}") from exc
    _CHILDREN[child.pid] = child
    return child.pid


def _log_tail(log: Path, lines: int = 8) -> str:
    try:
        tail = log.read_text(errors="replace").splitlines()[-lines:]
    except OSError:
        return ""
    return "\nLast lines of the log:\n  " + "\n  ".join(tail) if tail else ""


def wait_ready(name: str, pid: int, log: Path, check: Callable[[], tuple[bool, str]], timeout: float) -> None:
    """Poll `check` until it passes; raise StackError if the process exits or `timeout` s pass first."""
    deadline = time.monotonic() + timeout
    while True:
        if not process_alive(name, pid):
            child = _CHILDREN.get(pid)
            code = f" with exit code {child.returncode}" if child is not None else ""
            raise StackError(f"{label(name)} (pid {pid}) exited during start-up{code}. Log: {log}{_log_tail(log)}")
        ok, detail = check()
        if ok:
            return
        if time.monotonic() >= deadline:
            raise StackError(
                f"{label(name)} (pid {pid}) did not become ready within {timeout:g} s (last check: {detail}). "
                f"Log: {log}{_log_tail(log)}"
            )
        time.sleep(_POLL)


# --- checking and stopping --------------------------------------------------------------------------


_PROC = Path("/proc")
_EXEC_WINDOW_READS = 50  # x 10 ms: an exec's window, even on a loaded machine


def process_alive(name: str, pid: int) -> bool:
    """True while `pid` runs and is still the recorded component (not a zombie, not a reused pid)."""
    if pid <= 0:
        return False
    child = _CHILDREN.get(pid)
    if child is not None:
        if child.poll() is None:
            return True
        # It exited (poll reaped it), so this pid may since belong to another process: ask /proc below.
        _CHILDREN.pop(pid, None)
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    proc = _PROC / str(pid)
    if not Path("/proc/self").is_dir():
        return True  # no procfs (macOS): the signal check is all there is
    for _ in range(_EXEC_WINDOW_READS):
        try:
            status = (proc / "stat").read_text().rsplit(")", 1)[1].split()[0]
            command_line = (proc / "cmdline").read_bytes()
        except (OSError, IndexError):
            return False
        if status in ("Z", "X"):
            return False
        if command_line:
            return any(m.encode() in command_line for m in _MARKERS[component_of(name)])
        # An empty command line on a live process: it is inside exec (the kernel installs the new memory, which
        # unblocks the parent's Popen, before it copies the arguments there). Read again in a moment.
        time.sleep(0.01)
    return False


def _signal(pid: int, signum: int) -> None:
    try:
        if os.getpgid(pid) == pid:
            os.killpg(pid, signum)
        else:
            os.kill(pid, signum)
    except (ProcessLookupError, PermissionError):
        pass


def _reap(pid: int) -> None:
    child = _CHILDREN.pop(pid, None)
    if child is not None:
        with contextlib.suppress(subprocess.TimeoutExpired):
            child.wait(timeout=5)


def _wait_gone(pids: Mapping[str, int], timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while any(process_alive(name, pid) for name, pid in pids.items()):
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.1)
    return True


def stop_processes(pids: Mapping[str, int]) -> bool:
    """SIGTERM each live process group, wait up to _STOP_GRACE s, then SIGKILL. True if any was alive."""
    alive = {name: pid for name, pid in pids.items() if process_alive(name, pid)}
    for pid in alive.values():
        _signal(pid, signal.SIGTERM)
    if not _wait_gone(alive, _STOP_GRACE):
        for name, pid in alive.items():
            if process_alive(name, pid):
                _signal(pid, signal.SIGKILL)
        _wait_gone(alive, 5.0)
    for pid in pids.values():
        _reap(pid)
    return bool(alive)

"""The stack's processes: spawning them, telling whether they still run, stopping them; free ports.

Each component runs in its own process group (so stopping it also stops anything it forked) and writes
its output to its log. A recorded pid counts as the component only while its command line still names it.
Every spawned process carries its stack's folder in WAP_STACK_OWNER (local/leftovers.py), and so do its children.

Free ports are reserved: the sockets that found them stay bound until a process whose command line names the port is
spawned. Ports picked by binding to port 0 come from the ephemeral range, from which the kernel also gives every
outgoing connection its local port: released at once, a port could be taken by a connection (or another stack)
in the tens of seconds before the component that needs it starts (seen as the emulator's "address already in use").
"""

from __future__ import annotations

import contextlib
import os
import re
import shlex
import signal
import socket
import subprocess
import time
from collections.abc import Callable, Collection, Mapping
from pathlib import Path

from wap_ingest.local.components import (
    EMR,
    HOST,
    LAMBDA,
    MOTO,
    NESSIE,
    OIDC,
    SLACK,
    WORKER,
    StackError,
    component_of,
    label,
)
from wap_ingest.local.leftovers import OWNER_VARIABLE, owner_tag

# A recorded pid is only "ours" while its command line still contains this (guards against pid reuse).
_MARKERS: dict[str, tuple[str, ...]] = {
    MOTO: ("moto.server", "wap_ingest.local.moto_iam"),
    NESSIE: ("nessie.version.store.type",),
    SLACK: ("wap_ingest.local.slack_sink",),
    LAMBDA: ("--runtime-interface-emulator-address",),
    WORKER: ("wap_ingest.local.worker",),
    OIDC: ("wap_ingest.local.oidc",),
    EMR: ("wap_ingest.local.emr",),
}
_STOP_GRACE = 10.0
_POLL = 0.2

# Processes started by this interpreter. A child that exits stays a zombie (and looks alive to kill(pid, 0))
# until its parent waits for it, so children are polled and reaped through their Popen objects.
_CHILDREN: dict[int, subprocess.Popen[bytes]] = {}
# Ports handed out by free_port(s)/free_port_block, still bound (not listening) until a process that uses them starts.
_RESERVED: dict[int, socket.socket] = {}


# --- ports ------------------------------------------------------------------------------------------


def _socket() -> socket.socket:
    """A reservation: bound, never listening, SO_REUSEADDR so that the server that gets the port (they all set it)
    can bind even while it is held, and the kernel never gives it to an outgoing connection meanwhile."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    return sock


def _reserve(sock: socket.socket) -> int:
    port = int(sock.getsockname()[1])
    _RESERVED[port] = sock
    return port


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on, reserved until a process naming it is spawned."""
    sock = _socket()
    sock.bind((HOST, 0))
    return _reserve(sock)


def free_ports(count: int) -> list[int]:
    """`count` distinct free ports (all held together while choosing, so they cannot repeat), reserved."""
    socks = [_socket() for _ in range(count)]
    for sock in socks:
        sock.bind((HOST, 0))
    return [_reserve(sock) for sock in socks]


def free_port_block(count: int, avoid: Collection[int] = ()) -> int:
    """A port p such that p, p+1, ..., p+count-1 are all free right now and none is in `avoid`; all reserved."""
    for _ in range(200):
        base = free_port()
        block = range(base, base + count)
        taken = [base]
        if block[-1] <= 65535 and not set(block) & set(avoid):
            for port in block[1:]:
                if not _take(port):
                    break
                taken.append(port)
        if len(taken) == count:
            return base
        release(taken)
    raise StackError(f"Found no {count} consecutive free ports on {HOST}.")


def _take(port: int) -> bool:
    """Reserve `port` if it is free right now (and not reserved already, for another use)."""
    if port in _RESERVED:
        return False
    sock = _socket()
    try:
        sock.bind((HOST, port))
    except OSError:
        sock.close()
        return False
    _RESERVED[port] = sock
    return True


def release(ports: Collection[int]) -> None:
    """Give reserved ports back (the process that listens on them is about to start)."""
    for port in ports:
        sock = _RESERVED.pop(port, None)
        if sock is not None:
            sock.close()


def _release_named(command: list[str]) -> None:
    text = " ".join(command)
    release([port for port in list(_RESERVED) if re.search(rf"(?<![0-9]){port}(?![0-9])", text)])


def port_open(port: int, timeout: float = 1.0) -> bool:
    """True once something accepts TCP connections on 127.0.0.1:port."""
    try:
        with socket.create_connection((HOST, port), timeout=timeout):
            return True
    except OSError:
        return False


def port_is_free(port: int) -> bool:
    if port in _RESERVED:
        return True  # reserved by this process for the component about to use it
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
    of a log in <state dir>/logs/), and the ports its command names are released from reservation first."""
    log.parent.mkdir(parents=True, exist_ok=True)
    owner = owner or (log.parent.parent if log.parent.name == "logs" else log.parent)
    env = {**env, OWNER_VARIABLE: owner_tag(owner)}
    _release_named(command)
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
    proc = Path("/proc") / str(pid)
    if not Path("/proc/self").is_dir():
        return True  # no procfs (macOS): the signal check is all there is
    try:
        status = (proc / "stat").read_text().rsplit(")", 1)[1].split()[0]
        command_line = (proc / "cmdline").read_bytes()
    except (OSError, IndexError):
        return False
    return status not in ("Z", "X") and any(m.encode() in command_line for m in _MARKERS[component_of(name)])


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

"""Processes of a local stack found by what they carry, not by what the state file remembers.

Every process the stack spawns (wap_stack/processes.py `spawn`) carries `WAP_STACK_OWNER=<state dir>` in its
environment, and so does everything it starts in turn (the runtime under the emulator, the Spark JVM, spark-submit),
also an execution environment a worker's supervisor started again after a crash. So `wap stack down` stops whatever a
stack started, recorded or not, and `wap stack up` names a leftover of an earlier stack of the same folder (and offers
to stop it) instead of failing later on a port it still holds. Linux only (/proc); elsewhere nothing is found.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

OWNER_VARIABLE = "WAP_STACK_OWNER"
_PROC = Path("/proc")


def owner_tag(state_dir: Path) -> str:
    return str(state_dir.resolve())


@dataclass(frozen=True)
class Leftover:
    pid: int
    command: str  # its command line, shortened
    owner: str  # the state dir of the stack that started it ("" if it carries no tag)

    def describe(self) -> str:
        return f"pid {self.pid} ({self.command})"


def _environ(pid: int) -> dict[str, str]:
    try:
        raw = (_PROC / str(pid) / "environ").read_bytes()
    except OSError:
        return {}
    pairs = (item.split(b"=", 1) for item in raw.split(b"\0") if b"=" in item)
    return {key.decode(errors="replace"): value.decode(errors="replace") for key, value in pairs}


def _command(pid: int, width: int = 110) -> str:
    try:
        words = (_PROC / str(pid) / "cmdline").read_bytes().split(b"\0")
    except OSError:
        return "?"
    text = " ".join(w.decode(errors="replace") for w in words if w)
    return text if len(text) <= width else text[: width - 3] + "..."


def _running(pid: int) -> bool:
    try:
        state = (_PROC / str(pid) / "stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state not in ("Z", "X")


def _pids() -> list[int]:
    if not _PROC.is_dir():
        return []
    return sorted(int(p.name) for p in _PROC.iterdir() if p.name.isdigit())


def tagged_processes(variable: str, value: str) -> list[Leftover]:
    """The live processes (zombies excluded) whose environment has `variable`=`value`, this process excluded."""
    me = os.getpid()
    found = []
    for pid in _pids():
        environ = _environ(pid) if pid != me else {}
        if environ.get(variable) == value and _running(pid):
            found.append(Leftover(pid, _command(pid), environ.get(OWNER_VARIABLE, "")))
    return found


def owned_processes(state_dir: Path) -> list[Leftover]:
    """The live processes that a stack of `state_dir` started (directly or not), this process excluded."""
    return tagged_processes(OWNER_VARIABLE, owner_tag(state_dir))


def _listening_inodes(port: int) -> set[str]:
    inodes = set()
    for table in ("tcp", "tcp6"):
        try:
            lines = (_PROC / "net" / table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            if len(fields) > 9 and fields[3] == "0A" and int(fields[1].rsplit(":", 1)[1], 16) == port:
                inodes.add(fields[9])
    return inodes


def port_holders(port: int) -> list[Leftover]:
    """The processes listening on TCP `port` (any address), as far as /proc lets this user see them."""
    inodes = _listening_inodes(port)
    if not inodes:
        return []
    wanted = {f"socket:[{inode}]" for inode in inodes}
    found = []
    for pid in _pids():
        with contextlib.suppress(OSError):
            if any(os.readlink(fd) in wanted for fd in (_PROC / str(pid) / "fd").iterdir()):
                found.append(Leftover(pid, _command(pid), _environ(pid).get(OWNER_VARIABLE, "")))
    return found


def describe_holders(port: int) -> str:
    """' (held by pid 123 (aws-lambda-rie ...), started by the stack in /x/.wap/stack)', or ''."""
    holders = port_holders(port)
    if not holders:
        return ""
    parts = [h.describe() + (f", started by the stack in {h.owner}" if h.owner else "") for h in holders]
    return f" (held by {'; '.join(parts)})"


def _signal_group(pid: int, signum: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        group = os.getpgid(pid)
        if group != os.getpgrp():  # never the caller's own group
            os.killpg(group, signum)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.kill(pid, signum)


def stop_leftovers(leftovers: Iterable[Leftover], grace: float = 5.0) -> list[Leftover]:
    """SIGTERM each leftover's process group, SIGKILL what is still running after `grace` s; return them."""
    stopped = list(leftovers)
    for leftover in stopped:
        _signal_group(leftover.pid, signal.SIGTERM)
    deadline = time.monotonic() + grace
    while any(_running(left.pid) for left in stopped) and time.monotonic() < deadline:
        time.sleep(0.1)
    for leftover in stopped:
        if _running(leftover.pid):
            _signal_group(leftover.pid, signal.SIGKILL)
    deadline = time.monotonic() + 5.0
    while any(_running(left.pid) for left in stopped) and time.monotonic() < deadline:
        time.sleep(0.1)
    return stopped

"""A server run in the foreground of a command (`wap dashboard` runs Streamlit), stopped with the command.

The server gets a process group of its own, so that the command decides how it stops: Ctrl-C (SIGINT), SIGTERM or
SIGHUP to the command is passed on as SIGTERM to the server's whole group, which gets `grace` seconds before
SIGKILL. On Linux the server is also told to take SIGTERM when the command dies in any way (even SIGKILL), so it
is never left running without a parent.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from types import FrameType

_PR_SET_PDEATHSIG = 1
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


def _die_with(parent: int) -> Callable[[], None]:
    def prepare() -> None:  # runs in the child between fork and exec
        with contextlib.suppress(OSError, AttributeError):
            ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)
        if os.getppid() != parent:  # the parent died before the line above took effect
            os._exit(1)

    return prepare


def _signal_group(pid: int, signum: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signum)


def run_in_foreground(command: list[str], grace: float = 10.0) -> int:
    """Run `command` until it exits (its exit code) or this process is asked to stop (0, once the server is gone)."""
    linux = sys.platform.startswith("linux")
    # preexec_fn: the command has started no thread that could hold a lock across the fork (only prctl runs there)
    child = subprocess.Popen(command, start_new_session=True,
                             preexec_fn=_die_with(os.getpid()) if linux else None)  # noqa: PLW1509
    stopping: list[float] = []

    def stop(signum: int, _frame: FrameType | None) -> None:
        if not stopping:
            stopping.append(time.monotonic())
        _signal_group(child.pid, signal.SIGTERM)

    previous = {signum: signal.signal(signum, stop) for signum in STOP_SIGNALS}
    try:
        while True:
            try:
                code = child.wait(timeout=0.5)
                break
            except subprocess.TimeoutExpired:
                if stopping and time.monotonic() - stopping[0] > grace:
                    _signal_group(child.pid, signal.SIGKILL)
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
        if child.poll() is None:
            _signal_group(child.pid, signal.SIGKILL)
            child.wait()
        _signal_group(child.pid, signal.SIGKILL)  # anything the server forked into its group
    return 0 if stopping else code

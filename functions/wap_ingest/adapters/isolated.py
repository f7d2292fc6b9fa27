"""A call run in a forked child process, for native code that may abort on hostile input.

pyarrow's Parquet metadata reader calls `std::terminate` on some damaged footers (observed: "Definition level
histogram size mismatch", thrown where no exception may leave): no Python `except` sees it and the whole process,
with its warm Spark session, dies. `isolated(fn, *args)` runs `fn` in a fork of this process and returns its
(picklable) result or raises what it raised; a child that dies raises `ChildDiedError` naming the signal. A fork is a
few milliseconds (copy-on-write), nothing is imported or started in the child, and it leaves by `os._exit`.
"""

from __future__ import annotations

import faulthandler
import os
import pickle
import select
import signal
import time
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")
TIMEOUT_SECONDS = 30.0


class ChildDiedError(RuntimeError):
    """The child ended without an answer (killed by a signal, or an abort in native code)."""


class ChildHungError(RuntimeError):
    """The child gave no answer in time (it was killed)."""


def isolated(fn: Callable[..., T], *args: Any, timeout: float = TIMEOUT_SECONDS) -> T:
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: compute, answer, leave without running the parent's clean-up
        os.close(read_end)
        faulthandler.disable()  # an abort here is the parent's to report, not a traceback on the shared stderr
        try:
            try:
                answer: tuple[bool, Any] = (True, fn(*args))
            except BaseException as exc:
                answer = (False, exc)
            try:
                payload = pickle.dumps(answer)
            except Exception as exc:
                payload = pickle.dumps((False, RuntimeError(f"{type(exc).__name__}: {exc}")))
            view = memoryview(payload)
            while view:
                view = view[os.write(write_end, view):]
        finally:
            os._exit(0)
    os.close(write_end)
    try:
        payload = _read_all(read_end, pid, timeout)
    finally:
        os.close(read_end)
    _, status = os.waitpid(pid, 0)
    if not payload:
        if os.WIFSIGNALED(status):
            raise ChildDiedError(f"killed by {signal.Signals(os.WTERMSIG(status)).name}")
        raise ChildDiedError(f"exited with status {os.waitstatus_to_exitcode(status)} without an answer")
    ok, value = pickle.loads(payload)
    if ok:
        return value  # type: ignore[no-any-return]
    raise value


def _read_all(fd: int, pid: int, timeout: float) -> bytes:
    chunks: list[bytes] = []
    deadline = time.monotonic() + timeout
    while True:
        left = deadline - time.monotonic()
        ready, _, _ = select.select([fd], [], [], max(left, 0))
        if not ready:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            raise ChildHungError(f"no answer in {timeout:g} s")
        chunk = os.read(fd, 1 << 16)
        if not chunk:
            return b"".join(chunks)
        chunks.append(chunk)

"""A call run in a separate worker process, for native code that may abort on hostile input.

pyarrow's Parquet metadata reader calls `std::terminate` on some damaged footers (observed: "Definition level
histogram size mismatch", thrown where no exception may leave): no Python `except` sees it and the whole process,
with its warm Spark session, dies. `isolated(fn, *args)` runs `fn` (a module-level function, named by pickle) in a
long-lived worker process and returns its (picklable) result or raises what it raised; a worker that dies raises
`ChildDiedError` naming the signal, one that does not answer in time is killed (`ChildHungError`). Each call has a
worker to itself: an idle one, or a new one when all are busy (a whole file's pages decoded while another thread
reads a footer), kept for the next calls.

The workers are started with `subprocess` (fork and exec, no Python code run between them), never by a bare
`os.fork()` of this process: a fork of a process with a Spark session and several threads tears down, in the
child, the other threads' state, and py4j's per-thread connection finalizers then shut down the sockets the parent's
threads talk to the JVM on (observed: concurrent files failed with `Py4JError ... sessionState`). A started worker
answers in well under a millisecond plus the call itself; `start_worker()` starts one ahead of the first call (it
imports pyarrow once, while this process goes on). A worker reads requests on its stdin and leaves at end of file,
so it ends with the process that started it.
"""

from __future__ import annotations

import os
import pickle
import select
import signal
import struct
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from typing import IO, Any, TypeVar

T = TypeVar("T")
TIMEOUT_SECONDS = 30.0
_HEADER = struct.Struct("!Q")


class ChildDiedError(RuntimeError):
    """The worker ended without an answer (killed by a signal, or an abort in native code)."""


class ChildHungError(RuntimeError):
    """The worker gave no answer in time (it was killed)."""


class _Workers:
    """Idle worker processes, reused: a call takes one (or starts one) and gives it back when it answered, so a
    long call (a whole file's pages decoded) never holds up a short one (a footer) made meanwhile by another thread.
    A worker that died or hung is not given back."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._idle: list[subprocess.Popen[bytes]] = []
        self._busy: set[subprocess.Popen[bytes]] = set()

    def start(self) -> None:
        with self._lock:
            self._idle = [p for p in self._idle if p.poll() is None]
            if not self._idle:
                self._idle.append(_spawned())

    def stop(self) -> None:
        with self._lock:
            every, self._idle = [*self._idle, *self._busy], []
            self._busy.clear()
        for process in every:
            _stopped(process)

    def call(self, fn: Callable[..., T], args: tuple[Any, ...], timeout: float) -> T:
        request = pickle.dumps((fn, args))
        process = self._take()
        assert process.stdin is not None and process.stdout is not None
        try:
            process.stdin.write(_HEADER.pack(len(request)) + request)
            process.stdin.flush()
        except (BrokenPipeError, OSError):
            pass  # it died: reading says how
        payload = _read_answer(process.stdout, timeout)
        if payload is None:
            self._drop(process)
            raise ChildHungError(f"no answer in {timeout:g} s")
        if not payload:
            raise ChildDiedError(_ended(self._drop(process)))
        self._give_back(process)
        ok, value = pickle.loads(payload)
        if ok:
            return value  # type: ignore[no-any-return]
        raise value

    def _take(self) -> subprocess.Popen[bytes]:
        with self._lock:
            while self._idle:
                process = self._idle.pop()
                if process.poll() is None:
                    self._busy.add(process)
                    return process
                _stopped(process)
            process = _spawned()
            self._busy.add(process)
            return process

    def _give_back(self, process: subprocess.Popen[bytes]) -> None:
        with self._lock:
            if process in self._busy:  # not stopped meanwhile
                self._busy.discard(process)
                self._idle.append(process)

    def _drop(self, process: subprocess.Popen[bytes]) -> int:
        with self._lock:
            self._busy.discard(process)
        return _stopped(process)


def _spawned() -> subprocess.Popen[bytes]:
    path = os.pathsep.join(entry for entry in sys.path if entry)  # where this process finds its modules
    return subprocess.Popen([sys.executable, "-c", "from wap_ingest.adapters.formats.isolation import serve; serve()"],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, env={**os.environ, "PYTHONPATH": path})


def _stopped(process: subprocess.Popen[bytes]) -> int:
    if process.poll() is None:
        process.kill()
    code = process.wait()
    for stream in (process.stdin, process.stdout):
        if stream is not None:
            stream.close()
    return code


_WORKER = _Workers()


def isolated(fn: Callable[..., T], *args: Any, timeout: float = TIMEOUT_SECONDS) -> T:
    """`fn(*args)` in the worker process. `fn` is pickled by name: a module-level function or a built-in."""
    return _WORKER.call(fn, args, timeout)


def start_worker() -> None:
    """Start a worker now (it imports pyarrow while this process goes on), so the first call does not wait for it."""
    _WORKER.start()


def stop_worker() -> None:
    """Stop the workers (they also end by themselves when this process does)."""
    _WORKER.stop()


def _ended(code: int) -> str:
    if code < 0:
        return f"killed by {signal.Signals(-code).name}"
    return f"exited with status {code} without an answer"


def _read_answer(stream: IO[bytes], timeout: float) -> bytes | None:
    """The answer's bytes; b"" when the worker ended first; None when the deadline passed."""
    deadline = time.monotonic() + timeout
    fd = stream.fileno()
    header = _read_exactly(fd, _HEADER.size, deadline)
    if not header:
        return header
    return _read_exactly(fd, _HEADER.unpack(header)[0], deadline)


def _read_exactly(fd: int, size: int, deadline: float) -> bytes | None:
    chunks: list[bytes] = []
    while size:
        ready, _, _ = select.select([fd], [], [], max(deadline - time.monotonic(), 0))
        if not ready:
            return None
        chunk = os.read(fd, min(size, 1 << 20))
        if not chunk:
            return b""
        chunks.append(chunk)
        size -= len(chunk)
    return b"".join(chunks)


def serve() -> None:
    """The worker's loop: a request (length, pickled (fn, args)) on stdin, its answer on the original stdout. What
    the called code prints goes to stderr, never into the answers."""
    import pyarrow.parquet  # noqa: F401 - what the calls use, imported before the first one (the worker is started early)

    requests = os.fdopen(os.dup(0), "rb")
    answers = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)
    while True:
        header = requests.read(_HEADER.size)
        if len(header) < _HEADER.size:
            return  # the process that started it closed the pipe, or ended
        body = requests.read(_HEADER.unpack(header)[0])
        try:
            fn, args = pickle.loads(body)
            answer: tuple[bool, Any] = (True, fn(*args))
        except BaseException as exc:  # every failure of the call is the caller's to see
            answer = (False, exc)
        try:
            payload = pickle.dumps(answer)
        except Exception as exc:
            payload = pickle.dumps((False, RuntimeError(f"{type(exc).__name__}: {exc}")))
        answers.write(_HEADER.pack(len(payload)) + payload)
        answers.flush()

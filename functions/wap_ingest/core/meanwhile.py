"""Work started in a thread now, its answer wanted later: a read beside a write it does not depend on (the ledger
lookup beside the branch's creation, the branch listing beside the merge, the audit history beside the write, a
registered file's results beside its data commit). The one way the core runs something meanwhile."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Generic, TypeVar

T = TypeVar("T")


class Meanwhile(Generic[T]):
    """`work` run in a daemon thread named `name`, started when this is made. Calling it waits for the answer and
    returns it, or raises what the work raised (in the caller's thread); `wait` only waits, whatever became of it
    (a run leaving its branch: nothing of the work may land there after)."""

    def __init__(self, work: Callable[[], T], name: str) -> None:
        self._answer: list[T] = []
        self._failed: list[BaseException] = []

        def run() -> None:
            try:
                self._answer.append(work())
            except BaseException as exc:  # raised by __call__, in the thread that wants the answer
                self._failed.append(exc)

        self._thread = threading.Thread(target=run, name=name, daemon=True)
        self._thread.start()

    def __call__(self) -> T:
        self._thread.join()
        if self._failed:
            raise self._failed[0]
        return self._answer[0]

    def wait(self) -> None:
        self._thread.join()

"""Waiting for something a stack does asynchronously (a worker's outcome, an alert, a process's exit)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def wait_for(check: Callable[[], T | None], what: str, timeout: float = 240.0, every: float = 0.5) -> T:
    """`check()`'s first true value; an AssertionError naming `what` after `timeout` seconds without one."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(every)
    raise AssertionError(f"timed out after {timeout:g} s waiting for {what}")

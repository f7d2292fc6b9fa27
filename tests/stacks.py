"""A local stack of its own (the session's, or one test module's): started with these variables set (and those
unset), stopped and the variables restored after, whatever happened."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager

import pytest

from wap_stack.stack import StackConfig, start_stack, stop_stack
from wap_stack.state import StackState


@contextmanager
def running_stack(config: StackConfig, env: Mapping[str, str], unset: Iterable[str] = ()) -> Iterator[StackState]:
    patch = pytest.MonkeyPatch()
    for name, value in env.items():
        patch.setenv(name, value)  # the stack's processes (the function among them) inherit them
    for name in unset:
        patch.delenv(name, raising=False)
    try:
        state = start_stack(config)
        try:
            yield state
        finally:
            stop_stack(config)
    finally:
        patch.undo()

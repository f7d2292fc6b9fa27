"""adapters/isolated.py: a call in a forked child, its answer, its exception, its death and its hang."""

from __future__ import annotations

import os
import time

import pytest

from wap_ingest.adapters.isolated import ChildDiedError, ChildHungError, isolated


def _fail(message: str) -> None:
    raise ValueError(message)


def test_the_answer_and_the_exception_come_back() -> None:
    assert isolated(lambda a, b: {"sum": a + b, "pid": os.getpid()}, 2, 3)["sum"] == 5
    assert isolated(os.getpid) != os.getpid()  # it ran in another process
    with pytest.raises(ValueError, match="bad footer"):
        isolated(_fail, "bad footer")


def test_a_child_that_aborts_or_hangs_is_named_and_this_process_lives_on() -> None:
    with pytest.raises(ChildDiedError, match="SIGABRT"):
        isolated(os.abort)
    started = time.monotonic()
    with pytest.raises(ChildHungError, match=r"no answer in 0\.5 s"):
        isolated(time.sleep, 60, timeout=0.5)
    assert time.monotonic() - started < 10
    assert isolated(lambda: "still here") == "still here"

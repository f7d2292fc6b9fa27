"""core/meanwhile.py: work started in a thread now, its answer or its error handed to whoever calls for it."""

from __future__ import annotations

import threading

import pytest

from wap_ingest.core.errors import CatalogError
from wap_ingest.core.meanwhile import Meanwhile


def test_the_work_runs_in_its_own_named_thread_started_at_once_and_its_answer_is_handed_over() -> None:
    started, go = threading.Event(), threading.Event()
    ran_in: list[str] = []

    def work() -> int:
        ran_in.append(threading.current_thread().name)
        started.set()
        go.wait(5)
        return 42

    later = Meanwhile(work, "ledger-lookup")
    assert started.wait(5)  # running before anyone asked for it
    go.set()
    assert later() == 42 and later() == 42
    assert ran_in == ["ledger-lookup"]


def test_its_error_is_raised_to_the_caller_and_wait_only_waits() -> None:
    def work() -> int:
        raise CatalogError("nessie refused")

    later = Meanwhile(work, "branch-listing")
    later.wait()  # whatever became of it
    with pytest.raises(CatalogError, match="nessie refused"):
        later()

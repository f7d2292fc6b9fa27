"""adapters/formats/isolation.py: a call in the worker process, its answer, its exception, its death and its hang."""

from __future__ import annotations

import os
import threading
import time

import pytest

from wap_ingest.adapters.formats.isolation import ChildDiedError, ChildHungError, isolated


def test_the_answer_and_the_exception_come_back() -> None:
    assert isolated(divmod, 17, 5) == (3, 2)
    assert isolated(os.getpid) != os.getpid()  # it ran in another process
    with pytest.raises(ValueError, match="bad footer"):
        isolated(int, "bad footer")


def test_a_worker_that_aborts_or_hangs_is_named_and_this_process_lives_on() -> None:
    with pytest.raises(ChildDiedError, match="SIGABRT"):
        isolated(os.abort)
    started = time.monotonic()
    with pytest.raises(ChildHungError, match=r"no answer in 0\.5 s"):
        isolated(time.sleep, 60, timeout=0.5)
    assert time.monotonic() - started < 10
    assert isolated(divmod, 7, 7) == (1, 0)  # a new worker answers


def test_a_worker_is_kept_between_calls() -> None:
    first = isolated(os.getpid)
    assert [isolated(os.getpid) for _ in range(5)] == [first] * 5


def test_a_long_call_holds_up_no_other_thread() -> None:
    slow = threading.Thread(target=isolated, args=(time.sleep, 6))
    slow.start()
    time.sleep(0.3)  # the slow call has its worker
    assert isolated(divmod, 9, 4) == (2, 1)  # another worker answers meanwhile,
    assert slow.is_alive()  # before the slow call ends
    slow.join()
    answers: list[int] = []
    threads = [threading.Thread(target=lambda: answers.append(isolated(os.getpid))) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(answers) == 8 and os.getpid() not in answers


def test_what_the_call_prints_does_not_corrupt_the_answers() -> None:
    assert isolated(print, "noise on stdout") is None
    assert isolated(divmod, 9, 2) == (4, 1)

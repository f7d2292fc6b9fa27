"""The isolation worker (adapters/formats/isolation.py) beside a live Spark session used from several threads.

A bare `os.fork()` of such a process tore down, in the child, the other threads' state: py4j's per-thread finalizers
then closed the connections those threads had idle at the fork, and `close()` shuts down the socket the parent
shares, while the parent's thread may already be using it again: its call failed (observed: concurrent files failed
with `Py4JError ... sessionState`). The worker is started by fork-and-exec, so the threads' connections stay whole
however often it is called."""

from __future__ import annotations

import os
import threading
import time
from typing import Any

import pytest

from tests.conftest import Lake
from wap_ingest.adapters.formats.isolation import isolated

pytestmark = [pytest.mark.stack, pytest.mark.spark]
THREADS = 4
CALLS = 150


def test_calls_to_the_worker_leave_every_threads_jvm_connection_whole(lake: Lake) -> None:
    spark: Any = lake.service.ports.writer.spark
    errors: list[BaseException] = []
    done = threading.Event()

    def call_and_idle() -> None:  # each call leaves the thread's connection idle a moment, as a pipeline does
        try:
            while not done.is_set():
                spark._jsparkSession.sessionState().catalogManager()
                time.sleep(0.0005)
        except BaseException as exc:  # the test reports it
            errors.append(exc)

    threads = [threading.Thread(target=call_and_idle) for _ in range(THREADS)]
    for thread in threads:
        thread.start()
    try:
        answers = {isolated(os.getpid) for _ in range(CALLS)}
    finally:
        done.set()
        for thread in threads:
            thread.join()
    assert not errors, errors[:1]
    assert os.getpid() not in answers
    spark._jsparkSession.sessionState()  # this thread's connection too

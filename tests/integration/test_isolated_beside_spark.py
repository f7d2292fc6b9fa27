"""The isolation worker (adapters/isolated.py) beside a live Spark session used from several threads.

A bare `os.fork()` of such a process tore down, in the child, the other threads' py4j connections (their per-thread
finalizers shut down sockets the parent shares): concurrent files failed with `Py4JError ... sessionState`. The
worker is started by fork-and-exec, so the threads' connections stay whole however often it is called."""

from __future__ import annotations

import os
import threading
from typing import Any

import pytest

from tests.conftest import Lake
from wap_ingest.adapters.isolated import isolated

pytestmark = [pytest.mark.stack, pytest.mark.spark]


def test_calls_to_the_worker_leave_every_threads_jvm_connection_whole(lake: Lake) -> None:
    spark: Any = lake.service.ports.writer.spark
    errors: list[BaseException] = []
    calls = threading.Event()

    def talk_to_the_jvm() -> None:
        try:
            while not calls.is_set():
                spark._jsparkSession.sessionState().catalogManager()
        except BaseException as exc:  # the test reports it
            errors.append(exc)

    threads = [threading.Thread(target=talk_to_the_jvm) for _ in range(4)]
    for thread in threads:
        thread.start()
    try:
        answers = {isolated(os.getpid) for _ in range(40)}
    finally:
        calls.set()
        for thread in threads:
            thread.join()
    assert not errors, errors[:1]
    assert len(answers) == 1 and os.getpid() not in answers
    spark._jsparkSession.sessionState()  # this thread's connection too

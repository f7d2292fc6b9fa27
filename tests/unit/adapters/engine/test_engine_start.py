"""The engine holder (adapters/engine/session.py SparkEngine) with a stand-in for Spark's start: a start begun in
the background is the one the first use waits for (never a second JVM), a failed background start is made again
and raised by that use, and a suite the start-up check refuses stays refused for every later use."""

from __future__ import annotations

import threading
import time
from types import SimpleNamespace
from typing import Any

import pytest

from wap_ingest.adapters.engine.session import SparkEngine
from wap_ingest.core.errors import AuditSuiteError
from wap_ingest.core.layout import Layout, SortField
from wap_ingest.core.models import FileFormat, QuarantinePlan, TableRef


def live_session() -> Any:
    """What gateway_alive asks of a session (a context whose JVM side is not stopped), and what a thread's use
    makes of it (its JVM thread's active session), recorded by thread."""
    context = SimpleNamespace(sc=lambda: SimpleNamespace(isStopped=lambda: False))
    activated: list[str] = []
    jvm = SimpleNamespace(SparkSession=SimpleNamespace(
        setActiveSession=lambda _: activated.append(threading.current_thread().name)))
    return SimpleNamespace(sparkContext=SimpleNamespace(_jsc=context), _jvm=jvm, _jsparkSession=object(),
                           activated=activated)


class Starts:
    def __init__(self, seconds: float = 0.0, fail: int = 0) -> None:
        self.seconds, self.fail, self.calls = seconds, fail, 0
        self.threads: list[str] = []

    def __call__(self) -> Any:
        self.calls += 1
        self.threads.append(threading.current_thread().name)
        time.sleep(self.seconds)
        if self.calls <= self.fail:
            raise RuntimeError("the JVM did not start")
        return live_session()


def test_the_first_use_waits_for_the_start_begun_in_the_background() -> None:
    starts = Starts(seconds=0.3)
    engine = SparkEngine(starts)
    engine.start_in_background()
    engine.start_in_background()  # already starting: nothing more
    session = engine.session()
    assert starts.calls == 1 and starts.threads == ["wap-engine-start"]
    assert engine.session() is session
    # the session is made the active one of each thread that uses it (Spark's SQL settings follow it), once
    assert session.activated == ["wap-engine-start", "MainThread"]
    engine.start_in_background()  # started: nothing more
    assert starts.calls == 1


def test_a_failed_background_start_is_made_again_by_the_first_use() -> None:
    starts = Starts(fail=1)
    engine = SparkEngine(starts)
    engine.start_in_background()
    session = engine.session()
    assert starts.calls == 2 and session is not None


def test_a_start_that_keeps_failing_is_raised_by_the_use() -> None:
    engine = SparkEngine(Starts(fail=5))
    engine.start_in_background()
    with pytest.raises(RuntimeError, match="the JVM did not start"):
        engine.session()


def test_a_refused_suite_is_refused_by_every_use_not_only_the_first() -> None:
    checks: list[Any] = []

    def refuse(session: Any) -> None:
        checks.append(session)
        raise AuditSuiteError("audits file: table 'wap.orders', check 'env' (custom_sql) is refused")

    starts = Starts()
    engine = SparkEngine(starts, on_start=refuse)
    engine.start_in_background()  # the background start meets the refusal; the uses raise it
    for _ in range(3):
        with pytest.raises(AuditSuiteError, match="is refused"):
            engine.session()
    assert starts.calls == 1 and len(checks) == 1


class Holder:
    """An engine that records the background starts asked of it."""

    def __init__(self) -> None:
        self.asked = 0

    def start_in_background(self) -> None:
        self.asked += 1


@pytest.mark.parametrize(("fmt", "settings", "together", "starts"), [
    (FileFormat.PARQUET, {}, False, 0),  # it may be registered: no engine unless it turns out to need one
    (FileFormat.PARQUET, {}, True, 1),  # files read together are rewritten
    (FileFormat.CSV, {}, False, 1),
    (FileFormat.PARQUET, {"write": "rewrite"}, False, 1),
    (FileFormat.PARQUET, {"quarantine": QuarantinePlan(TableRef("wap", "t_quarantine"), 0.05)}, False, 1),
    (FileFormat.PARQUET, {"layout": Layout(sort=(SortField("a"),))}, False, 1),
], ids=["parquet", "together", "csv", "write-rewrite", "quarantine", "sorted"])
def test_the_writer_starts_the_engine_early_only_for_files_that_surely_need_it(
        fmt: FileFormat, settings: dict[str, Any], together: bool, starts: int) -> None:
    from wap_ingest.adapters.engine.writer import SparkIcebergWriter
    from wap_ingest.core.measurements import MeasurementPlan
    from wap_ingest.core.ports import WriteSpec

    holder = Holder()
    writer = SparkIcebergWriter(holder, lambda source, stop: "", lake=object(),  # type: ignore[arg-type]
                                branches=object())  # type: ignore[arg-type]
    writer.start([(WriteSpec(TableRef("wap", "t"), "", MeasurementPlan(), **settings), fmt)], together=together)
    assert holder.asked == starts

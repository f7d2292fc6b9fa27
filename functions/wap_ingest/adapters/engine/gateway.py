"""The engine's liveness, seen from Python: `gateway_alive`, a bounded probe a caller uses to decide to build a fresh
session (a JVM that died, stopped its context, or hangs), and `forget_session`, which lets PySpark build one after the
old JVM is gone (its `getOrCreate` would otherwise hand back the dead session) and ends a JVM that lives on."""

from __future__ import annotations

import contextlib
import logging
import threading
from typing import Any

log = logging.getLogger(__name__)

GATEWAY_TIMEOUT_SECONDS = 30.0
"""How long `gateway_alive` waits for the JVM's answer. A JVM that does not answer one call in this long (stopped,
deadlocked, lost in garbage collection) is taken as dead: the caller starts a fresh engine instead of waiting on it."""


def gateway_alive(spark: Any = None, timeout: float | None = None) -> bool:
    """One Py4J round trip, waited for at most `timeout` seconds (default GATEWAY_TIMEOUT_SECONDS): False when the
    JVM cannot be reached, does not answer in time, or its SparkContext is stopped (either way the session must be
    rebuilt). `spark` defaults to PySpark's active context. The call runs in a daemon thread of its own: one left
    waiting on a hung JVM ends when `forget_session` kills that JVM, and never holds up the process's exit."""
    wait = GATEWAY_TIMEOUT_SECONDS if timeout is None else timeout
    answer: list[bool] = []
    probe = threading.Thread(target=lambda: answer.append(_answers(spark)), name="wap-gateway-probe", daemon=True)
    probe.start()
    probe.join(wait)
    if probe.is_alive():
        log.warning("the Spark JVM did not answer within %.0f s: taken as dead", wait)
        return False
    return bool(answer and answer[0])


def forget_session() -> None:
    """Drop PySpark's references to a session whose JVM died, so that the next `SparkSession.builder.getOrCreate()`
    starts a new JVM instead of returning the dead session (its `stop()` cannot reach the JVM any more). A JVM that
    lives on (a stopped context, or hung) is killed: SIGKILL ends a stopped process too."""
    from pyspark import SparkContext
    from pyspark.sql import SparkSession

    gateway = SparkContext._gateway
    if gateway is not None:
        with contextlib.suppress(Exception):  # a dead gateway's sockets may fail to close: nothing to free then
            gateway.close()  # local sockets and threads only; the JVM is not asked
        process = getattr(gateway, "proc", None)
        if process is not None and process.poll() is None:
            process.kill()
    SparkContext._active_spark_context = None
    SparkContext._gateway = None
    SparkContext._jvm = None
    SparkSession._instantiatedSession = None
    SparkSession._activeSession = None


def _answers(spark: Any) -> bool:
    try:
        context = spark.sparkContext if spark is not None else _active_context()
        if context is None or context._jsc is None:
            return False
        return not bool(context._jsc.sc().isStopped())
    except Exception:  # Py4J errors, refused or closed sockets, an object that is no session: no live engine
        return False


def _active_context() -> Any:
    from pyspark import SparkContext

    return SparkContext._active_spark_context

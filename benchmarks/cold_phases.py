"""The phases of one cold start, read from its execution environment's log (benchmarks/cold_start.py).

The driver is given a log4j2 configuration (LOG4J) that keeps Spark's usual console output and adds a line with each
job's end and its time; the handler's JSON lines give the service's wiring and Spark's start-up timestamps.
"""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime
from typing import Any

TIMING = "wap-timing"
LOG4J = f"""# benchmarks/cold_start.py: Spark's usual console output, and each job's end with its time (epoch ms)
rootLogger.level = warn
rootLogger.appenderRef.console.ref = console
appender.console.type = Console
appender.console.name = console
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = %d{{yy/MM/dd HH:mm:ss}} %p %c{{1}}: %m%n%ex
appender.timing.type = Console
appender.timing.name = timing
appender.timing.target = SYSTEM_ERR
appender.timing.layout.type = PatternLayout
appender.timing.layout.pattern = {TIMING} %d{{UNIX_MILLIS}} %m%n
appender.timing.filter.job.type = RegexFilter
appender.timing.filter.job.regex = Job [0-9]+ finished.*
appender.timing.filter.job.onMatch = ACCEPT
appender.timing.filter.job.onMismatch = DENY
logger.dag.name = org.apache.spark.scheduler.DAGScheduler
logger.dag.level = info
logger.dag.additivity = false
logger.dag.appenderRef.timing.ref = timing
"""
BUILT = re.compile(r"service built .* in ([0-9.]+)s")
JOB_END = re.compile(rf"^{TIMING} (\d+) Job \d+ finished")


def epoch_from_iso(text: str) -> float:
    """Nessie's commit time (nanoseconds, `Z`) as epoch seconds."""
    whole, _, fraction = text.rstrip("Z").partition(".")
    return datetime.fromisoformat(whole).replace(tzinfo=UTC).timestamp() + float(f"0.{fraction or 0}")


def phases_from(log: str, started: float, on_main: float) -> dict[str, Any]:
    """The phases of one cold start from the environment's log (the handler's JSON lines, Spark's timing line)."""
    built_at: float | None = None
    ready_at: float | None = None
    spark: dict[str, Any] | None = None
    job_ends: list[float] = []
    built_s = 0.0
    for line in log.splitlines():
        if line.startswith(TIMING):
            match = JOB_END.match(line)
            if match:
                job_ends.append(int(match.group(1)) / 1000)
            continue
        if not line.startswith("{"):
            continue
        try:
            record = json.loads(line)
        except ValueError:
            continue
        message = str(record.get("message", ""))
        if built_at is None and (found := BUILT.search(message)):
            built_s = float(found.group(1))
            built_at = datetime.strptime(record["timestamp"], "%Y-%m-%d %H:%M:%S,%f%z").timestamp()
        elif message == "Spark started":
            spark = record.get("spark_startup")
        elif "spark_ready_at" in record and ready_at is None:
            ready_at = float(record["spark_ready_at"])
    if built_at is None:
        raise RuntimeError("the log lacks the service's timing line (service built)")
    handler_at = built_at - built_s
    if spark is None or ready_at is None or ready_at > on_main:  # no engine before main (a file registered by
        phases = {"interpreter_imports": handler_at - started, "service_wiring": built_s,  # PyIceberg)
                  "jvm_start": 0.0, "spark_session": 0.0, "first_spark_job": 0.0, "pipeline": on_main - built_at}
        return {"total_s": round(on_main - started, 3), "phases": {k: round(v, 3) for k, v in phases.items()},
                "jvm_detail": None, "engine_before_main": False, "spark_jobs_before_main": 0}
    ended = [end for end in job_ends if end <= on_main]
    first_job = min(ended) if ended else ready_at  # no job: a registered file
    phases = {
        "interpreter_imports": handler_at - started,
        "service_wiring": built_s,
        "jvm_start": spark["context_started_at"] - spark["began_at"],
        "spark_session": ready_at - spark["context_started_at"],
        "first_spark_job": first_job - ready_at,
        "pipeline": (spark["began_at"] - built_at) + (on_main - first_job),
    }
    return {"total_s": round(on_main - started, 3), "phases": {k: round(v, 3) for k, v in phases.items()},
            "jvm_detail": {"spark_submit_launcher": round(spark["jvm_started_at"] - spark["began_at"], 3),
                           "driver_jvm_to_context": round(spark["context_started_at"] - spark["jvm_started_at"], 3)},
            "class_data_archive": spark.get("class_data_archive"), "engine_before_main": True,
            "spark_jobs_before_main": len(ended)}

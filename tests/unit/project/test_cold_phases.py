"""A cold start's phases from its log (benchmarks/cold_phases.py): with the engine on the way to `main`, and without
it (a file registered through PyIceberg starts no JVM), where the JVM phases are zero and the pipeline is the rest."""

from __future__ import annotations

import json

from benchmarks.cold_phases import phases_from

BUILT = json.dumps({"message": "service built (once per process) in 0.02s",
                    "timestamp": "2026-11-27 06:00:01,000+0000"})
STARTED = 1795759200.5  # 2026-11-27 06:00:00.5 UTC


def test_a_cold_start_without_the_engine_is_imports_wiring_and_pipeline() -> None:
    found = phases_from(BUILT, STARTED, STARTED + 2.0)
    assert found["engine_before_main"] is False
    assert found["phases"] == {"interpreter_imports": 0.48, "service_wiring": 0.02, "jvm_start": 0.0,
                               "spark_session": 0.0, "first_spark_job": 0.0, "pipeline": 1.5}


def test_a_cold_start_with_the_engine_splits_its_start_out_of_the_pipeline() -> None:
    began = STARTED + 0.6
    spark = {"began_at": began, "jvm_started_at": began + 0.5, "context_started_at": began + 1.5}
    log = "\n".join([BUILT, json.dumps({"message": "Spark started", "spark_startup": spark}),
                     json.dumps({"message": "session", "spark_ready_at": began + 2.5})])
    found = phases_from(log, STARTED, began + 3.5)
    assert found["engine_before_main"] is True
    assert found["phases"]["jvm_start"] == 1.5 and found["phases"]["spark_session"] == 1.0
    assert found["phases"]["pipeline"] == 1.1  # 0.1 before the engine began, 1.0 after it was ready

"""The rewrite path's write job, profiled from Spark's own event log (issue 35, item 4).

    python -m benchmarks.write_profile --label spark-4.1 [--rows 5000000] [--out benchmarks/results/write_profile.json]

It starts its own local stack (as benchmarks/step_profile.py does), writes workload 4's large file (the same rows,
benchmarks/flights.py) and runs the service's one-file path on it in a worker process exactly as workload 4 does
(benchmarks/large_file.py), but with Spark's event log on: the worker's spark-submit reads a `spark-defaults.conf`
from SPARK_CONF_DIR, so the service's code and settings are untouched. The log then says, per job and stage: wall
time, tasks and how many ran at once on the cores, each task's run, CPU, GC, deserialisation and serialisation time,
bytes and rows read and written, spill and shuffle; and the physical plan of each SQL execution (the scan, the
columnar-to-row conversion, any exchange or sort Iceberg's distribution mode asks for, the write). Beside it: the
file's row groups, the table's codec and the worker's own step times. Several labels (e.g. before and after a
change, or two engines) sit side by side in one file.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
from collections import defaultdict
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from benchmarks.common import INBOX, ROOT, Bench, Options, bench_audits, write_audits

RESULTS = Path(__file__).resolve().parent / "results" / "write_profile.json"


def _ms(value: Any) -> float:
    return round(float(value or 0) / 1000, 3)


def _task(event: dict[str, Any]) -> dict[str, Any]:
    info, metrics = event["Task Info"], event.get("Task Metrics") or {}
    inputs, outputs = metrics.get("Input Metrics") or {}, metrics.get("Output Metrics") or {}
    shuffle_w = metrics.get("Shuffle Write Metrics") or {}
    shuffle_r = metrics.get("Shuffle Read Metrics") or {}
    return {
        "stage": event["Stage ID"], "index": info["Index"], "launch_ms": info["Launch Time"],
        "finish_ms": info["Finish Time"], "seconds": _ms(info["Finish Time"] - info["Launch Time"]),
        "run_s": _ms(metrics.get("Executor Run Time")), "cpu_s": round(float(metrics.get("Executor CPU Time") or 0)
                                                                        / 1e9, 3),
        "gc_s": _ms(metrics.get("JVM GC Time")), "deserialize_s": _ms(metrics.get("Executor Deserialize Time")),
        "result_serialize_s": _ms(metrics.get("Result Serialization Time")),
        "bytes_read": inputs.get("Bytes Read", 0), "rows_read": inputs.get("Records Read", 0),
        "bytes_written": outputs.get("Bytes Written", 0), "rows_written": outputs.get("Records Written", 0),
        "spilled_memory": metrics.get("Memory Bytes Spilled", 0), "spilled_disk": metrics.get("Disk Bytes Spilled", 0),
        "shuffle_written": shuffle_w.get("Shuffle Bytes Written", 0),
        "shuffle_read": shuffle_r.get("Remote Bytes Read", 0) + shuffle_r.get("Local Bytes Read", 0),
        "peak_execution_memory": metrics.get("Peak Execution Memory", 0),
    }


def _at_once(tasks: list[dict[str, Any]]) -> int:
    """The most tasks that ran at the same moment."""
    edges = sorted([(t["launch_ms"], 1) for t in tasks] + [(t["finish_ms"], -1) for t in tasks],
                   key=lambda e: (e[0], e[1]))
    running = most = 0
    for _, step in edges:
        running += step
        most = max(most, running)
    return most


def _lines(path: Path) -> list[str]:
    """An event log's lines: one file, or (Spark 4's rolling logs, `eventlog_v2_<app>/`) its `events_<n>_` parts in
    order."""
    if path.is_file():
        return path.read_text().splitlines()
    parts = sorted(path.glob("events_*"), key=lambda p: int(p.name.split("_")[1]))
    return [line for part in parts for line in part.read_text().splitlines()]


def read_event_log(path: Path) -> dict[str, Any]:
    """Jobs, their stages and tasks, and the SQL executions' plans, from one application's event log."""
    stages: dict[int, dict[str, Any]] = {}
    tasks: dict[int, list[dict[str, Any]]] = defaultdict(list)
    jobs: list[dict[str, Any]] = []
    plans: list[dict[str, Any]] = []
    properties: dict[str, str] = {}
    for line in _lines(path):
        event = json.loads(line)
        kind = event.get("Event", "")
        if kind == "SparkListenerEnvironmentUpdate":
            properties = dict(event.get("Spark Properties") or {})
        elif kind == "SparkListenerJobStart":
            jobs.append({"job": event["Job ID"], "stages": event.get("Stage IDs", []),
                         "started_ms": event["Submission Time"],
                         "description": (event.get("Properties") or {}).get("spark.job.description", "")})
        elif kind == "SparkListenerJobEnd":
            for job in jobs:
                if job["job"] == event["Job ID"]:
                    job["seconds"] = _ms(event["Completion Time"] - job["started_ms"])
        elif kind == "SparkListenerStageCompleted":
            info = event["Stage Info"]
            stages[info["Stage ID"]] = {"stage": info["Stage ID"], "name": info["Stage Name"][:120],
                                        "tasks": info["Number of Tasks"],
                                        "seconds": _ms((info.get("Completion Time") or 0) -
                                                       (info.get("Submission Time") or 0))}
        elif kind == "SparkListenerTaskEnd":
            tasks[event["Stage ID"]].append(_task(event))
        elif kind.endswith("SparkListenerSQLExecutionStart"):
            plans.append({"description": str(event.get("description", ""))[:200],
                          "plan": str(event.get("physicalPlanDescription", ""))[:6000]})
    for number, stage in stages.items():
        own = tasks.get(number, [])
        total = {k: round(sum(t[k] for t in own), 3) for k in ("run_s", "cpu_s", "gc_s", "deserialize_s",
                                                                "result_serialize_s")}
        sums = {k: sum(t[k] for t in own) for k in ("bytes_read", "rows_read", "bytes_written", "rows_written",
                                                      "spilled_memory", "spilled_disk", "shuffle_written",
                                                      "shuffle_read")}
        stage.update({"tasks_at_once": _at_once(own), "task_seconds": sorted((t["seconds"] for t in own), reverse=True),
                      "sum": total | sums, "task_detail": own})
    for job in jobs:
        job["stages"] = [stages[s] for s in job["stages"] if s in stages]
    keep = ("spark.master", "spark.driver.memory", "spark.sql.shuffle.partitions", "spark.sql.files.maxPartitionBytes",
            "spark.default.parallelism", "spark.sql.iceberg.vectorization.enabled", "spark.sql.ansi.enabled")
    return {"jobs": sorted(jobs, key=lambda j: -j.get("seconds", 0)), "plans": plans,
            "spark_settings": {k: properties[k] for k in keep if k in properties}}


# Where the write job's CPU goes: each JFR execution sample of a task thread is put in the step of the first frame,
# from the running method outwards, whose class starts with one of these (the first listed wins within a frame).
STEPS = (
    ("com.github.luben.zstd", "write: zstd compression"),
    ("io.airlift.compress", "write: zstd compression"),
    ("org.apache.iceberg.shaded.org.apache.parquet.hadoop.codec", "write: zstd compression"),
    ("software.amazon.awssdk", "write: S3 upload (request signing, checksums)"),
    ("sun.security.provider", "write: S3 upload (request signing, checksums)"),
    ("org.apache.iceberg.aws", "write: S3 upload (request signing, checksums)"),
    ("org.apache.iceberg.shaded.org.apache.parquet.column.values.dictionary",
     "write: Parquet dictionary encoding"),
    ("org.apache.iceberg.shaded.org.apache.parquet.shaded.it.unimi", "write: Parquet dictionary encoding"),
    ("org.apache.iceberg.shaded.org.apache.parquet.io.api.Binary", "write: Parquet dictionary encoding"),
    ("org.apache.iceberg.shaded.org.apache.parquet.column.statistics", "write: Parquet statistics"),
    ("org.apache.iceberg.shaded.org.apache.parquet.schema.PrimitiveComparator", "write: Parquet statistics"),
    ("org.apache.iceberg.shaded.org.apache.parquet", "write: Parquet encoding (other values, levels, pages)"),
    ("org.apache.iceberg.parquet", "write: Iceberg's row writers (row values to Parquet)"),
    ("org.apache.iceberg.spark.data", "write: Iceberg's row writers (row values to Parquet)"),
    ("org.apache.iceberg", "write: Iceberg (other)"),
    ("org.apache.parquet", "read: Parquet decode (Spark's reader)"),
    ("org.apache.spark.sql.execution.datasources.parquet", "read: Parquet decode (Spark's reader)"),
    ("org.apache.spark.sql.execution.vectorized", "read: Parquet decode (Spark's reader)"),
    ("org.apache.spark.sql.catalyst.expressions", "convert: columnar batch to rows (codegen, getters)"),
    ("org.apache.spark.sql.execution.ColumnarToRow", "convert: columnar batch to rows (codegen, getters)"),
    ("org.apache.spark.unsafe", "convert: columnar batch to rows (codegen, getters)"),
    ("org.apache.spark.sql.catalyst.types", "convert: columnar batch to rows (codegen, getters)"),
    ("org.apache.spark", "Spark (task, other)"),
)


def frame_name(class_name: str, method: str) -> str:
    """`org/apache/X` -> `org.apache.X.method`. Iceberg's writer uses its shaded parquet-mr
    (`org.apache.iceberg.shaded.org.apache.parquet`), Spark's reader its own (`org.apache.parquet`): the steps tell
    them apart by that."""
    return f"{class_name.replace('/', '.')}.{method}"


def step_of(frames: list[str]) -> str:
    for name in frames:
        for prefix, step in STEPS:
            if name.startswith(prefix):
                return step
    return "other (JDK, native)"


def read_jfr(recordings: list[Path]) -> dict[str, Any]:
    """Samples of the executor's task threads, by step (STEPS), from the JDK's `jfr print`: the execution samples
    (a thread running Java code) and the native-method samples (a thread in native code, e.g. zstd-jni's
    compression), taken at the same period."""
    import subprocess

    steps: dict[str, int] = defaultdict(int)
    leaves: dict[str, int] = defaultdict(int)
    total = 0
    for recording in recordings:
        printed = subprocess.run(["jfr", "print", "--json", "--events", "jdk.ExecutionSample,jdk.NativeMethodSample",
                                  str(recording)],
                                 capture_output=True, text=True, check=True).stdout
        for event in json.loads(printed)["recording"]["events"]:
            values = event["values"]
            if "task launch worker" not in str((values.get("sampledThread") or {}).get("javaName", "")):
                continue
            frames = [frame_name(f["method"]["type"]["name"], f["method"]["name"])
                      for f in ((values.get("stackTrace") or {}).get("frames") or [])]
            total += 1
            steps[step_of(frames)] += 1
            if frames:
                leaves[frames[0]] += 1
    share = {step: round(n / total, 3) for step, n in sorted(steps.items(), key=lambda kv: -kv[1])} if total else {}
    top = sorted(leaves.items(), key=lambda kv: -kv[1])[:25]
    return {"samples": total, "share_by_step": share,
            "hottest_methods": [{"method": m, "share": round(n / total, 3)} for m, n in top]}


def profile(bench: Bench, rows: int, work: Path) -> dict[str, Any]:
    """Workload 4's service run on the rewrite path, with the event log on; the log, read."""
    from benchmarks.large_file import LargeFile, pq_row_groups

    conf, events = work / "spark-conf", work / "events"
    conf.mkdir(parents=True, exist_ok=True)
    events.mkdir(parents=True, exist_ok=True)
    jfr = work / "jfr"
    jfr.mkdir(parents=True, exist_ok=True)
    recording = f"-XX:StartFlightRecording=filename={jfr}/driver-%p.jfr,settings=default,dumponexit=true"
    large = LargeFile(bench.s3, bench.env, work, rows)
    runs = []
    for n, extra in enumerate(({}, {"JAVA_TOOL_OPTIONS": recording})):  # timed without the recorder, then with it
        (events / str(n)).mkdir()
        settings = f"spark.eventLog.enabled true\nspark.eventLog.dir file://{events / str(n)}\n"
        (conf / "spark-defaults.conf").write_text(settings + "spark.eventLog.compress false\n")
        result = large.service(n, env={"SPARK_CONF_DIR": str(conf)} | extra)  # bench_large_<n>: rewritten
        if "failed" in result:
            raise RuntimeError(result["failed"])
        [log] = list((events / str(n)).iterdir())
        runs.append({"worker": result} | read_event_log(log))
    found = runs[0] | {"with_recorder": {"worker": runs[1]["worker"], "jobs": runs[1]["jobs"],
                                         "cpu_by_step": read_jfr(sorted(jfr.glob("*.jfr")))}}
    return {"file": large.file | {"row_groups": pq_row_groups(large.path)}, "cores": os.cpu_count(), **found}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--label", required=True, help="this profile's name in the file (e.g. spark-4.1)")
    parser.add_argument("--rows", type=int, default=5_000_000, help="workload 4's default")
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument("--commit", default="", help="the commit the profiled tree is at (recorded)")
    args = parser.parse_args(argv)
    from wap_stack.stack import StackConfig, free_ports, stack_environment, start_stack, stop_stack

    moto, nessie, mgmt, slack, function, runtime = free_ports(6)
    config = StackConfig(state_dir=Path(tempfile.mkdtemp(prefix="wap-write-profile-")), moto_port=moto,
                         nessie_port=nessie, nessie_management_port=mgmt, slack_port=slack, lambda_port=function,
                         runtime_port=runtime)
    options = Options(smoke=False, runs=1, burst=1, burst_batch=1, concurrency=(1,), large_rows=args.rows,
                      large_runs=2, function_memory_mb=4096, work=config.state_dir / "large")
    os.environ["WAP_AUDITS_FILE"] = str(write_audits(ROOT / "audits.yml", config.state_dir / "audits.yml",
                                                     bench_audits(options)))
    state = start_stack(config)
    load = os.getloadavg()[0]
    try:
        env = dict(os.environ) | stack_environment(state) | {"WAP_WORK_DIR": str(config.state_dir / "work"),
                                                               "WAP_SOURCE_BUCKETS": INBOX}
        os.environ.update(env)
        found = profile(Bench(env, options), args.rows, options.work)
    finally:
        stop_stack(config)
    found |= {"measured_at": datetime.now(UTC).isoformat(timespec="seconds"), "commit": args.commit,
              "load_average_before_after": [round(load, 2), round(os.getloadavg()[0], 2)]}
    document = json.loads(args.out.read_text()) if args.out.exists() else {}
    document.setdefault("profiles", {})[args.label] = found
    document["about"] = (__doc__ or "").splitlines()[0]
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(document, indent=1) + "\n")
    print(summary(found))
    return 0


def summary(found: dict[str, Any]) -> str:
    lines = [f"file: {found['file']}", f"worker stages: {found['worker'].get('stages_s')}",
             f"CPU by step (with the recorder): {found['with_recorder']['cpu_by_step']['share_by_step']}"]
    for job in found["jobs"][:4]:
        lines.append(f"job {job['job']} {job.get('seconds')} s: {job['description'][:60]}")
        for stage in job["stages"]:
            s = stage["sum"]
            lines.append(f"  stage {stage['stage']} {stage['seconds']} s, {stage['tasks']} tasks "
                         f"({stage['tasks_at_once']} at once) {stage['task_seconds'][:6]}: run {s['run_s']} cpu "
                         f"{s['cpu_s']} gc {s['gc_s']} read {s['bytes_read']} written {s['bytes_written']} "
                         f"spill {s['spilled_disk']} shuffle {s['shuffle_written']}")
    return "\n".join(lines)


if __name__ == "__main__":
    raise SystemExit(main())

"""`make bench`: the service against the reference approach (benchmarks/baseline.py), on one local stack, in
one run. Writes benchmarks/results/latest.json (with `targets`, benchmarks/targets.py) and latest.md.

    python -m benchmarks.run [--smoke] [--out DIR] [--burst N] [--workloads 1,2]

    python -m benchmarks.run --workloads 4 --large-rows 1000000   (one workload, a smaller file)

Workloads (registered in WORKLOADS below; each in its own module):
  1. one small file (benchmarks/small_file.py): service direct, baseline, the engine alone, the event path;
  2. audit cost against table size (benchmarks/audit_cost.py): 10k, 1M and 10M rows;
  3. a burst of small files for one table (benchmarks/burst.py): both sides at concurrency 1 and 4;
  4. one large file (benchmarks/large_file.py): the service, the baseline, the floor: seconds per step, rows/s
     and each process tree's peak memory;
  5. the EMR job entry point under spark-submit on the same file;
  6. load cost against table history and the measured compaction (benchmarks/history.py): the 10th, 100th and
     1,000th load into one table, the metadata file's size, then 200 small files compacted by `wap maintain`;
  7. a 1 GiB Parquet file to main in the function, rewritten and registered (benchmarks/large_file.py). Not among
     the defaults (it writes and uploads 1 GiB twice): ask for it with --workloads.
  8. bursts of 300 and 2,000 small files through the stack's real event path, files per second at each
     (benchmarks/queue_burst.py; `python -m benchmarks.queue_burst` runs it alone, on a stack of its own, into
     benchmarks/results/queue_burst.json). Not among the defaults (about 5 minutes): ask for it with --workloads.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from benchmarks import audit_cost, burst, history, queue_burst, readme, small_file
from benchmarks.common import INBOX, RESULTS, ROOT, Bench, Options, bench_audits, write_audits
from benchmarks.large_file import LargeFile
from benchmarks.report import markdown
from benchmarks.targets import targets


@dataclass(frozen=True)
class Workload:
    name: str  # its key under `results`
    run: Callable[[Bench], dict[str, Any]]


def _large_file(bench: Bench) -> LargeFile:
    """The large file and its processes, made once for workloads 4 and 5."""
    if "large" not in bench.shared:
        options = bench.options
        bench.shared["large"] = LargeFile(bench.s3, bench.env, options.work, 2_000 if options.smoke else
                                          options.large_rows, in_process=bench.service if options.smoke else None,
                                          function_memory_mb=options.function_memory_mb)
    large: LargeFile = bench.shared["large"]
    return large


# One line per workload: a module with `run(...) -> dict` and its line here; its section in report.SECTIONS is
# optional.
WORKLOADS: dict[int, Workload] = {
    1: Workload("small_file", small_file.run),
    2: Workload("audit_cost", audit_cost.run),
    3: Workload("burst", burst.run),
    4: Workload("large_file", lambda bench: _large_file(bench).compare(bench.options.large_runs)),
    5: Workload("emr_job", lambda bench: _large_file(bench).emr(bench.service, ROOT / ".cache" / "jars" / "spark")),
    6: Workload("history", lambda bench: history.run(bench.service, [2, 4] if bench.options.smoke else [10, 100, 1000],
                                                     False, 6 if bench.options.smoke else 200, bucket=INBOX)),
    7: Workload("gib_file", lambda bench: _large_file(bench).gib(1, 2 * 2**20 if bench.options.smoke else 2**30)),
    8: Workload("queue_burst", queue_burst.run),
}
DEFAULT_WORKLOADS = (1, 2, 3, 4, 5, 6)


def options_from(args: argparse.Namespace, work: Path) -> Options:
    smoke = args.smoke
    return Options(smoke=smoke, runs=1 if smoke else args.runs, burst=3 if smoke else args.burst,
                   burst_batch=args.burst_batch, concurrency=(1, 2) if smoke else (1, 4),
                   large_rows=args.large_rows, large_runs=1 if smoke else args.large_runs,
                   function_memory_mb=args.function_memory, work=work)


def run_workloads(bench: Bench, chosen: list[int], loads: dict[str, list[float]],
                  measured_at: dict[str, str] | None = None) -> tuple[dict[str, Any], dict[str, float]]:
    """(results, seconds each workload took, set-up included); `loads` gets each one's load averages, `measured_at`
    the time each one started."""
    results: dict[str, Any] = {}
    spent: dict[str, float] = {}
    for number in chosen:
        workload = WORKLOADS[number]
        started, load = time.perf_counter(), os.getloadavg()[0]
        if measured_at is not None:
            measured_at[workload.name] = datetime.now(UTC).isoformat(timespec="seconds")
        print(f"workload {number}: {workload.name}", file=sys.stderr, flush=True)
        results[workload.name] = workload.run(bench)
        spent[workload.name] = round(time.perf_counter() - started, 1)
        # The machine's 1-minute load average before and after (2 cores, shared): how loaded it was meanwhile.
        loads[workload.name] = [round(load, 2), round(os.getloadavg()[0], 2)]
    return results, spent


KEPT = ("results", "workload_seconds", "workload_load_average", "workload_measured_at")


def keep_others(report: dict[str, Any], previous: Path) -> None:
    """--keep-others: the workloads this run did not run keep their results from the previous report (each with its
    own time and load average: every ratio is within one workload, its baseline measured in the same run)."""
    if not previous.is_file():
        return
    old = json.loads(previous.read_text())
    for name in old.get("results", {}):
        if name in report["results"]:
            continue
        for key in KEPT:
            if name in old.get(key, {}):
                report.setdefault(key, {})[name] = old[key][name]
        report["workload_measured_at"].setdefault(name, old.get("started_at"))
    report["workloads_kept"] = sorted(set(report["results"]) - set(report["workloads_run"]))


def parser() -> argparse.ArgumentParser:
    found = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    found.add_argument("--smoke", action="store_true", help="tiny sizes, one repetition (the test suite runs this)")
    found.add_argument("--out", type=Path, default=RESULTS)
    found.add_argument("--runs", type=int, default=5, help="repetitions of each timed step (median)")
    found.add_argument("--burst", type=int, default=200, help="files per burst (workload 3)")
    found.add_argument("--burst-batch", type=int, default=100,
                       help="files per call of the service's direct burst (serverless.yml's SQS batchSize)")
    found.add_argument("--workloads", default=",".join(map(str, DEFAULT_WORKLOADS)),
                       help="e.g. 4,5 (default: 1-6; 7, the 1 GiB file, on request)")
    found.add_argument("--large-rows", type=int, default=5_000_000, help="rows of the large file (workloads 4, 5)")
    found.add_argument("--large-runs", type=int, default=5, help="repetitions of workload 4 (median)")
    found.add_argument("--function-memory", type=int, default=4096,
                       help="the function's memory (MB) in workload 4: its Spark driver gets 60%% of it")
    found.add_argument("--keep-others", action="store_true",
                       help="keep the previous report's results of the workloads not run now (each with its time)")
    return found


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    chosen = sorted({int(w) for w in args.workloads.split(",") if w.strip()})
    if not set(chosen) <= set(WORKLOADS):
        parser().error(f"--workloads: choose among {sorted(WORKLOADS)}")
    from wap_stack.stack import StackConfig, free_ports, stack_environment, start_stack, stop_stack

    moto, nessie, mgmt, slack, function, runtime = free_ports(6)
    config = StackConfig(state_dir=Path(tempfile.mkdtemp(prefix="wap-bench-")), moto_port=moto, nessie_port=nessie,
                         nessie_management_port=mgmt, slack_port=slack, lambda_port=function, runtime_port=runtime)
    options = options_from(args, config.state_dir / "large")
    started_at = datetime.now(UTC).isoformat(timespec="seconds")
    # The stack (the function, the EMR artefacts) audits the bench's tables like the baseline: set before start.
    audits = Path(os.environ.get("WAP_AUDITS_FILE", "").strip() or ROOT / "audits.yml")
    os.environ["WAP_AUDITS_FILE"] = str(write_audits(audits, config.state_dir / "audits.yml", bench_audits(options)))
    state = start_stack(config)
    loads: dict[str, list[float]] = {}
    measured_at: dict[str, str] = {}
    try:
        env = dict(os.environ) | stack_environment(state) | {"WAP_WORK_DIR": str(config.state_dir / "bench-work"),
                                                               "WAP_SOURCE_BUCKETS": "bench-inbox"}
        os.environ.update(env)
        results, spent = run_workloads(Bench(env, options), chosen, loads, measured_at)
    finally:
        stop_stack(config)
        shutil.rmtree(options.work, ignore_errors=True)
    report: dict[str, Any] = {
        "started_at": started_at,
        "finished_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}",
        "smoke": args.smoke,
        "options": {k: v for k, v in vars(args).items() if k != "out"} | {"concurrency": list(options.concurrency)},
        "workloads": chosen,
        "workloads_run": [WORKLOADS[n].name for n in chosen],
        "workload_seconds": spent,
        "workload_load_average": loads,
        "workload_measured_at": measured_at,
        "results": results,
    }
    if args.keep_others:
        keep_others(report, args.out / "latest.json")
    report["targets"] = targets(report)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "latest.json").write_text(json.dumps(report, indent=2, default=str) + "\n")
    (args.out / "latest.md").write_text(markdown(report))
    if args.out.resolve() == RESULTS and not args.smoke:  # the committed results: the README shows them
        readme.update(ROOT / "README.md", markdown(report))
    print(markdown(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())

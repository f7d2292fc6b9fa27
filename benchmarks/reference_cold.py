"""The reference's cold first file (issue 35, item 4): a fresh process, as seed 004's function starts, that imports
pyarrow, PyIceberg and pynessie, reads one file from S3, branches, appends, scans for nulls and merges
(benchmarks/baseline.py, step for step), timed from the process's start to the merge's return.

    python -m benchmarks.reference_cold --bucket B --key K --table wap.T --started EPOCH

benchmarks/cold_start.py runs it as its `reference` variant, interleaved with the service's variants on the same
stack, so that a cold start's absolute time, which swings with the machine, is read as a ratio to this one. Prints
one JSON line: the seconds until the imports were done and until the merge returned, from `--started` (the parent's
clock when it spawned the process), and the process's CPU seconds.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path
from typing import Any


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--bucket", required=True)
    parser.add_argument("--key", required=True)
    parser.add_argument("--table", required=True)
    parser.add_argument("--started", type=float, required=True)
    args = parser.parse_args(argv)
    import pyarrow.parquet  # noqa: F401  the reference's imports, at its cold start
    import pyiceberg.catalog  # noqa: F401
    import pynessie  # noqa: F401

    from benchmarks.baseline import Baseline

    imported = time.time()
    baseline = Baseline(os.environ["NESSIE_ENDPOINT"], os.environ.get("AWS_ENDPOINT_URL"),
                        os.environ.get("AWS_DEFAULT_REGION", "us-east-1"))
    times = baseline.ingest(args.bucket, args.key, args.table)
    merged = time.time()
    usage = resource.getrusage(resource.RUSAGE_SELF)
    print(json.dumps({"imports_s": round(imported - args.started, 3), "total_s": round(merged - args.started, 3),
                      "cpu_s": round(usage.ru_utime + usage.ru_stime, 2), "steps": times.as_dict()}))
    return 0


def reference_run(env: dict[str, str], bucket: str, key: str, table: str, log: Path) -> dict[str, Any]:
    """One cold run of the reference in a fresh process; a sample in cold_start.py's shape (its phases: the
    imports, then the rest as `pipeline`; no JVM)."""
    root = Path(__file__).resolve().parents[1]
    env = env | {"PYTHONPATH": os.pathsep.join(p for p in (str(root), env.get("PYTHONPATH", "")) if p)}
    started = time.time()
    done = subprocess.run([sys.executable, "-m", "benchmarks.reference_cold", "--bucket", bucket, "--key", key,
                           "--table", table, "--started", repr(started)], env=env, capture_output=True, text=True,
                          timeout=600, check=False)
    log.write_text(done.stdout + done.stderr)
    if done.returncode != 0:
        raise RuntimeError(f"the reference's cold run failed ({done.returncode}); see {log}")
    found = json.loads(done.stdout.strip().splitlines()[-1])
    phases = dict.fromkeys(("interpreter_imports", "service_wiring", "jvm_start", "spark_session", "first_spark_job",
                            "pipeline"), 0.0)
    phases |= {"interpreter_imports": found["imports_s"], "pipeline": round(found["total_s"] - found["imports_s"], 3)}
    return {"total_s": found["total_s"], "phases": phases, "cpu_s": found["cpu_s"], "warm_s": [],
            "steps": found["steps"], "log": str(log)}


if __name__ == "__main__":
    sys.exit(main())

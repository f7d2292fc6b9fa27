"""The Lambda image, measured: its size, and its cold start against the local stack's.

    python -m benchmarks.image [--image localhost/wap-lambda:dev] [--runs 3] [--out benchmarks/results/image.json]

Needs the image (`make image`) and podman (root, as `make image-test`). It starts its own local stack (on free
ports). Each run uploads one 1,000-row Parquet file to a bucket nothing is notified of, then starts a fresh
execution environment and invokes it once with the SQS event that the file's notification would make, as the
stack's worker does; the cold start is the time from the environment's start to the file's merge commit on `main`
(Nessie's commit time), and `listening_s` the part of it until the emulator's invoke port opens. The two ways an
environment starts, interleaved (stack, image, stack, image...) so that the shared machine's load falls on each
alike:

  stack   the local stack's: the Runtime Interface Emulator and `python -m awslambdaric` on this machine
          (wap_stack/trigger.py), Spark's class-data archive from `make cds`
  image   `podman run` of the image as Lambda runs it (wap_stack/image.py: read-only root, tmpfs /tmp, the function's
          memory as its limit, the emulator mounted as the entry point), the archive the image built

Both get the deployed function's memory (serverless.yml), so Spark's driver is sized alike. A first cold start
(not measured) creates the table. The load average before and after is recorded: on a shared machine it stretches
wall time.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import os
import platform
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import requests

from benchmarks.cold_start import INBOX, TABLE, Environments, _published, sqs_event, stop_environment
from benchmarks.common import Bench, Options

RESULTS = Path(__file__).resolve().parent / "results" / "image.json"
VARIANTS = ("stack", "image")


def image_facts(image: str) -> dict[str, Any]:
    """The image's size as podman stores it (uncompressed: what Lambda's 10 GB limit counts) and its layers."""
    [inspected] = json.loads(subprocess.run(["podman", "image", "inspect", image], capture_output=True, text=True,
                                            check=True, timeout=120).stdout)
    return {"image": image, "id": inspected["Id"][:12], "size_bytes": int(inspected["Size"]),
            "size_mb": round(int(inspected["Size"]) / 1e6), "layers": len(inspected["RootFS"]["Layers"]),
            "created": inspected["Created"]}


class Runs(Environments):
    """Fresh execution environments of either kind on one stack (benchmarks/cold_start.py's, plus the image)."""

    def __init__(self, config: Any, state: Any, bench: Bench, image: str) -> None:
        super().__init__(config, state, bench)
        self.image_config = dataclasses.replace(config, image=image)

    def start(self, variant: str, rows: int) -> dict[str, Any]:
        from wap_stack.image import container_name, function_limits
        from wap_stack.processes import free_ports, port_open, spawn
        from wap_stack.trigger import lambda_command

        self.count += 1
        name = f"{variant}-{self.count}"
        key = f"{TABLE}/{name}.parquet"
        self.bench.put(INBOX, key, rows)
        invoke, runtime = free_ports(2)
        log = self.config.logs_dir / f"{name}.log"
        env = self.environment(name, {}) | {"AWS_LAMBDA_FUNCTION_MEMORY_SIZE": str(function_limits().memory_mb)}
        config = self.image_config if variant == "image" else self.config
        url = f"http://127.0.0.1:{invoke}/2015-03-31/functions/function/invocations"
        started = time.time()
        pid = spawn("lambda", lambda_command(config, invoke, runtime), log, env)
        try:
            while not port_open(invoke, timeout=0.2):
                time.sleep(0.005)
            listening = time.time()
            _published(requests.post(url, json=sqs_event([key]), timeout=900), name, log)
            replied = time.time()
        finally:
            if variant == "image":  # SIGTERM: podman stops the container, which --rm removes
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(pid, signal.SIGTERM)
                with contextlib.suppress(subprocess.TimeoutExpired, ChildProcessError):
                    os.waitpid(pid, 0)
                subprocess.run(["podman", "rm", "--force", "--ignore", container_name(invoke)], capture_output=True,
                               check=False, timeout=120)
            else:
                stop_environment(pid, runtime)
        on_main = self.committed_at(key)
        return {"cold_start_s": round(on_main - started, 3), "listening_s": round(listening - started, 3),
                "reply_s": round(replied - started, 3), "log": str(log)}


def measure(image: str, runs: int) -> dict[str, list[dict[str, Any]]]:
    from wap_stack.stack import StackConfig, free_ports, stack_environment, start_stack, stop_stack

    moto, nessie, mgmt, slack, function, runtime = free_ports(6)
    config = StackConfig(state_dir=Path(tempfile.mkdtemp(prefix="wap-image-bench-")), moto_port=moto,
                         nessie_port=nessie, nessie_management_port=mgmt, slack_port=slack, lambda_port=function,
                         runtime_port=runtime)
    results: dict[str, list[dict[str, Any]]] = {name: [] for name in VARIANTS}
    state = start_stack(config)
    try:
        env = dict(os.environ) | stack_environment(state) | {"WAP_WORK_DIR": str(config.state_dir / "bench-work"),
                                                               "WAP_SOURCE_BUCKETS": INBOX}
        os.environ.update(env)
        os.environ.pop("WAP_AUDITS_FILE", None)  # both read the repository's audits.yml (the image has its own copy)
        options = Options(smoke=False, runs=1, burst=0, burst_batch=1, concurrency=(1,), large_rows=0, large_runs=0,
                          function_memory_mb=4096, work=config.state_dir / "large")  # only put() and the service
        environments = Runs(config, state, Bench(env, options), image)
        environments.start("stack", 1000)  # creates the table: not measured
        for run in range(1, runs + 1):
            for variant in VARIANTS:
                sample = environments.start(variant, 1000)
                results[variant].append(sample)
                print(f"run {run} {variant}: {sample['cold_start_s']} s", flush=True)
    finally:
        stop_stack(config)
    return results


def report_for(image: dict[str, Any], results: dict[str, list[dict[str, Any]]], started_at: str,
               load_before: list[float]) -> dict[str, Any]:
    medians = {name: round(statistics.median(s["cold_start_s"] for s in samples), 3)
               for name, samples in results.items()}
    listening = {name: round(statistics.median(s["listening_s"] for s in samples), 3)
                 for name, samples in results.items()}
    return {
        "started_at": started_at, "finished_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}",
        "load_average_before": [round(x, 2) for x in load_before],
        "load_average_after": [round(x, 2) for x in os.getloadavg()],
        "image": image,
        "cold_start": {"measure": "environment start (podman run, or the emulator on this machine) to the file's "
                                  "merge commit on main; one 1,000-row Parquet file; median",
                       "runs_per_variant": len(results["image"]),
                       "median_s": medians,
                       "median_listening_s": listening,  # start to the emulator's invoke port open
                       "image_minus_stack_s": round(medians["image"] - medians["stack"], 3),
                       "samples": results},
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--image", default="localhost/wap-lambda:dev")
    parser.add_argument("--runs", type=int, default=3, help="cold starts per variant (median reported)")
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    started_at, load = datetime.now(UTC).isoformat(timespec="seconds"), list(os.getloadavg())
    facts = image_facts(args.image)
    report = report_for(facts, measure(args.image, args.runs), started_at, load)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    print(json.dumps({k: report[k] for k in ("image", "load_average_before", "load_average_after")} |
                     {"median_s": report["cold_start"]["median_s"]}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())

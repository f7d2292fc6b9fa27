"""Two engines side by side (issue 35, item 6): the same `make bench` workloads on two checkouts, interleaved.

    python -m benchmarks.engines --tree spark-3.5=../main --tree spark-4.1=. [--rounds 2] [--workloads 1,2,3,4,5]
        [--large-runs 3] [--out benchmarks/results/engines.json]

Each tree is a checkout set up as `make setup` leaves it (its own .venv, jars and class-data archive). Each round
runs `benchmarks.run` once in each tree, in turn (round 1: A then B, round 2: B then A, ...), each on a stack of its
own, with the same options, so that the machine's load falls on both alike. Each run's report stays beside the
summary (the targets' values and each workload's figures); the summary gives, per target, every run's value per
tree, their median, and the ratio of the second tree's median to the first's with the spread of each. A target
whose values of the two trees overlap has not moved beyond the noise of these runs.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

RESULTS = Path(__file__).resolve().parent / "results" / "engines.json"


def run_tree(tree: Path, out: Path, workloads: str, large_runs: int, runs: int) -> dict[str, Any]:
    started = time.monotonic()
    done = subprocess.run([str(tree / ".venv" / "bin" / "python"), "-m", "benchmarks.run", "--workloads", workloads,
                           "--large-runs", str(large_runs), "--runs", str(runs), "--out", str(out)], cwd=tree,
                          capture_output=True, text=True, check=False)
    (out / "run.log").parent.mkdir(parents=True, exist_ok=True)
    (out / "run.log").write_text(done.stdout + done.stderr)
    if done.returncode != 0:
        raise RuntimeError(f"benchmarks.run failed in {tree} ({done.returncode}); see {out / 'run.log'}")
    report: dict[str, Any] = json.loads((out / "latest.json").read_text())
    return report | {"wall_s": round(time.monotonic() - started, 1)}


def versions(tree: Path) -> dict[str, str]:
    code = ("import pyspark, pyiceberg, pyarrow; from pathlib import Path; "
            "print(pyspark.__version__, pyiceberg.__version__, pyarrow.__version__, "
            "[p.name for p in Path('.cache/jars/spark').glob('iceberg-spark-runtime*')][0])")
    out = subprocess.run([str(tree / ".venv" / "bin" / "python"), "-c", code], cwd=tree, capture_output=True,
                         text=True, check=True).stdout.split()
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=tree, capture_output=True, text=True,
                            check=False).stdout.strip()
    return {"pyspark": out[0], "pyiceberg": out[1], "pyarrow": out[2], "iceberg_runtime": out[3], "commit": commit}


def summary(runs: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    names = list(runs)
    targets: dict[str, Any] = {}
    for name in names:
        for report in runs[name]:
            for target in report["targets"]:
                entry = targets.setdefault(target["name"], {"target": target["target"]})
                entry.setdefault(name, {"values": []})["values"].append(target["value"])
    for entry in targets.values():
        for name in names:
            values = [v for v in entry.get(name, {}).get("values", []) if v is not None]
            if values:
                entry[name] |= {"median": round(statistics.median(values), 3), "min": min(values), "max": max(values)}
        first, second = (entry.get(n, {}) for n in names[:2])
        if first.get("median") and second.get("median") is not None:
            entry["second_vs_first"] = round(second["median"] / first["median"], 3)
            entry["overlap"] = second["min"] <= first["max"] and first["min"] <= second["max"]
    return targets


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--tree", action="append", required=True, metavar="NAME=PATH", help="twice: the two engines")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--workloads", default="1,2,3,4,5")
    parser.add_argument("--large-runs", type=int, default=3)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    trees = {name: Path(path).resolve() for name, _, path in (t.partition("=") for t in args.tree)}
    if len(trees) != 2:
        parser.error("--tree twice: NAME=PATH of each engine's checkout")
    work = Path(tempfile.mkdtemp(prefix="wap-engines-"))
    started = datetime.now(UTC).isoformat(timespec="seconds")
    runs: dict[str, list[dict[str, Any]]] = {name: [] for name in trees}
    order = list(trees)
    for round_number in range(1, args.rounds + 1):
        for name in order if round_number % 2 else reversed(order):
            report = run_tree(trees[name], work / f"{name}-{round_number}", args.workloads, args.large_runs,
                              args.runs)
            runs[name].append(report)
            print(f"round {round_number} {name}: {report['wall_s']} s", flush=True)
    targets = summary(runs)
    document = {"about": (__doc__ or "").splitlines()[0], "started_at": started,
                "finished_at": datetime.now(UTC).isoformat(timespec="seconds"),
                "options": {"rounds": args.rounds, "workloads": args.workloads, "large_runs": args.large_runs,
                            "runs": args.runs},
                "trees": {name: versions(path) for name, path in trees.items()}, "order": order,
                "targets": targets, "runs": runs}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(document, indent=1, default=str) + "\n")
    for name, entry in targets.items():
        print(name, entry["target"], {n: entry.get(n, {}).get("median") for n in trees},
              entry.get("second_vs_first"), "overlap" if entry.get("overlap") else "")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""The warm small file, step by step: where the service's direct call spends its time (issue 17, item 2).

    python -m benchmarks.step_profile --label after [--files 12] [--out benchmarks/results/small_file_profile.json]
        [--table bench_small]   (bench_small rewrites its files; bench_small_register registers them, issue 27)

It starts its own local stack (as benchmarks/run.py does), ingests one untimed file, then `--files` 1,000-row
Parquet files one at a time with `service.ingest(source)`, each adapter call on the way timed by wrapping the
service's own objects (nothing else differs): the S3 store, the Nessie catalog, and the Spark writer's steps.
A step's time is exclusive (a wrapped call inside another is counted once, in the inner step); what no wrapper
covers (core logic, the audit's decision, alerts, the downstream event) is `other`. Run it against an older
tree (PYTHONPATH=<tree>/functions:<tree>) with another --label to put the two profiles side by side in one file;
a step the older code does not have is simply absent from its profile.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import threading
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from benchmarks.common import INBOX, ROOT, Bench, Options, bench_audits, write_audits

RESULTS = Path(__file__).resolve().parent / "results" / "small_file_profile.json"
ROWS = 1_000


class Steps:
    """Exclusive wall time per named step, for the file being ingested. Nesting is tracked per thread: a step in
    another thread (the page decoding, meanwhile) is not a child of the calling thread's step."""

    def __init__(self) -> None:
        self.spent: dict[str, float] = {}
        self.calls: dict[str, int] = {}
        self._local = threading.local()  # per thread: the time of wrapped calls inside each active one
        self._wrapped: list[tuple[Any, str, Any, bool]] = []  # (owner, attribute, original, the owner's own?)

    def wrap(self, owner: Any, attribute: str, step: str) -> None:
        original = getattr(owner, attribute, None)
        if original is None:
            return

        def timed(*args: Any, **kwargs: Any) -> Any:
            children = self._children()
            children.append(0.0)
            started = time.perf_counter()
            try:
                return original(*args, **kwargs)
            finally:
                elapsed = time.perf_counter() - started
                inner = children.pop()
                self.spent[step] = self.spent.get(step, 0.0) + elapsed - inner
                self.calls[step] = self.calls.get(step, 0) + 1
                if children:
                    children[-1] += elapsed

        self._wrapped.append((owner, attribute, original, attribute in vars(owner)))
        setattr(owner, attribute, timed)

    def _children(self) -> list[float]:
        if not hasattr(self._local, "children"):
            self._local.children = []
        children: list[float] = self._local.children
        return children

    def restore(self) -> None:
        """Every wrapped attribute as it was (an instance's method is its class's again)."""
        for owner, attribute, original, own in reversed(self._wrapped):
            if own:
                setattr(owner, attribute, original)
            else:
                delattr(owner, attribute)
        self._wrapped.clear()

    def take(self) -> tuple[dict[str, float], dict[str, int]]:
        spent, calls = self.spent, self.calls
        self.spent, self.calls = {}, {}
        return spent, calls


def instrument(bench: Bench, steps: Steps) -> None:
    from wap_ingest.adapters.catalog import tables as lake_tables
    from wap_ingest.adapters.engine import register as spark_register
    from wap_ingest.adapters.engine import tables as spark_tables
    from wap_ingest.adapters.engine import writer as spark_writer

    service = bench.service
    for attribute, step in (("head", "s3: head"), ("download", "s3: download"),
                            ("read_tail", "s3: footer (one ranged GET)"),
                            ("copy_into", "s3: server-side copy into the table's location")):
        steps.wrap(service.objects, attribute, step)
    catalog = service.ports.catalog
    for attribute, step in (("find_published", "nessie: ledger lookup (duplicate?)"),
                            ("find_appends", "duplicate lookup (table snapshots)"),
                            ("ensure_namespace", "nessie: namespace check, main's head"),
                            ("create_branch", "nessie: create branch"),
                            ("record_published", "nessie: ledger record"),
                            ("merge", "nessie: merge"),
                            ("changes", "nessie: what the branch changed (merge plan check)"),
                            ("commit_log", "nessie: the branch's commits (merge plan check)"),
                            ("list_branches", "nessie: list branches (clean-up)"),
                            ("delete_branch", "nessie: delete branch")):
        steps.wrap(catalog, attribute, step)
    writer = service.ports.writer
    steps.wrap(writer, "find_appends", "duplicate lookup (Spark)")
    steps.wrap(spark_writer, "read_source", "spark: read the file (schema)")
    steps.wrap(spark_tables.IcebergTables, "schema", "iceberg: table load, schema")
    steps.wrap(spark_tables.IcebergTables, "write", "spark: write job + Iceberg commit")
    steps.wrap(spark_tables.IcebergTables, "last_append", "iceberg: the new snapshot")
    steps.wrap(spark_writer, "added_file_metrics", "iceberg: new files' metrics")
    steps.wrap(spark_writer, "metrics_of", "pyiceberg: the registered file's metrics")  # in hand, not read back
    steps.wrap(spark_writer, "measure_without_rows", "audit: answered from the metrics (no engine)")
    steps.wrap(spark_writer, "measure_frame", "audit: measure (scan if needed)")
    steps.wrap(spark_writer, "register", "register: its own steps (footer judged, partition, location)")
    steps.wrap(spark_register, "_spark_schema", "spark: the new table's schema from the footer")
    steps.wrap(spark_register, "partition_values", "iceberg: partition values from the metrics")
    steps.wrap(spark_writer, "measure_parquet", "pyarrow: every page decoded and measured (worker)")
    steps.wrap(spark_register, "measured_statistics", "register: the measured figures as Iceberg metrics")
    steps.wrap(spark_register, "_checked", "register: waiting for the pages' figures")
    steps.wrap(spark_register, "footer_from", "pyarrow: footer parsed (worker)")
    steps.wrap(spark_register, "fit", "register: the footer's fit to the table")
    steps.wrap(lake_tables.BranchTables, "load", "pyiceberg: table load (nessie content, metadata file)")
    steps.wrap(spark_register, "_append", "pyiceberg: data file, metrics, manifests")
    steps.wrap(lake_tables._BranchCommitter, "commit_table", "pyiceberg: commit (metadata file, nessie commit)")
    if service.events is not None:
        steps.wrap(service.events, "publish", "downstream event")


def profile(bench: Bench, files: int, table: str = "bench_small") -> dict[str, Any]:
    from wap_ingest.core.models import OutcomeStatus, SourceObject

    steps = Steps()
    instrument(bench, steps)
    per_file: list[dict[str, float]] = []
    calls: dict[str, int] = {}
    for number in range(files + 1):
        key = f"{table}/p{number}.parquet"
        bench.put(INBOX, key, ROWS)
        steps.take()
        started = time.perf_counter()
        outcome = bench.service.ingest(SourceObject(INBOX, key))
        total = time.perf_counter() - started
        if outcome.status is not OutcomeStatus.PUBLISHED:
            raise RuntimeError(f"the service did not publish {key}: {outcome.message}")
        spent, calls = steps.take()
        if number == 0:
            continue  # the warm-up
        per_file.append(spent | {"other": total - sum(spent.values()), "total": total})
    steps_seen = sorted({n for f in per_file for n in f} - {"other", "total"},
                        key=lambda n: -statistics.median(f.get(n, 0.0) for f in per_file))
    names = [*steps_seen, "other", "total"]
    return {"steps_median_s": {n: round(statistics.median(f.get(n, 0.0) for f in per_file), 4) for n in names},
            "calls_per_file": {n: calls.get(n, 0) for n in names if n not in ("other", "total")},
            "files": files, "table": table, "write": outcome.message.rpartition("; ")[2]}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--label", required=True, help="this profile's name in the file (e.g. before, after)")
    parser.add_argument("--files", type=int, default=12)
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument("--commit", default="", help="the commit the profiled tree is at (recorded)")
    parser.add_argument("--table", default="bench_small",
                        help="bench_small (its files rewritten) or bench_small_register (registered)")
    args = parser.parse_args(argv)
    from wap_stack.stack import StackConfig, free_ports, stack_environment, start_stack, stop_stack

    moto, nessie, mgmt, slack, function, runtime = free_ports(6)
    config = StackConfig(state_dir=Path(tempfile.mkdtemp(prefix="wap-profile-")), moto_port=moto, nessie_port=nessie,
                         nessie_management_port=mgmt, slack_port=slack, lambda_port=function, runtime_port=runtime)
    options = Options(smoke=False, runs=1, burst=1, burst_batch=1, concurrency=(1,), large_rows=1, large_runs=1,
                      function_memory_mb=4096, work=config.state_dir / "large")
    os.environ["WAP_AUDITS_FILE"] = str(write_audits(ROOT / "audits.yml", config.state_dir / "audits.yml",
                                                     bench_audits(options)))
    state = start_stack(config)
    load = os.getloadavg()[0]
    try:
        env = dict(os.environ) | stack_environment(state) | {"WAP_WORK_DIR": str(config.state_dir / "work"),
                                                               "WAP_SOURCE_BUCKETS": INBOX}
        os.environ.update(env)
        found = profile(Bench(env, options), args.files, args.table)
    finally:
        stop_stack(config)
    found |= {"measured_at": datetime.now(UTC).isoformat(timespec="seconds"), "commit": args.commit,
              "load_average_before_after": [round(load, 2), round(os.getloadavg()[0], 2)]}
    document = json.loads(args.out.read_text()) if args.out.exists() else {}
    document.setdefault("profiles", {})[args.label] = found
    document["about"] = (__doc__ or "").splitlines()[0]
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(document, indent=2) + "\n")
    print(table(document["profiles"]))
    return 0


def table(profiles: dict[str, Any]) -> str:
    """A markdown table: one row per step, one column per profile (seconds, median per file)."""
    labels = list(profiles)
    names: list[str] = []
    for label in labels:
        names += [n for n in profiles[label]["steps_median_s"] if n not in names and n not in ("other", "total")]
    names += ["other", "total"]
    lines = ["| step | " + " | ".join(f"{label} (s)" for label in labels) + " |",
             "|---" * (len(labels) + 1) + "|"]
    for name in names:
        cells = [profiles[label]["steps_median_s"].get(name) for label in labels]
        lines.append(f"| {name} | " + " | ".join("-" if c is None else f"{c:.3f}" for c in cells) + " |")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())

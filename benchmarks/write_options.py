"""The rewrite path's write job under the options its profile points at (issue 35, item 4): the driver JVM's JIT and
Parquet's dictionary encoding.

    python -m benchmarks.write_options [--rows 5000000] [--rounds 3] [--out benchmarks/results/write_options.json]

benchmarks/write_profile.py found the write job CPU-bound: a third of its CPU in parquet-mr's dictionary encoding
(one hash lookup per value), and the driver runs with the function's start-up flags, `-XX:TieredStopAtLevel=1`
(C1 only: sooner and cheaper to compile for a Lambda's short jobs, slower code for a long one) and the serial GC.
This measures, on workload 4's file (the same rows, benchmarks/flights.py), each JVM (`function`: those flags, as
session.startup_java_options gives them; `full_jit`: the JVM's defaults, C1 then C2) with each table-property
variant (`default`; dictionary encoding off for the numeric columns; off for all), Iceberg's runtime from the pinned
jars, local[2] and the service's driver memory. One child process per JVM per round (a JVM's flags are set when it
starts), the JVMs and the variants interleaved round by round; in each child a warm-up append of the whole file
first, untimed (the JIT's work on a warmed function), then each variant appends the whole file into a table of its
own. Per variant: the append's seconds (the write job and its commit), the data files' bytes, and both against
`function/default` (the service as it runs). pyarrow's own write of the same rows (zstd, dictionary on) is timed in
the same rounds. The catalog is a Hadoop catalog on a local folder: the write job is Iceberg's and Spark's, the same
whichever catalog commits it.

    --jvm NAME="OPTIONS"  another JVM: the function's flags with OPTIONS after them (the JVM takes the last of a flag),
                          e.g. late_c2="-XX:TieredStopAtLevel=4 -XX:Tier4InvocationThreshold=50000 ..."
    --cold                no warm-up append and the `default` variant alone: each JVM's first job is the one timed
                          (what a function's first large file meets, its write loops compiled during the job itself)
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from benchmarks.common import ROOT
from benchmarks.flights import write_flights

RESULTS = Path(__file__).resolve().parent / "results" / "write_options.json"
DICT_OFF = "write.parquet.dict-encoding-enabled.column."  # Iceberg 1.12's per-column switch (parquet-mr's)
BASE = "function/default"


def jvms(extra: list[str] | None = None) -> dict[str, str]:
    """The JVMs compared: the function's flags, the JVM's defaults, and each `NAME=OPTIONS` of `extra` (the
    function's flags, then OPTIONS)."""
    from wap_ingest.adapters.engine.session import startup_java_options

    function = " ".join(startup_java_options(None))
    found = {"function": function, "full_jit": ""}
    for given in extra or []:
        name, _, options = given.partition("=")
        if not name or not options or name in found:
            raise SystemExit(f'--jvm {given!r}: use NAME="OPTIONS" with a new NAME')
        found[name] = f"{function} {options.strip()}"
    return found


def variants(schema: pa.Schema) -> dict[str, dict[str, str]]:
    numbers = [f.name for f in schema if pa.types.is_integer(f.type) or pa.types.is_floating(f.type)]
    return {
        "default": {},
        "no_dictionary_numeric": {DICT_OFF + name: "false" for name in numbers},
        "no_dictionary": {DICT_OFF + f.name: "false" for f in schema},
    }


def session(warehouse: Path, java_options: str) -> Any:
    from pyspark.sql import SparkSession

    jars = sorted(str(p) for p in (ROOT / ".cache" / "jars" / "spark").glob("*.jar"))  # the pinned jars (make jars)
    return (SparkSession.builder.master("local[2]").appName("write-options")
            .config("spark.driver.memory", "2457m").config("spark.jars", ",".join(jars))
            .config("spark.driver.extraJavaOptions", java_options)
            .config("spark.sql.extensions", "org.apache.iceberg.spark.extensions.IcebergSparkSessionExtensions")
            .config("spark.sql.catalog.bench", "org.apache.iceberg.spark.SparkCatalog")
            .config("spark.sql.catalog.bench.type", "hadoop")
            .config("spark.sql.catalog.bench.warehouse", str(warehouse))
            .config("spark.ui.enabled", "false").getOrCreate())


def child(source: Path, work: Path, java_options: str, order: list[str], *, warm: bool = True
          ) -> dict[str, dict[str, Any]]:
    """One JVM: a warm-up append (unless not `warm`), then each variant in `order` once."""
    chosen = variants(pq.read_schema(source))
    spark = session(work / "warehouse", java_options)

    def frame() -> Any:  # read afresh each time, as the service does
        return spark.read.parquet(str(source))

    if warm:
        frame().writeTo("bench.db.warmup").create()
    found: dict[str, dict[str, Any]] = {}
    for name in order:
        columns = ", ".join(f"`{f.name}` {f.dataType.simpleString()}" for f in frame().schema.fields)
        properties = ", ".join(f"'{k}' = '{v}'" for k, v in chosen[name].items())
        spark.sql(f"CREATE TABLE bench.db.{name} ({columns}) USING iceberg"
                  + (f" TBLPROPERTIES ({properties})" if properties else ""))
        started = time.perf_counter()
        frame().writeTo(f"bench.db.{name}").append()
        seconds = time.perf_counter() - started
        data = work / "warehouse" / "db" / name / "data"
        found[name] = {"seconds": round(seconds, 3), "bytes": sum(p.stat().st_size for p in data.rglob("*.parquet"))}
    spark.stop()
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--rows", type=int, default=5_000_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument("--child", nargs=3, metavar=("SOURCE", "WORK", "ORDER"), help=argparse.SUPPRESS)
    parser.add_argument("--java-options", default="", help=argparse.SUPPRESS)
    parser.add_argument("--jvm", action="append", default=[], metavar='NAME="OPTIONS"',
                        help="another JVM: the function's flags, then these")
    parser.add_argument("--cold", action="store_true", help="no warm-up append; the default variant alone")
    args = parser.parse_args(argv)
    if args.child:
        source, work, order = args.child
        print(json.dumps(child(Path(source), Path(work), args.java_options, order.split(","), warm=not args.cold)))
        return 0
    work = Path(tempfile.mkdtemp(prefix="wap-write-options-"))
    source = work / "flights.parquet"
    made = write_flights(source, args.rows)
    rows = pq.read_table(source)
    names, flags = (["default"] if args.cold else list(variants(rows.schema))), jvms(args.jvm)
    runs: dict[str, list[dict[str, Any]]] = {f"{j}/{v}": [] for j in flags for v in names}
    runs["pyarrow_floor"] = []
    for round_number in range(args.rounds):
        turn = 1 if round_number % 2 == 0 else -1
        for jvm in list(flags)[::turn]:
            where = work / f"{jvm}-{round_number}"
            done = subprocess.run([sys.executable, "-m", "benchmarks.write_options", "--java-options", flags[jvm],
                                   *(["--cold"] if args.cold else []),
                                   "--child", str(source), str(where), ",".join(names[::turn])],
                                  cwd=ROOT, capture_output=True, text=True, check=True)
            for name, found in json.loads(done.stdout.strip().splitlines()[-1]).items():
                runs[f"{jvm}/{name}"].append(found)
                print(f"round {round_number} {jvm}/{name}: {found['seconds']} s, {found['bytes']} bytes", flush=True)
        started = time.perf_counter()
        floor_path = work / f"floor_{round_number}.parquet"
        pq.write_table(rows, floor_path, compression="zstd")
        runs["pyarrow_floor"].append({"seconds": round(time.perf_counter() - started, 3),
                                      "bytes": floor_path.stat().st_size})
    summary = {name: {"median_s": statistics.median(r["seconds"] for r in found),
                      "min_s": min(r["seconds"] for r in found), "max_s": max(r["seconds"] for r in found),
                      "bytes": statistics.median(r["bytes"] for r in found)} for name, found in runs.items()}
    for entry in summary.values():
        entry["seconds_vs_function_default"] = round(entry["median_s"] / summary[BASE]["median_s"], 3)
        entry["bytes_vs_function_default"] = round(entry["bytes"] / summary[BASE]["bytes"], 3)
    import pyspark

    document = {"about": (__doc__ or "").splitlines()[0],
                "measured_at": datetime.now(UTC).isoformat(timespec="seconds"), "machine": f"{os.cpu_count()} cores",
                "pyspark": pyspark.__version__, "file": made, "rows": args.rows, "rounds": args.rounds,
                "warm_up": not args.cold, "jvm_options": flags, "variants": variants(rows.schema),
                "summary": summary, "runs": runs}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(document, indent=1, default=str) + "\n")
    print(json.dumps(summary, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())

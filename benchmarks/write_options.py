"""The rewrite path's write job under the Parquet writer options its profile points at (issue 35, item 4).

    python -m benchmarks.write_options [--rows 5000000] [--rounds 3] [--out benchmarks/results/write_options.json]

benchmarks/write_profile.py found the write job CPU-bound, a third of its CPU in parquet-mr's dictionary encoding
(one hash lookup per value). This measures what turning that off would buy and cost, on workload 4's file (the
same rows, benchmarks/flights.py), in one Spark session of this checkout (local[2], the service's driver memory,
Iceberg's runtime from the pinned jars): each variant appends the whole file into a table of its own with only its
table properties changed, the variants interleaved round by round so the machine's load falls on all alike. Per
variant: the append's seconds (the write job and its commit), the data files' bytes, and the ratio of both to the
default. pyarrow's own write of the same rows (zstd, dictionary on: the floor of `large_file_vs_pyarrow_floor`)
is timed in the same rounds. The catalog is a Hadoop catalog on a local folder: the write job is Iceberg's and
Spark's, the same whichever catalog commits it.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
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


def variants(schema: pa.Schema) -> dict[str, dict[str, str]]:
    numbers = [f.name for f in schema if pa.types.is_integer(f.type) or pa.types.is_floating(f.type)]
    return {
        "default": {},
        "no_dictionary_numeric": {DICT_OFF + name: "false" for name in numbers},
        "no_dictionary": {DICT_OFF + f.name: "false" for f in schema},
    }


def session(warehouse: Path) -> Any:
    from pyspark.sql import SparkSession

    jars = sorted(str(p) for p in (ROOT / ".cache" / "jars" / "spark").glob("*.jar"))  # the pinned jars (make jars)
    return (SparkSession.builder.master("local[2]").appName("write-options")
            .config("spark.driver.memory", "2457m").config("spark.jars", ",".join(jars))
            .config("spark.sql.extensions", "org.apache.iceberg.spark.extensions.IcebergSparkSessionExtensions")
            .config("spark.sql.catalog.bench", "org.apache.iceberg.spark.SparkCatalog")
            .config("spark.sql.catalog.bench.type", "hadoop")
            .config("spark.sql.catalog.bench.warehouse", str(warehouse))
            .config("spark.ui.enabled", "false").getOrCreate())


def bytes_of(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*.parquet"))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--rows", type=int, default=5_000_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="wap-write-options-"))
    source = work / "flights.parquet"
    made = write_flights(source, args.rows)
    rows = pq.read_table(source)
    chosen = variants(rows.schema)
    spark = session(work / "warehouse")

    def frame_of() -> Any:  # read afresh each time, as the service does
        return spark.read.parquet(str(source))

    frame_of().writeTo("bench.db.warmup").create()  # the JVM's classes and JIT, once, before anything is timed
    runs: dict[str, list[dict[str, Any]]] = {name: [] for name in [*chosen, "pyarrow_floor"]}
    for round_number in range(args.rounds):
        order = list(chosen) if round_number % 2 == 0 else list(reversed(chosen))
        for name in order:
            table = f"bench.db.{name}_{round_number}"
            spark.sql(f"CREATE TABLE {table} ({', '.join(f'`{f.name}` {t}' for f, t in _types(frame_of()))}) "
                      f"USING iceberg" + (f" TBLPROPERTIES ({_props(chosen[name])})" if chosen[name] else ""))
            started = time.perf_counter()
            frame_of().writeTo(table).append()
            seconds = time.perf_counter() - started
            folder = work / "warehouse" / "db" / f"{name}_{round_number}" / "data"
            runs[name].append({"seconds": round(seconds, 3), "bytes": bytes_of(folder)})
            print(f"round {round_number} {name}: {seconds:.2f} s, {bytes_of(folder)} bytes", flush=True)
        started = time.perf_counter()
        floor_path = work / f"floor_{round_number}.parquet"
        pq.write_table(rows, floor_path, compression="zstd")
        runs["pyarrow_floor"].append({"seconds": round(time.perf_counter() - started, 3),
                                      "bytes": floor_path.stat().st_size})
    spark.stop()
    summary = {name: {"median_s": statistics.median(r["seconds"] for r in found),
                      "min_s": min(r["seconds"] for r in found), "max_s": max(r["seconds"] for r in found),
                      "bytes": statistics.median(r["bytes"] for r in found)} for name, found in runs.items()}
    base = summary["default"]
    for entry in summary.values():
        entry["seconds_vs_default"] = round(entry["median_s"] / base["median_s"], 3)
        entry["bytes_vs_default"] = round(entry["bytes"] / base["bytes"], 3)
    document = {"about": (__doc__ or "").splitlines()[0],
                "measured_at": datetime.now(UTC).isoformat(timespec="seconds"),
                "machine": f"{os.cpu_count()} cores", "file": made, "rows": args.rows, "rounds": args.rounds,
                "variants": chosen,
                "summary": summary, "runs": runs, "pyspark": _pyspark()}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(document, indent=1, default=str) + "\n")
    print(json.dumps(summary, indent=1))
    return 0


def _types(frame: Any) -> list[tuple[Any, str]]:
    return [(field, field.dataType.simpleString()) for field in frame.schema.fields]


def _props(properties: dict[str, str]) -> str:
    return ", ".join(f"'{k}' = '{v}'" for k, v in properties.items())


def _pyspark() -> str:
    import pyspark

    return str(pyspark.__version__)


if __name__ == "__main__":
    sys.exit(main())

"""The profile's distinct estimate (issue 36): what it adds to the audit's one pass over a 1,000-row load, and how
close it is, with the service's own aggregates (adapters.engine.profile) beside the same profile counted by Spark's
HLL++ (`approx_count_distinct`), in one warm local Spark session, the arms interleaved.

    python -m benchmarks.profile_distinct [--runs 30] [--out benchmarks/results/profile_distinct.json]

Arms, each one `agg(...).collect()` over the same Parquet file (three columns, as workload 2's loads):
- pass: not_null on my_col_1 and a regex check on it, the row count (what an audit that reads the rows makes);
- pass_profile: the same + the service's profile of my_col_2 (null share, distinct sketch, min, max, mean);
- pass_profile_hllpp: the same profile with `approx_count_distinct` as its distinct estimate.
Then each estimate against the exact count at 1,000 and 200,000 distinct values.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

RESULTS = Path(__file__).resolve().parent / "results" / "profile_distinct.json"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    from pyspark.sql import SparkSession
    from pyspark.sql import functions as F

    from wap_ingest.adapters.engine.profile import profile_aggregates

    spark = (SparkSession.builder.master("local[2]").appName("profile-distinct")
             .config("spark.ui.enabled", "false").getOrCreate())
    types = {"my_col_2": "double"}
    with tempfile.TemporaryDirectory() as work:
        path = f"{work}/load.parquet"
        spark.range(1000).selectExpr("cast(id as int) as my_col_0", "concat('v', id) as my_col_1",
                                     "cast(id as double) / 2 as my_col_2").write.parquet(path)
        frame = spark.read.parquet(path)
        checks = [F.count(F.lit(1)).alias("rows"),
                  F.sum(F.when(frame.my_col_1.isNull(), 1).otherwise(0)).alias("nulls"),
                  F.sum(F.when(~frame.my_col_1.rlike("^v[0-9]+$"), 1).otherwise(0)).alias("rule")]
        profile = profile_aggregates(frame, ["my_col_2"], types)
        hllpp = [F.approx_count_distinct(frame.my_col_2).alias("p0_distinct") if "p0_distinct" in str(a) else a
                 for a in profile]
        arms: dict[str, list[Any]] = {"pass": checks, "pass_profile": checks + profile,
                                      "pass_profile_hllpp": checks + hllpp}

        def timed(aggregates: list[Any]) -> float:
            started = time.perf_counter()
            frame.agg(*aggregates).collect()
            return time.perf_counter() - started

        for aggregates in arms.values():  # warm-up: codegen, the file's footer cached
            for _ in range(8):
                timed(aggregates)
        samples: dict[str, list[float]] = {name: [] for name in arms}
        for _ in range(args.runs):
            for name, aggregates in arms.items():
                samples[name].append(timed(aggregates))
        accuracy = {}
        for distinct in (1000, 200_000):
            values = spark.range(distinct).selectExpr("cast(id as double) / 2 as my_col_2")
            ours = values.agg(*profile_aggregates(values, ["my_col_2"], types)).collect()[0]["p0_distinct"]
            theirs = values.agg(F.approx_count_distinct("my_col_2")).collect()[0][0]
            accuracy[str(distinct)] = {"exact": distinct, "service_sketch": int(ours), "hllpp": int(theirs)}
    spark.stop()
    medians = {name: round(statistics.median(values), 4) for name, values in samples.items()}
    document = {
        "what": " ".join((__doc__ or "").strip().split("\n\n")[0].split()),
        "measured_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "runs": args.runs,
        "seconds": {name: {"median": medians[name], "min": round(min(v), 4), "max": round(max(v), 4)}
                    for name, v in samples.items()},
        "profile_adds_s": {"service_sketch": round(medians["pass_profile"] - medians["pass"], 4),
                           "hllpp": round(medians["pass_profile_hllpp"] - medians["pass"], 4)},
        "accuracy": accuracy,
    }
    args.out.write_text(json.dumps(document, indent=1) + "\n")
    print(json.dumps(document))
    return 0


if __name__ == "__main__":
    sys.exit(main())

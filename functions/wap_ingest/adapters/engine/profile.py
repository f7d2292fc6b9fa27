"""A cheap column profile of the new rows (issue 36): null share, a distinct estimate and, for numeric columns, min,
max and mean, as aggregates added to the audit's one pass over the new rows (audit.measure_frame).

The distinct estimate is a DataSketches HLL sketch (`hll_sketch_agg`, lgConfigK 12: about 1.6% error, exact for the
small counts its coupon list holds) of each non-null value's 64-bit hash, rather than Spark's HLL++
(`approx_count_distinct`): cheaper in the audit's pass and closer (benchmarks/profile_distinct.py,
benchmarks/results/profile_distinct.json)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from wap_ingest.core.measurements import ColumnProfile

NUMERIC = ("tinyint", "smallint", "int", "bigint", "float", "double")  # and decimal(p,s)


def numeric(type_name: str) -> bool:
    return type_name in NUMERIC or type_name.startswith("decimal")


def profile_aggregates(frame: Any, columns: Sequence[str], types: Mapping[str, str]) -> list[Any]:
    """The aggregates of each column's profile, aliased `p<i>_<figure>` (column i of `columns`)."""
    from pyspark.sql import functions as F

    found: list[Any] = []
    for i, column in enumerate(columns):
        value = frame[column]
        found += [F.sum(F.when(value.isNull(), 1).otherwise(0)).alias(f"p{i}_nulls"),
                  F.hll_sketch_estimate(F.hll_sketch_agg(F.when(value.isNotNull(), F.xxhash64(value))))
                  .alias(f"p{i}_distinct")]
        if numeric(types[column]):
            as_double = value.cast("double")
            found += [F.min(as_double).alias(f"p{i}_min"), F.max(as_double).alias(f"p{i}_max"),
                      F.avg(as_double).alias(f"p{i}_mean")]
    return found


def profiles_from(row: Any, columns: Sequence[str], types: Mapping[str, str], rows: int) -> dict[str, ColumnProfile]:
    """Each column's profile from the aggregated row."""
    found: dict[str, ColumnProfile] = {}
    for i, column in enumerate(columns):
        nulls = int(row[f"p{i}_nulls"] or 0)
        figures: dict[str, float | None] = {"min": None, "max": None, "mean": None}
        if numeric(types[column]):
            figures = {name: _float(row[f"p{i}_{name}"]) for name in figures}
        found[column] = ColumnProfile(null_share=nulls / rows if rows else None,
                                      distinct=float(row[f"p{i}_distinct"] or 0) if rows else None, **figures)
    return found


def _float(value: Any) -> float | None:
    return None if value is None else float(value)

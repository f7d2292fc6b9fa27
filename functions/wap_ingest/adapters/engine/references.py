"""The `references` check measured with Spark (core.audits.cross): the new rows whose value of a column is no key of
another table as the run's branch has it. The new values' smallest and largest come from the audit's one pass
(`reference_aggregates`); the other table is read for its key column only, between them, so Iceberg skips its data
files whose bounds miss that range; a left anti join leaves the rows whose value has no match."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from wap_ingest.core.measurements import Reference, Sample, sample_key

Lookup = Callable[[str], Any | None]  # a qualified table -> a DataFrame of it on the run's branch, None: no table


def present(references: Sequence[Reference], names: Mapping[str, str]) -> list[tuple[Reference, str]]:
    """The references whose column the new rows have, with the column as the frame spells it."""
    return [(r, names[r.column.lower()]) for r in references if r.column.lower() in names]


def reference_aggregates(frame: Any, found: Sequence[tuple[Reference, str]]) -> list[Any]:
    from pyspark.sql import functions as F

    return [agg for i, (_, column) in enumerate(found)
            for agg in (F.min(frame[column]).alias(f"rmin_{i}"), F.max(frame[column]).alias(f"rmax_{i}"))]


def measure_references(frame: Any, found: Sequence[tuple[Reference, str]], row: Any, lookup: Lookup | None,
                       samples: int, shown: Callable[[list[Any]], tuple[Sample, ...]]
                       ) -> tuple[dict[str, int], tuple[str, ...], dict[str, tuple[Sample, ...]]]:
    """(missing rows per reference, the referenced tables that do not exist, samples of the missing rows)."""
    from pyspark.sql import functions as F

    missing: dict[str, int] = {}
    absent: list[str] = []
    sampled: dict[str, tuple[Sample, ...]] = {}
    for i, (ref, column) in enumerate(found):
        if lookup is None:
            raise RuntimeError(f"references check {ref.name}: no way to read {ref.table} was given to the audit")
        low, high = row[f"rmin_{i}"], row[f"rmax_{i}"]
        if low is None:  # no non-null value: nothing to look up
            missing[ref.name] = 0
            continue
        values = frame.filter(frame[column].isNotNull())
        other = lookup(ref.table)
        if other is None:
            absent.append(ref.table)
            rows = values
        else:
            keys = {c.lower(): c for c in other.columns}
            if ref.key.lower() not in keys:  # no value can be a key the table does not have
                rows = values
            else:
                key = other[keys[ref.key.lower()]]
                wanted = other.select(key.alias("__key")).filter(F.col("__key").between(F.lit(low), F.lit(high)))
                rows = values.join(wanted.distinct(), values[column] == F.col("__key"), "left_anti")
        missing[ref.name] = int(rows.count())
        if missing[ref.name] and samples:
            sampled[sample_key("references", ref.name)] = shown(rows.limit(samples).collect())
    return missing, tuple(dict.fromkeys(absent)), sampled

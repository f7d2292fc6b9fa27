"""The checks that read other tables, measured with Spark (core.audits.cross).

`references`: the new rows whose value of a column is no key of another table as the run's branch has it. The new
values' smallest and largest come from the audit's one pass (`reference_aggregates`); the other table is read for
its key column only, between them, so Iceberg skips its data files whose bounds miss that range; a left anti join
leaves the rows whose value has no match.

`reconcile`: one aggregate of the audited table and one of the other, each as the run's branch has it (after the
append: main's rows and the new ones), each read for its one column."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from wap_ingest.adapters.engine.profile import numeric
from wap_ingest.core.errors import AuditSuiteError
from wap_ingest.core.measurements import Reconciliation, Reference, Sample, sample_key

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


def measure_reconciliations(reconciliations: Sequence[Reconciliation], lookup: Lookup, own: str
                            ) -> tuple[dict[str, tuple[float | None, float | None]], tuple[str, ...]]:
    """(each reconciliation's two aggregates, the other tables that do not exist on the branch)."""
    reconciled: dict[str, tuple[float | None, float | None]] = {}
    absent: list[str] = []
    mine = lookup(own)
    for rec in reconciliations:
        other = lookup(rec.table)
        if other is None:
            absent.append(rec.table)
        reconciled[rec.name] = (_aggregate(mine, rec.ours, own, rec),
                                None if other is None else _aggregate(other, rec.theirs, rec.table, rec))
    return reconciled, tuple(dict.fromkeys(absent))


def _aggregate(frame: Any, aggregate: tuple[str, str | None], table: str, rec: Reconciliation) -> float | None:
    """count(*), or a function of one column (None: the table lacks the column, or no value: min/max/avg of no
    rows); count and sum of no rows are 0. sum, min, max and avg take numbers, dates (days since the epoch) and
    timestamps (seconds since the epoch); another type is the audits file's mistake (AuditSuiteError)."""
    from pyspark.sql import functions as F

    if frame is None:
        return None
    function, column = aggregate
    if column is None:
        return float(frame.count())
    names = {c.lower(): c for c in frame.columns}
    if column.lower() not in names:
        return None
    value = frame[names[column.lower()]]
    kind = dict(frame.dtypes)[names[column.lower()]]
    if function != "count":
        if kind == "date":
            value = F.unix_date(value)
        elif kind.startswith("timestamp"):
            value = F.unix_micros(value.cast("timestamp")) / 1_000_000
        elif not numeric(kind):
            raise AuditSuiteError(f"audits file: reconcile {rec.name}: {function}({column}) of {table} is a {kind} "
                                  f"column; sum, min, max and avg take numbers, dates and timestamps. Fix: name a "
                                  f"numeric column, or count({column}).")
    found = frame.select(getattr(F, function)(value)).collect()[0][0]
    if found is None and function in ("count", "sum"):
        return 0.0
    return None if found is None else float(found)

"""What the new data files' metrics answer of an audit, without reading a row (and without an engine).

`FileMetrics` are the counts and bounds of the data files one append added (from Spark's Java manifests,
spark_audit.added_file_metrics, or from a registered file's PyIceberg DataFile, `metrics_of`). `answered` is the
one place that decides which of a plan's measurements they settle: spark_audit.measure_frame starts from it and reads
rows for the rest; `measure_without_rows` returns the Measurements when nothing is left to read (a registered file
whose audit its measured metrics answer then needs no engine at all), else None.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from wap_ingest.core.measurements import MeasurementPlan, Measurements, RowRule

MICROS_PER_DAY = 86_400_000_000
Bound = float | int | Decimal


@dataclass(frozen=True)
class FileMetrics:
    """Column metrics of the data files one snapshot added, from its manifests (no data file is read).
    A column is listed only if every new file reported the metric for it."""

    files: int = 0
    bytes: int = 0
    rows: int = 0
    null_counts: dict[str, int] = field(default_factory=dict)
    lower: dict[str, Bound] = field(default_factory=dict)  # numbers (decimals exact); dates, timestamps in micros
    upper: dict[str, Bound] = field(default_factory=dict)


@dataclass
class Answered:
    """What the metrics settled, and what is left for a pass over the rows (columns as the rows name them)."""

    nulls: dict[str, int] = field(default_factory=dict)
    null_columns: list[str] = field(default_factory=list)
    violations: dict[str, int] = field(default_factory=dict)
    rules: list[tuple[RowRule, str]] = field(default_factory=list)
    newest: dict[str, int | None] = field(default_factory=dict)
    max_columns: list[str] = field(default_factory=list)
    from_metadata: list[str] = field(default_factory=list)


def answered(plan: MeasurementPlan, names: Mapping[str, str], types: Mapping[str, str], metrics: FileMetrics,
             row_count: int | None) -> Answered:
    """`names`: each column's lower-case name -> its name; `types`: the engine's type name of each column."""
    found = Answered()
    if row_count is not None:
        found.from_metadata.append("row_count")
    for wanted in plan.null_count_columns:
        name = names.get(wanted.lower())
        if name is None:
            continue
        if name in metrics.null_counts:
            found.nulls[name] = metrics.null_counts[name]
            found.from_metadata.append(f"not_null:{name}")
        else:
            found.null_columns.append(name)
    for rule in plan.rules:
        name = names.get(rule.column.lower())
        if name is None:
            continue
        if rule.kind == "range" and name in metrics.lower and name in metrics.upper and \
                within(metrics.lower[name], metrics.upper[name], rule):
            found.violations[rule.key] = 0  # every new file's bounds lie inside the range
            found.from_metadata.append(rule.key)
        else:
            found.rules.append((rule, name))
    for wanted in plan.max_columns:
        name = names.get(wanted.lower())
        if name is None:
            continue
        if name in metrics.upper and types.get(name, "").startswith(("timestamp", "date")):
            found.newest[name] = int(metrics.upper[name])
            found.from_metadata.append(f"freshness:{name}")
        else:
            found.max_columns.append(name)
    return found


def measure_without_rows(plan: MeasurementPlan, columns: tuple[str, ...], types: Mapping[str, str],
                         metrics: FileMetrics, row_count: int) -> Measurements | None:
    """The new rows' Measurements from the metrics alone, or None when the plan needs a row read: a count the
    metrics do not settle, a key, a query, a column profile (its mean and distinct count are not in the metrics), a
    reference to another table or a reconciliation with one, or samples of a failed not_null check."""
    names = {c.lower(): c for c in columns}
    found = answered(plan, names, types, metrics, row_count)
    keys = [k for k in plan.unique_keys + plan.existing_keys if all(c.lower() in names for c in k)]
    if (found.null_columns or found.rules or found.max_columns or keys or plan.queries or plan.profile_columns
            or plan.references or plan.reconciliations):
        return None
    if plan.samples and any(found.nulls.values()):
        return None  # the failing rows are sampled for the alert
    return Measurements(row_count=row_count, null_counts=found.nulls, columns=columns, types=dict(types),
                        violations=found.violations, newest=found.newest, from_metadata=tuple(found.from_metadata))


def metrics_of(schema: Any, data_file: Any, bounds_for: Collection[str] | None = None) -> FileMetrics:
    """A (PyIceberg) DataFile's metrics, as spark_audit.data_file_metrics gives a Java one's: null counts of every
    column it reports, bounds of the numeric and temporal `bounds_for` columns (None: all) known to hold no NaN."""
    from pyiceberg.conversions import from_bytes

    wanted = None if bounds_for is None else {c.lower() for c in bounds_for}
    nulls, lower, upper = {}, {}, {}
    nans = data_file.nan_value_counts or {}
    for column in schema.fields:
        count = (data_file.null_value_counts or {}).get(column.field_id)
        if count is not None:
            nulls[column.name] = int(count)
        kind = str(column.field_type)
        if (kind not in _NUMBERS and not kind.startswith("decimal")) or not no_nans(kind, nans.get(column.field_id)) \
                or (wanted is not None and column.name.lower() not in wanted):
            continue
        low = (data_file.lower_bounds or {}).get(column.field_id)
        high = (data_file.upper_bounds or {}).get(column.field_id)
        if low is not None and high is not None:
            lower[column.name] = _number(from_bytes(column.field_type, low), kind)
            upper[column.name] = _number(from_bytes(column.field_type, high), kind)
    return FileMetrics(files=1, bytes=int(data_file.file_size_in_bytes), rows=int(data_file.record_count),
                       null_counts=nulls, lower=lower, upper=upper)


def no_nans(kind: str, nans: int | None) -> bool:
    """Whether a column's bounds cover all its values: none is NaN. A floating-point column's NaN count must say so:
    a missing count is not a zero (bounds leave NaNs out, and a writer that does not count them says nothing)."""
    if kind in ("float", "double"):
        return nans is not None and int(nans) == 0
    return not nans


_NUMBERS = {"int", "long", "float", "double", "date", "timestamp", "timestamptz", "timestamp_ns", "timestamptz_ns"}


def _number(value: Any, kind: str) -> Bound:
    if kind == "date":
        return int(value) * MICROS_PER_DAY
    if kind in ("timestamp_ns", "timestamptz_ns"):
        return int(value) // 1000
    if kind.startswith("decimal"):
        return Decimal(value)
    return float(value) if kind in ("float", "double") else int(value)


def spark_type_name(kind: Any) -> str:
    """Spark's name (DataType.simpleString) of the (PyIceberg) Iceberg type a Spark read of the table gives: what
    Measurements.types holds for the schema check when no engine read the rows."""
    text = str(kind)
    primitive = {"long": "bigint", "timestamp": "timestamp_ntz", "timestamptz": "timestamp", "uuid": "string",
                 "timestamp_ns": "timestamp_ntz", "timestamptz_ns": "timestamp"}
    if text.startswith("fixed"):
        return "binary"
    if text.startswith("decimal"):
        return text.replace(" ", "")
    if getattr(kind, "is_primitive", True):
        return primitive.get(text, text)
    if hasattr(kind, "element_field"):
        return f"array<{spark_type_name(kind.element_field.field_type)}>"
    if hasattr(kind, "key_field"):
        return f"map<{spark_type_name(kind.key_field.field_type)},{spark_type_name(kind.value_field.field_type)}>"
    return "struct<" + ",".join(f"{f.name}:{spark_type_name(f.field_type)}" for f in kind.fields) + ">"


def rule_bound(value: int | float) -> Decimal | None:
    """A range rule's bound as the number the audits file wrote: YAML's `0.1` is the float nearest 0.1, whose
    shortest representation is what was written. None for an infinite or NaN bound."""
    if isinstance(value, int):
        return Decimal(value)
    return Decimal(repr(value)) if math.isfinite(value) else None


def within(low: Bound, high: Bound, rule: RowRule) -> bool:
    """Whether every value between the new files' bounds `low` and `high` meets `rule` (a range), compared exactly
    (decimals as decimals, against the bound as written): True only when that is certain."""
    for value, bound, is_minimum in ((low, rule.low, True), (high, rule.high, False)):
        if bound is None:
            continue
        if isinstance(bound, float) and math.isnan(bound):
            return False  # the rows decide what a NaN bound means
        limit: Bound = bound
        if isinstance(value, Decimal):
            written = rule_bound(bound)
            limit = Decimal(bound) if written is None else written  # Decimal(inf) is Infinity
        if value < limit if is_minimum else value > limit:
            return False
    return True

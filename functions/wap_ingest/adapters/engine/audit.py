"""Measuring new rows for an audit with Spark: `measure_frame(spark, frame, plan, ...) -> Measurements`.

`frame` is a DataFrame of the rows to audit (the incremental scan of one append, or a batch's rows); the
plan says what to measure. The cost, in order:
1. Iceberg metadata (`added_file_metrics`, no data read): the new data files' row, null and NaN counts and
   lower/upper bounds answer row_count, not_null, range and freshness when they settle the question.
2. One aggregation pass over `frame` for everything else that counts rows: nulls, the rows breaking each
   rule, distinct keys, newest values, and the min/max of single-column keys (to prune the next step).
3. Only if the plan asks for it: the new keys already in the table before the append (a semi-join with the
   base snapshot, filtered on the new keys' range so Iceberg skips the data files that cannot match), and
   the custom SQL queries over the view `new_rows`.
4. Only if something failed: one limited pass collecting up to `plan.samples` failing rows per check.
Column names come from the audits file: they are resolved against the frame's columns (never put into SQL
text) and values are passed as literals (`F.lit`, `isin`), never formatted into SQL.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Collection
from decimal import ROUND_CEILING, ROUND_FLOOR, Context, Decimal
from functools import reduce
from typing import Any

from wap_ingest.adapters.engine.audit_metadata import MICROS_PER_DAY, Bound, FileMetrics, answered, no_nans, rule_bound
from wap_ingest.adapters.engine.profile import profile_aggregates, profiles_from
from wap_ingest.adapters.engine.py4j_lookup import static
from wap_ingest.adapters.engine.references import Lookup, measure_references, present, reference_aggregates
from wap_ingest.adapters.engine.sql_guard import require_read_only
from wap_ingest.core.audits import NEW_ROWS_VIEW
from wap_ingest.core.measurements import MeasurementPlan, Measurements, RowRule, Sample, sample_key

MAX_VALUE_CHARS = 80
_NUMERIC = {"INTEGER", "LONG", "FLOAT", "DOUBLE", "DECIMAL"}
_TEMPORAL = {"DATE", "TIMESTAMP", "TIMESTAMP_NANO"}
_EXACT = Context(prec=100)  # room for any decimal(38, s) value and any bound a float can write, without rounding


def added_file_metrics(spark: Any, iceberg_table: Any, snapshot_id: int,
                       bounds_for: Collection[str] | None = None) -> FileMetrics:
    """The metrics of the data files snapshot `snapshot_id` of the Iceberg (Java) table added: one read of
    the manifests that snapshot wrote, through the table's FileIO; no data file is opened. `bounds_for`: the
    columns (any case) whose lower/upper bounds are wanted (None: every numeric or temporal one). Each Py4J call is
    a round trip to the JVM: the schema comes as one JSON document, each file's count maps in one call each, and
    only the wanted bounds are converted."""
    snapshot = iceberg_table.snapshot(snapshot_id)
    if snapshot is None:
        return FileMetrics()
    return data_file_metrics(spark, iceberg_table, snapshot.addedDataFiles(iceberg_table.io()).iterator(), bounds_for)


def data_file_metrics(spark: Any, iceberg_table: Any, data_files: Any,
                      bounds_for: Collection[str] | None = None) -> FileMetrics:
    """`added_file_metrics` of data files already in hand (a Java iterator of DataFile)."""
    jvm = spark.sparkContext._jvm
    schema = iceberg_table.schema()
    wanted = None if bounds_for is None else {c.lower() for c in bounds_for}
    fields = []  # (field id, name, its type id, the Java type when its bounds are wanted)
    for column in json.loads(str(static(jvm, "org.apache.iceberg.SchemaParser", "toJson")(schema)))["fields"]:
        field_id, name, type_id = int(column["id"]), str(column["name"]), _type_id(column["type"])
        bounded_type = schema.findType(field_id) if type_id in _NUMERIC | _TEMPORAL and (
            wanted is None or name.lower() in wanted) else None
        fields.append((field_id, name, type_id, bounded_type))
    # the class once (each lookup through the JVM view is a round trip), and only when a bound is wanted
    conversions: Any = static(jvm, "org.apache.iceberg.types.Conversions") if any(f[3] is not None for f in fields) \
        else None
    nulls: dict[str, int] = {}
    lower: dict[str, Bound] = {}
    upper: dict[str, Bound] = {}
    seen: dict[str, int] = {}
    bounded: dict[str, int] = {}
    files = size = rows = 0
    iterator = data_files
    while iterator.hasNext():
        data_file = iterator.next()
        files += 1
        size += int(data_file.fileSizeInBytes())
        rows += int(data_file.recordCount())
        counts, nans = _counts(data_file.nullValueCounts()), _counts(data_file.nanValueCounts())
        lows: Any = None
        highs: Any = None
        for field_id, name, type_id, kind in fields:
            if field_id in counts:
                nulls[name] = nulls.get(name, 0) + counts[field_id]
                seen[name] = seen.get(name, 0) + 1
            if kind is None or not no_nans(type_id.lower(), nans.get(field_id)):
                continue
            if lows is None:
                lows, highs = data_file.lowerBounds() or {}, data_file.upperBounds() or {}
            low_bytes, high_bytes = lows.get(field_id), highs.get(field_id)
            if low_bytes is not None and high_bytes is not None:
                low = _number(conversions.fromByteBuffer(kind, low_bytes), type_id)
                high = _number(conversions.fromByteBuffer(kind, high_bytes), type_id)
                lower[name] = low if name not in lower else min(lower[name], low)
                upper[name] = high if name not in upper else max(upper[name], high)
                bounded[name] = bounded.get(name, 0) + 1
    return FileMetrics(
        files=files, bytes=size, rows=rows,
        null_counts={n: c for n, c in nulls.items() if seen.get(n) == files},
        lower={n: v for n, v in lower.items() if bounded.get(n) == files},
        upper={n: v for n, v in upper.items() if bounded.get(n) == files},
    )


def _type_id(kind: Any) -> str:
    """Iceberg's type id (Type.TypeID's name) of a type in the schema's JSON: a primitive is a string there."""
    if not isinstance(kind, str):
        return "NESTED"
    if kind.startswith("decimal"):
        return "DECIMAL"
    return {"int": "INTEGER", "long": "LONG", "float": "FLOAT", "double": "DOUBLE", "date": "DATE",
            "timestamp": "TIMESTAMP", "timestamptz": "TIMESTAMP", "timestamp_ns": "TIMESTAMP_NANO",
            "timestamptz_ns": "TIMESTAMP_NANO"}.get(kind, kind.upper())


_COUNT = re.compile(r"(\d+)=(\d+)")


def _counts(java_map: Any) -> dict[int, int]:
    """A data file's Map<Integer, Long> of counts (field id -> count), in one call: its `toString()`, which is
    `{1=0, 2=5}` for these maps (both sides are plain integers)."""
    if java_map is None:
        return {}
    return {int(k): int(v) for k, v in _COUNT.findall(str(java_map.toString()))}


def _number(value: Any, type_id: str) -> Bound:
    if type_id == "DATE":
        return int(value) * MICROS_PER_DAY
    if type_id in ("TIMESTAMP", "TIMESTAMP_NANO"):
        return int(value) if type_id == "TIMESTAMP" else int(value) // 1000
    if type_id == "DECIMAL":  # Py4J hands a java.math.BigDecimal over as decimal.Decimal: kept exact (a float has
        return Decimal(value)  # 15-17 digits; a decimal(38,18) bound one unit past a limit rounds onto it)
    return int(value) if type_id in ("INTEGER", "LONG") else float(value)


def _violation(frame: Any, rule: RowRule, column: str) -> Any:
    """The rows breaking the rule (nulls are not_null's business). Values are literals, never SQL text."""
    from pyspark.sql import functions as F

    value = frame[column]
    if rule.kind == "accepted_values":
        return value.isNotNull() & ~value.isin(*[F.lit(v) for v in rule.values])
    if rule.kind == "range":
        outside = F.lit(False)
        exact = _exact_type(frame.schema[column].dataType)  # compared at the column's type, not as doubles
        for bound, below in ((rule.low, True), (rule.high, False)):
            if bound is None:
                continue
            if exact is None or (isinstance(bound, float) and math.isnan(bound)):
                outside = outside | (value < F.lit(bound) if below else value > F.lit(bound))
                continue
            edge = _edge(bound, below, *exact)
            if edge is True:
                outside = F.lit(True)
            elif edge is not None:
                literal = F.lit(edge).cast(frame.schema[column].dataType)
                outside = outside | (value < literal if below else value > literal)
        return value.isNotNull() & outside
    if rule.kind == "regex":
        return value.isNotNull() & ~value.cast("string").rlike(f"^(?:{rule.pattern})$")
    raise ValueError(f"unknown row rule {rule.kind!r}")


def _exact_type(data_type: Any) -> tuple[Decimal, Decimal, int] | None:
    """The smallest and largest values and the scale of a decimal or integral column, whose values Spark would
    compare with a float bound as doubles (15-17 digits); None for other types."""
    from pyspark.sql import types as T

    if isinstance(data_type, T.DecimalType):
        largest = _EXACT.subtract(_EXACT.power(10, data_type.precision - data_type.scale),
                                  Decimal(1).scaleb(-data_type.scale))
        return -largest, largest, data_type.scale
    bits = {T.ByteType: 8, T.ShortType: 16, T.IntegerType: 32, T.LongType: 64}
    return next(((Decimal(-(2 ** (b - 1))), Decimal(2 ** (b - 1) - 1), 0) for kind, b in bits.items()
                 if isinstance(data_type, kind)), None)


def _edge(bound: int | float, below: bool, smallest: Decimal, largest: Decimal, scale: int
          ) -> Decimal | bool | None:
    """The bound as a value of the column's own type, giving the same verdict for every value it can hold: a
    minimum rounded up, a maximum down, to the column's scale (values are whole multiples of 10^-scale). True if
    every value breaks it, None if none can (the bound lies beyond what the type holds)."""
    exact = rule_bound(bound)
    if exact is None:  # infinite: -inf as a minimum or +inf as a maximum excludes nothing
        return None if (bound < 0) == below else True
    if not smallest <= exact <= largest:
        return None if (exact < smallest) == below else True
    return exact.quantize(Decimal(1).scaleb(-scale), rounding=ROUND_CEILING if below else ROUND_FLOOR,
                          context=_EXACT)


def _text(value: Any) -> str:
    text = "null" if value is None else str(value)
    return text if len(text) <= MAX_VALUE_CHARS else text[: MAX_VALUE_CHARS - 3] + "..."


def _samples(rows: list[Any]) -> tuple[Sample, ...]:
    return tuple({k: _text(v) for k, v in row.asDict().items()} for row in rows)


def measure_frame(
    spark: Any,
    frame: Any,
    plan: MeasurementPlan,
    *,
    row_count: int | None = None,
    metrics: FileMetrics | None = None,
    base: Any | None = None,
    lookup: Lookup | None = None,
) -> Measurements:
    """Measure `frame` (the new rows) for `plan`. `row_count`: the rows already known (a snapshot summary);
    `metrics`: the new files' metrics (answers what it can without reading); `base`: the table before these
    rows, for keys that must not exist there yet (None: nothing existed); `lookup`: another table on the run's
    branch, for the references checks (adapters.engine.references)."""
    from pyspark.sql import functions as F

    columns = tuple(frame.columns)
    types = {f.name: f.dataType.simpleString() for f in frame.schema.fields}
    names = {c.lower(): c for c in columns}
    metrics = metrics or FileMetrics()
    found = answered(plan, names, types, metrics, row_count)
    nulls, null_columns, violations, rules = found.nulls, found.null_columns, found.violations, found.rules
    newest, max_columns, from_metadata = found.newest, found.max_columns, found.from_metadata

    key_sets = [k for k in dict.fromkeys(plan.unique_keys + plan.existing_keys)
                if all(c.lower() in names for c in k)]
    resolved = {k: tuple(names[c.lower()] for c in k) for k in key_sets}

    aggregates = []
    if row_count is None:
        aggregates.append(F.count(F.lit(1)).alias("rows"))
    aggregates += [F.sum(F.when(frame[c].isNull(), 1).otherwise(0)).alias(f"nulls_{i}")
                   for i, c in enumerate(null_columns)]
    aggregates += [F.sum(F.when(_violation(frame, r, c), 1).otherwise(0)).alias(f"rule_{i}")
                   for i, (r, c) in enumerate(rules)]
    aggregates += [F.unix_micros(F.max(frame[c]).cast("timestamp")).alias(f"max_{i}")
                   for i, c in enumerate(max_columns)]
    unique_sets = [k for k in plan.unique_keys if k in resolved]
    if unique_sets and row_count is not None:  # else already aggregated
        aggregates.append(F.count(F.lit(1)).alias("rows"))
    aggregates += [F.countDistinct(F.struct(*[frame[c] for c in resolved[k]])).alias(f"distinct_{i}")
                   for i, k in enumerate(unique_sets)]
    existing_sets = [k for k in plan.existing_keys if k in resolved] if base is not None else []
    for i, k in enumerate(existing_sets):  # the new keys' range, to prune the base scan
        if len(k) == 1:
            key = frame[resolved[k][0]]
            aggregates += [F.min(key).alias(f"kmin_{i}"), F.max(key).alias(f"kmax_{i}")]

    profiled = [names[c.lower()] for c in plan.profile_columns if c.lower() in names]
    aggregates += profile_aggregates(frame, profiled, types)  # in the same pass
    referenced = present(plan.references, names)
    aggregates += reference_aggregates(frame, referenced)

    row: Any = None
    if aggregates:  # the one pass over the new rows
        row = frame.agg(*aggregates).collect()[0]
    rows = row_count if row_count is not None else int(row["rows"])
    nulls |= {c: int(row[f"nulls_{i}"] or 0) for i, c in enumerate(null_columns)}
    violations |= {r.key: int(row[f"rule_{i}"] or 0) for i, (r, _) in enumerate(rules)}
    newest |= {c: (None if row[f"max_{i}"] is None else int(row[f"max_{i}"])) for i, c in enumerate(max_columns)}
    duplicates = {k: int(row["rows"]) - int(row[f"distinct_{i}"]) for i, k in enumerate(unique_sets)}
    profile = profiles_from(row, profiled, types, rows) if profiled else {}

    existing: dict[tuple[str, ...], int] = {k: 0 for k in plan.existing_keys if k in resolved}
    matches: dict[tuple[str, ...], Any] = {}
    base_names = {c.lower(): c for c in base.columns} if base is not None else {}
    for i, k in enumerate(existing_sets):
        if base is None:  # pragma: no cover - existing_sets is empty then
            break
        if not all(c in base_names for c in (x.lower() for x in k)):
            continue  # a key column the base did not have: no old row can share the key
        keys = resolved[k]
        old = base.select(*[base[base_names[c.lower()]].alias(c) for c in keys])
        if len(k) == 1:
            low, high = row[f"kmin_{i}"], row[f"kmax_{i}"]
            if low is None:
                continue
            # Iceberg skips the data files whose bounds do not overlap the new keys' range
            old = old.filter(old[keys[0]].between(F.lit(low), F.lit(high)))
        matches[k] = frame.join(old.distinct(), on=list(keys), how="left_semi")
        existing[k] = int(matches[k].count())

    missing, absent, missing_samples = measure_references(frame, referenced, row, lookup, plan.samples, _samples)

    query_rows: dict[str, int] = {}
    query_frames: dict[str, Any] = {}
    if plan.queries:
        frame.createOrReplaceTempView(NEW_ROWS_VIEW)
        try:
            for query in plan.queries:
                require_read_only(spark, query)  # parsed, never run, unless it only reads the new rows
                result = spark.sql(query)
                query_rows[query] = int(result.count())
                if query_rows[query]:
                    query_frames[query] = _samples(result.limit(plan.samples).collect())
        finally:
            spark.catalog.dropTempView(NEW_ROWS_VIEW)

    samples: dict[str, tuple[Sample, ...]] = {sample_key("custom_sql", q): s for q, s in query_frames.items()}
    samples |= missing_samples
    failing: list[tuple[str, Any]] = [(sample_key("not_null", c), frame[c].isNull())
                                      for c in plan.null_count_columns
                                      if nulls.get(names.get(c.lower(), ""), 0) > 0]
    failing += [(r.key, _violation(frame, r, c)) for r, c in rules if violations.get(r.key)]
    if failing and plan.samples:  # one limited pass for the samples of every failed row rule
        text = [frame[c].cast("string").alias(c) for c in columns]
        parts = [frame.filter(condition).select(F.lit(key).alias("__check"), *text).limit(plan.samples)
                 for key, condition in failing]
        collected = reduce(lambda a, b: a.unionByName(b), parts).collect()
        for key, _ in failing:
            mine = [r for r in collected if r["__check"] == key]
            samples[key] = tuple({c: _text(r[c]) for c in columns} for r in mine)
    for k in unique_sets:
        if duplicates.get(k) and plan.samples:
            groups = frame.groupBy(*[frame[c] for c in resolved[k]]).count()
            repeated = groups.filter(F.col("count") > 1).limit(plan.samples).collect()
            samples[sample_key("unique", ",".join(k))] = _samples(repeated)
    for k, matched in matches.items():
        if existing.get(k) and plan.samples:
            samples[sample_key("unique_vs_main", ",".join(k))] = _samples(matched.limit(plan.samples).collect())

    return Measurements(
        row_count=rows, null_counts=nulls, columns=columns, types=types, violations=violations,
        duplicates=duplicates, existing=existing, newest=newest, query_rows=query_rows, samples=samples,
        from_metadata=tuple(from_metadata), profile=profile, missing=missing, absent=absent,
    )

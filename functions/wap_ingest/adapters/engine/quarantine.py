"""Row quarantine on Spark (issue 16, item 1): a file's rows that fail a row-level check, split from the others.

Each new row gets the list of the checks it fails (`_wap_failed_checks`): a null in a `not_null` column, a value
outside an accepted_values/range/regex rule, a key repeated within the file (every row with that key), or a row a
custom query over `new_rows` returns (matched on the query's columns, null-safe; a query whose columns are not the
table's, such as an aggregate, names no rows and stays a whole-file check). Nothing is split when no row fails, when
every row fails, or when more than the plan's fraction fails: the file is then written whole and audited as usual.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from wap_ingest.adapters.engine.audit import _violation
from wap_ingest.adapters.engine.sql_guard import require_read_only
from wap_ingest.core.audits import NEW_ROWS_VIEW
from wap_ingest.core.models import FAILED_CHECKS_COLUMN, LOADED_AT_COLUMN, SOURCE_COLUMN, Quarantined, QuarantinePlan

_ROW_ID = "_wap_row_id"


@dataclass(frozen=True)
class Split:
    good: Any  # DataFrame: the rows for the table
    bad: Any  # DataFrame: the rows for the quarantine table, with the checks they failed, the source and the time
    quarantined: Quarantined
    release: Callable[[], None]  # unpersist the flagged rows once both are written


def split_rows(spark: Any, frame: Any, plan: QuarantinePlan, source_uri: str) -> Split | None:
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    names = {c.lower(): c for c in frame.columns}
    base = frame.withColumn(_ROW_ID, F.monotonically_increasing_id()).persist()  # one id per row, read once
    rows = base
    flags: list[Any] = []
    for label, column in plan.not_null:
        if column.lower() in names:
            flags.append(F.when(rows[names[column.lower()]].isNull(), F.lit(label)))
    for label, rule in plan.rules:
        if rule.column.lower() in names:
            flags.append(F.when(_violation(rows, rule, names[rule.column.lower()]), F.lit(label)))
    for label, keys in plan.unique:
        if all(k.lower() in names for k in keys):
            window = Window.partitionBy(*[F.col(names[k.lower()]) for k in keys])
            flags.append(F.when(F.count(F.lit(1)).over(window) > 1, F.lit(label)))
    for i, (label, query) in enumerate(plan.queries):
        named = _rows_named_by(spark, frame, base, query)
        if named is not None:
            column = f"_wap_q{i}"
            rows = rows.join(named.select(_ROW_ID).distinct().withColumn(column, F.lit(label)), _ROW_ID, "left")
            flags.append(F.col(column))
    if not flags:
        base.unpersist()
        return None
    helper = [c for c in rows.columns if c.startswith("_wap_q")]
    flagged = rows.withColumn(FAILED_CHECKS_COLUMN, F.filter(F.array(*flags), lambda x: x.isNotNull())) \
        .drop(*helper).persist()
    checks = F.col(FAILED_CHECKS_COLUMN)
    counted = flagged.agg(  # one pass: the rows, the failing ones, and each check's
        F.count(F.lit(1)), F.sum(F.when(F.size(checks) > 0, 1).otherwise(0)),
        *[F.sum(F.when(F.array_contains(checks, label), 1).otherwise(0)) for label in plan.labels]).collect()[0]
    total, bad_rows = int(counted[0]), int(counted[1] or 0)
    failing = flagged.filter(F.size(checks) > 0)

    def release() -> None:
        flagged.unpersist()
        base.unpersist()

    if bad_rows in (0, total) or bad_rows > plan.max_fraction * total:
        release()
        return None
    by_check = {label: int(n) for label, n in zip(plan.labels, counted[2:], strict=True) if n}
    good = flagged.filter(F.size(FAILED_CHECKS_COLUMN) == 0).drop(FAILED_CHECKS_COLUMN, _ROW_ID)
    bad = failing.drop(_ROW_ID).withColumn(SOURCE_COLUMN, F.lit(source_uri)) \
        .withColumn(LOADED_AT_COLUMN, F.current_timestamp())
    return Split(good, bad, Quarantined(plan.table.qualified, bad_rows, by_check, total), release)


def _rows_named_by(spark: Any, frame: Any, rows: Any, query: str) -> Any | None:
    """The flagged frame's rows a custom query returns, matched on its columns; None if they are not the table's."""
    from functools import reduce

    frame.createOrReplaceTempView(NEW_ROWS_VIEW)
    try:
        require_read_only(spark, query)
        result = spark.sql(query)
        columns = {c.lower(): c for c in frame.columns}
        if not result.columns or any(c.lower() not in columns for c in result.columns):
            return None
        result = result.distinct()
        on = reduce(lambda a, b: a & b, [rows[columns[c.lower()]].eqNullSafe(result[c]) for c in result.columns])
        return rows.join(result, on, "left_semi").localCheckpoint()  # evaluated while `new_rows` still exists
    finally:
        spark.catalog.dropTempView(NEW_ROWS_VIEW)

"""The parts of the engine that take several files of one table at once: which staged files can be read as one
(same format and header or schema), and each file's measurements in one grouped pass over their rows."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from wap_ingest.adapters.engine.audit import measure_frame
from wap_ingest.adapters.engine.read import header_of
from wap_ingest.core.measurements import MeasurementPlan, Measurements
from wap_ingest.core.models import FileFormat, SourceObject

FILE_COLUMN = "__wap_input_file"
Staged = tuple[SourceObject, FileFormat, Path]


def measure_grouped(
    spark: Any, frame: Any, columns: tuple[str, ...], plan: MeasurementPlan, by_tag: Mapping[str, SourceObject]
) -> dict[str, Measurements]:
    """Every file's row count and null counts in one grouped pass over the batch; a plan that needs more (row rules,
    keys, freshness, queries, a column profile) is measured per file with the one-file path's `measure_frame`."""
    from pyspark.sql import functions as F

    wanted = [c for c in plan.null_count_columns if c.lower() in {x.lower() for x in columns}]
    actual = {c.lower(): c for c in columns}
    exprs = [F.count(F.lit(1)).alias("__rows")] + [
        F.sum(F.when(F.col(f"`{actual[c.lower()]}`").isNull(), 1).otherwise(0)).alias(f"__nulls_{i}")
        for i, c in enumerate(wanted)
    ]
    grouped = frame.groupBy(path_of(F.col(FILE_COLUMN)).alias("__path")).agg(*exprs).collect()
    types = {f.name: f.dataType.simpleString() for f in frame.schema.fields if f.name != FILE_COLUMN}
    counted = {row["__path"]: row for row in grouped}
    measured: dict[str, Measurements] = {}
    richer = bool(plan.rules or plan.unique_keys or plan.existing_keys or plan.max_columns or plan.queries
                  or plan.profile_columns or plan.references)
    for tag, source in by_tag.items():
        row = counted.get(tag)
        rows = int(row["__rows"]) if row is not None else 0
        if richer and rows:
            own = frame.filter(path_of(F.col(FILE_COLUMN)) == F.lit(tag)).drop(FILE_COLUMN)
            measured[source.identity] = measure_frame(spark, own, plan, row_count=rows)
            continue
        nulls = {actual[c.lower()]: int(row[f"__nulls_{i}"] or 0) for i, c in enumerate(wanted)} if row else {}
        measured[source.identity] = Measurements(row_count=rows, null_counts=nulls, columns=columns, types=types)
    return measured


_STAGED_NAME = re.compile(r"^([0-9a-f]{16}-[0-9a-f]{8})")  # S3ObjectStore: <digest>-<uuid><suffix>


def tag_of(path: Path) -> str:
    """A staged file's unique name stem, or its whole name for a file staged another way."""
    found = _STAGED_NAME.match(path.name)
    return found.group(1) if found else path.name


def path_of(column: Any) -> Any:
    """The staged file's tag from input_file_name() (a URI): plain SQL functions, no Python UDF."""
    from pyspark.sql import functions as F

    return F.regexp_extract(column, r"([0-9a-f]{16}-[0-9a-f]{8})[^/]*$", 1)


def compatible(staged: list[Staged]) -> tuple[list[Staged], dict[str, str]]:
    """The largest set of files that can be read as one: same format and same header (CSV) or schema (Parquet).
    The others are returned with the reason, and run alone."""
    shapes = {source.identity: (fmt, header_of(path, fmt)) for source, fmt, path in staged}
    counts = Counter(shape for shape in shapes.values() if shape[1] is not None)
    if not counts:
        return [], {s.identity: "its header or schema could not be read" for s, _, _ in staged}
    common = counts.most_common(1)[0][0]
    together = [item for item in staged if shapes[item[0].identity] == common]
    others = {s.identity: "its format or columns differ from the rest of the batch" for s, _, _ in staged
              if shapes[s.identity] != common}
    return together, others

"""What a registered file's metrics answer of an audit without an engine (adapters/engine/audit_metadata.py): the plan
is answered only when nothing is left to read (a count the metrics do not settle, a key, a query, samples of a failed
not_null), and a PyIceberg DataFile's metrics and types read as the engine would give them."""

from __future__ import annotations

from decimal import Decimal

import pytest
from pyiceberg.manifest import DataFile, DataFileContent, FileFormat
from pyiceberg.schema import Schema
from pyiceberg.typedef import Record
from pyiceberg.types import (
    DateType,
    DecimalType,
    DoubleType,
    FixedType,
    IntegerType,
    ListType,
    LongType,
    MapType,
    NestedField,
    StringType,
    StructType,
    TimestampType,
    TimestamptzType,
    UUIDType,
)

from wap_ingest.adapters.engine.audit_metadata import (
    MICROS_PER_DAY,
    FileMetrics,
    measure_without_rows,
    metrics_of,
    spark_type_name,
)
from wap_ingest.core.measurements import MeasurementPlan, RowRule

COLUMNS = ("id", "amount")
TYPES = {"id": "bigint", "amount": "double"}
METRICS = FileMetrics(files=1, rows=10, null_counts={"id": 0, "amount": 2}, lower={"id": 1, "amount": 0.5},
                      upper={"id": 10, "amount": 9.5})
IN_RANGE = RowRule("range:amount", "range", "amount", low=0, high=10)


@pytest.mark.parametrize(("plan", "answered"), [
    (MeasurementPlan(null_count_columns=("ID",), rules=(IN_RANGE,)), True),
    (MeasurementPlan(null_count_columns=("amount",), samples=0), True),  # nulls counted, no sample asked for
    (MeasurementPlan(null_count_columns=("amount",)), False),  # the failing rows are sampled
    (MeasurementPlan(rules=(RowRule("range:amount", "range", "amount", low=1),)), False),  # bounds say maybe
    (MeasurementPlan(rules=(RowRule("in:id", "accepted_values", "id", values=(1,)),)), False),
    (MeasurementPlan(unique_keys=(("id",),)), False),
    (MeasurementPlan(queries=("SELECT * FROM new_rows WHERE id < 0",)), False),
    (MeasurementPlan(max_columns=("amount",)), False),  # freshness of a column that is not a date or timestamp
    (MeasurementPlan(unique_keys=(("missing",),)), True),  # a key the rows do not have: nothing to read
], ids=["answered", "nulls-no-samples", "nulls-sampled", "range-unsure", "values", "unique", "query", "max",
        "absent-key"])
def test_the_metrics_answer_a_plan_only_when_no_row_is_left_to_read(plan: MeasurementPlan, answered: bool) -> None:
    found = measure_without_rows(plan, COLUMNS, TYPES, METRICS, row_count=10)
    assert (found is not None) is answered
    if found is not None:
        assert found.row_count == 10 and found.columns == COLUMNS and found.types == TYPES
        assert "row_count" in found.from_metadata


def test_a_data_files_metrics_read_as_the_engines() -> None:
    schema = Schema(NestedField(1, "id", LongType()), NestedField(2, "day", DateType()),
                    NestedField(3, "price", DecimalType(10, 2)), NestedField(4, "x", DoubleType()),
                    NestedField(5, "name", StringType()))
    data_file = DataFile.from_args(
        content=DataFileContent.DATA, file_path="s3://lake/f.parquet", file_format=FileFormat.PARQUET,
        partition=Record(), record_count=3, file_size_in_bytes=100, null_value_counts={1: 0, 2: 1, 5: 0},
        nan_value_counts={4: 1}, lower_bounds={1: (5).to_bytes(8, "little"), 2: (3).to_bytes(4, "little"),
                                               3: (125).to_bytes(1, "big"), 4: b"\x00" * 8, 5: b"a"},
        upper_bounds={1: (7).to_bytes(8, "little"), 2: (4).to_bytes(4, "little"), 3: (350).to_bytes(2, "big"),
                      4: b"\x00" * 8, 5: b"c"})
    metrics = metrics_of(schema, data_file)
    assert metrics.null_counts == {"id": 0, "day": 1, "name": 0}
    assert metrics.lower == {"id": 5, "day": 3 * MICROS_PER_DAY, "price": Decimal("1.25")}  # x has NaNs; text no
    assert metrics.upper == {"id": 7, "day": 4 * MICROS_PER_DAY, "price": Decimal("3.50")}
    assert metrics_of(schema, data_file, ["ID"]).lower == {"id": 5}


def test_an_iceberg_type_is_spelled_as_spark_reads_it() -> None:
    kinds = [(LongType(), "bigint"), (IntegerType(), "int"), (TimestamptzType(), "timestamp"),
             (TimestampType(), "timestamp_ntz"), (DecimalType(10, 2), "decimal(10,2)"), (UUIDType(), "string"),
             (FixedType(16), "binary"), (ListType(1, StringType()), "array<string>"),
             (MapType(1, StringType(), 2, LongType()), "map<string,bigint>"),
             (StructType(NestedField(1, "a", LongType()), NestedField(2, "b", DateType())), "struct<a:bigint,b:date>")]
    assert [spark_type_name(kind) for kind, _ in kinds] == [name for _, name in kinds]

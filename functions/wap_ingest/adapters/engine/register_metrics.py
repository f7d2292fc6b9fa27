"""A registered file's Iceberg metrics, made from what the service measured of its pages (parquet_measured), never
from the file's footer: every count and bound committed for it is one the service computed.

`measured_statistics` gives PyIceberg's DataFileStatistics, as `data_file_statistics_from_parquet_metadata` would from
a truthful footer, with the table's metrics config (`compute_statistics_plan`: none, counts, truncate(n) or full per
column; bounds truncated by Iceberg's rules through PyIceberg's StatsAggregator):
- record count: the rows decoded; value counts: each leaf's entries; null counts: entries without a value;
- NaN counts: the NaNs of each float and double column (PyIceberg leaves them out of a footer's reading, and a missing
  count would read as none);
- bounds: min and max without nulls and NaNs, for leaves outside lists and maps (Iceberg's Java writers keep none for
  those either); a floating-point zero bound as -0.0 below and +0.0 above, so either zero lies inside;
- column sizes and split offsets: where the decoder found each chunk's pages and each row group.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from wap_ingest.adapters.engine.parquet_measured import LeafFigures, Measured


def statistics_plan(schema: Any, properties: Mapping[str, str], physical: Mapping[str, str]) -> dict[int, Any]:
    """The table's metrics config for the file's leaves (`physical`: each leaf path's Parquet physical type); a
    column whose physical type PyIceberg takes no bounds from for its Iceberg type (a decimal(10, 2) pyarrow writes as
    FIXED_LEN_BYTE_ARRAY, where PyIceberg writes INT64) keeps its counts and has no bounds."""
    from pyiceberg.io.pyarrow import (
        MetricModeTypes,
        MetricsMode,
        StatsAggregator,
        compute_statistics_plan,
        parquet_path_to_id_mapping,
    )

    plan = compute_statistics_plan(schema, dict(properties))
    ids = parquet_path_to_id_mapping(schema)
    for path, kind in physical.items():
        collector = plan.get(ids.get(path, -1))
        if collector is None or collector.mode.type not in (MetricModeTypes.TRUNCATE, MetricModeTypes.FULL):
            continue
        try:
            StatsAggregator(collector.iceberg_type, kind)
        except ValueError:
            plan[collector.field_id] = replace(collector, mode=MetricsMode(MetricModeTypes.COUNTS))
    return plan


def measured_statistics(schema: Any, properties: Mapping[str, str], measured: Measured) -> Any:
    """PyIceberg's DataFileStatistics of the file from `measured`. Raises KeyError for a leaf the table's schema
    does not name (its path is not the table's), ValueError for a bound PyIceberg cannot hold."""
    from pyiceberg.io.pyarrow import DataFileStatistics, MetricModeTypes, StatsAggregator, parquet_path_to_id_mapping

    plan = statistics_plan(schema, properties, {leaf.path: leaf.physical for leaf in measured.leaves})
    ids = parquet_path_to_id_mapping(schema)
    sizes: dict[int, int] = {}
    values: dict[int, int] = {}
    nulls: dict[int, int] = {}
    nans: dict[int, int] = {}
    bounds: dict[int, Any] = {}
    for leaf in measured.leaves:
        field_id = ids[leaf.path]
        collector = plan[field_id]
        sizes[field_id] = sizes.get(field_id, 0) + leaf.compressed
        if collector.mode.type == MetricModeTypes.NONE:
            continue
        values[field_id] = leaf.values
        nulls[field_id] = leaf.nulls
        if leaf.nans is not None and str(collector.iceberg_type) in ("float", "double"):
            nans[field_id] = leaf.nans
        if collector.mode.type == MetricModeTypes.COUNTS or leaf.low is None or leaf.high is None:
            continue
        aggregate = StatsAggregator(collector.iceberg_type, leaf.physical, collector.mode.length)
        low, high = _bounds(leaf)
        aggregate.update_min(low)
        aggregate.update_max(high)
        bounds[field_id] = aggregate
    return DataFileStatistics(record_count=measured.rows, column_sizes=sizes, value_counts=values,
                              null_value_counts=nulls, nan_value_counts=nans, column_aggregates=bounds,
                              split_offsets=list(measured.split_offsets))


def _bounds(leaf: LeafFigures) -> tuple[Any, Any]:
    low, high = leaf.low, leaf.high
    if isinstance(low, float) and low == 0.0:
        low = -0.0
    if isinstance(high, float) and high == 0.0:
        high = 0.0
    return low, high

"""The conversion of Iceberg metric values (as Py4J hands them over) to comparable numbers: no JVM needed."""

from __future__ import annotations

from decimal import Decimal

import pytest

from wap_ingest.adapters.engine.audit import _number
from wap_ingest.adapters.engine.audit_metadata import MICROS_PER_DAY


@pytest.mark.parametrize(
    ("value", "type_id", "expected"),
    [
        (Decimal("12.50"), "DECIMAL", 12.5),  # java.math.BigDecimal arrives as decimal.Decimal
        (3, "DATE", 3 * MICROS_PER_DAY),  # days since epoch -> microseconds
        (1_700_000_000_000_000, "TIMESTAMP", 1_700_000_000_000_000),
        (1_700_000_000_000_000_123, "TIMESTAMP_NANO", 1_700_000_000_000_000),
        (7, "INTEGER", 7),
        (2.5, "DOUBLE", 2.5),
    ],
)
def test_metric_values_become_numbers(value: object, type_id: str, expected: float) -> None:
    assert _number(value, type_id) == expected

"""Range bounds compared exactly (adapters/engine/audit.py): metadata bounds of decimal columns against a rule's
bound as written, and a bound turned into a value of the column's own type for the pass over the rows. No JVM."""

from __future__ import annotations

from decimal import Decimal

import pytest
from pyspark.sql import types as T

from wap_ingest.adapters.engine.audit import _edge, _exact_type
from wap_ingest.adapters.engine.audit_metadata import rule_bound, within
from wap_ingest.core.measurements import RowRule

OVER = Decimal("1.000000000000000001")
UNDER = Decimal("0.999999999999999999")


def rule(low: float | None = None, high: float | None = None) -> RowRule:
    return RowRule("range:amount", "range", "amount", low=low, high=high)


def test_bounds_are_taken_as_written() -> None:
    assert rule_bound(0.1) == Decimal("0.1") and rule_bound(10**20) == Decimal(10**20)
    assert rule_bound(float("inf")) is None and rule_bound(float("nan")) is None


@pytest.mark.parametrize(
    ("low", "high", "bounds", "inside"),
    [
        (Decimal(0), OVER, rule(high=1), False),  # a float compare sees 1.0 <= 1
        (UNDER, Decimal(2), rule(low=1), False),
        (Decimal("0.1"), Decimal(1), rule(low=0.1, high=1), True),  # exactly at the limits
        (Decimal(0), OVER, rule(high=1.0), False),
        (Decimal(10**20 + 1), Decimal(10**20 + 1), rule(high=10**20), False),
        (Decimal(-5), Decimal(5), rule(low=float("-inf"), high=float("inf")), True),
        (Decimal(0), Decimal(1), rule(high=float("nan")), False),  # the rows decide
        (3, 5, rule(low=0, high=10), True),  # integers and floats as before
        (0.5, 2.5, rule(low=1), False),
    ],
)
def test_metadata_decides_only_what_is_certain(low: Decimal, high: Decimal, bounds: RowRule, inside: bool) -> None:
    assert within(low, high, bounds) is inside


DECIMAL_38_18 = _exact_type(T.DecimalType(38, 18))


@pytest.mark.parametrize(
    ("bound", "is_minimum", "edge"),
    [
        (1, False, Decimal("1.000000000000000000")),
        (0.1, True, Decimal("0.100000000000000000")),
        (1e-19, True, Decimal("0.000000000000000001")),  # a minimum rounds up to the column's scale
        (1e-19, False, Decimal("0")),  # a maximum rounds down
        (1e30, False, None),  # beyond what decimal(38,18) holds: no value is above it
        (1e30, True, True),  # every value is below it
        (-1e30, True, None),
        (float("inf"), False, None),
        (float("-inf"), False, True),
    ],
)
def test_a_bound_becomes_a_value_of_the_columns_type(bound: float, is_minimum: bool,
                                                     edge: Decimal | bool | None) -> None:
    assert DECIMAL_38_18 is not None
    found = _edge(bound, is_minimum, *DECIMAL_38_18)
    assert found == edge and type(found) is type(edge)


def test_integral_columns_have_their_exact_range() -> None:
    assert _exact_type(T.LongType()) == (Decimal(-(2**63)), Decimal(2**63 - 1), 0)
    assert _edge(9.5e18, True, *_exact_type(T.LongType())) is True  # type: ignore[misc]
    assert _exact_type(T.DoubleType()) is None and _exact_type(T.StringType()) is None

"""Range checks on decimal columns decided exactly (issue 24, smaller items), through the pipeline on the real stack:
a decimal(38,18) value one unit past a limit is 1.0 as a float, so a check that compared floats passed it, from the
new files' metadata (one file) or from the rows (a batch: no metadata). Values exactly at a limit still pass, from
metadata."""

from __future__ import annotations

import io
from decimal import Decimal
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tests.conftest import Lake
from tests.integration.core.audits.test_audit_suites import run, suites
from wap_ingest.core.ingest import Item, ingest
from wap_ingest.core.models import IngestOutcome, OutcomeStatus

pytestmark = [pytest.mark.stack, pytest.mark.spark]

ONE_UNIT_OVER = Decimal("1.000000000000000001")  # float(...) == 1.0
ONE_UNIT_UNDER = Decimal("0.999999999999999999")  # float(...) == 1.0


def amounts(values: list[Decimal], precision: int = 38, scale: int = 18) -> bytes:
    sink = io.BytesIO()
    pq.write_table(pa.table({"id": pa.array(range(len(values)), pa.int64()),
                             "amount": pa.array(values, pa.decimal128(precision, scale))}), sink)
    return sink.getvalue()


def check(**bounds: Any) -> list[dict[str, Any]]:
    return [{"check": "range", "column": "amount", **bounds}]


@pytest.mark.parametrize(
    ("values", "bounds", "status"),
    [
        pytest.param([Decimal("0.5"), ONE_UNIT_OVER], {"max": 1}, OutcomeStatus.REJECTED, id="one-unit-over-max"),
        pytest.param([ONE_UNIT_UNDER, Decimal("1.5")], {"min": 1}, OutcomeStatus.REJECTED, id="one-unit-under-min"),
        pytest.param([Decimal("0.5"), ONE_UNIT_OVER], {"max": 1.0}, OutcomeStatus.REJECTED, id="float-bound"),
        pytest.param([Decimal("0.1"), Decimal("1")], {"min": 0.1, "max": 1}, OutcomeStatus.PUBLISHED,
                     id="at-both-limits"),
    ],
)
def test_one_file_is_judged_exactly_from_its_metadata(lake: Lake, table_name: str, values: list[Decimal],
                                                      bounds: dict[str, Any], status: OutcomeStatus) -> None:
    outcome = run(lake, lake.put(f"{table_name}/a.parquet", amounts(values)), suites(table_name, check(**bounds)))
    assert outcome.status is status, outcome.message
    if status is OutcomeStatus.REJECTED:  # the one value past the limit, and only the range check
        assert outcome.report is not None
        [failed] = outcome.report.failures
        assert failed.check == "range" and failed.measured.startswith("1 "), failed


def test_a_large_whole_decimal_past_its_limit_is_rejected(lake: Lake, table_name: str) -> None:
    """decimal(38,0): 10^20 + 1 is 1e20 as a float, equal to the limit."""
    data = amounts([Decimal(10**20 + 1)], precision=38, scale=0)
    outcome = run(lake, lake.put(f"{table_name}/a.parquet", data), suites(table_name, check(max=10**20)))
    assert outcome.status is OutcomeStatus.REJECTED, outcome.message


def test_a_batch_is_judged_exactly_from_its_rows(lake: Lake, table_name: str) -> None:
    """Two files of one table read as one batch: each file's rows are measured without metadata, compared with the
    bound at the column's type (a float literal would make Spark compare doubles)."""
    over = lake.put(f"{table_name}/over.parquet", amounts([Decimal("0.5"), ONE_UNIT_OVER]))
    inside = lake.put(f"{table_name}/inside.parquet", amounts([Decimal("0.5"), Decimal("1.0")]))
    svc = lake.service
    results = ingest([Item(over), Item(inside)], ports=svc.ports, suites=suites(table_name, check(max=1.0)),
                     config=svc.config, notifier=svc.notifier)
    assert all(isinstance(r, IngestOutcome) for r in results), results
    statuses = {r.source.key.rsplit("/", 1)[1]: r.status for r in results if isinstance(r, IngestOutcome)}
    assert statuses == {"over.parquet": OutcomeStatus.REJECTED, "inside.parquet": OutcomeStatus.PUBLISHED}

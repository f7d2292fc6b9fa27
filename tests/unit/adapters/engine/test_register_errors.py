"""A registration's failures outside the engine (adapters/engine/register.py): the table's catalog or PyIceberg
failing while the engine was never asked for is not an engine failure: a catalog outage stays one, S3 is S3, and
anything else is unexpected (retried, then dead-lettered), never "the Spark engine died"."""

from __future__ import annotations

import io
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from wap_ingest.adapters.engine.register import register
from wap_ingest.core.errors import CatalogUnavailableError, ObjectStoreUnavailableError, UnexpectedError
from wap_ingest.core.models import SourceObject, TableRef


class Store:
    def __init__(self) -> None:
        sink = io.BytesIO()
        pq.write_table(pa.table({"a": [1, 2]}), sink)
        self.data = sink.getvalue()

    def read_tail(self, source: SourceObject, max_bytes: int) -> tuple[bytes, int]:
        return self.data[-max_bytes:], len(self.data)

    def copy_into(self, source: SourceObject, uri: str) -> None:
        raise AssertionError("nothing is copied when the table cannot be read")

    def remove(self, uri: str) -> None:
        raise AssertionError("nothing to remove")


class Lake:
    def __init__(self, error: Exception) -> None:
        self.error = error

    def load(self, table: TableRef, branch: str) -> Any:
        raise self.error


@pytest.mark.parametrize(("raised", "expected"), [
    (ValueError("a metadata file PyIceberg cannot parse"), UnexpectedError),
    (CatalogUnavailableError("Nessie is down"), CatalogUnavailableError),
    (OSError("S3: connection reset"), ObjectStoreUnavailableError),
])
def test_a_failure_without_the_engine_is_never_called_an_engine_failure(raised: Exception,
                                                                       expected: type[Exception]) -> None:
    def engine() -> Any:
        raise AssertionError("the engine is not asked for")

    with pytest.raises(expected) as found:
        register(Lake(raised), engine, Store(), SourceObject("inbox", "t/a.parquet"), TableRef("wap", "t"),  # type: ignore[arg-type]
                 "wap-t-branch", {}, None, measured=lambda: "not measured")
    assert "registering s3://inbox/t/a.parquet into wap.t" in str(found.value) or expected is CatalogUnavailableError

"""The reference approach (seed 004), reproduced on the same stack: PyIceberg appends the file to the table
on a Nessie branch (no JVM), a null check reads the whole table's column, then the branch is merged.
"""

from __future__ import annotations

import io
import time
from dataclasses import dataclass
from typing import Any

import pyarrow.parquet as pq


@dataclass
class BaselineTimes:
    append: float
    audit: float
    merge: float
    nulls: int

    @property
    def total(self) -> float:
        return self.append + self.audit + self.merge


class Baseline:
    def __init__(self, nessie_endpoint: str, s3: Any) -> None:
        import pynessie

        self.endpoint = nessie_endpoint
        self.s3 = s3
        self.nessie = pynessie.init(config_dict={"endpoint": f"{nessie_endpoint}/api/v1", "verify": True,
                                                 "default_branch": "main", "auth": {"type": "none", "timeout": 30}})

    def _catalog(self, ref: str) -> Any:
        from pyiceberg.catalog import load_catalog

        return load_catalog(f"baseline-{ref}", type="rest", uri=f"{self.endpoint}/iceberg/{ref}",
                            **{"py-io-impl": "pyiceberg.io.fsspec.FsspecFileIO"})

    def ingest(self, bucket: str, key: str, table: str, column: str = "my_col_1") -> BaselineTimes:
        started = time.perf_counter()
        main = self.nessie.get_reference("main")
        branch = self.nessie.create_branch(f"baseline-{time.time_ns()}", ref="main", hash_on_ref=main.hash_)
        catalog = self._catalog(branch.name)
        data = pq.read_table(io.BytesIO(self.s3.get_object(Bucket=bucket, Key=key)["Body"].read()))
        if catalog.table_exists(table):
            catalog.load_table(table).append(data)
        else:
            catalog.create_table(table, schema=data.schema).append(data)
        appended = time.perf_counter()
        nulls = self.full_scan_nulls(branch.name, table, column)
        audited = time.perf_counter()
        head = self.nessie.get_reference(branch.name)
        self.nessie.merge(branch.name, "main", head.hash_, self.nessie.get_reference("main").hash_)
        self.nessie.delete_branch(branch.name, head.hash_)
        return BaselineTimes(appended - started, audited - appended, time.perf_counter() - audited, nulls)

    def full_scan_nulls(self, ref: str, table: str, column: str = "my_col_1") -> int:
        """The reference audit: read the column of the whole table and count nulls."""
        scanned = self._catalog(ref).load_table(table).scan(selected_fields=(column,)).to_arrow()
        return int(scanned.column(column).null_count)

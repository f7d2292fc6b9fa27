"""The reference approach (seed 004, BauplanLabs/no-jvm-wap-with-iceberg, src/serverless/app.py), reproduced on
the same stack, step for step as its `lambda_handler` runs them:

1. read the file from S3 into Arrow with `pq.read_table("s3://bucket/key")` (pyarrow's S3 filesystem);
2. create the table on `main` if it is not there (from the file's schema);
3. create a branch from `main`;
4. load the table on the branch and `append` the Arrow table (PyIceberg, no JVM);
5. the quality check, exactly as written: load the table on the branch and
   `scan(row_filter=IsNull(column), selected_fields=(column,)).to_arrow()`, passed when it has no rows. The row
   filter lets PyIceberg skip every data file whose metrics say the column has no nulls;
6. merge the branch into `main` and delete it.

Its catalog is Nessie's Iceberg REST endpoint (`/iceberg/<ref>`) instead of the seed's patched PyIceberg Nessie
catalog, and it merges with pynessie; there is no retry (the seed has none): a merge conflict raises
`MergeConflictError` and the caller decides (the burst workload runs that file again from `main`, and counts it).
The append is timed as its two halves: writing the data and manifest files, and the commit to the catalog.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlparse

import pyarrow as pa
import pyarrow.parquet as pq

NAMESPACE = "wap"


class MergeConflictError(RuntimeError):
    """`main` moved under the branch: the reference's merge fails (it has no retry)."""


@dataclass
class BaselineTimes:
    """Seconds per step of one file (`read` is pyarrow's read from S3: the download and the decoding)."""

    read: float
    branch: float
    write: float
    commit: float
    audit: float
    merge: float
    rows: int
    nulls: int

    @property
    def total(self) -> float:
        return self.read + self.branch + self.write + self.commit + self.audit + self.merge

    def as_dict(self) -> dict[str, Any]:
        steps = ("read", "branch", "write", "commit", "audit", "merge")
        return {"seconds": round(self.total, 3), "rows": self.rows, "nulls": self.nulls,
                "stages_s": {s: round(getattr(self, s), 3) for s in steps}}


def arrow_s3(s3_endpoint: str | None, region: str) -> Any:
    """pyarrow's S3 filesystem on the same endpoint as boto3 (the local moto), credentials from the environment."""
    from pyarrow import fs

    if not s3_endpoint:
        return fs.S3FileSystem(region=region)
    parsed = urlparse(s3_endpoint)
    return fs.S3FileSystem(endpoint_override=parsed.netloc, scheme=parsed.scheme or "http", region=region)


class Baseline:
    """One instance per thread: pynessie's client and the REST catalogs are not shared between threads."""

    _lock = threading.Lock()  # pynessie.init reads its config files: once at a time

    def __init__(self, nessie_endpoint: str, s3_endpoint: str | None, region: str) -> None:
        import pynessie

        self.endpoint = nessie_endpoint
        self.filesystem = arrow_s3(s3_endpoint, region)
        with self._lock:
            self.nessie = pynessie.init(config_dict={
                "endpoint": f"{nessie_endpoint}/api/v1", "verify": True, "default_branch": "main",
                "auth": {"type": "none", "timeout": 30}})

    def _catalog(self, ref: str) -> Any:
        from pyiceberg.catalog import load_catalog

        return load_catalog(f"baseline-{ref}", type="rest", uri=f"{self.endpoint}/iceberg/{ref}",
                            **{"py-io-impl": "pyiceberg.io.fsspec.FsspecFileIO"})

    def read(self, bucket: str, key: str) -> pa.Table:
        return pq.read_table(f"{bucket}/{key}", filesystem=self.filesystem)

    def ingest(self, bucket: str, key: str, table: str, column: str = "my_col_1") -> BaselineTimes:
        """One file, the reference's steps; `table` is `wap.<name>`. Raises MergeConflictError if `main` moved."""
        from pynessie.error import NessieConflictException

        started = time.perf_counter()
        data = self.read(bucket, key)
        was_read = time.perf_counter()
        main = self._catalog("main")
        if not main.table_exists(table):
            main.create_namespace_if_not_exists(NAMESPACE)
            main.create_table(table, schema=data.schema)
        head = self.nessie.get_reference("main")
        branch = self.nessie.create_branch(f"baseline-{time.time_ns()}-{threading.get_ident()}", ref="main",
                                           hash_on_ref=head.hash_)
        branched = time.perf_counter()
        write, commit = self.append(branch.name, table, data)
        appended = time.perf_counter()
        nulls = self.reference_audit(branch.name, table, column)
        audited = time.perf_counter()
        if nulls:
            raise RuntimeError(f"the reference's check failed: {nulls} nulls in {column} of {key}")
        tip = self.nessie.get_reference(branch.name)
        try:
            self.nessie.merge(branch.name, "main", tip.hash_, self.nessie.get_reference("main").hash_)
        except NessieConflictException as exc:
            self.nessie.delete_branch(branch.name, tip.hash_)
            raise MergeConflictError(f"{key}: main moved while {branch.name} was audited") from exc
        self.nessie.delete_branch(branch.name, tip.hash_)
        return BaselineTimes(read=was_read - started, branch=branched - was_read, write=write, commit=commit,
                             audit=audited - appended, merge=time.perf_counter() - audited, rows=data.num_rows,
                             nulls=nulls)

    def append(self, ref: str, table: str, data: pa.Table) -> tuple[float, float]:
        """`table.append(data)` as PyIceberg runs it (a transaction's append, then its commit), timed in two:
        (writing the data and manifest files, committing to the catalog)."""
        loaded = self._catalog(ref).load_table(table)
        started = time.perf_counter()
        transaction = loaded.transaction()
        transaction.append(data)
        written = time.perf_counter()
        transaction.commit_transaction()
        return written - started, time.perf_counter() - written

    def reference_audit(self, ref: str, table: str, column: str = "my_col_1") -> int:
        """The reference's quality check, as written: the rows of `column` that are null, by a row-filtered scan
        of the whole table on `ref` (files whose metrics show no nulls in `column` are skipped)."""
        from pyiceberg.expressions import IsNull, Reference

        loaded = self._catalog(ref).load_table(table)
        scan = loaded.scan(row_filter=IsNull(term=Reference(column)), selected_fields=(column,))
        return int(scan.to_arrow().num_rows)

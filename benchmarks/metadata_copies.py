"""What a PyIceberg commit pays for the snapshots its table's metadata lists: PyIceberg's Transaction applies its
updates again, with a deep copy of the metadata, every time the transaction's metadata is asked for (about 19 times
for one append of a results table, counted with cProfile on the local stack), so the cost of an append grows with
the snapshots and metadata log entries the metadata file lists (adapters.catalog.audit_results keeps them bounded).

    python -m benchmarks.metadata_copies [--copies 19] [--out benchmarks/results/metadata_copies.json]

Each case: a results table's metadata (its real schema) listing N snapshots and L metadata log entries, deep-copied
`--copies` times (pydantic's `model_copy(deep=True)`, as PyIceberg's update_table_metadata does), best of 5.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "results" / "metadata_copies.json"
CASES = ((10, 10), (20, 10), (20, 100), (100, 100))  # (snapshots, metadata log entries)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--copies", type=int, default=19)
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    from pyiceberg.partitioning import UNPARTITIONED_PARTITION_SPEC
    from pyiceberg.table.metadata import new_table_metadata
    from pyiceberg.table.snapshots import MetadataLogEntry, Operation, Snapshot, SnapshotLogEntry, Summary
    from pyiceberg.table.sorting import UNSORTED_SORT_ORDER

    from wap_ingest.adapters.catalog.audit_results import PROPERTIES, iceberg_schema

    base = new_table_metadata(iceberg_schema(), UNPARTITIONED_PARTITION_SPEC, UNSORTED_SORT_ORDER,
                              "s3://lake/warehouse/wap_meta/t", dict(PROPERTIES))
    found = []
    for snapshots, logs in CASES:
        listed = [Snapshot.model_validate({
            "snapshot-id": i + 1, "parent-snapshot-id": i or None, "sequence-number": i + 1,
            "timestamp-ms": 1_764_000_000_000 + i, "manifest-list": f"s3://lake/m/snap-{i}.avro", "schema-id": 0,
            "summary": Summary(Operation.APPEND, **{"added-data-files": "1", "added-records": "20",
                                                     "total-records": str(20 * (i + 1))})}) for i in range(snapshots)]
        metadata = base.model_copy(update={
            "snapshots": listed, "current_snapshot_id": snapshots,
            "snapshot_log": [SnapshotLogEntry.model_validate({"snapshot-id": i + 1, "timestamp-ms": 1})
                             for i in range(snapshots)],
            "metadata_log": [MetadataLogEntry.model_validate({"metadata-file": f"s3://lake/m/{i:05d}.metadata.json",
                                                              "timestamp-ms": 1}) for i in range(logs)]})
        best = float("inf")
        for _ in range(5):
            started = time.perf_counter()
            for _ in range(args.copies):
                metadata.model_copy(deep=True)
            best = min(best, time.perf_counter() - started)
        found.append({"snapshots": snapshots, "metadata_log": logs, "copies": args.copies,
                      "best_of_5_ms": round(best * 1000, 1)})
    document = {"what": " ".join((__doc__ or "").strip().split("\n\n")[0].split()),
                "measured_at": datetime.now(UTC).isoformat(timespec="seconds"), "cases": found}
    args.out.write_text(json.dumps(document, indent=1) + "\n")
    print(json.dumps(document))
    return 0


if __name__ == "__main__":
    sys.exit(main())

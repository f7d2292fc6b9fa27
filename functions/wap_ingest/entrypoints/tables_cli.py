"""`wap tables [--json]`: every table, what is on main and what waits.

Per table: the rows on `main` (its current snapshot's summary, through the lake reader: no Spark, no data file read),
the last load published (time and object, from `main`'s history), the open branches of rejected files, and the rows
its quarantine table holds (`<table>_quarantine`, shown with its table, not as one). A table only open branches hold
(its first file was rejected) is listed too, with no rows on main. A table that cannot be read (its metadata gone,
the catalog refusing it) is listed with the reason, and the others still are. Then `wap history TABLE` tells the rest.
"""

from __future__ import annotations

import argparse
import json
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from wap_ingest.core.audit_results import RESULTS_NAMESPACE
from wap_ingest.core.errors import WapError
from wap_ingest.core.ledger import LEDGER_NAMESPACE
from wap_ingest.core.models import QUARANTINE_SUFFIX, TableRef

from .ops_schema import SCHEMA_VERSION

if TYPE_CHECKING:
    from wap_ingest.bootstrap import OperatorCommands

READERS = 8  # tables read at once (each a catalog call and a metadata read; the catalog serves them in parallel)


@dataclass(frozen=True)
class TableLine:
    table: TableRef
    rows_on_main: int | None  # None: not on main yet (only open branches hold it)
    last_load: datetime | None
    last_source: str | None
    open_branches: tuple[str, ...]
    quarantined_rows: int | None  # None: the table sets no rows aside
    error: str | None = None  # why the table could not be read (then its counts are None)

    def to_dict(self) -> dict[str, Any]:
        return {"table": self.table.qualified, "rows_on_main": self.rows_on_main,
                "last_load": self.last_load.isoformat() if self.last_load else None, "last_source": self.last_source,
                "open_branches": list(self.open_branches), "quarantined_rows": self.quarantined_rows,
                "error": self.error}


def table_lines(uses: OperatorCommands) -> list[TableLine]:
    # the service's own keys are no tables of the lake's: the ledger, and each table's audit results (wap_meta)
    on_main = [t for t in uses.tables_on_main() if t.namespace not in (LEDGER_NAMESPACE, RESULTS_NAMESPACE)]
    names = {t.qualified for t in on_main}
    branches: dict[TableRef, list[str]] = {}
    for branch in uses.branches():
        branches.setdefault(branch.table, []).append(branch.name)
    tables = sorted({t for t in on_main if not _is_quarantine(t, names)} | set(branches), key=lambda t: t.qualified)
    loads = uses.last_loads(tables)  # one read of main's history for every table

    def line_for(table: TableRef) -> TableLine:
        waiting, loaded = tuple(branches.get(table, ())), loads.get(table)
        try:
            quarantine = TableRef(table.namespace, table.name + QUARANTINE_SUFFIX)
            return TableLine(
                table, uses.rows_on_main(table) if table.qualified in names else None,
                loaded.at if loaded else None, loaded.source if loaded else None, waiting,
                uses.rows_on_main(quarantine) if quarantine.qualified in names else None)
        except WapError as exc:  # this table's; the listing goes on
            return TableLine(table, None, None, None, waiting, None, error=str(exc))

    with ThreadPoolExecutor(max_workers=READERS, thread_name_prefix="wap-tables") as pool:
        return list(pool.map(line_for, tables))  # each table's metadata read through the catalog, a few at a time


def _is_quarantine(table: TableRef, names: set[str]) -> bool:
    base = table.name.removesuffix(QUARANTINE_SUFFIX)
    return base != table.name and f"{table.namespace}.{base}" in names


def _text(lines: list[TableLine]) -> str:
    if not lines:
        return "No tables yet: drop a file into the source bucket (s3://$SOURCE_BUCKET/<table>/...)."
    now = datetime.now(UTC)
    rows = [("table", "rows on main", "last load", "open branches", "quarantined")]
    for line in lines:
        age = "-" if line.last_load is None else f"{line.last_load:%Y-%m-%d %H:%M:%S} ({_ago(now - line.last_load)})"
        on_main = "unreadable" if line.error else "-" if line.rows_on_main is None else f"{line.rows_on_main:,}"
        rows.append((line.table.qualified, on_main, age,
                     str(len(line.open_branches)), "-" if line.quarantined_rows is None else
                     f"{line.quarantined_rows:,}"))
    widths = [max(len(r[i]) for r in rows) for i in range(5)]
    text = "\n".join("  ".join(cell.rjust(w) if i in (1, 3, 4) else cell.ljust(w)
                               for i, (cell, w) in enumerate(zip(row, widths, strict=True))).rstrip() for row in rows)
    for line in lines:
        if line.error is not None:
            text += f"\n{line.table.qualified} could not be read: {line.error}"
    waiting = sum(len(line.open_branches) for line in lines)
    return text + ("\nOpen branches: wap branches; one table's story: wap history TABLE" if waiting else
                   "\nOne table's story: wap history TABLE")


def _ago(delta: timedelta) -> str:
    seconds = max(0, int(delta.total_seconds()))
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{seconds // size}{unit} ago"
    return f"{seconds}s ago"


def cmd_tables(args: argparse.Namespace) -> int:
    from wap_ingest.bootstrap import operator_commands

    lines = table_lines(operator_commands())
    if args.json:
        print(json.dumps({"schema_version": SCHEMA_VERSION, "tables": [line.to_dict() for line in lines]}, indent=2))
    else:
        print(_text(lines))
    return 0


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    tables = sub.add_parser("tables", help="every table: rows on main, last load, open branches, quarantined rows",
                            description="List every table with its rows on main, its last published load, the "
                            "open branches of its rejected files and the rows set aside in its quarantine table "
                            "(read from the catalog and the tables' metadata; no Spark).")
    tables.add_argument("--json", action="store_true")
    tables.set_defaults(func=cmd_tables)

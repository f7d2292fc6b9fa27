"""`wap maintain TABLE|--all [--dry-run]`: compaction, manifest rewrite and the metadata-only snapshot trim of a
table (or every table on main), each through a WAP branch merged into main (core.pipeline.maintain); a table above
its `emr_above_mb` goes to the EMR Serverless job. Then each table's location is swept of the files no reference of
the catalog uses, older than WAP_SWEEP_GRACE_SECONDS (core.pipeline.sweep); `--dry-run` lists them. The function runs
the same thing on its schedule (serverless.yml, `wap-maintain`). Exit 1 when a table failed or its sweep aborted."""

from __future__ import annotations

import argparse
import contextlib
import json
import sys

from wap_ingest.core.errors import WapError
from wap_ingest.core.lake_files import FilesSwept
from wap_ingest.core.maintenance import MaintenanceReport


def _line(report: MaintenanceReport) -> str:
    after = report.after or report.before
    return (f"{report.table}: {report.status} ({report.work.describe()}); data files {report.before.data_files} -> "
            f"{after.data_files}, bytes {report.before.data_bytes} -> {after.data_bytes}, manifests "
            f"{report.before.manifests} -> {after.manifests}, snapshots {report.before.snapshots} -> "
            f"{after.snapshots}" + (f"; attempts {report.attempts}" if report.attempts > 1 else "")
            + (f"; EMR job run {report.job_run}" if report.job_run else "") + _swept(report.swept))


def _swept(swept: FilesSwept | None) -> str:
    """The sweep's line, then one line per file it removed (or, in a dry run, would remove)."""
    if swept is None:
        return ""
    verb = "would remove" if swept.status == "dry run" else "removed"
    return f"\n  files: {swept.describe()}" + "".join(
        f"\n    {verb} {f.path} ({f.size:,} bytes, written {f.modified:%Y-%m-%d %H:%M:%S})" for f in swept.removable)


def _failed(result: MaintenanceReport | WapError) -> bool:
    return isinstance(result, WapError) or (result.swept is not None and result.swept.status == "aborted")


def cmd_maintain(args: argparse.Namespace) -> int:
    from wap_ingest.bootstrap import pipeline_commands

    uses = pipeline_commands()
    table = None if args.all else uses.table(args.table, "wap maintain")
    with contextlib.redirect_stdout(sys.stderr):  # the metrics' EMF documents: stdout is the command's answer
        results = uses.maintain(table, dry_run=args.dry_run)
    failed = [r for r in results if _failed(r)]
    if args.json:
        print(json.dumps({"results": [r.to_dict() if isinstance(r, MaintenanceReport) else {"error": str(r)}
                                      for r in results]}, indent=2))
    else:
        for result in results:
            print(_line(result) if isinstance(result, MaintenanceReport) else f"failed: {result}")
        if not results:
            print("no table on main")
    return 1 if failed else 0


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    maintain = sub.add_parser("maintain", help="compact a table's small files, bound its metadata, remove the files "
                              "no reference uses",
                              description="Compaction of small data files, manifest rewrite and the metadata-only "
                              "snapshot trim, on the thresholds of the table's `maintenance:` settings, through a "
                              "WAP branch merged into main (a concurrent ingestion makes it retry, never lose data). "
                              "Then the files under the table's location that no branch, tag or commit of the "
                              "catalog uses, written more than WAP_SWEEP_GRACE_SECONDS ago, are removed.")
    which = maintain.add_mutually_exclusive_group(required=True)
    which.add_argument("table", nargs="?", help="<table> or <namespace>.<table>")
    which.add_argument("--all", action="store_true", help="every table on main")
    maintain.add_argument("--dry-run", action="store_true", help="say what it would do and list the files it would "
                          "remove; change nothing")
    maintain.add_argument("--json", action="store_true")
    maintain.set_defaults(func=cmd_maintain)

"""`wap audit s3://bucket/key [--table T] [--json]`: a file's audit suite without publishing (a dry run).

Exit code 0 when the file would be published (warnings included), 1 when a check of severity error fails
or the file cannot be ingested. Also renders stored reports for `wap show`.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Mapping
from typing import Any

from wap_ingest.core.dry_run import DryRun, DryRunStatus
from wap_ingest.core.models import SourceObject

from .uris import parse_s3_uri


def audit_report_lines(document: Mapping[str, Any] | None) -> list[str]:
    """The text of a stored run (an outcome's to_dict) for `wap show`: every check, its samples indented."""
    report = (document or {}).get("report")
    if not isinstance(report, Mapping):
        return ["Audit      no stored report for this branch"]
    lines = [f"Audit      {'passed' if report.get('passed') else 'FAILED'} on {report.get('rows')} new rows"
             f" ({(document or {}).get('object', '?')})"]
    for check in report.get("checks") or []:
        lines.append(f"  {str(check.get('status')).upper():7} {check.get('check')}({check.get('target')}): "
                     f"{check.get('measured')} (expected {check.get('expected')}; {check.get('severity', 'error')})")
        for sample in check.get("samples") or []:
            lines.append("            e.g. " + ", ".join(f"{k}={v}" for k, v in sample.items()))
    return lines


def _describe(run: DryRun) -> str:
    lines = [f"{run.status.value.upper():8} {run.source.uri}  table={run.table or '-'} rows={run.rows}"]
    if run.report is not None:
        lines += audit_report_lines({"object": run.source.uri, "report": run.report.to_dict()})[1:]
    lines.append(run.message)
    return "\n".join(lines)


def cmd_audit(args: argparse.Namespace) -> int:
    from wap_ingest.bootstrap import pipeline_commands

    bucket, key = parse_s3_uri(args.uri)
    run = pipeline_commands().audit(SourceObject(bucket, key), args.table)
    print(json.dumps(run.to_dict(), indent=2) if args.json else _describe(run))
    return 0 if run.status is DryRunStatus.PASSED else 1


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    audit = sub.add_parser(
        "audit", help="run a file's audit suite without publishing (a dry run)",
        description="Write the file to a temporary branch, run its table's audit suite, print the report and "
        "delete the branch. main never changes and no alert is sent. Exit code 1 when a check of severity "
        "error fails or the file cannot be ingested.",
    )
    audit.add_argument("uri", help="s3://bucket/key of one file")
    audit.add_argument("--table", help="target table (<table> or <namespace>.<table>) instead of the key's prefix")
    audit.add_argument("--json", action="store_true", help="print the report as JSON")
    audit.set_defaults(func=cmd_audit)

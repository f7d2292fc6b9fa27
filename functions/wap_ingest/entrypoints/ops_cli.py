"""Operator commands for the branches rejected files leave open:

  wap branches [--table T] [--older-than 7d] [--json]   open WAP branches, their tables and ages
  wap prune --older-than 14d [--table T] [--dry-run] [--json]   discard the old ones (one summary alert)
  wap show BRANCH [--json]                     what the branch holds (from Iceberg metadata, no JVM)
  wap publish BRANCH --reason '...' [--json]   merge it into main after review (never forced)
  wap discard BRANCH --reason '...' [--json]   delete it
  wap history TABLE [--json]                   what was published to a table, newest first
"""

from __future__ import annotations

import argparse
import getpass
import json
import os
from dataclasses import asdict
from datetime import UTC, datetime
from typing import Any

from wap_ingest.bootstrap import catalog_for, notifier_for, reader_for, reports_for
from wap_ingest.config import Settings
from wap_ingest.core.alerts import alert_for_prune
from wap_ingest.core.durations import format_age, parse_duration
from wap_ingest.core.models import TableRef
from wap_ingest.core.naming import table_ref_from
from wap_ingest.core.review import (
    Decision,
    OpenBranch,
    discard_branch,
    open_branches,
    prune_branches,
    publish_branch,
    wap_branch,
)
from wap_ingest.entrypoints.audit_cli import audit_report_lines


def _actor() -> str:
    return os.environ.get("WAP_ACTOR") or getpass.getuser()


def _print(payload: Any, as_json: bool, text: str) -> None:
    print(json.dumps(payload, indent=2, default=str) if as_json else text)


def _row(branch: OpenBranch, now: datetime) -> dict[str, Any]:
    age = branch.age(now)
    return {"branch": branch.name, "table": branch.table.qualified, "hash": branch.hash,
            "head_commit_time": branch.head_time.isoformat() if branch.head_time else None,
            "age_seconds": None if age is None else round(age.total_seconds()),
            "age": "?" if age is None else format_age(age)}


def _listing(rows: list[dict[str, Any]], verb: str = "") -> str:
    width = max((len(r["branch"]) for r in rows), default=0)
    return "\n".join(f"{verb}{r['branch']:{width}}  {r['table']}  {r['age']} old" for r in rows)


def _table(args: argparse.Namespace, settings: Settings) -> TableRef | None:
    return table_ref_from(args.table, default_namespace=settings.namespace, source="--table") if args.table else None


def cmd_branches(args: argparse.Namespace) -> int:
    settings = Settings.from_env()
    table = _table(args, settings)
    older_than = None if args.older_than is None else parse_duration(args.older_than)
    now = datetime.now(UTC)
    rows = [_row(b, now) for b in open_branches(catalog_for(settings), now=now, table=table, older_than=older_than)]
    scope = "".join([f" for {table}" if table else "", f" older than {args.older_than}" if older_than else ""])
    _print({"branches": rows}, args.json, _listing(rows) or f"No open WAP branches{scope}.")
    return 0


def cmd_prune(args: argparse.Namespace) -> int:
    settings = Settings.from_env()
    table, older_than = _table(args, settings), parse_duration(args.older_than)  # refused before any change
    reason = f"pruned: older than {args.older_than}"
    catalog = catalog_for(settings)
    now = datetime.now(UTC)
    stale = open_branches(catalog, now=now, table=table, older_than=older_than)
    result = prune_branches(catalog, stale, dry_run=args.dry_run)
    rows = [_row(b, now) for b in result.discarded]
    skipped = [_row(b, now) | {"error": why} for b, why in result.skipped]
    if result.discarded and not args.dry_run:
        notifier_for(settings).notify(alert_for_prune(
            [(b.name, b.table.qualified) for b in result.discarded], reason=reason, actor=_actor(),
            skipped=len(skipped)))
    verb = "would discard  " if args.dry_run else "discarded  "
    lines = [_listing(rows, verb)] if rows else [f"No open WAP branches older than {args.older_than}."]
    lines += [f"left alone  {s['branch']}: {s['error']}" for s in skipped]
    if args.dry_run and rows:
        lines.append(f"Dry run: nothing was deleted. Run without --dry-run to discard ({reason}).")
    payload = {"dry_run": args.dry_run, "older_than": args.older_than, "reason": reason, "actor": _actor(),
               "discarded": [] if args.dry_run else rows, "would_discard": rows if args.dry_run else [],
               "skipped": skipped}
    _print(payload, args.json, "\n".join(lines))
    return 0


def cmd_show(args: argparse.Namespace) -> int:
    settings = Settings.from_env()
    branch, table = wap_branch(catalog_for(settings), args.branch)
    reader = reader_for(settings)
    changes = reader.branch_changes(table, branch.name)
    on_main = reader.row_count(table, settings.main_branch)
    source = changes.summary.get("wap.source.bucket", "?") + "/" + changes.summary.get("wap.source.key", "?")
    payload = {"branch": branch.name, "hash": branch.hash, "table": table.qualified, "source": f"s3://{source}",
               "rows_added": changes.rows_added, "rows_on_main": on_main, "null_counts": changes.null_counts,
               "snapshot_id": changes.snapshot_id}
    stored = reports_for(settings).load(branch.name)  # the audit report of the run that left the branch open
    payload["audit"] = stored
    nulls = ", ".join(f"{c}={n}" for c, n in changes.null_counts.items()) or "-"
    text = "\n".join([
        f"Branch     {branch.name}",
        f"Table      {table}",
        f"Source     s3://{source}",
        f"New rows   {changes.rows_added} on the branch (main has {'no such table' if on_main is None else on_main})",
        f"Nulls      in the new rows: {nulls}",
        *audit_report_lines(stored),
        f"Next       wap publish {branch.name} --reason '...'   |   wap discard {branch.name} --reason '...'",
    ])
    _print(payload, args.json, text)
    return 0


def _decided(decision: Decision, as_json: bool) -> int:
    payload = asdict(decision) | {"table": decision.table.qualified}
    merged = f" (main is now at {decision.merged_hash[:12]})" if decision.merged_hash else ""
    _print(payload, as_json, f"{decision.action} {decision.branch} for {decision.table} by {decision.actor}: "
                             f"{decision.reason}{merged}")
    return 0


def cmd_publish(args: argparse.Namespace) -> int:
    settings = Settings.from_env()
    decision = publish_branch(catalog_for(settings), args.branch, reason=args.reason, actor=_actor(),
                              main=settings.main_branch)
    return _decided(decision, args.json)


def cmd_discard(args: argparse.Namespace) -> int:
    decision = discard_branch(catalog_for(Settings.from_env()), args.branch, reason=args.reason, actor=_actor())
    return _decided(decision, args.json)


def cmd_history(args: argparse.Namespace) -> int:
    settings = Settings.from_env()
    table = table_ref_from(args.table, default_namespace=settings.namespace, source="wap history")
    entries = catalog_for(settings).publications(table, on=settings.main_branch, limit=args.limit)
    lines = []
    for entry in entries:
        props = entry.properties
        if props.get("wap.decision.action") == "published":
            who, why = props.get("wap.decision.actor"), props.get("wap.decision.reason")
            what = f"reviewed publish of branch {props.get('wap.decision.branch')} by {who}: {why}"
        else:
            source = f"s3://{props.get('wap.source.bucket')}/{props.get('wap.source.key')}"
            what = f"published {props.get('wap.rows', '?')} rows from {source} (audit passed)"
        lines.append(f"{entry.committed_at}  {entry.hash[:12]}  {what}")
    text = "\n".join(lines) or f"Nothing has been published to {table} on {settings.main_branch}."
    _print({"table": table.qualified, "entries": [e.to_dict() for e in entries]}, args.json, text)
    return 0


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    history = sub.add_parser("history", help="what was published to a table: objects, rows, time, decisions")
    history.add_argument("table", help="<table> or <namespace>.<table>")
    history.add_argument("--limit", type=int, default=100)
    history.add_argument("--json", action="store_true")
    history.set_defaults(func=cmd_history)
    branches = sub.add_parser("branches", help="list the open WAP branches (rejected files), their tables and ages")
    branches.add_argument("--table", help="only this table (<table> or <namespace>.<table>)")
    branches.add_argument("--older-than", metavar="AGE",
                          help="only branches whose head commit is older: 30m, 12h, 7d, 2w")
    branches.add_argument("--json", action="store_true")
    branches.set_defaults(func=cmd_branches)
    prune = sub.add_parser("prune", help="discard the WAP branches older than a threshold (one summary alert)")
    prune.add_argument("--older-than", metavar="AGE", required=True, help="e.g. 14d (units: m, h, d, w)")
    prune.add_argument("--table", help="only this table's branches")
    prune.add_argument("--dry-run", action="store_true", help="list what would be discarded; change nothing")
    prune.add_argument("--json", action="store_true")
    prune.set_defaults(func=cmd_prune)
    show = sub.add_parser("show", help="what a WAP branch holds: source, new rows, nulls per column")
    show.add_argument("branch")
    show.add_argument("--json", action="store_true")
    show.set_defaults(func=cmd_show)
    publish = sub.add_parser("publish", help="merge a reviewed WAP branch into main (refused on conflict)")
    publish.add_argument("branch")
    publish.add_argument("--reason", required=True, help="why the rows are fine to publish (recorded)")
    publish.add_argument("--json", action="store_true")
    publish.set_defaults(func=cmd_publish)
    discard = sub.add_parser("discard", help="delete a WAP branch")
    discard.add_argument("branch")
    discard.add_argument("--reason", required=True, help="why it is discarded")
    discard.add_argument("--json", action="store_true")
    discard.set_defaults(func=cmd_discard)

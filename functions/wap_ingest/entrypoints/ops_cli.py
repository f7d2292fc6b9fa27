"""Operator commands for the branches rejected files leave open:

  wap branches [--json]                        open WAP branches
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
from typing import Any

from wap_ingest.bootstrap import catalog_for, reader_for
from wap_ingest.config import Settings
from wap_ingest.core.naming import BRANCH_PREFIX, table_from_branch, table_ref_from
from wap_ingest.core.review import Decision, discard_branch, publish_branch, wap_branch


def _actor() -> str:
    return os.environ.get("WAP_ACTOR") or getpass.getuser()


def _print(payload: Any, as_json: bool, text: str) -> None:
    print(json.dumps(payload, indent=2, default=str) if as_json else text)


def cmd_branches(args: argparse.Namespace) -> int:
    catalog = catalog_for(Settings.from_env())
    rows = []
    for branch in catalog.list_branches(f"{BRANCH_PREFIX}-"):
        table = table_from_branch(branch.name)
        if table is not None:
            rows.append({"branch": branch.name, "table": table.qualified, "hash": branch.hash})
    text = "\n".join(f"{r['branch']}  {r['table']}" for r in rows) or "No open WAP branches."
    _print({"branches": rows}, args.json, text)
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
    nulls = ", ".join(f"{c}={n}" for c, n in changes.null_counts.items()) or "-"
    text = "\n".join([
        f"Branch     {branch.name}",
        f"Table      {table}",
        f"Source     s3://{source}",
        f"New rows   {changes.rows_added} on the branch (main has {'no such table' if on_main is None else on_main})",
        f"Nulls      in the new rows: {nulls}",
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
    branches = sub.add_parser("branches", help="list the open WAP branches (rejected files)")
    branches.add_argument("--json", action="store_true")
    branches.set_defaults(func=cmd_branches)
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

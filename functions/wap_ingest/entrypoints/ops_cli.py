"""Operator commands for the branches rejected files leave open:

  wap branches [--table T] [--older-than 7d] [--json]   open WAP branches, their tables and ages
  wap prune --older-than 14d [--table T] [--dry-run] [--json]   discard the old ones (one summary alert)
  wap show BRANCH [--json]                     what the branch holds (from Iceberg metadata, no JVM)
  wap publish BRANCH [--reason '...'] [--json] re-audit its new rows, then merge it into main (never forced)
  wap publish BRANCH --no-reaudit --reason '...'   merge it as it is (the audit override is recorded)
     with WAP_PUBLISH_QUEUE_URL set (an operator under the catalog's roles): the service does it on request
  wap discard BRANCH --reason '...' [--json]   delete it; the decision is recorded in the lake bucket
  wap history TABLE [--json]                   publications and discard decisions, newest first
  wap tables [--json]                          every table: rows on main, last load, open branches, quarantined
  wap schema COMMAND                           the JSON Schema of a command's --json output
  wap dashboard [--port 8501]                  the quality dashboard (Streamlit) on 127.0.0.1

Every --json document follows the schema in entrypoints/ops_schema.py (`schema_version` inside).
"""

from __future__ import annotations

import argparse
import json
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from wap_ingest.core import lineage
from wap_ingest.core.alerts import branch_commands
from wap_ingest.core.durations import format_age, parse_duration
from wap_ingest.core.models import TableRef
from wap_ingest.core.review import Decision, HistoryEntry, OpenBranch, ReauditFailedError
from wap_ingest.entrypoints.audit_cli import audit_report_lines
from wap_ingest.entrypoints.publish_cli import answer_text, ask_service, publish_queue_url

from . import tables_cli
from .foreground import run_in_foreground
from .ops_schema import SCHEMA_VERSION, SCHEMAS

if TYPE_CHECKING:
    from wap_ingest.bootstrap import OperatorCommands


def operator_commands() -> OperatorCommands:
    """The composition root's operator use cases, imported when a command runs: `wap stack ...` and `--help` never
    pay for the adapters' imports (about 0.6 s of CPU per process)."""
    from wap_ingest.bootstrap import operator_commands as build

    return build()


def check_settings() -> None:
    from wap_ingest.bootstrap import check_settings as check

    check()


def _actor(uses: OperatorCommands) -> str:
    """Who the decision log records: the `sub` of the access token this command's OAuth2 client obtains (the
    identity the catalog authorized), else WAP_ACTOR or the login name, marked as unverified (Service.actor)."""
    return uses.actor()


def _print(payload: dict[str, Any], as_json: bool, text: str) -> None:
    document = {"schema_version": SCHEMA_VERSION} | payload
    print(json.dumps(document, indent=2, default=str) if as_json else text)


def _row(branch: OpenBranch, now: datetime) -> dict[str, Any]:
    age = branch.age(now)
    return {"branch": branch.name, "table": branch.table.qualified, "hash": branch.hash,
            "head_commit_time": branch.head_time.isoformat() if branch.head_time else None,
            "age_seconds": None if age is None else round(age.total_seconds()),
            "age": "?" if age is None else format_age(age)}


def _listing(rows: list[dict[str, Any]], verb: str = "") -> str:
    width = max((len(r["branch"]) for r in rows), default=0)
    return "\n".join(f"{verb}{r['branch']:{width}}  {r['table']}  {r['age']} old" for r in rows)


def _table(args: argparse.Namespace, uses: OperatorCommands) -> TableRef | None:
    return uses.table(args.table, "--table") if args.table else None


def cmd_branches(args: argparse.Namespace) -> int:
    uses = operator_commands()
    table = _table(args, uses)
    older_than = None if args.older_than is None else parse_duration(args.older_than)
    now = datetime.now(UTC)
    rows = [_row(b, now) for b in uses.branches(table, older_than)]
    scope = "".join([f" for {table}" if table else "", f" older than {args.older_than}" if older_than else ""])
    running = [run for run in uses.job_runs(table) if not run.finished]
    lines = [_listing(rows) or f"No open WAP branches{scope}."]
    lines += [f"running on EMR  {r.source.uri} -> {r.table}  job run {r.job_run_id} ({r.state}, submitted "
              f"{r.submitted_at})" for r in running]
    _print({"branches": rows, "emr_jobs": [r.to_dict() for r in running]}, args.json, "\n".join(lines))
    return 0


def cmd_prune(args: argparse.Namespace) -> int:
    uses = operator_commands()
    table, older_than = _table(args, uses), parse_duration(args.older_than)  # refused before any change
    reason = f"pruned: older than {args.older_than}"
    now = datetime.now(UTC)
    result = uses.prune(uses.branches(table, older_than), dry_run=args.dry_run, reason=reason, actor=_actor(uses))
    rows = [_row(b, now) for b in result.discarded]
    skipped = [_row(b, now) | {"error": why} for b, why in result.skipped]
    unrecorded = [_row(b, now) | {"error": why} for b, why in result.unrecorded]
    verb = "would discard  " if args.dry_run else "discarded  "
    lines = [_listing(rows, verb)] if rows else [f"No open WAP branches older than {args.older_than}."]
    lines += [f"left alone  {s['branch']}: {s['error']}" for s in skipped]
    lines += [f"NOT RECORDED  {u['branch']} was discarded but not recorded: {u['error']}" for u in unrecorded]
    if args.dry_run and rows:
        lines.append(f"Dry run: nothing was deleted. Run without --dry-run to discard ({reason}).")
    payload = {"dry_run": args.dry_run, "older_than": args.older_than, "reason": reason, "actor": _actor(uses),
               "discarded": [] if args.dry_run else rows, "would_discard": rows if args.dry_run else [],
               "skipped": skipped, "unrecorded": unrecorded}
    _print(payload, args.json, "\n".join(lines))
    return 1 if unrecorded else 0


def cmd_show(args: argparse.Namespace) -> int:
    uses = operator_commands()
    branch, table = uses.wap_branch(args.branch)
    changes = uses.branch_changes(table, branch.name)
    on_main = uses.rows_on_main(table)
    source = changes.summary.get(lineage.BUCKET, "?") + "/" + changes.summary.get(lineage.KEY, "?")
    commands = dict(branch_commands(branch.name, table.qualified))
    payload = {"branch": branch.name, "hash": branch.hash, "table": table.qualified, "source": f"s3://{source}",
               "rows_added": changes.rows_added, "rows_on_main": on_main, "null_counts": changes.null_counts,
               "snapshot_id": changes.snapshot_id, "commands": commands}
    stored = uses.report(branch.name)  # the audit report of the run that left the branch open
    payload["audit"] = stored
    nulls = ", ".join(f"{c}={n}" for c, n in changes.null_counts.items()) or "-"
    text = "\n".join([
        f"Branch     {branch.name}",
        f"Table      {table}",
        f"Source     s3://{source}",
        f"New rows   {changes.rows_added} on the branch (main has {'no such table' if on_main is None else on_main})",
        f"Nulls      in the new rows: {nulls}",
        *audit_report_lines(stored),
        *[f"{label:<22} {command}" for label, command in commands.items() if label != "Inspect"],
    ])
    _print(payload, args.json, text)
    return 0


def _decision_payload(decision: Decision) -> dict[str, Any]:
    return {"branch": decision.branch, "table": decision.table.qualified, "action": decision.action,
            "reason": decision.reason, "actor": decision.actor, "merged_hash": decision.merged_hash,
            "already": decision.already, "reaudit": decision.reaudit.to_dict() if decision.reaudit else None,
            "source": decision.source, "recorded_at": decision.recorded_at}


def _decided(decision: Decision, as_json: bool) -> int:
    if decision.already:
        where = f" (commit {decision.merged_hash[:12]})" if decision.merged_hash else ""
        text = (f"{decision.branch} was already {decision.action}{where} by {decision.actor}: {decision.reason}. "
                f"Nothing to do.")
    else:
        merged = f" (main is now at {decision.merged_hash[:12]})" if decision.merged_hash else ""
        audited = ""
        if decision.reaudit is not None:
            audited = f"\nre-audit passed: {decision.reaudit.rows} rows, {len(decision.reaudit.checks)} checks"
        elif decision.action == "published":
            audited = "\nnot re-audited (--no-reaudit): the override is recorded on the merge commit"
        recorded = f"\nrecorded at {decision.recorded_at}" if decision.recorded_at else ""
        text = (f"{decision.action} {decision.branch} for {decision.table} by {decision.actor}: {decision.reason}"
                f"{merged}{audited}{recorded}")
    _print(_decision_payload(decision), as_json, text)
    return 0


def cmd_publish(args: argparse.Namespace) -> int:
    uses = operator_commands()
    queue_url = publish_queue_url()
    if queue_url is not None:  # an operator: the service publishes (the operator has no write on main)
        answer = ask_service(args, uses.requests, queue_url)
        if answer is None:
            return 2
        if answer.get("action") == "refused":
            print(f"wap: {answer.get('error')}", file=sys.stderr)
            if args.json:
                _print(answer, True, "")
            return 1
        _print(answer, args.json, answer_text(answer))
        return 0
    try:
        decision = uses.publish(args.branch, reason=args.reason, actor=_actor(uses), reaudit=args.reaudit)
    except ReauditFailedError as exc:
        if not args.json:
            raise
        print(f"wap: {exc}", file=sys.stderr)
        _print({"branch": args.branch, "table": exc.report.table, "action": "refused", "reason": args.reason,
                "actor": _actor(uses), "merged_hash": None, "already": False, "reaudit": exc.report.to_dict(),
                "source": None, "recorded_at": None, "error": str(exc)}, True, "")
        return 1
    return _decided(decision, args.json)


def cmd_discard(args: argparse.Namespace) -> int:
    uses = operator_commands()
    decision = uses.discard(args.branch, reason=args.reason, actor=_actor(uses))
    return _decided(decision, args.json)


def _history_line(entry: HistoryEntry) -> str:
    when = entry.at.strftime("%Y-%m-%d %H:%M:%S")
    if entry.action == "discarded":
        what = f"discarded branch {entry.branch} ({entry.how}) by {entry.actor}: {entry.reason}"
        if entry.source:
            what += f" [{entry.source}]"
        return f"{when}  {'-':12}  {what}"
    if entry.action == "maintained":
        return f"{when}  {(entry.hash or '?')[:12]:12}  maintained: {entry.how}"
    if entry.action == "swept":  # `wap maintain` removed files no reference uses (core.pipeline.sweep)
        return f"{when}  {'-':12}  swept by {entry.actor}: {entry.reason}"
    if entry.how == "reviewed":
        audit = "re-audit passed" if entry.reaudit == "passed" else "published without re-audit"
        what = f"reviewed publish of branch {entry.branch} by {entry.actor} ({audit}): {entry.reason}"
    else:
        what = f"published {entry.rows if entry.rows is not None else '?'} rows from {entry.source} (audit passed)"
    if entry.write:
        what += f"; {entry.write}"
    if entry.properties.get(lineage.QUARANTINED_ROWS):
        what += (f"; {entry.properties[lineage.QUARANTINED_ROWS]} rows quarantined in "
                 f"{entry.properties.get(lineage.QUARANTINE_TABLE, '?')}")
    return f"{when}  {(entry.hash or '?')[:12]:12}  {what}"


def cmd_history(args: argparse.Namespace) -> int:
    uses = operator_commands()
    table = uses.table(args.table, "wap history")
    entries = uses.history(table, limit=args.limit)
    runs = uses.job_runs(table)
    text = "\n".join(_history_line(e) for e in entries) or (
        f"Nothing has been published to or discarded from {table} on {uses.main}.")
    if runs:
        text += "\nLarge files on EMR Serverless:\n" + "\n".join(
            f"{r.submitted_at}  job run {r.job_run_id}  {r.source.uri}  "
            f"{r.outcome or ('running on EMR (' + r.state + ')')}{'  branch ' + r.branch if r.branch else ''}"
            for r in runs)
    _print({"table": table.qualified, "entries": [e.to_dict() for e in entries],
            "emr_jobs": [r.to_dict() for r in runs]}, args.json, text)
    return 0


def cmd_schema(args: argparse.Namespace) -> int:
    print(json.dumps(SCHEMAS[args.name], indent=2))
    return 0


def cmd_dashboard(args: argparse.Namespace) -> int:
    """Runs until interrupted (Ctrl-C, SIGTERM), which stops the Streamlit server too (entrypoints/foreground.py).
    Settings are checked first so that a missing variable fails here, clearly."""
    check_settings()
    app = Path(__file__).resolve().parents[1] / "dashboard" / "app.py"
    command = [sys.executable, "-m", "streamlit", "run", str(app), "--server.address", "127.0.0.1",
               "--server.port", str(args.port), "--server.headless", "true",
               "--browser.gatherUsageStats", "false", "--client.toolbarMode", "viewer"]
    print(f"wap dashboard: http://127.0.0.1:{args.port}/  (Ctrl-C stops it)", flush=True)
    return run_in_foreground(command)


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    tables_cli.register(sub)
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
    publish = sub.add_parser(
        "publish", help="re-audit a WAP branch's new rows, then merge it into main (refused on conflict)",
        description="Re-runs the table's audit suite (WAP_AUDITS_FILE) on the rows the branch's file added and "
        "merges only if it passes; --no-reaudit merges as it is and needs --reason. Who and why are recorded on "
        "the merge commit. Publishing a branch that is already on main says so and exits 0.")
    publish.add_argument("branch")
    publish.add_argument("--reason", help="why the rows are fine to publish (recorded; required with --no-reaudit)")
    publish.add_argument("--reaudit", action=argparse.BooleanOptionalAction, default=True,
                         help="re-run the audit on the branch's new rows first (default; starts Spark)")
    publish.add_argument("--wait", type=float, default=900.0,
                         help="with WAP_PUBLISH_QUEUE_URL: seconds to wait for the service's answer (default 900)")
    publish.add_argument("--json", action="store_true")
    publish.set_defaults(func=cmd_publish)
    discard = sub.add_parser("discard", help="delete a WAP branch and record the decision (wap history shows it)")
    discard.add_argument("branch")
    discard.add_argument("--reason", required=True, help="why it is discarded")
    discard.add_argument("--json", action="store_true")
    discard.set_defaults(func=cmd_discard)
    schema = sub.add_parser("schema", help="print the JSON Schema of an ops command's --json output")
    schema.add_argument("name", choices=sorted(SCHEMAS))
    schema.set_defaults(func=cmd_schema)
    dashboard = sub.add_parser("dashboard", help="the quality dashboard (Streamlit) on 127.0.0.1")
    dashboard.add_argument("--port", type=int, default=8501)
    dashboard.set_defaults(func=cmd_dashboard)

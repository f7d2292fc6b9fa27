"""`wap`: the command line. Thin: parse arguments, call the use cases the composition root hands each command family
(bootstrap/commands.py), print, exit.

  wap ingest s3://bucket/key-or-prefix [--table NAME] [--json]   one-off / backfill ingestion
  wap audit s3://bucket/key [--table NAME] [--json]              a file's audit suite, not published
  wap branches | show | publish | discard                         the branches rejected files leave open
  wap stack up|down|status|env|alerts                            the local stack
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from collections.abc import Sequence
from typing import Any

from wap_ingest.core.errors import ConfigError, WapError
from wap_ingest.core.ingest import Item
from wap_ingest.core.models import IngestOutcome, OutcomeStatus, TableRef

from . import audit_cli, dlq_cli, maintain_cli, ops_cli
from .uris import parse_s3_uri


def _describe(outcome: IngestOutcome) -> str:
    audit = "-" if outcome.report is None else ("passed" if outcome.report.passed else "failed")
    head = (
        f"{outcome.status.value.upper():9} {outcome.source.uri}\n"
        f"          table={outcome.table or '-'} branch={outcome.branch or '-'} rows={outcome.rows} audit={audit}"
    )
    lines = [head]
    if outcome.report is not None:
        lines += [
            f"          {c.status.value:6} {c.check}({c.target}): {c.measured} (expected {c.expected})"
            for c in outcome.report.checks
        ]
    if outcome.status is not OutcomeStatus.PUBLISHED:
        lines.append(f"          {outcome.message}")
    elif outcome.attempts > 1:
        lines.append(f"          published after {outcome.attempts - 1} merge conflict(s) retried on a fresh branch")
    return "\n".join(lines)


def cmd_ingest(args: argparse.Namespace) -> int:
    from wap_ingest.bootstrap import pipeline_commands

    uses = pipeline_commands()
    table: TableRef | None = uses.table(args.table, "--table") if args.table else None
    sources = uses.sources(*parse_s3_uri(args.uri), args.uri)
    outcomes: list[IngestOutcome] = []
    for start in range(0, len(sources), INGEST_CHUNK):  # the pipeline's batches, with progress in between
        chunk = sources[start:start + INGEST_CHUNK]
        for source, result in zip(chunk, uses.ingest([Item(s, table=table) for s in chunk]), strict=True):
            outcome = result if isinstance(result, IngestOutcome) else IngestOutcome(
                source=source, status=OutcomeStatus.FAILED, message=str(result))
            outcomes.append(outcome)
            if not args.json:
                print(_describe(outcome), flush=True)
    counts = {s: sum(1 for o in outcomes if o.status is s) for s in OutcomeStatus}
    if args.json:
        print(json.dumps({"outcomes": [o.to_dict() for o in outcomes]}, indent=2))
    else:
        print(", ".join(f"{n} {s.value}" for s, n in counts.items() if n or s in _ALWAYS_SHOWN))
    done = sum(counts[s] for s in (OutcomeStatus.PUBLISHED, OutcomeStatus.DUPLICATE, OutcomeStatus.SUBMITTED,
                                   OutcomeStatus.WAITING))  # waiting: a load's file, ingested with its manifest
    return 0 if done == len(outcomes) else 1


INGEST_CHUNK = 100
_ALWAYS_SHOWN = (OutcomeStatus.PUBLISHED, OutcomeStatus.REJECTED, OutcomeStatus.INVALID, OutcomeStatus.DUPLICATE,
                 OutcomeStatus.FAILED)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="wap", description="Write-Audit-Publish ingestion for Iceberg on Nessie.")
    parser.add_argument("-v", "--verbose", action="store_true", help="log pipeline steps to stderr")
    sub = parser.add_subparsers(dest="command", required=True)
    ingest = sub.add_parser(
        "ingest",
        help="ingest existing objects (one-off or backfill)",
        description="Run the WAP pipeline over an object, or every object under a prefix. Exit code 1 "
        "when any file was rejected, invalid or failed.",
    )
    ingest.add_argument("uri", help="s3://bucket/key or s3://bucket/prefix/")
    ingest.add_argument("--table", help="target table (<table> or <namespace>.<table>) instead of the key's prefix")
    ingest.add_argument("--json", action="store_true", help="print the outcomes as JSON")
    ingest.set_defaults(func=cmd_ingest)
    audit_cli.register(sub)
    dlq_cli.register(sub)
    maintain_cli.register(sub)
    ops_cli.register(sub)
    _register_stack(sub)
    return parser


def _register_stack(sub: Any) -> None:
    """`wap stack ...`: the local development stack (the wap_stack package), where it is installed; the Lambda image
    and the EMR job carry the service only."""
    try:
        from wap_stack import cli as stack_cli
    except ImportError:
        return
    stack_cli.register(sub)


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(
        level=logging.INFO if args.verbose else logging.WARNING, stream=sys.stderr,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    try:
        code: int = args.func(args)
        return code
    except ConfigError as exc:
        print(f"wap: {exc}", file=sys.stderr)
        return 2
    except WapError as exc:
        print(f"wap: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    raise SystemExit(main())

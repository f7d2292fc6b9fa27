"""The `--json` output of the ops commands: one JSON Schema (draft 2020-12) per command, the stable contract
for scripts. `wap schema COMMAND` prints one. Every document carries `schema_version`; a key is only ever
added within a version (scripts must ignore keys they do not know); renaming or removing one bumps it.

  wap branches --json   {"schema_version", "branches": [BRANCH], "emr_jobs": [JOB] (large files still running)}
  wap prune --json      {"schema_version", "dry_run", "older_than", "reason", "actor",
                         "discarded": [BRANCH], "would_discard": [BRANCH], "skipped": [BRANCH + "error"],
                         "unrecorded": [BRANCH + "error"]}
  wap show --json       {"schema_version", "branch", "hash", "table", "source", "rows_added", "rows_on_main",
                         "null_counts": {column: int}, "snapshot_id", "commands": {label: command}}
  wap publish --json    DECISION (action "published"), or on a failed re-audit (exit 1) action "refused"
                         with "error" and the "reaudit" report
  wap discard --json    DECISION (action "discarded")
  wap history --json    {"schema_version", "table", "entries": [ENTRY], "emr_jobs": [JOB]}, newest first
  wap tables --json     {"schema_version", "tables": [{"table", "rows_on_main", "last_load", "last_source",
                         "open_branches": [branch name], "quarantined_rows", "error"}]}
"""

from __future__ import annotations

from typing import Any

SCHEMA_VERSION = 1

_STR = {"type": "string"}
_OPT_STR = {"type": ["string", "null"]}
_OPT_INT = {"type": ["integer", "null"]}


def _object(properties: dict[str, Any], extra: bool = True) -> dict[str, Any]:
    return {"type": "object", "required": sorted(properties), "properties": properties,
            "additionalProperties": extra}


def _document(properties: dict[str, Any]) -> dict[str, Any]:
    return {"$schema": "https://json-schema.org/draft/2020-12/schema",
            **_object({"schema_version": {"const": SCHEMA_VERSION}} | properties)}


BRANCH = _object({"branch": _STR, "table": _STR, "hash": _STR, "head_commit_time": _OPT_STR,
                  "age_seconds": _OPT_INT, "age": _STR})
BRANCH_WITH_ERROR = {"allOf": [BRANCH, _object({"error": _STR})]}
CHECK = _object({"check": _STR, "target": _STR, "status": {"enum": ["passed", "failed", "warned"]}, "measured": _STR,
                 "expected": _STR})
REPORT = _object({"table": _STR, "rows": {"type": "integer"}, "passed": {"type": "boolean"},
                  "checks": {"type": "array", "items": CHECK}})
DECISION = _document({
    "branch": _STR, "table": _STR, "action": {"enum": ["published", "discarded", "refused"]}, "reason": _OPT_STR,
    "actor": _STR, "merged_hash": _OPT_STR, "already": {"type": "boolean"},
    "reaudit": {"anyOf": [{"type": "null"}, REPORT]}, "source": _OPT_STR, "recorded_at": _OPT_STR,
})
ENTRY = _object({
    "at": _STR, "action": {"enum": ["published", "discarded", "maintained", "swept"]}, "how": _STR,
    "branch": _OPT_STR, "actor": _OPT_STR,
    "reason": _OPT_STR, "source": _OPT_STR, "rows": _OPT_INT, "hash": _OPT_STR, "reaudit": _OPT_STR,
    "properties": {"type": "object", "additionalProperties": _STR}, "write": _OPT_STR,
})

JOB = _object({"job_run_id": _STR, "application_id": _STR, "object": _STR, "table": _STR, "state": _STR,
               "submitted_at": _STR, "outcome": _OPT_STR, "branch": _OPT_STR})

SCHEMAS: dict[str, dict[str, Any]] = {
    "branches": _document({"branches": {"type": "array", "items": BRANCH},
                           "emr_jobs": {"type": "array", "items": JOB}}),
    "prune": _document({
        "dry_run": {"type": "boolean"}, "older_than": _STR, "reason": _STR, "actor": _STR,
        "discarded": {"type": "array", "items": BRANCH}, "would_discard": {"type": "array", "items": BRANCH},
        "skipped": {"type": "array", "items": BRANCH_WITH_ERROR},
        "unrecorded": {"type": "array", "items": BRANCH_WITH_ERROR},
    }),
    "show": _document({
        "branch": _STR, "hash": _STR, "table": _STR, "source": _OPT_STR, "rows_added": {"type": "integer"},
        "rows_on_main": _OPT_INT, "null_counts": {"type": "object", "additionalProperties": {"type": "integer"}},
        "snapshot_id": _OPT_INT, "commands": {"type": "object", "additionalProperties": _STR},
    }),
    "publish": DECISION,
    "discard": DECISION,
    "history": _document({"table": _STR, "entries": {"type": "array", "items": ENTRY},
                          "emr_jobs": {"type": "array", "items": JOB}}),
    "tables": _document({"tables": {"type": "array", "items": _object({
        "table": _STR, "rows_on_main": _OPT_INT, "last_load": _OPT_STR, "last_source": _OPT_STR,
        "open_branches": {"type": "array", "items": _STR}, "quarantined_rows": _OPT_INT, "error": _OPT_STR})}}),
}

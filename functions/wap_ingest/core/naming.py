"""Pure converters from object keys to table identifiers (formats: core.formats; branch names: core.branches).

Identifiers that come from object keys are validated here before anything reaches SQL: a table or
namespace name is `[a-z_][a-z0-9_]*` (at most 128 characters), compared case-insensitively.
"""

from __future__ import annotations

import re

from .audit_results import RESULTS_NAMESPACE
from .errors import InvalidTableNameError
from .ledger import LEDGER_NAMESPACE
from .models import QUARANTINE_SUFFIX, TableRef

_IDENTIFIER = re.compile(r"^[a-z_][a-z0-9_]{0,127}$")
PENDING_PREFIX = "_pending/"  # a multi-table load's files: ingested with their manifest, never on their own
LOADS_PREFIX = "_loads/"  # multi-table load manifests (core.pipeline.loads)
RESERVED = {LEDGER_NAMESPACE: "the service's exactly-once ledger",
            RESULTS_NAMESPACE: "the service's audit results tables (one per audited table, written with its loads)"}


def identifier_from(raw: str, *, what: str, source: str) -> str:
    """Validate one identifier part; the error says which object and suggests a valid name."""
    candidate = raw.strip().lower()
    if _IDENTIFIER.match(candidate):
        return candidate
    suggestion = re.sub(r"[^a-z0-9_]", "_", candidate)[:128] or "my_table"
    if not re.match(r"^[a-z_]", suggestion):
        suggestion = f"t_{suggestion}"[:128]
    raise InvalidTableNameError(
        f"{source}: {what} {raw!r} is not a valid identifier (letters, digits and underscores, not "
        f"starting with a digit, at most 128 characters). Fix: upload under a prefix such as "
        f"'{suggestion}/' or pass --table."
    )


def table_ref_from(name: str, *, default_namespace: str, source: str, results: bool = False) -> TableRef:
    """`name` or `namespace.name` -> a validated TableRef. `results`: an audit results table may be named (an
    operator reading or maintaining one; never a target to write)."""
    parts = name.split(".")
    if len(parts) == 1:
        return TableRef(default_namespace, identifier_from(parts[0], what="table name", source=source))
    if len(parts) == 2:
        namespace = identifier_from(parts[0], what="namespace", source=source)
        if namespace in RESERVED and not (results and namespace == RESULTS_NAMESPACE):
            raise InvalidTableNameError(f"{source}: namespace {namespace!r} is reserved for {RESERVED[namespace]}. "
                                        f"Fix: use another namespace.")
        return TableRef(namespace, identifier_from(parts[1], what="table name", source=source))
    raise InvalidTableNameError(
        f"{source}: {name!r} has {len(parts)} dot-separated parts. Fix: name it '<table>' or "
        f"'<namespace>.<table>'."
    )


def table_for_key(key: str, *, default_namespace: str, bucket: str = "") -> TableRef:
    """Route `<table>/...` (or `<namespace>.<table>/...`) to its table."""
    source = f"s3://{bucket}/{key}" if bucket else key
    segments = [s for s in key.split("/") if s]
    if len(segments) < 2:
        raise InvalidTableNameError(
            f"{source}: the key has no table prefix, so no table can be chosen. Fix: upload it as "
            f"'<table>/{segments[-1] if segments else 'file.parquet'}', or pass --table to `wap ingest`."
        )
    return table_ref_from(segments[0], default_namespace=default_namespace, source=source)


def check_target(table: TableRef, source: str) -> None:
    """Refuse, as the file's fault, a target table the service owns: the ledger's and the audit results' namespaces,
    and every
    `<table>_quarantine` (only the service writes a quarantine table, with the rows it sets aside)."""
    if table.namespace in RESERVED:
        raise InvalidTableNameError(
            f"{source}: namespace {table.namespace!r} is reserved for {RESERVED[table.namespace]}; nothing was read. "
            f"Fix: use another namespace.")
    if table.name.endswith(QUARANTINE_SUFFIX):
        raise InvalidTableNameError(
            f"{source}: table {table} is a quarantine table, which only the service writes (the rows a table with "
            f"`on_failure: quarantine` sets aside); nothing was read. Fix: send the file to "
            f"{table.name.removesuffix(QUARANTINE_SUFFIX) or '<table>'}, or rename the target table.")

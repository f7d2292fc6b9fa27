"""Pure converters from object keys to table identifiers and branch names (formats: core.formats).

Identifiers that come from object keys are validated here before anything reaches SQL: a table or
namespace name is `[a-z_][a-z0-9_]*` (at most 128 characters), compared case-insensitively.
"""

from __future__ import annotations

import hashlib
import re
import secrets

from .errors import InvalidTableNameError
from .ledger import LEDGER_NAMESPACE
from .models import SourceObject, TableRef

_IDENTIFIER = re.compile(r"^[a-z_][a-z0-9_]{0,127}$")
BRANCH_PREFIX = "wap"
PENDING_PREFIX = "_pending/"  # a multi-table load's files: ingested with their manifest, never on their own
LOADS_PREFIX = "_loads/"  # multi-table load manifests (core.pipeline.loads)


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


def table_ref_from(name: str, *, default_namespace: str, source: str) -> TableRef:
    """`name` or `namespace.name` -> a validated TableRef."""
    parts = name.split(".")
    if len(parts) == 1:
        return TableRef(default_namespace, identifier_from(parts[0], what="table name", source=source))
    if len(parts) == 2:
        namespace = identifier_from(parts[0], what="namespace", source=source)
        if namespace == LEDGER_NAMESPACE:
            raise InvalidTableNameError(
                f"{source}: namespace {LEDGER_NAMESPACE!r} is reserved for the service's exactly-once ledger. "
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


def identity_digest(identity: str) -> str:
    """The part of a WAP branch name that stands for its source identity."""
    return hashlib.sha256(identity.encode("utf-8")).hexdigest()[:16]


def source_digest(source: SourceObject) -> str:
    return identity_digest(source.identity)


def digest_from_branch(name: str) -> str | None:
    """The source digest in a WAP branch name (`wap-<namespace>-<table>-<digest>-<attempt>`), or None."""
    return name.split("-")[3] if table_from_branch(name) is not None else None


def branch_prefix_for(table: TableRef, source: SourceObject) -> str:
    """Deterministic per object version: every attempt at it has a branch under this prefix, so a retry
    of the same event finds the earlier attempts."""
    return f"{BRANCH_PREFIX}-{table.namespace}-{table.name}-{source_digest(source)}"


def branch_name_for(table: TableRef, source: SourceObject, attempt: str | None = None) -> str:
    """One branch per attempt: two workers handling the same object (a duplicate delivery) never write to
    the same branch, so a branch never holds the file twice.

    Only letters, digits, `_` and `-`: Nessie accepts `/` in reference names, but its REST paths (and
    pynessie, which puts names into paths unescaped) do not handle them, so `-` separates the parts.
    Identifiers never contain `-`, so `wap-<namespace>-<table>-<digest>-<attempt>` parses back unambiguously.
    """
    return f"{branch_prefix_for(table, source)}-{attempt or secrets.token_hex(4)}"


def table_from_branch(name: str) -> TableRef | None:
    """The table a WAP branch belongs to, or None if `name` is not a WAP branch."""
    parts = name.split("-")
    if len(parts) != 5 or parts[0] != BRANCH_PREFIX:
        return None
    if not (_IDENTIFIER.match(parts[1]) and _IDENTIFIER.match(parts[2])):
        return None
    return TableRef(parts[1], parts[2])

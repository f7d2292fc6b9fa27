"""Commits the service did not make, on a real Nessie, for the tests of what a merge may carry (issue 33, item 3):
through REST API v2 with the caller's own credentials (a NessieBranches adapter built for a role, or without
authentication), as anyone holding them could: a table pointed back at its previous metadata file, a planted ledger
entry, an extra table."""

from __future__ import annotations

from typing import Any

from wap_ingest.adapters.catalog.nessie import NessieBranches
from wap_ingest.core.ledger import LEDGER_NAMESPACE, entry_for
from wap_ingest.core.models import TableRef

Key = tuple[str, ...]


def content(catalog: NessieBranches, ref: str, key: Key) -> dict[str, Any]:
    """The content at `key` on `ref` (`name` or `name@hash`), as Nessie stores it."""
    found = catalog._v2("post", f"trees/{ref}/contents", "reading a content",
                        {"requestedKeys": [{"elements": list(key)}]})
    (entry,) = found["contents"]
    return dict(entry["content"])


def commit(catalog: NessieBranches, branch: str, key: Key, value: dict[str, Any] | None, message: str) -> str:
    """One commit of `value` at `key` on `branch` (None: delete the key), at its current head; the new head."""
    operation = {"type": "DELETE", "key": {"elements": list(key)}} if value is None else {
        "type": "PUT", "key": {"elements": list(key)}, "content": value}
    head = catalog.reference_hash(branch)
    done = catalog._v2("post", f"trees/{branch}@{head}/history/commit", f"committing on {branch}",
                       {"commitMeta": {"message": message}, "operations": [operation]})
    return str(done["targetBranch"]["hash"])


def previous_metadata(catalog: NessieBranches, table: TableRef) -> dict[str, Any]:
    """`table` as main held it one publication ago: the same table (content id), its previous metadata file."""
    newest, older = catalog.publications(table, limit=2)[:2]
    now = content(catalog, f"main@{newest.hash}", (table.namespace, table.name))
    then = content(catalog, f"main@{older.hash}", (table.namespace, table.name))
    assert then["id"] == now["id"] and then["metadataLocation"] != now["metadataLocation"], (then, now)
    return then


def planted_entry(table: TableRef, identity: str) -> tuple[Key, dict[str, Any]]:
    """A ledger entry saying `identity` was published into `table` (the service would skip it as a duplicate)."""
    entry = entry_for(table, identity, f"s3://source/{identity}", 100, "wap-planted", 0.0)
    return (LEDGER_NAMESPACE, entry.key), {"type": "NAMESPACE", "elements": [LEDGER_NAMESPACE, entry.key],
                                           "properties": entry.properties()}


def extra_table(catalog: NessieBranches, ref: str, table: TableRef) -> dict[str, Any]:
    """A new table (a new content id) pointing at `table`'s current metadata file on `ref`."""
    found = content(catalog, ref, (table.namespace, table.name))
    return {k: v for k, v in found.items() if k != "id"}


def attack(catalog: NessieBranches, branch: str, what: str, table: TableRef, main: NessieBranches | None = None
           ) -> tuple[str, str]:
    """One change the service did not make on `branch`: `rollback` (the table at the metadata file it had before:
    for a branch made from main, main's previous one; for a branch that appended to it, main's current one), `ledger`
    (a planted entry) or `table` (an extra table); main is read with `main` (default `catalog`). Returns the key's
    name and the commit's hash."""
    reader = main or catalog
    key: Key = (table.namespace, table.name)
    if what == "rollback":
        on_main = content(reader, "main", key)
        value = previous_metadata(reader, table) if content(catalog, branch, key) == on_main else on_main
    elif what == "ledger":
        key, value = planted_entry(table, f"source/{table.name}/future.parquet#e9")
    else:
        key, value = (table.namespace, f"{table.name}_extra"), extra_table(reader, "main", table)
    return ".".join(key), commit(catalog, branch, key, value, f"by hand: {what}")

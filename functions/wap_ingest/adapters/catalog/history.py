"""What a Nessie branch changed and who committed it, read with REST API v2 for NessieBranches
(adapters/catalog/nessie.py): the diff since a base hash (`GET /api/v2/trees/{branch}@{base}/diff/{branch}`: every key
whose content differs, with both contents) and the branch's log with each commit's operations (`GET
/api/v2/trees/{branch}/history?fetch=ALL`). Both are paged by Nessie; every page goes through the caller's REST v2
call, so every failure is judged by the one Nessie table (adapters/catalog/errors.py). Nessie answers for a hash on a
reference without checking it is in that reference's history: the caller checks ancestry from the log where it matters
(core.merge_plan.log_problems).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

from wap_ingest.core.merge_plan import Change, Changes, CommitInfo, Content, Key

PAGE = 250  # the most entries Nessie returns in one page of a log


class V2Call(Protocol):
    def __call__(self, method: str, path: str, doing: str, body: Mapping[str, Any] | None = None, *,
                 params: Mapping[str, str] | None = None) -> dict[str, Any]: ...


def changes(call: V2Call, name: str, base: str) -> Changes:
    """What branch `name` changed since `base`, read at its head (later pages at the first page's head)."""
    doing = f"reading what branch {name!r} changed since {base[:12]}"
    found: list[Change] = []
    to, head = name, ""
    params: dict[str, str] = {}
    while True:
        page = call("get", f"trees/{name}@{base}/diff/{to}", doing, params=params)
        head = head or str((page.get("effectiveToReference") or {}).get("hash") or "")
        to = f"{name}@{head}" if head else name
        found += [Change(_key(d.get("key")), content_from(d.get("from")), content_from(d.get("to")))
                  for d in page.get("diffs") or [] if isinstance(d, dict)]
        if not page.get("hasMore") or not page.get("token"):
            return Changes(head, tuple(found))
        params = {"page-token": str(page["token"])}


def commits(call: V2Call, name: str, until: str | None, limit: int) -> list[CommitInfo]:
    """The commits of `name`, newest first, down to `until` (excluded) or `limit` of them."""
    doing = f"reading the commits of branch {name!r}"
    params = {"fetch": "ALL", "max-records": str(max(1, min(limit, PAGE)))} | ({"limit-hash": until} if until else {})
    found: list[CommitInfo] = []
    while len(found) < limit:
        page = call("get", f"trees/{name}/history", doing, params=params)
        for entry in page.get("logEntries") or []:
            commit = _commit(entry)
            if commit.hash == until or len(found) == limit:
                return found
            found.append(commit)
        if not page.get("hasMore") or not page.get("token"):
            break
        params = params | {"page-token": str(page["token"])}
    return found


def content_from(payload: Any) -> Content | None:
    """A Nessie content object (an Iceberg table, a namespace, ...) as the check reads it; None for no content."""
    if not isinstance(payload, dict):
        return None
    snapshot = payload.get("snapshotId")
    found = payload.get("properties")
    properties: Mapping[str, Any] = found if isinstance(found, dict) else {}
    return Content(str(payload.get("type") or "UNKNOWN"), _text(payload.get("id")),
                   _text(payload.get("metadataLocation")), snapshot if isinstance(snapshot, int) else None,
                   tuple(sorted((str(k), str(v)) for k, v in properties.items())))


def _commit(entry: Mapping[str, Any]) -> CommitInfo:
    meta = entry.get("commitMeta") or {}
    properties = {k: v[-1] for k, v in (meta.get("allProperties") or {}).items() if v} or dict(
        meta.get("properties") or {})
    keys = tuple(_key(op.get("key")) for op in entry.get("operations") or [] if isinstance(op, dict))
    parent = entry.get("parentCommitHash") or next(iter(meta.get("parentCommitHashes") or []), None)
    return CommitInfo(str(meta.get("hash")), _text(parent), str(meta.get("committer") or ""),
                      str(meta.get("message") or ""), properties, keys)


def _key(payload: Any) -> Key:
    elements = payload.get("elements") if isinstance(payload, dict) else None
    return tuple(str(e) for e in elements) if isinstance(elements, list) else ()


def _text(value: Any) -> str | None:
    return None if value is None else str(value)

"""What the catalog keeps alive, read from Nessie's REST API v2 for the lake's file sweep (core.lake_files): every
reference (branches and tags: `GET /api/v2/trees`), and every commit in each one's history with its operations
(`GET /api/v2/trees/@<hash>/history?fetch=ALL`), giving every Iceberg metadata file a live commit names.

Every commit counts, not only each reference's head: Nessie keeps a table's history in its own commits (its Iceberg
REST endpoint serves one snapshot per table, and the service trims the snapshot list of the current metadata), so an
older commit of main is the only way to the snapshots it named, and reading a table at a Nessie commit hash is time
travel that must keep working. A merge commit carries the merged contents, so walking the first parents of each
reference sees what was merged into it; a walk stops at a commit another walk already read (their history is shared).

Races: a reference is walked from the hash it was listed at (as a detached `@<hash>`, readable even once the branch is
deleted), and the references are listed twice, before and after the walks, the second listing's new heads walked too.
Contents only move between references by a merge into a reference whose history is kept, before the source is
deleted, so a content live when the reading began is seen by one of the two listings.

Errors go through the one Nessie table (nessie_errors.checked): Nessie down is CatalogUnavailableError, and the sweep
then removes nothing.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote

import requests

from wap_ingest.adapters.catalog.errors import checked, unavailable
from wap_ingest.adapters.catalog.oauth2 import BearerAuth

PAGE = 250  # records per page (Nessie's largest)
ICEBERG_TABLE = "ICEBERG_TABLE"


@dataclass
class LiveContent:
    """One Iceberg table as the live commits know it: by its content id (a table dropped and made again under the
    same name is another content), the names it had, and every metadata file a live commit gave it."""

    content_id: str
    keys: set[str] = field(default_factory=set)  # dotted names, e.g. "wap.orders"
    metadata: set[str] = field(default_factory=set)


@dataclass
class LiveCatalog:
    """Everything a reading of the catalog found."""

    contents: dict[str, LiveContent] = field(default_factory=dict)
    references: int = 0
    commits: int = 0

    def of(self, key: str) -> list[LiveContent]:
        return [c for c in self.contents.values() if key in c.keys]


class NessieLiveContents:
    def __init__(self, endpoint: str, *, timeout: float = 30.0, auth: BearerAuth | None = None,
                 session: requests.Session | None = None) -> None:
        self._endpoint = endpoint.rstrip("/")
        self._timeout = timeout
        self._auth = auth
        self._http = session or requests.Session()
        if auth is not None:
            self._http.auth = auth

    def read(self) -> LiveCatalog:
        """Every live content, from every reference's whole history (see the module's note on races)."""
        found, walked = LiveCatalog(), set[str]()
        listed = self.references()
        for head in sorted(set(listed.values())):
            self._walk(head, walked, found)
        again = self.references()
        for head in sorted(set(again.values()) - set(listed.values())):
            self._walk(head, walked, found)
        found.references = len(set(listed) | set(again))
        return found

    def references(self) -> dict[str, str]:
        """Every branch and tag: `TYPE:name` -> the hash it points at."""
        found: dict[str, str] = {}
        for page in self._pages("trees", "listing the catalog's references", {}):
            for ref in page.get("references") or []:
                if ref.get("hash"):
                    found[f"{ref.get('type')}:{ref.get('name')}"] = str(ref["hash"])
        return found

    def _walk(self, head: str, walked: set[str], found: LiveCatalog) -> None:
        doing = f"reading the history of the catalog from commit {head[:12]}"
        for page in self._pages(f"trees/@{quote(head, safe='')}/history", doing, {"fetch": "ALL"}):
            for entry in page.get("logEntries") or []:
                commit = str((entry.get("commitMeta") or {}).get("hash") or "")
                if not commit or commit in walked:
                    return
                walked.add(commit)
                found.commits += 1
                for key, content in _puts(entry):
                    live = found.contents.setdefault(str(content.get("id")), LiveContent(str(content.get("id"))))
                    live.keys.add(key)
                    live.metadata.add(str(content["metadataLocation"]))

    def _pages(self, path: str, doing: str, params: Mapping[str, str]) -> Iterator[dict[str, Any]]:
        query = dict(params) | {"max-records": str(PAGE)}
        while True:
            try:
                response = self._http.get(f"{self._endpoint}/api/v2/{path}", params=query, timeout=self._timeout)
            except requests.RequestException as exc:
                raise unavailable(self._endpoint, doing, exc) from exc
            page = checked(response, doing, endpoint=self._endpoint,
                           client_id=self._auth.client_id if self._auth else None)
            yield page
            if not page.get("hasMore") or not page.get("token"):
                return
            query["page-token"] = str(page["token"])


def _puts(entry: Mapping[str, Any]) -> Iterator[tuple[str, Mapping[str, Any]]]:
    """(dotted key, content) of each Iceberg table the commit put."""
    for operation in entry.get("operations") or []:
        content = operation.get("content") or {}
        if operation.get("type") == "PUT" and content.get("type") == ICEBERG_TABLE and content.get("metadataLocation"):
            yield ".".join(str(e) for e in (operation.get("key") or {}).get("elements") or []), content

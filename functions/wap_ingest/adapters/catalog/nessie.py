"""NessieBranches: the CatalogBranches port on a Nessie server.

pynessie (REST API v1) does everything except one thing: a v1 merge cannot carry a commit message or
properties, and the merge commit is where the source identity is stamped. `merge` therefore calls the
REST API v2 (`POST /api/v2/trees/{onto}@{hash}/history/merge`) directly with `requests`.
Every failure goes through the one Nessie table (adapters/catalog/errors.py): pynessie's exceptions and the REST v2
answers alike, by Nessie's error code and HTTP status.

Authentication: with an OAuth2 client configured, one `BearerAuth` (adapters/catalog/oauth2.py) puts a current
access token on every request, pynessie's and the REST v2 ones. A 401 from Nessie becomes a `ConfigError`
that names the client (or says that none is configured).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any
from urllib.parse import quote

import pynessie
import requests
from pynessie.client import NessieClient
from pynessie.client import _endpoints as pynessie_endpoints
from pynessie.error import NessieContentNotFoundException, NessieException
from pynessie.model import ContentKey, Namespace, Put

from wap_ingest.adapters import Verdict
from wap_ingest.adapters.catalog import history as nessie_history
from wap_ingest.adapters.catalog.errors import MERGE, checked, error_for, unavailable
from wap_ingest.adapters.catalog.http import endpoint_session, json_object
from wap_ingest.adapters.catalog.oauth2 import BearerAuth
from wap_ingest.core.errors import (
    BranchExistsError,
    BranchNotFoundError,
    CatalogError,
    CatalogUnavailableError,
    MergeConflictError,
    StaleHashError,
    WapError,
)
from wap_ingest.core.ledger import LEDGER_NAMESPACE, LedgerEntry, ledger_key, matching
from wap_ingest.core.merge_plan import Changes, CommitInfo
from wap_ingest.core.models import Branch, Publication, TableRef
from wap_ingest.core.ports import CatalogBranches


def nessie_client_for(endpoint: str, timeout: float, auth: BearerAuth | None = None) -> NessieClient:
    """A pynessie client configured explicitly (pynessie also reads every `*NESSIE_*` variable)."""
    # pynessie has no per-client timeout: its module-level default is read at each call.
    pynessie_endpoints.DEFAULT_TIMEOUT_SEC = max(1, round(timeout))
    client = pynessie.init(
        config_dict={
            "endpoint": f"{endpoint}/api/v1",
            "verify": True,
            "default_branch": "main",
            "auth": {"type": "none", "timeout": max(1, round(timeout))},
        }
    )
    if auth is not None:
        # pynessie 0.67 only knows a static bearer token (`auth.type=bearer`), which expires. It keeps the
        # `requests.auth.AuthBase` it built from its config in `client._auth` and passes it to every call, so
        # the client is built without auth and that attribute replaced by one that asks for a current token.
        client._auth = auth
    return client


MAX_REMEMBERED_BRANCHES = 1_000  # branches this process made, remembered for a one-call ledger record


class NessieBranches(CatalogBranches):
    def __init__(
        self,
        endpoint: str,
        *,
        timeout: float = 30.0,
        client: NessieClient | None = None,
        session: requests.Session | None = None,
        auth: BearerAuth | None = None,
    ) -> None:
        self._endpoint = endpoint.rstrip("/")
        self._timeout = timeout
        self._auth = auth
        self._client = client or nessie_client_for(self._endpoint, timeout, auth)
        self._namespaces: set[tuple[str, str]] = set()  # (reference, namespace) known to exist there
        # The branches this process made and not yet deleted: the hash each was made at, and whether main had the
        # ledger's namespace there (so the branch has it). Bounded: the oldest are forgotten first.
        self._created: dict[str, tuple[str, bool]] = {}
        # Hashes of main known to hold the ledger's namespace: the lookup's that saw it, and every head read after
        # that (a namespace is never dropped). Bounded, like `_created`.
        self._ledger_heads: dict[str, None] = {}
        self._http = session or endpoint_session(self._endpoint)
        if auth is not None:
            self._http.auth = auth

    # --- reads -------------------------------------------------------------------------------------

    def reference_hash(self, name: str) -> str:
        ledger_before = (name, LEDGER_NAMESPACE) in self._namespaces  # seen before this read: the head has it
        # REST v2 on the pooled session (pynessie opens a connection per call): the same errors, through checked()
        found = str(self._v2("get", f"trees/{quote(name, safe='')}", f"reading branch {name!r}").get(
            "reference", {}).get("hash"))
        if ledger_before and name == "main":
            self._remember_ledger_head(found)
        return found

    def has_namespace(self, ref: str, namespace: str) -> bool:
        if (ref, namespace) in self._namespaces:  # never dropped: the service has no DELETE_ENTITY on main
            return True
        found = self._exists(ref, None, ContentKey([namespace]))
        if found:
            self._namespaces.add((ref, namespace))
        return found

    def find_branch(self, name: str) -> Branch | None:
        try:
            return Branch(name, self.reference_hash(name))
        except BranchNotFoundError:
            return None

    def list_branches(self, prefix: str = "") -> list[Branch]:
        # REST v2, every page (Nessie pages its references), filtered by the server: the prefix is a branch-name
        # prefix the service builds from validated identifiers (letters, digits, `_`, `-`), safe in the CEL string.
        params = {"filter": f"refType == 'BRANCH' && ref.name.startsWith('{_cel_safe(prefix)}')"}
        found: list[Branch] = []
        while True:
            page = self._v2("get", "trees", "listing branches", params=params)
            found += [Branch(str(r["name"]), str(r.get("hash"))) for r in page.get("references", [])
                      if r.get("type") == "BRANCH" and str(r.get("name", "")).startswith(prefix)]
            if not page.get("hasMore") or not page.get("token"):
                return sorted(found, key=lambda b: b.name)
            params = params | {"page-token": str(page["token"])}

    def head_commit(self, name: str) -> Publication | None:
        # REST v2: the newest entry of the branch's history is its head commit.
        doing = f"reading the head commit of {name!r}"
        try:
            response = self._http.get(f"{self._endpoint}/api/v2/trees/{name}/history", params={"maxRecords": "1"},
                                      timeout=self._timeout)
        except requests.RequestException as exc:
            raise self._unavailable(doing, exc) from exc
        self._check(response, doing)
        entries = json_object(response).get("logEntries") or []
        if not entries:
            return None
        return _publication(entries[0].get("commitMeta", {}))

    def publications(self, table: TableRef | None, on: str = "main", limit: int = 100) -> list[Publication]:
        # pynessie's log cannot return commit properties in this form: REST API v2 with a CEL filter.
        # `table` is a validated identifier (letters, digits, `_`, one `.`), safe inside the CEL string.
        cp = "commit.properties"  # a load's merge lists its tables in wap.tables
        if table is None:
            cel = f"'wap.table' in {cp} || 'wap.tables' in {cp}"
        else:
            name = table.qualified
            cel = (f"('wap.table' in {cp} && {cp}['wap.table'] == '{name}') || "
                   f"('wap.tables' in {cp} && {cp}['wap.tables'].contains(',{name},'))")
        url = f"{self._endpoint}/api/v2/trees/{on}/history"
        found: list[Publication] = []
        params = {"filter": cel, "max-records": str(min(limit, 250))}
        while len(found) < limit:  # Nessie pages its history (250 entries at most per page)
            try:
                response = self._http.get(url, params=params, timeout=self._timeout)
            except requests.RequestException as exc:
                raise self._unavailable(f"reading the history of {on!r}", exc) from exc
            self._check(response, f"reading the history of {on!r}")
            page = json_object(response)
            found += [_publication(entry.get("commitMeta", {})) for entry in page.get("logEntries", [])]
            if not page.get("hasMore") or not page.get("token"):
                break
            params = params | {"page-token": str(page["token"])}
        return found[:limit]

    def list_tables(self, ref: str) -> list[TableRef]:
        found: list[TableRef] = []
        params = {"filter": "entry.contentType == 'ICEBERG_TABLE'"}
        while True:  # Nessie pages its entries
            page = self._v2("get", f"trees/{ref}/entries", f"listing the tables on {ref!r}", params=params)
            found += [TableRef(*e["name"]["elements"]) for e in page.get("entries", [])
                      if len(e.get("name", {}).get("elements", [])) == 2]
            if not page.get("hasMore") or not page.get("token"):
                return sorted(found, key=lambda t: t.qualified)
            params = params | {"page-token": str(page["token"])}

    def find_published(self, ref: str, table: TableRef, identities: Sequence[str]) -> dict[str, LedgerEntry]:
        # REST v2 "get multiple contents": every key in one request, each an indexed lookup in Nessie.
        if not identities:
            return {}
        keys = sorted({ledger_key(table.qualified, i) for i in identities})
        # the namespace too, in the same request: once seen, a branch made from `ref` later has it (never dropped)
        payload = self._v2("post", f"trees/{ref}/contents", f"looking up {len(identities)} source(s) of {table} "
                           f"in the ledger on {ref!r}", {"requestedKeys": [{"elements": [LEDGER_NAMESPACE]}] + [
                               {"elements": [LEDGER_NAMESPACE, k]} for k in keys]})
        if ref == "main" and any(c.get("key", {}).get("elements") == [LEDGER_NAMESPACE]
                                 for c in payload.get("contents", [])):
            self._namespaces.add((ref, LEDGER_NAMESPACE))
            self._remember_ledger_head(str(payload.get("effectiveReference", {}).get("hash")))
        found = {c["key"]["elements"][-1]: c["content"].get("properties") or {} for c in payload.get("contents", [])
                 if len(c.get("key", {}).get("elements", [])) == 2}
        return matching(table, found, identities)

    def changes(self, name: str, base: str) -> Changes:
        return nessie_history.changes(self._v2, name, base)  # REST v2 diff, every page

    def commit_log(self, name: str, *, until: str | None = None, limit: int = 1000) -> list[CommitInfo]:
        return nessie_history.commits(self._v2, name, until, limit)  # REST v2 log with operations, every page

    # --- writes ------------------------------------------------------------------------------------

    def record_published(self, branch: str, entries: Sequence[LedgerEntry],
                         properties: Mapping[str, str] | None = None) -> Branch:
        doing = f"recording {len(entries)} source(s) in the ledger on {branch!r}"
        made = self._created.get(branch)
        if made is not None and made[1]:
            # One commit: this process made the branch from a main with the ledger's namespace. Its hash then is
            # the expected hash: Nessie checks the commits since (the table's) for conflicts on these keys only.
            head, operations = made[0], []
        else:  # one read gives the branch's head and whether it has the ledger's namespace; then one commit
            seen = self._v2("post", f"trees/{branch}/contents", doing,
                            {"requestedKeys": [{"elements": [LEDGER_NAMESPACE]}]})
            head = str(seen.get("effectiveReference", {}).get("hash"))
            operations = [] if seen.get("contents") else [
                {"type": "PUT", "key": {"elements": [LEDGER_NAMESPACE]},
                 "content": {"type": "NAMESPACE", "elements": [LEDGER_NAMESPACE]}}]
        operations += [{"type": "PUT", "key": {"elements": [LEDGER_NAMESPACE, e.key]},
                        "content": {"type": "NAMESPACE", "elements": [LEDGER_NAMESPACE, e.key],
                                    "properties": e.properties()}} for e in entries]
        meta = {"message": f"wap: ledger, {len(entries)} source(s)", "properties": dict(properties or {})}
        body = {"commitMeta": meta, "operations": operations}
        committed = self._v2("post", f"trees/{branch}@{head}/history/commit", doing, body)
        return Branch(branch, str(committed.get("targetBranch", {}).get("hash")))

    def create_branch(self, name: str, from_hash: str) -> Branch:
        made = self._v2("post", "trees", f"creating branch {name!r}", {"type": "BRANCH", "name": "main",
                                                                       "hash": from_hash},
                        params={"name": name, "type": "BRANCH"}).get("reference", {})
        ref = Branch(str(made.get("name") or name), str(made.get("hash")))
        if len(self._created) >= MAX_REMEMBERED_BRANCHES:
            self._created.pop(next(iter(self._created)))
        self._created[ref.name] = (ref.hash, from_hash in self._ledger_heads)
        return ref

    def _remember_ledger_head(self, head: str) -> None:
        if len(self._ledger_heads) >= MAX_REMEMBERED_BRANCHES:
            self._ledger_heads.pop(next(iter(self._ledger_heads)))
        self._ledger_heads[head] = None

    def ensure_namespace(self, on: str, namespace: str) -> str:
        # Known to exist on `on` (checked or created by this process): only the head is read. The service never
        # drops a namespace (the catalog's rules give no role DELETE_ENTITY on main).
        if (on, namespace) in self._namespaces:
            return self.reference_hash(on)
        key = ContentKey([namespace])
        for _ in range(5):
            head = self.reference_hash(on)
            if self._exists(on, head, key):
                self._namespaces.add((on, namespace))
                return head
            try:
                with self._translated(f"creating namespace {namespace!r} on {on!r}"):
                    created = self._client.commit(
                        on, head, f"wap: create namespace {namespace}", None,
                        Put(key, Namespace(id=None, elements=[namespace])),
                    )
                self._namespaces.add((on, namespace))
                return str(created.hash_)
            except (MergeConflictError, StaleHashError, BranchExistsError):
                continue  # another writer moved the branch or created the namespace first: look again
        raise CatalogError(f"could not create namespace {namespace!r} on {on!r}: the branch kept moving.")

    def merge(
        self,
        branch: Branch,
        onto: str,
        expected_hash: str,
        message: str,
        properties: Mapping[str, str],
    ) -> str:
        body = {
            "fromRefName": branch.name,
            "fromHash": branch.hash,
            "commitMeta": {"message": message, "properties": dict(properties)},
        }
        url = f"{self._endpoint}/api/v2/trees/{onto}@{expected_hash}/history/merge"
        try:
            response = self._http.post(url, json=body, timeout=self._timeout)
        except requests.RequestException as exc:
            raise self._unavailable(f"merging {branch.name!r} into {onto!r}", exc) from exc
        payload = self._check(response, f"merging {branch.name!r} into {onto!r} (expected at {expected_hash[:12]})",
                              MERGE)
        target = payload.get("resultantTargetHash")
        return str(target) if target else self.reference_hash(onto)

    def delete_branch(self, branch: Branch) -> None:
        self._v2("delete", f"trees/{quote(branch.name, safe='')}@{branch.hash}", f"deleting branch {branch.name!r}")
        self._created.pop(branch.name, None)

    # --- helpers -----------------------------------------------------------------------------------

    def _v2(self, method: str, path: str, doing: str, body: Mapping[str, Any] | None = None, *,
            params: Mapping[str, str] | None = None) -> dict[str, Any]:
        """One REST v2 call; the project's errors for Nessie's (adapters/catalog/errors.py)."""
        try:
            response = self._http.request(method, f"{self._endpoint}/api/v2/{path}",
                                          json=None if body is None else dict(body), params=params,
                                          timeout=self._timeout)
        except requests.RequestException as exc:
            raise self._unavailable(doing, exc) from exc
        return self._check(response, doing)

    def _exists(self, ref: str, hash_: str | None, key: ContentKey) -> bool:
        with self._translated(f"reading {key.to_string()} on {ref!r}"):
            try:
                self._client.get_content(ref, key, hash_on_ref=hash_)
            except NessieContentNotFoundException:
                return False
        return True

    def _unavailable(self, doing: str, exc: Exception) -> CatalogUnavailableError:
        return unavailable(self._endpoint, doing, exc)

    def _error(self, status: int, code: str | None, message: str, doing: str) -> WapError:
        return error_for(status, code, message, doing=doing, endpoint=self._endpoint,
                         client_id=self._auth.client_id if self._auth else None)

    def _check(self, response: requests.Response, doing: str,
               special: Mapping[int | str, Verdict] | None = None) -> dict[str, Any]:
        return checked(response, doing, endpoint=self._endpoint,
                       client_id=self._auth.client_id if self._auth else None, special=special)

    @contextmanager
    def _translated(self, doing: str) -> Iterator[None]:
        try:
            yield
        except requests.RequestException as exc:
            raise self._unavailable(doing, exc) from exc
        except NessieException as exc:  # pynessie's: the same status and error code, through the same table
            said = str(exc.server_message) if exc.server_message not in ("", "{}") else str(exc)  # {}: no JSON body
            raise self._error(int(exc.status_code), str(exc.error_code), said, doing) from exc


def _cel_safe(text: str) -> str:
    """`text` for a single-quoted CEL string: only characters that cannot end or escape it."""
    if not all(c.isalnum() or c in "_-./" for c in text):
        raise CatalogError(f"listing branches: the prefix {text!r} has characters a branch name cannot have")
    return text


def _publication(meta: Mapping[str, Any]) -> Publication:
    """A commit's hash, time, message and properties (the last value of each) from Nessie's `commitMeta`."""
    props = {k: v[-1] for k, v in (meta.get("allProperties") or {}).items() if v}
    return Publication(str(meta.get("hash")), str(meta.get("commitTime") or ""), str(meta.get("message") or ""),
                       props)


"""The Nessie error table (adapters/catalog/errors.py), row by row: each answer Nessie can give (its HTTP status and
the `errorCode` of its JSON body) has one error, whichever call got it: every REST v2 call of NessieBranches, the
pynessie (v1) calls (pynessie's own exceptions, built by pynessie from the same body) and the lake reader
(PyIceberg's exceptions). The statuses the real server returns, on the real
server: tests/integration/adapters/catalog/test_nessie_errors.py."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest
import requests
from pynessie.error import _create_exception

from wap_ingest.adapters.catalog import errors as nessie_errors
from wap_ingest.adapters.catalog.nessie import NessieBranches
from wap_ingest.adapters.catalog.reader import IcebergRestReader
from wap_ingest.core.errors import (
    BranchExistsError,
    BranchNotFoundError,
    CatalogError,
    CatalogUnavailableError,
    ConfigError,
    MergeConflictError,
    StaleHashError,
    WapError,
)
from wap_ingest.core.ledger import entries_for
from wap_ingest.core.models import Branch, SourceObject, TableRef

ENDPOINT = "http://nessie:19120"


@dataclass(frozen=True)
class Row:
    status: int
    code: str | None  # Nessie's errorCode (None: the body has none)
    error: type[WapError]
    merge: type[WapError] | None = None  # what a merge makes of it, where that differs
    says: str = ""


ROWS = [
    Row(404, "REFERENCE_NOT_FOUND", BranchNotFoundError, says="no such branch"),
    Row(404, "CONTENT_NOT_FOUND", CatalogError, says="no such table or namespace"),
    Row(404, "NAMESPACE_NOT_FOUND", CatalogError, says="no such table or namespace"),
    Row(404, None, ConfigError, says="NESSIE_ENDPOINT"),  # not Nessie's API at all
    Row(409, "REFERENCE_ALREADY_EXISTS", BranchExistsError),
    Row(409, "REFERENCE_CONFLICT", StaleHashError, merge=MergeConflictError),
    Row(409, None, MergeConflictError),
    Row(400, "BAD_REQUEST", CatalogError, says="refused the request as invalid"),
    Row(415, "UNSUPPORTED_MEDIA_TYPE", CatalogError),
    Row(422, None, CatalogError),
    Row(412, None, StaleHashError),
    Row(429, "TOO_MANY_REQUESTS", CatalogUnavailableError),
    Row(500, "UNKNOWN", CatalogUnavailableError, says="Nessie failed"),
    Row(503, None, CatalogUnavailableError, says="Nessie failed"),
    Row(401, None, ConfigError, says="authentication failed (HTTP 401), and no OAuth2 client is configured"),
    Row(403, "FORBIDDEN", CatalogError, says="denied the request (HTTP 403) for anonymous requests"),
]
IDS = [f"{r.status}-{r.code}" for r in ROWS]


def body_of(row: Row) -> dict[str, Any]:
    """Nessie's error body (what the 0.99 server sends; no body at all for a path it does not serve)."""
    if row.status == 404 and row.code is None:
        return {}
    body: dict[str, Any] = {"status": row.status, "reason": "Reason", "message": f"Nessie's own words ({row.code})"}
    return body | ({"errorCode": row.code} if row.code else {})


class Answering(requests.Session):
    """A session that gives every request one answer (unit tier: the real server is in the integration test)."""

    def __init__(self, status: int, body: dict[str, Any]) -> None:
        super().__init__()
        self.status, self.body, self.calls = status, body, 0

    def request(self, *_: Any, **__: Any) -> requests.Response:  # type: ignore[override]
        self.calls += 1
        answer = requests.Response()
        answer.status_code = self.status
        answer._content = json.dumps(self.body).encode() if self.body else b""
        return answer


SOURCE = SourceObject("inbox", "t/a.csv", 10, "etag")
CALLS: dict[str, Callable[[NessieBranches], object]] = {  # every REST v2 call of the adapter
    "head_commit": lambda c: c.head_commit("wap-b"),
    "publications": lambda c: c.publications(TableRef("wap", "t")),
    "list_tables": lambda c: c.list_tables("main"),
    "find_published": lambda c: c.find_published("main", TableRef("wap", "t"), [SOURCE.identity]),
    "record_published": lambda c: c.record_published("wap-b", entries_for(TableRef("wap", "t"), [(SOURCE, 1)],
                                                                           "wap-b", 0.0)),
    "merge": lambda c: c.merge(Branch("wap-b", "1" * 16), "main", "0" * 16, "m", {}),
}


@pytest.mark.parametrize("row", ROWS, ids=IDS)
@pytest.mark.parametrize("call", sorted(CALLS))
def test_every_rest_call_judges_an_answer_alike(row: Row, call: str) -> None:
    session = Answering(row.status, body_of(row))
    with pytest.raises(WapError) as info:
        CALLS[call](NessieBranches(ENDPOINT, session=session))
    expected = row.merge if call == "merge" and row.merge else row.error
    assert type(info.value) is expected and session.calls >= 1
    assert row.says in str(info.value)
    if row.status not in (401, 403):
        assert f"Nessie at {ENDPOINT} answered HTTP {row.status}" in str(info.value)


@pytest.mark.parametrize("row", ROWS, ids=IDS)
def test_pynessie_exceptions_go_through_the_same_table(row: Row) -> None:
    catalog = NessieBranches(ENDPOINT, session=Answering(200, {}))
    with pytest.raises(WapError) as info, catalog._translated("deleting branch 'wap-b'"):
        raise _create_exception(body_of(row), row.status, "Reason", f"{ENDPOINT}/api/v1/trees/branch/wap-b")
    assert type(info.value) is row.error and row.says in str(info.value)
    assert str(info.value).startswith("deleting branch 'wap-b': ")


def test_every_code_of_the_table_has_its_row() -> None:
    assert {r.code for r in ROWS} >= set(nessie_errors.BY_CODE)
    assert {r.status for r in ROWS} >= set(nessie_errors.BY_STATUS)


def test_a_message_names_the_call_the_server_its_answer_and_the_fix() -> None:
    error = nessie_errors.error_for(404, "REFERENCE_NOT_FOUND", "Named reference 'wap-b' not found",
                                    doing="reading branch 'wap-b'", endpoint=ENDPOINT)
    assert str(error) == (
        "reading branch 'wap-b': no such branch, or no such commit on it; Nessie at http://nessie:19120 answered "
        "HTTP 404 REFERENCE_NOT_FOUND: Named reference 'wap-b' not found. Fix: check the name (wap branches lists the "
        "open ones); a WAP run starts again from a fresh main by itself.")


def test_a_branch_deleted_during_a_commit_is_not_found_not_an_outage() -> None:
    """Nessie 0.99's answer to a commit onto a branch a concurrent delivery deleted meanwhile (as it really came)."""
    said = ("java.lang.RuntimeException: Internal reference not found, caused by org.projectnessie.versioned.storage."
            "common.exceptions.RefNotFoundException: Reference refs/heads/wap-t-abc-1 does not exist")
    session = Answering(500, {"status": 500, "reason": "Internal Server Error", "message": said})
    with pytest.raises(BranchNotFoundError, match="deleted while Nessie worked on the request"):
        CALLS["record_published"](NessieBranches(ENDPOINT, session=session))
    other = nessie_errors.error_for(500, None, "java.lang.NullPointerException", doing="d", endpoint=ENDPOINT)
    assert type(other) is CatalogUnavailableError


def test_a_caller_gives_the_meaning_of_its_own_answers() -> None:
    conflict = nessie_errors.error_for(409, "REFERENCE_CONFLICT", "keys changed in conflict: 't'", doing="merging",
                                       endpoint=ENDPOINT, special=nessie_errors.MERGE)
    assert type(conflict) is MergeConflictError and "Fix:" not in str(conflict)  # the caller says what to do
    denied = nessie_errors.error_for(403, "FORBIDDEN", "", doing="merging", endpoint=ENDPOINT, client_id="wap-svc")
    assert type(denied) is CatalogError and "OAuth2 client 'wap-svc'" in str(denied)


# --- the lake reader (PyIceberg through Nessie's Iceberg REST endpoint) ---------------------------------------

def _raising(exc: Exception) -> Callable[[Any], Any]:
    def call(_: Any) -> Any:
        raise exc
    return call


@pytest.mark.parametrize(
    ("kind", "error", "says"),
    [("BadRequestError", CatalogError, "HTTP 400"), ("UnauthorizedError", ConfigError, "authentication failed"),
     ("AuthorizationExpiredError", ConfigError, "authentication failed"),
     ("ForbiddenError", CatalogError, "denied the request (HTTP 403)"),
     ("ServiceUnavailableError", CatalogUnavailableError, "HTTP 503"), ("ServerError", CatalogUnavailableError,
                                                                       "HTTP 500")],
)
def test_the_lake_reader_judges_pyicebergs_errors_through_the_table(kind: str, error: type[WapError], says: str
                                                                    ) -> None:
    from pyiceberg import exceptions

    reader = IcebergRestReader(ENDPOINT, timeout=1)
    reader._catalogs["main"] = object()  # built: the call itself answers
    with pytest.raises(WapError) as info:
        reader._catalog_call("reading wap.t", "main", _raising(getattr(exceptions, kind)("the server's words")))
    assert type(info.value) is error and says in str(info.value) and "reading wap.t on 'main'" in str(info.value)
    assert reader._catalog_call("reading wap.t", "main", _raising(exceptions.NoSuchTableError("no"))) is None

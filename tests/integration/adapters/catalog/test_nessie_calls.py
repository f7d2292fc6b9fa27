"""Catalog calls the warm path no longer makes (issue 17, item 2), on the real Nessie: a namespace known to exist is
not read again by the same process, the exactly-once lookup is one request whatever the number of files, and the
ledger is recorded in one commit on a branch this process made from a main that has the ledger."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from wap_ingest.adapters.catalog.nessie import NessieBranches
from wap_ingest.core.models import TableRef

pytestmark = [pytest.mark.stack]


def counted(catalog: NessieBranches) -> list[str]:
    """Every REST v2 request the adapter sends itself, by method and path."""
    seen: list[str] = []
    send = catalog._http.request

    def request(method: str, url: str, *args: Any, **kwargs: Any) -> Any:
        seen.append(f"{method.upper()} {url.split('/api/', 1)[-1].split('?', maxsplit=1)[0]}")
        return send(method, url, *args, **kwargs)

    catalog._http.request = request  # type: ignore[method-assign]
    return seen


def test_a_known_namespace_costs_only_the_head_read(stack_env: dict[str, str]) -> None:
    catalog = NessieBranches(stack_env["NESSIE_ENDPOINT"], timeout=10)
    namespace = f"ns_{uuid.uuid4().hex[:8]}"
    checks: list[str] = []
    real = catalog._client.get_content
    catalog._client.get_content = lambda *a, **k: checks.append(str(a[1])) or real(*a, **k)  # type: ignore
    first = catalog.ensure_namespace("main", namespace)
    assert checks  # looked for (then created)
    checks.clear()
    assert catalog.ensure_namespace("main", namespace) == first == catalog.reference_hash("main")
    assert checks == []  # the second time: no content read
    fresh = NessieBranches(stack_env["NESSIE_ENDPOINT"], timeout=10)  # another process checks again
    fresh._client.get_content = lambda *a, **k: checks.append(str(a[1])) or real(*a, **k)  # type: ignore
    assert fresh.ensure_namespace("main", namespace) == first and checks


def test_the_ledger_lookup_is_one_request_for_a_whole_batch(stack_env: dict[str, str]) -> None:
    catalog = NessieBranches(stack_env["NESSIE_ENDPOINT"], timeout=10)
    seen = counted(catalog)
    found = catalog.find_published("main", TableRef("wap", "t_none"), [f"inbox/t/{i}.csv#e{i}" for i in range(100)])
    assert found == {} and seen == ["POST v2/trees/main/contents"]


def test_the_ledger_is_recorded_in_one_commit_on_a_branch_made_from_a_main_that_has_it(stack_env: dict[str, str]
                                                                                     ) -> None:
    from wap_ingest.core.ledger import entries_for
    from wap_ingest.core.models import SourceObject

    catalog = NessieBranches(stack_env["NESSIE_ENDPOINT"], timeout=10)
    table, suffix = TableRef("wap", f"t_{uuid.uuid4().hex[:8]}"), uuid.uuid4().hex[:8]
    first, second = (SourceObject("inbox", f"t/{n}.csv", 10, f"etag-{suffix}") for n in ("a", "b"))
    # a branch made before this process saw the ledger on main: the record reads the branch first
    base = catalog.ensure_namespace("main", table.namespace)
    early = catalog.create_branch(f"calls-early-{suffix}", base)
    seen = counted(catalog)
    head = catalog.record_published(early.name, entries_for(table, [(first, 1)], early.name, 0.0))
    assert [s.split("@")[0] for s in seen] == [f"POST v2/trees/{early.name}/contents",
                                               f"POST v2/trees/{early.name}"]
    catalog.merge(head, "main", catalog.reference_hash("main"), "publish", {})
    # the lookup sees the ledger on main; a head read after it has it, and so has a branch made there
    assert catalog.find_published("main", table, [second.identity]) == {}
    later = catalog.create_branch(f"calls-later-{suffix}", catalog.ensure_namespace("main", table.namespace))
    catalog.ensure_namespace(later.name, f"moved_{suffix}")  # the branch moves on (as the table's commit moves it)
    seen.clear()
    head = catalog.record_published(later.name, entries_for(table, [(second, 2)], later.name, 0.0))
    assert seen == [f"POST v2/trees/{later.name}@{later.hash}/history/commit"]  # one call, at the made-at hash
    assert set(catalog.find_published(later.name, table, [first.identity, second.identity])) == {
        first.identity, second.identity}
    assert catalog.ensure_namespace(later.name, f"moved_{suffix}") == head.hash  # the move is kept

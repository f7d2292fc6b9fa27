"""Catalog calls the warm path no longer makes (issue 17, item 2), on the real Nessie: a namespace known to exist is
not read again by the same process, and the exactly-once lookup is one request whatever the number of files."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from wap_ingest.adapters.nessie import NessieBranches
from wap_ingest.core.models import TableRef

pytestmark = [pytest.mark.stack]


def counted(catalog: NessieBranches) -> list[str]:
    """Every REST v2 request the adapter sends itself, by method and path."""
    seen: list[str] = []
    send = catalog._http.request

    def request(method: str, url: str, *args: Any, **kwargs: Any) -> Any:
        seen.append(f"{method.upper()} {url.split('/api/', 1)[-1].split('?')[0]}")
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

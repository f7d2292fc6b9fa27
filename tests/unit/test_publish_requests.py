"""The service's answer to an operator's publish request (wap_ingest.core.publish_requests), with fakes: who asks
decides first, then the publish; refusals are answers, an infrastructure failure is raised for a retry. The
same answers against the real catalog and queue: tests/integration/test_stack_auth.py."""

from __future__ import annotations

import base64
import json

import pytest

from wap_ingest.adapters.publish_requests import CatalogRequesters, claims_of
from wap_ingest.core.errors import BadInputError, CatalogUnavailableError, MergeConflictError
from wap_ingest.core.models import AuditReport, CheckResult, CheckStatus, TableRef
from wap_ingest.core.publish_requests import PublishRequest, RequestRefusedError, requester_from, serve
from wap_ingest.core.review import Decision, ReauditFailedError

BRANCH = "wap-wap-orders-0123456789abcdef-1a2b3c4d"


def token_with(claims: dict[str, object]) -> str:
    payload = base64.urlsafe_b64encode(json.dumps(claims).encode()).decode().rstrip("=")
    return f"eyJhbGciOiJSUzI1NiJ9.{payload}.c2ln"


def published(request: PublishRequest, actor: str) -> Decision:
    return Decision(request.branch, TableRef("wap", "orders"), "published", request.reason or "re-audit passed", actor,
                    "abc123")


def test_a_request_round_trips_through_its_message_body_and_other_bodies_are_not_requests() -> None:
    request = PublishRequest(BRANCH, "ok", reaudit=False, token="t.o.k", claimed_actor="alice")
    again = PublishRequest.from_body(request.to_body())
    assert again == request and again is not None and again.token == "t.o.k"
    assert "t.o.k" not in repr(request)
    assert PublishRequest.from_body('{"Records": []}') is None and PublishRequest.from_body("not json") is None
    with pytest.raises(BadInputError, match="request_id"):
        PublishRequest.from_body(json.dumps({"kind": "wap.publish-request", "branch": BRANCH, "request_id": "../x"}))


def test_the_verified_actor_publishes_and_the_answer_is_the_decision() -> None:
    request = PublishRequest(BRANCH, "reviewed", reaudit=True)
    answer = serve(request, identify=lambda _: "wap-operator", publish=published)
    assert answer["action"] == "published" and answer["actor"] == "wap-operator"
    assert answer["merged_hash"] == "abc123" and answer["request_id"] == request.request_id


def test_an_unverified_requester_is_refused_before_anything_is_published() -> None:
    calls: list[str] = []

    def refuse(_: PublishRequest) -> str:
        raise RequestRefusedError("not an operator")

    def publish(request: PublishRequest, actor: str) -> Decision:
        calls.append(actor)
        return published(request, actor)

    answer = serve(PublishRequest(BRANCH, None, True, claimed_actor="mallory"), identify=refuse, publish=publish)
    assert answer["action"] == "refused" and answer["error"] == "not an operator" and calls == []


def test_a_failed_reaudit_and_a_conflict_are_refusals_an_outage_is_raised() -> None:
    report = AuditReport("wap.orders", 10, (CheckResult("not_null", "x", CheckStatus.FAILED, "3", "0"),))

    def failing(request: PublishRequest, actor: str) -> Decision:
        raise ReauditFailedError("still fails", report)

    def conflicting(request: PublishRequest, actor: str) -> Decision:
        raise MergeConflictError("main moved")

    def down(request: PublishRequest, actor: str) -> Decision:
        raise CatalogUnavailableError("nessie down")

    request = PublishRequest(BRANCH, None, True)
    answer = serve(request, identify=lambda _: "op", publish=failing)
    assert answer["action"] == "refused" and answer["reaudit"]["rows"] == 10
    assert serve(request, identify=lambda _: "op", publish=conflicting)["error"] == "main moved"
    with pytest.raises(CatalogUnavailableError):
        serve(request, identify=lambda _: "op", publish=down)


def test_only_operator_or_service_scopes_may_request_and_the_subject_is_recorded() -> None:
    allowed = ("nessie/operator", "nessie/service")
    assert requester_from({"sub": "alice", "scope": "nessie/operator"}, allowed) == "alice"
    with pytest.raises(RequestRefusedError, match="may not publish"):
        requester_from({"sub": "bob", "scope": "nessie/reader"}, allowed)
    with pytest.raises(RequestRefusedError, match="no subject"):
        requester_from({"scope": "nessie/operator"}, allowed)
    assert claims_of(token_with({"sub": "x"})) == {"sub": "x"}
    with pytest.raises(RequestRefusedError):
        claims_of("opaque-token")


def test_without_catalog_authentication_the_actor_is_marked_unverified_and_a_token_is_required_with_it() -> None:
    open_catalog = CatalogRequesters("http://127.0.0.1:9", authenticated=False, allowed_roles=("r",), timeout=1)
    assert open_catalog.identify(PublishRequest(BRANCH, None, True, claimed_actor="alice")).startswith(
        "alice (unverified")
    secured = CatalogRequesters("http://127.0.0.1:9", authenticated=True, allowed_roles=("r",), timeout=1)
    with pytest.raises(RequestRefusedError, match="no access token"):
        secured.identify(PublishRequest(BRANCH, None, True, claimed_actor="alice"))
    with pytest.raises(CatalogUnavailableError):  # nothing listens on port 9: retried, not refused
        secured.identify(PublishRequest(BRANCH, None, True, token=token_with({"sub": "a", "scope": "r"})))

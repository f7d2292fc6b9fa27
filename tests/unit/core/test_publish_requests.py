"""Publish requests without a replayable secret (wap_ingest.core.publish_requests, adapters/aws/publish_requests.py),
with fakes: the message format (no token, a digest over every field), the checks made before anybody is asked (format,
addressee, age, integrity), who may ask, the single use of a request id and the answer written once, the SigV4
proof the operator makes and what the service sends STS for it (STS's answers row by row: test_sts_answers.py).
Against moto's STS and S3 (IAM enforced): tests/integration/adapters/aws/test_publish_signatures.py; through the local
stack's function: tests/integration/stack/test_stack_auth_publish.py."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

import pytest
from botocore.credentials import ReadOnlyCredentials

from tests.aws_stubs import StsAnswers as Sts
from tests.fake_actions import FakeActionRecords
from wap_ingest.adapters.aws.dead_letters import shown_body
from wap_ingest.adapters.aws.publish_requests import STS_BODY, StsRequesters, queue_name_of
from wap_ingest.core.errors import BadInputError, CatalogUnavailableError, InfrastructureError, MergeConflictError
from wap_ingest.core.models import AuditReport, CheckResult, CheckStatus, TableRef
from wap_ingest.core.publish_requests import (
    LIFETIME_SECONDS,
    SIGNED_HEADER,
    IdentityProof,
    PublishRequest,
    RequestRefusedError,
    answer_request,
    check_request,
    principal_from,
    principals_from,
    requester_from,
    serve,
)
from wap_ingest.core.review import Decision, ReauditFailedError

BRANCH = "wap-orders-0123456789abcdef-1a2b3c4d"
QUEUE = "wap-ingest"
NOW = 1_900_000_000
STS = "https://sts.us-east-1.amazonaws.com"
OPERATOR_ROLE = "arn:aws:iam::123456789012:role/wap-operator"
ALICE = "arn:aws:sts::123456789012:assumed-role/wap-operator/alice"
SECRET = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
SESSION = "FwoGZXIvYXdzEXAMPLESESSIONTOKEN"
CREDENTIALS = ReadOnlyCredentials("ASIAEXAMPLEEXAMPLE", SECRET, SESSION)


def request(**changes: Any) -> PublishRequest:
    base = PublishRequest(BRANCH, "nulls expected", reaudit=False, queue=QUEUE, issued_at=NOW)
    return replace(base, **changes)


def signed(value: PublishRequest | None = None) -> PublishRequest:
    return StsRequesters(STS, "us-east-1", timeout=1, credentials=lambda: CREDENTIALS).sign(value or request())


def published(req: PublishRequest, actor: str) -> Decision:
    return Decision(req.branch, TableRef("wap", "orders"), "published", req.reason or "re-audit passed", actor,
                    "abc123")


def served(req: PublishRequest, *, now: float = NOW + 5, caller: str = ALICE, **kwargs: Any) -> dict[str, Any]:
    options: dict[str, Any] = {"identify": lambda _: caller, "allowed": (OPERATOR_ROLE,), "publish": published,
                               "now": now, "queue": QUEUE} | kwargs
    return serve(req, **options)


# --- the message ------------------------------------------------------------------------------------------------

def test_the_message_carries_no_token_or_secret_and_round_trips() -> None:
    req = signed()
    body = req.to_body()
    assert PublishRequest.from_body(body) == req
    assert SECRET not in body and "token\"" not in body.replace("security_token", "")
    assert req.expires_at == NOW + LIFETIME_SECONDS and req.proof is not None
    assert req.proof.digest == req.digest() and req.proof.endpoint == STS
    assert SESSION not in repr(req) and req.proof.authorization not in repr(req)
    assert PublishRequest.from_body('{"Records": []}') is None and PublishRequest.from_body("not json") is None
    with pytest.raises(BadInputError, match="request_id"):
        PublishRequest.from_body(json.dumps({"kind": "wap.publish-request", "branch": BRANCH, "request_id": "../x"}))


@pytest.mark.parametrize("change", [{"branch": "wap-other-0123456789abcdef-1"}, {"reason": "other"},
                                    {"reaudit": True}, {"request_id": "f" * 32}, {"queue": "wap2-ingest"},
                                    {"issued_at": NOW - 1}, {"expires_at": NOW + 900}])
def test_every_field_is_signed_a_changed_one_is_refused(change: dict[str, Any]) -> None:
    original = signed()
    altered = replace(original, **change)
    assert altered.digest() != original.digest()
    check_request(original, now=NOW + 5, queue=None)
    with pytest.raises(RequestRefusedError, match="changed after it was signed"):
        check_request(altered, now=NOW + 5, queue=None)
    received = PublishRequest.from_body(json.dumps(json.loads(original.to_body()) | change))
    assert received is not None
    answer = served(received, queue=None)
    assert answer["action"] == "refused" and "changed after it was signed" in answer["error"]


def test_a_request_past_its_time_or_from_the_future_or_too_long_lived_is_refused() -> None:
    req = signed()
    check_request(req, now=req.expires_at, queue=QUEUE)  # the last valid second
    with pytest.raises(RequestRefusedError, match=r"expired: .* reached the service 1 s later"):
        check_request(req, now=req.expires_at + 1, queue=QUEUE)
    with pytest.raises(RequestRefusedError, match="in the future"):
        check_request(req, now=NOW - 301, queue=QUEUE)
    long_lived = signed(request(expires_at=NOW + 901))
    with pytest.raises(RequestRefusedError, match="at most 900 s"):
        check_request(long_lived, now=NOW + 5, queue=QUEUE)
    calls: list[str] = []
    answer = served(req, now=req.expires_at + 60, identify=lambda _: calls.append("sts") or ALICE)
    assert answer["action"] == "refused" and "expired" in answer["error"] and calls == []  # STS not even asked


def test_an_unsigned_or_old_format_request_with_a_bearer_token_is_refused_and_the_token_never_shown() -> None:
    token = "eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJvcCJ9.c2ln"
    old = json.dumps({"kind": "wap.publish-request", "request_id": "abc123", "branch": BRANCH, "reason": "r",
                      "reaudit": False, "token": token, "claimed_actor": None})
    parsed = PublishRequest.from_body(old)
    assert parsed is not None and parsed.carried_token and token not in repr(parsed)
    answer = served(parsed)
    assert answer["action"] == "refused" and "old format" in answer["error"] and token not in json.dumps(answer)
    assert token not in json.dumps(shown_body(old)) and shown_body(old)["branch"] == BRANCH
    with pytest.raises(RequestRefusedError, match="not signed"):
        check_request(request(), now=NOW, queue=QUEUE)


def test_the_listing_shows_a_request_without_its_signature() -> None:
    req = signed()
    shown = shown_body(req.to_body())
    assert req.proof is not None
    assert SESSION not in json.dumps(shown) and req.proof.authorization not in json.dumps(shown)
    assert (shown["branch"], shown["request_id"], shown["proof"]) == (
        BRANCH, req.request_id, {"scheme": "aws-sts-get-caller-identity", "endpoint": STS, "digest": req.digest(),
                                 "signature": "(not shown)"})


def test_a_request_for_another_queue_is_refused() -> None:
    req = signed()
    with pytest.raises(RequestRefusedError, match="addressed to queue 'wap-ingest'"):
        check_request(req, now=NOW, queue="wap2-ingest")
    assert queue_name_of("https://sqs.us-east-1.amazonaws.com/123456789012/wap-ingest") == "wap-ingest"
    assert queue_name_of("arn:aws:sqs:us-east-1:123456789012:wap-ingest") == "wap-ingest"


# --- who may ask ------------------------------------------------------------------------------------------------

def test_a_role_admits_its_sessions_a_user_itself_and_nothing_else_is_admitted() -> None:
    allowed = (OPERATOR_ROLE, "arn:aws:iam::123456789012:user/ops/carol")
    assert requester_from(ALICE, allowed) == ALICE
    assert requester_from("arn:aws:iam::123456789012:user/carol", allowed).endswith("user/carol")
    for caller in ("arn:aws:sts::123456789012:assumed-role/wap-reader/alice",
                   "arn:aws:sts::999999999999:assumed-role/wap-operator/alice", "arn:aws:iam::123456789012:root",
                   "arn:aws:sts::123456789012:federated-user/alice", "arn:aws:iam::123456789012:user/moto"):
        with pytest.raises(RequestRefusedError, match="may not publish"):
            requester_from(caller, allowed)
    with pytest.raises(RequestRefusedError, match="WAP_PUBLISH_PRINCIPALS is empty"):
        requester_from(ALICE, ())
    assert principal_from("arn:aws:iam::123456789012:role/path/wap-operator") == principal_from(OPERATOR_ROLE)
    assert principals_from(f" {OPERATOR_ROLE} ,") == (OPERATOR_ROLE,)
    for bad in (ALICE, "wap-operator", "arn:aws:s3:::lake"):
        with pytest.raises(BadInputError, match="WAP_PUBLISH_PRINCIPALS"):
            principals_from(bad)


def test_a_reader_is_refused_with_its_name_and_nothing_is_published() -> None:
    calls: list[str] = []

    def publish(req: PublishRequest, actor: str) -> Decision:
        calls.append(actor)
        return published(req, actor)

    reader = "arn:aws:sts::123456789012:assumed-role/wap-reader/bob"
    answer = served(signed(), caller=reader, publish=publish)
    assert answer["action"] == "refused" and "may not publish" in answer["error"] and answer["actor"] == reader
    assert calls == []


def test_the_verified_actor_publishes_and_a_refused_publish_is_an_answer_an_outage_raises() -> None:
    req = signed()
    answer = served(req, describe=lambda arn: f"{arn} (local)")
    assert answer["action"] == "published" and answer["actor"] == f"{ALICE} (local)"
    assert answer["merged_hash"] == "abc123" and answer["request_id"] == req.request_id
    report = AuditReport("wap.orders", 10, (CheckResult("not_null", "x", CheckStatus.FAILED, "3", "0"),))

    def failing(_: PublishRequest, __: str) -> Decision:
        raise ReauditFailedError("still fails", report)

    def conflicting(_: PublishRequest, __: str) -> Decision:
        raise MergeConflictError("main moved")

    def down(_: PublishRequest, __: str) -> Decision:
        raise CatalogUnavailableError("nessie down")

    assert served(req, publish=failing)["reaudit"]["rows"] == 10
    assert served(req, publish=conflicting)["error"] == "main moved"
    with pytest.raises(CatalogUnavailableError):
        served(req, publish=down)


# --- single use, written once ------------------------------------------------------------------------------------

class Ledger:
    """The answers, as S3RequestResults keeps them (each written once)."""

    def __init__(self) -> None:
        self.answers: dict[str, dict[str, Any]] = {}

    def put_once(self, request_id: str, answer: dict[str, Any]) -> bool:
        if request_id in self.answers:
            return False
        self.answers[request_id] = answer
        return True


def test_a_request_is_served_once_a_replay_or_a_redelivery_changes_nothing_and_a_retry_goes_on() -> None:
    ledger, records, calls = Ledger(), FakeActionRecords(), []
    outage = [True]

    def publish(req: PublishRequest, actor: str) -> Decision:
        calls.append(req.request_id)
        if outage and outage.pop():
            raise CatalogUnavailableError("nessie down")
        return published(req, actor)

    def answer(message: str, req: PublishRequest) -> dict[str, Any]:
        return answer_request(req, message, records=records, ledger=ledger, identify=lambda _: ALICE,
                              allowed=(OPERATOR_ROLE,), publish=publish, now=NOW + 5, queue=QUEUE)

    req = signed()
    with pytest.raises(CatalogUnavailableError):  # an outage: the message is retried
        answer("m1", req)
    first = answer("m1", req)  # its retry (the same message) goes on
    assert first["action"] == "published" and first["written"] and ledger.answers[req.request_id]["actor"] == ALICE
    replay = answer("m2", req)  # the same body sent again (a replay, a redrive): another message id
    assert replay["action"] == "refused" and not replay["written"] and "replay" in replay["error"]
    assert replay["seen"] == "copy" and ledger.answers[req.request_id]["action"] == "published"
    again = answer("m1", req)  # the same message delivered again after its answer: nothing done
    assert again["action"] == "refused" and not again["written"] and again["seen"] == "done"
    assert "redelivery" in again["error"] and calls == [req.request_id] * 2


def test_an_altered_copy_claims_nothing_it_can_use() -> None:
    """A copy with the original's id and another branch arrives first: refused (changed after signing); the
    original then is a replay of that id: refused too, and nothing is published."""
    ledger, records, calls = Ledger(), FakeActionRecords(), []
    original = signed()
    altered = replace(original, branch="wap-other-0123456789abcdef-1")
    for message, req in (("m1", altered), ("m2", original)):
        answer_request(req, message, records=records, ledger=ledger, identify=lambda _: ALICE,
                       allowed=(OPERATOR_ROLE,),
                       publish=lambda r, a: calls.append(r.branch) or published(r, a), now=NOW + 5, queue=QUEUE)
    assert calls == [] and "changed after it was signed" in ledger.answers[original.request_id]["error"]


# --- the proof and what the service sends STS ------------------------------------------------------------------

def caller_xml(arn: str) -> str:
    return (f'<GetCallerIdentityResponse xmlns="https://sts.amazonaws.com/doc/2011-06-15/"><GetCallerIdentityResult>'
            f"<Arn>{arn}</Arn><UserId>AROA:alice</UserId><Account>123456789012</Account></GetCallerIdentityResult>"
            f"</GetCallerIdentityResponse>")


def test_the_proof_is_sigv4_over_the_digest_and_the_service_sends_its_own_digest_to_its_own_sts() -> None:
    req = signed()
    assert req.proof is not None
    assert req.proof.authorization.startswith("AWS4-HMAC-SHA256 Credential=ASIAEXAMPLEEXAMPLE/")
    assert "/us-east-1/sts/aws4_request" in req.proof.authorization
    assert SIGNED_HEADER.lower() in req.proof.authorization and SECRET not in req.proof.authorization
    sts = Sts(200, caller_xml(ALICE))
    assert StsRequesters(STS, "us-east-1", timeout=1, session=sts).identify(req) == ALICE
    [(url, data, headers)] = sts.sent
    assert (url, data) == (f"{STS}/", STS_BODY)
    assert headers[SIGNED_HEADER] == req.digest() and headers["X-Amz-Security-Token"] == SESSION
    # a proof naming another digest: the service still sends the digest of what it received (STS then refuses)
    tampered = req.signed(replace(req.proof, digest="0" * 64))
    StsRequesters(STS, "us-east-1", timeout=1, session=sts).identify(tampered)
    assert sts.sent[-1][2][SIGNED_HEADER] == req.digest()


def test_a_proof_for_another_endpoint_or_not_over_the_digest_is_refused_without_calling_sts() -> None:
    req = signed()
    assert req.proof is not None
    sts = Sts(200, caller_xml(ALICE))
    elsewhere = StsRequesters("https://sts.eu-west-1.amazonaws.com", "eu-west-1", timeout=1, session=sts)
    with pytest.raises(RequestRefusedError, match="AWS_REGION=eu-west-1"):
        elsewhere.identify(req)
    unsigned_digest = req.proof.authorization.replace(f";{SIGNED_HEADER.lower()}", "")
    for proof in (replace(req.proof, authorization=unsigned_digest),
                  replace(req.proof, authorization=req.proof.authorization.replace("/sts/", "/s3/")),
                  replace(req.proof, amz_date="yesterday")):
        with pytest.raises(RequestRefusedError, match="not an STS request signed over the request's digest"):
            StsRequesters(STS, "us-east-1", timeout=1, session=sts).identify(req.signed(proof))
    assert sts.sent == []


def test_an_unreachable_sts_is_an_outage_and_a_local_sts_is_said_to_be_unverified() -> None:
    local = StsRequesters("http://127.0.0.1:9", "us-east-1", timeout=1, credentials=lambda: CREDENTIALS)
    with pytest.raises(InfrastructureError, match=r"no answer from STS \(ConnectionError\)"):  # port 9: retried
        local.identify(local.sign(request()))
    assert local.actor(ALICE) == f"{ALICE} (unverified: the STS at http://127.0.0.1:9 is not AWS's)"
    assert StsRequesters(STS, "us-east-1", timeout=1).actor(ALICE) == ALICE


def test_a_proof_without_its_parts_is_no_proof() -> None:
    req = signed()
    assert req.proof is not None
    data = req.proof.to_dict()
    assert IdentityProof.from_dict(data) == req.proof
    assert IdentityProof.from_dict(data | {"authorization": ""}) is None and IdentityProof.from_dict("x") is None

"""STS's answers to the signed GetCallerIdentity request a publish request carries, row by row: read by the AWS table
(adapters/aws/errors.py, `answer_error`: the code, else the status) with this call's meaning (`SIGNATURE` in
adapters/aws/publish_requests.py): STS's outages are retried as any AWS service's, every other answer refuses the
request (it judges the signature or the signer's credentials). Each answer has STS's shape (an ErrorResponse document,
or none) and reaches `StsRequesters.identify` through a fake HTTP session. Against moto's STS:
tests/integration/adapters/aws/test_publish_signatures.py."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from botocore.credentials import ReadOnlyCredentials

from tests.aws_stubs import StsAnswers, sts_error_xml
from wap_ingest.adapters.aws.errors import Failure, failure_for
from wap_ingest.adapters.aws.publish_requests import SIGNATURE, StsRequesters
from wap_ingest.core.errors import InfrastructureError, WapError
from wap_ingest.core.publish_requests import PublishRequest, RequestRefusedError

STS = "https://sts.us-east-1.amazonaws.com"
CREDENTIALS = ReadOnlyCredentials("ASIAEXAMPLEEXAMPLE", "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", "FwoGZXIvYXdz")


@dataclass(frozen=True)
class Row:
    status: int
    code: str  # "": no error document (a bare HTTP status)
    failure: Failure
    error: type[WapError]
    says: tuple[str, ...] = ()  # besides the request, STS's answer and a fix


REFUSED = ("STS did not accept the signature", "nothing was published", "run wap publish again")
RETRIED = ("the message is retried",)
ROWS = [
    # STS's outage: nothing is wrong with the request, the same one succeeds later
    Row(500, "InternalFailure", Failure.UNAVAILABLE, InfrastructureError, ("STS is unreachable or failing", *RETRIED)),
    Row(503, "ServiceUnavailable", Failure.UNAVAILABLE, InfrastructureError, RETRIED),
    Row(400, "RequestTimeout", Failure.UNAVAILABLE, InfrastructureError, RETRIED),  # a 4xx, and still an outage
    Row(503, "", Failure.UNAVAILABLE, InfrastructureError, ("HTTP 503", *RETRIED)),
    Row(200, "", Failure.UNAVAILABLE, InfrastructureError, ("HTTP 200",)),  # a success without an Arn: cut short
    Row(400, "Throttling", Failure.THROTTLED, InfrastructureError, ("throttling", *RETRIED)),
    Row(400, "ThrottlingException", Failure.THROTTLED, InfrastructureError),
    Row(400, "RequestLimitExceeded", Failure.THROTTLED, InfrastructureError),
    Row(429, "", Failure.THROTTLED, InfrastructureError),
    # the signature or the signer's credentials: refused, answered to the operator, never retried
    Row(403, "SignatureDoesNotMatch", Failure.CREDENTIALS, RequestRefusedError, REFUSED),
    Row(403, "InvalidClientTokenId", Failure.CREDENTIALS, RequestRefusedError, REFUSED),
    Row(400, "ExpiredToken", Failure.CREDENTIALS, RequestRefusedError),
    Row(403, "ExpiredToken", Failure.CREDENTIALS, RequestRefusedError),
    Row(400, "RequestExpired", Failure.CREDENTIALS, RequestRefusedError),
    Row(403, "AccessDenied", Failure.DENIED, RequestRefusedError, ("sts:GetCallerIdentity",)),
    Row(403, "", Failure.DENIED, RequestRefusedError),
    Row(400, "IncompleteSignature", Failure.CREDENTIALS, RequestRefusedError, REFUSED),
    Row(403, "MissingAuthenticationToken", Failure.CREDENTIALS, RequestRefusedError),
    Row(400, "InvalidAction", Failure.UNKNOWN, RequestRefusedError),
    Row(400, "", Failure.UNKNOWN, RequestRefusedError),
    Row(400, "InvalidParameterValue", Failure.INVALID_REQUEST, RequestRefusedError),
    # answers STS does not give to this request, judged the same way: not an outage, so a refusal
    Row(404, "", Failure.MISSING, RequestRefusedError),
    Row(404, "NoSuchBucket", Failure.NO_BUCKET, RequestRefusedError),
    Row(400, "ResourceNotFoundException", Failure.NO_RESOURCE, RequestRefusedError),
    Row(412, "", Failure.PRECONDITION, RequestRefusedError),
    Row(403, "InvalidObjectState", Failure.ARCHIVED, RequestRefusedError),
    Row(416, "", Failure.UNSATISFIABLE_RANGE, RequestRefusedError),
]


def signed() -> PublishRequest:
    request = PublishRequest("wap-orders-0123456789abcdef-1a2b3c4d", "nulls expected", reaudit=False,
                             queue="wap-ingest", issued_at=1_900_000_000)
    return StsRequesters(STS, "us-east-1", timeout=1, credentials=lambda: CREDENTIALS).sign(request)


@pytest.mark.parametrize("row", ROWS, ids=lambda r: f"{r.status}-{r.code or 'bare'}")
def test_each_sts_answer_has_one_verdict(row: Row) -> None:
    assert failure_for(row.code, row.status) is row.failure
    request = signed()
    answers = StsAnswers(row.status, sts_error_xml(row.code, "Rate exceeded.") if row.code else "")
    with pytest.raises(WapError) as info:
        StsRequesters(STS, "us-east-1", timeout=1, session=answers).identify(request)
    assert type(info.value) is row.error
    text = str(info.value)
    assert text.startswith(f"verifying publish request {request.request_id} with {STS}/: ")
    assert "STS GetCallerIdentity answered" in text and f"HTTP {row.status}" in text and row.code in text
    assert "Fix: " in text
    for phrase in row.says:
        assert phrase in text, text


def test_every_failure_has_its_row_and_only_outages_are_retried() -> None:
    assert {r.failure for r in ROWS} == set(Failure)
    assert set(SIGNATURE) == set(Failure) - {Failure.UNAVAILABLE, Failure.THROTTLED}
    assert {r.failure for r in ROWS if r.error is InfrastructureError} == {Failure.UNAVAILABLE, Failure.THROTTLED}

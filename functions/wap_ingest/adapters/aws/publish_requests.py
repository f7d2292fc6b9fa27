"""Publish requests on AWS: sent on the ingest queue, signed and verified through STS, claimed and answered once in
the lake bucket (wap_ingest.core.publish_requests says why an operator asks instead of merging, and what the
message holds).

- `SqsPublishRequests` sends a request to the function's own queue (the queue policy lets only the operator role,
  and the source bucket's notifications, send there);
- `StsRequesters` signs a request on the operator's machine (an STS GetCallerIdentity request signed with the
  operator's AWS credentials, botocore's SigV4, the request's digest in a signed header) and, in the service, sends
  that signed request to STS to learn who signed it. The service builds the URL and the body itself and takes only
  the signature headers from the message: it never sends anything to an address a message names. STS's answer is
  judged by the AWS table (adapters/aws/errors.py, `answer_error`), with this call's meaning in `SIGNATURE`: its
  outages are retried as any AWS service's, every other answer refuses the request;
- `S3RequestResults` keeps, per request id, the answer (`wap-requests/<id>.json`), written once with If-None-Match;
  the claim beside it (`wap-requests/<id>.claim.json`: the first message's id, and how far it got) is the request's
  action record (adapters/aws/action_records.py).
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable
from typing import Any
from urllib.parse import urlparse
from xml.etree import ElementTree

import requests
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.exceptions import BotoCoreError, ClientError

from wap_ingest.adapters import Verdict
from wap_ingest.adapters.aws.errors import S3, SQS, STS, Failure, answer_error, aws_error, failure_of, no_answer_error
from wap_ingest.core.errors import ConfigError
from wap_ingest.core.publish_requests import (
    RESULT_PREFIX,
    SIGNED_HEADER,
    IdentityProof,
    PublishRequest,
    RequestRefusedError,
)

STS_BODY = "Action=GetCallerIdentity&Version=2011-06-15"
CONTENT_TYPE = "application/x-www-form-urlencoded; charset=utf-8"
_AUTHORIZATION = re.compile(r"AWS4-HMAC-SHA256 Credential=[A-Za-z0-9]+/\d{8}/[a-z0-9-]+/(?P<service>[a-z0-9-]+)/"
                            r"aws4_request, ?SignedHeaders=(?P<signed>[a-z0-9;-]+), ?Signature=[0-9a-f]{64}")
_AMZ_DATE = re.compile(r"\d{8}T\d{6}Z")
_AWS_HOSTS = (".amazonaws.com", ".amazonaws.com.cn")
_REFUSED = Verdict(RequestRefusedError, "STS did not accept the signature: the request was changed after it was "
                   "signed, signed more than 15 minutes ago, or with credentials that are no longer valid (or not "
                   "allowed to call sts:GetCallerIdentity); nothing was published", "run wap publish again")
# What STS's answer to a signed request means here: an outage (UNAVAILABLE, THROTTLED) is retried as the table says;
# any other answer judges the signature or the signer's credentials (STS's own endpoint and body are the service's):
# a refusal, answered to the operator, never retried
SIGNATURE: dict[Failure, Verdict] = {failure: _REFUSED for failure in Failure
                                     if failure not in (Failure.UNAVAILABLE, Failure.THROTTLED)}


class SqsPublishRequests:
    def __init__(self, sqs: Any, queue_url: str) -> None:
        self._sqs, self._queue_url = sqs, queue_url

    def send(self, request: PublishRequest) -> str:
        """The message id SQS gave the request."""
        try:
            sent = self._sqs.send_message(QueueUrl=self._queue_url, MessageBody=request.to_body())
        except (ClientError, BotoCoreError) as exc:
            raise aws_error(exc, service=SQS, doing=f"sending the publish request for {request.branch!r} to",
                            resource=self._queue_url, setting="WAP_PUBLISH_QUEUE_URL (the ingest queue's URL)") from exc
        return str(sent.get("MessageId", ""))


def queue_name_of(queue: str) -> str:
    """The queue's name from its URL (https://sqs.<region>.amazonaws.com/<account>/<name>) or ARN."""
    return queue.rstrip("/").rsplit("/", 1)[-1].rsplit(":", 1)[-1]


def operator_credentials(region: str) -> Any:
    """The caller's AWS credentials (boto3's chain: environment, profile, SSO, instance role), frozen."""
    import boto3

    found = boto3.Session(region_name=region).get_credentials()
    if found is None:
        raise ConfigError("wap publish: no AWS credentials to sign the publish request with. Fix: assume the "
                          "operator role (aws sts assume-role, or a profile with role_arn = <prefix>-operator's ARN; "
                          "docs/deploy.md, \"How an operator publishes\") and run it again.")
    return found.get_frozen_credentials()


class StsRequesters:
    """Who asks, as STS says: `sign` on the operator's machine, `identify` in the service. `endpoint` is the STS
    endpoint both use (the region's, or AWS_ENDPOINT_URL's locally); `credentials` gives the signer's (operator)."""

    def __init__(self, endpoint: str, region: str, *, timeout: float, session: requests.Session | None = None,
                 credentials: Callable[[], Any] | None = None) -> None:
        self.endpoint, self._region, self._timeout = endpoint.rstrip("/"), region, timeout
        self._http = session or requests.Session()
        self._credentials = credentials or (lambda: operator_credentials(region))

    @property
    def url(self) -> str:
        return f"{self.endpoint}/"

    @property
    def is_aws(self) -> bool:
        return (urlparse(self.endpoint).hostname or "").endswith(_AWS_HOSTS)

    def sign(self, request: PublishRequest) -> PublishRequest:
        """The request with its proof: a GetCallerIdentity request signed with the caller's credentials, its
        signature covering the request's digest (SIGNED_HEADER). The secret key is used here and sent nowhere."""
        digest = request.digest()
        signed = AWSRequest(method="POST", url=self.url, data=STS_BODY,
                            headers={"Content-Type": CONTENT_TYPE, SIGNED_HEADER: digest})
        SigV4Auth(self._credentials(), "sts", self._region).add_auth(signed)
        return request.signed(IdentityProof(
            endpoint=self.endpoint, digest=digest, authorization=str(signed.headers["Authorization"]),
            amz_date=str(signed.headers["X-Amz-Date"]), security_token=signed.headers.get("X-Amz-Security-Token")))

    def actor(self, caller_arn: str) -> str:
        """What the decision log records: the ARN STS gave; said to be unverified when the STS is not AWS's (the
        local stack's moto answers from the access key without checking the signature, unless IAM is enforced)."""
        return caller_arn if self.is_aws else f"{caller_arn} (unverified: the STS at {self.endpoint} is not AWS's)"

    def identify(self, request: PublishRequest) -> str:
        """The signer's ARN, as STS answers the signed request the proof holds for the digest computed here."""
        proof = request.proof
        if proof is None:
            raise RequestRefusedError(f"request {request.request_id} is not signed.")
        if proof.endpoint.rstrip("/") != self.endpoint:
            raise RequestRefusedError(
                f"request {request.request_id} was signed for the STS endpoint {proof.endpoint}, and this service "
                f"verifies signatures at {self.endpoint}. Fix: run wap publish with AWS_REGION={self._region} (the "
                f"service's region).")
        match = _AUTHORIZATION.fullmatch(proof.authorization.strip())
        signed = match["signed"].split(";") if match else []
        if match is None or match["service"] != "sts" or not _AMZ_DATE.fullmatch(proof.amz_date) or \
                not {"host", "x-amz-date", SIGNED_HEADER.lower()} <= set(signed):
            raise RequestRefusedError(
                f"request {request.request_id}'s proof is not an STS request signed over the request's digest "
                f"(SigV4 for sts, with {SIGNED_HEADER} among its signed headers). Fix: run wap publish again.")
        headers = {"Content-Type": CONTENT_TYPE, SIGNED_HEADER: request.digest(), "X-Amz-Date": proof.amz_date,
                   "Authorization": proof.authorization.strip(), "Accept": "text/xml"}
        if proof.security_token:
            headers["X-Amz-Security-Token"] = proof.security_token
        doing = f"verifying publish request {request.request_id} with"
        try:
            answer = self._http.post(self.url, data=STS_BODY, headers=headers, timeout=self._timeout)
        except requests.RequestException as exc:
            raise no_answer_error(exc, service=STS, operation="GetCallerIdentity", doing=doing, resource=self.url,
                                  setting="AWS_ENDPOINT_URL", special=SIGNATURE) from exc
        return _caller_from(answer, doing, self.url)


def _text(root: ElementTree.Element, name: str) -> str:
    for element in root.iter():
        if element.tag == name or element.tag.endswith("}" + name):
            return (element.text or "").strip()
    return ""


def _caller_from(answer: requests.Response, doing: str, url: str) -> str:
    """The caller's ARN from STS's answer, or the error the AWS table and `SIGNATURE` make of it."""
    try:
        root = ElementTree.fromstring(answer.content)
    except ElementTree.ParseError:
        root = ElementTree.Element("none")
    if answer.status_code == 200 and _text(root, "Arn"):
        return _text(root, "Arn")
    raise answer_error(_text(root, "Code"), answer.status_code, _text(root, "Message") or answer.reason or "",
                       service=STS, operation="GetCallerIdentity", doing=doing, resource=url,
                       setting="AWS_ENDPOINT_URL", special=SIGNATURE)


class S3RequestResults:
    """The answers, one JSON object per request id, under `wap-requests/` in the lake bucket."""

    def __init__(self, s3: Any, bucket: str) -> None:
        self._s3, self._bucket = s3, bucket

    def _key(self, name: str) -> str:
        return f"{RESULT_PREFIX}/{name}.json"  # request ids are alphanumeric (core.publish_requests)

    def uri(self, request_id: str) -> str:
        return f"s3://{self._bucket}/{self._key(request_id)}"

    def _put_once(self, name: str, document: dict[str, Any], what: str) -> bool:
        try:
            self._s3.put_object(Bucket=self._bucket, Key=self._key(name), IfNoneMatch="*",
                                Body=json.dumps(document, indent=2, default=str).encode(),
                                ContentType="application/json")
        except (ClientError, BotoCoreError) as exc:
            if failure_of(exc) is Failure.PRECONDITION:  # If-None-Match: one was written first
                return False
            raise aws_error(exc, service=S3, doing=f"writing {what}", resource=f"s3://{self._bucket}/"
                            f"{self._key(name)}", setting="LAKE_BUCKET") from exc
        return True

    def _get(self, name: str, what: str) -> dict[str, Any] | None:
        try:
            body = self._s3.get_object(Bucket=self._bucket, Key=self._key(name))["Body"].read()
        except (ClientError, BotoCoreError) as exc:
            if failure_of(exc) is Failure.MISSING:
                return None
            raise aws_error(exc, service=S3, doing=f"reading {what}", resource=f"s3://{self._bucket}/"
                            f"{self._key(name)}", setting="LAKE_BUCKET") from exc
        document = json.loads(body)
        return document if isinstance(document, dict) else None

    def put_once(self, request_id: str, answer: dict[str, Any]) -> bool:
        """Write the answer; False (nothing written) when the request already has one."""
        return self._put_once(request_id, answer, f"the answer to publish request {request_id}")

    def get(self, request_id: str) -> dict[str, Any] | None:
        return self._get(request_id, f"the answer to publish request {request_id}")

    def wait(self, request_id: str, timeout: float, *, sleep: Callable[[float], None] = time.sleep,
             clock: Callable[[], float] = time.monotonic) -> dict[str, Any] | None:
        """The answer once written, or None after `timeout` seconds."""
        deadline = clock() + timeout
        while True:
            answer = self.get(request_id)
            if answer is not None or clock() >= deadline:
                return answer
            sleep(2.0)

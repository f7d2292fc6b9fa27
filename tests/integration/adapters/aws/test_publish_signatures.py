"""Publish requests against moto's STS and S3 over HTTP, with IAM enforced (moto's `reset-auth`, as in
tests/integration/adapters/aws/test_aws_errors.py), so that moto checks every SigV4 signature as AWS does: the operator
role's session and an IAM user sign a request (adapters/publish_requests.StsRequesters.sign) and the service learns who
signed from STS (`identify`); a request whose content and digest were changed in flight, or signed with a wrong
secret, is refused by STS itself. The claims and answers are written once (S3 If-None-Match).

moto's STS checks signatures only with IAM enforced (its server answers GetCallerIdentity from the access key
otherwise), and never the age of a signature: the 15-minute limit is AWS's, the request's own expiry is checked by
the service before STS is asked (tests/unit/core/test_publish_requests.py)."""

from __future__ import annotations

import contextlib
import json
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, replace
from typing import Any

import boto3
import pytest
import requests
from botocore.credentials import ReadOnlyCredentials
from moto.server import ThreadedMotoServer

from wap_ingest.adapters.aws.action_records import S3ActionRecords
from wap_ingest.adapters.aws.publish_requests import S3RequestResults, StsRequesters
from wap_ingest.core.once import Progress
from wap_ingest.core.publish_requests import PublishRequest, RequestRefusedError
from wap_stack.processes import free_port

pytestmark = [pytest.mark.stack]

ROLE = "arn:aws:iam::123456789012:role/wap-operator"


@dataclass(frozen=True)
class Aws:
    url: str
    operator: ReadOnlyCredentials  # a session of the operator role, named alice
    carol: ReadOnlyCredentials  # an IAM user's access key
    admin: ReadOnlyCredentials  # may do anything (the bucket's calls)
    suffix: str = ""  # of the users' names (moto's in-process backends are shared by the session's servers)

    def requesters(self, credentials: ReadOnlyCredentials | None = None) -> StsRequesters:
        return StsRequesters(self.url, "us-east-1", timeout=10, credentials=lambda: credentials or self.operator)

    def s3(self) -> Any:
        return boto3.client("s3", endpoint_url=self.url, region_name="us-east-1",
                            aws_access_key_id=self.admin.access_key, aws_secret_access_key=self.admin.secret_key)


@pytest.fixture(scope="module")
def aws() -> Iterator[Aws]:
    port = free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    url = f"http://127.0.0.1:{port}"
    try:
        def client(service: str) -> Any:
            return boto3.client(service, endpoint_url=url, region_name="us-east-1", aws_access_key_id="testing",
                                aws_secret_access_key="testing")

        iam = client("iam")
        # moto's backends are the process's, shared with every in-process server of the session: the role may be
        # there already, and the users get names of their own
        with contextlib.suppress(iam.exceptions.EntityAlreadyExistsException):
            iam.create_role(RoleName="wap-operator", AssumeRolePolicyDocument=json.dumps({
                "Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "sts:AssumeRole",
                                                       "Principal": {"AWS": "arn:aws:iam::123456789012:root"}}]}))
        session = client("sts").assume_role(RoleArn=ROLE, RoleSessionName="alice")["Credentials"]
        keys, suffix = {}, uuid.uuid4().hex[:8]
        for user in ("carol", "admin"):
            iam.create_user(UserName=f"{user}-{suffix}")
            made = iam.create_access_key(UserName=f"{user}-{suffix}")["AccessKey"]
            keys[user] = ReadOnlyCredentials(made["AccessKeyId"], made["SecretAccessKey"], None)
        iam.put_user_policy(UserName=f"admin-{suffix}", PolicyName="all", PolicyDocument=json.dumps({
            "Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "*", "Resource": "*"}]}))
        with contextlib.suppress(Exception):  # already made by an earlier in-process server of the session
            client("s3").create_bucket(Bucket="lake")
        requests.post(f"{url}/moto-api/reset-auth", data=b"0", timeout=10).raise_for_status()
        try:
            yield Aws(url, ReadOnlyCredentials(session["AccessKeyId"], session["SecretAccessKey"],
                                               session["SessionToken"]), keys["carol"], keys["admin"], suffix)
        finally:
            requests.post(f"{url}/moto-api/reset-auth", data=b"inf", timeout=10)
    finally:
        server.stop()


def a_request() -> PublishRequest:
    return PublishRequest("wap-orders-0123456789abcdef-1a2b3c4d", "nulls expected", reaudit=False,
                          queue="wap-ingest")


def test_sts_names_the_operator_role_session_and_the_user_that_signed(aws: Aws) -> None:
    signed = aws.requesters().sign(a_request())
    assert aws.requesters().identify(signed) == "arn:aws:sts::123456789012:assumed-role/wap-operator/alice"
    by_carol = aws.requesters(aws.carol).sign(a_request())
    assert aws.requesters().identify(by_carol) == f"arn:aws:iam::123456789012:user/carol-{aws.suffix}"
    assert aws.operator.secret_key not in by_carol.to_body() + signed.to_body()


def test_a_request_changed_in_flight_with_its_digest_is_refused_by_sts(aws: Aws) -> None:
    """The branch changed and the digest the proof names recomputed (so the service's own comparison passes): the
    service sends STS the digest of what it received, which the operator's signature does not cover."""
    signed = aws.requesters().sign(a_request())
    assert signed.proof is not None
    changed = replace(signed, branch="wap-payments-0123456789abcdef-1a2b3c4d")
    changed = changed.signed(replace(signed.proof, digest=changed.digest()))
    with pytest.raises(RequestRefusedError, match="SignatureDoesNotMatch"):
        aws.requesters().identify(changed)
    assert aws.requesters().identify(signed).endswith("/wap-operator/alice")  # the original still verifies


def test_a_signature_made_with_a_wrong_secret_or_unknown_key_is_refused(aws: Aws) -> None:
    wrong = ReadOnlyCredentials(aws.carol.access_key, "not-the-secret", None)
    with pytest.raises(RequestRefusedError, match="SignatureDoesNotMatch"):
        aws.requesters().identify(aws.requesters(wrong).sign(a_request()))
    unknown = ReadOnlyCredentials("AKIAUNKNOWNUNKNOWN00", "secret", None)
    with pytest.raises(RequestRefusedError, match="InvalidClientTokenId"):
        aws.requesters().identify(aws.requesters(unknown).sign(a_request()))


def test_a_request_id_is_claimed_once_and_answered_once(aws: Aws) -> None:
    """The claim is the request's action record (core.once; the contract suite: test_action_records_contract.py),
    here with IAM enforced: the If-None-Match and If-Match writes, and the read back of another delivery's claim."""
    records = S3ActionRecords(aws.s3(), "lake")
    claimed, made = records.claim("abc123", "m1", "publish request abc123")
    assert made and records.claim("abc123", "m2", "publish request abc123")[0].message_id == "m1"  # a replay
    assert records.change(claimed, Progress.DONE) is not None
    assert records.claim("abc123", "m1", "publish request abc123")[0].progress is Progress.DONE  # the same message
    results = S3RequestResults(aws.s3(), "lake")
    assert results.put_once("abc123", {"action": "published", "actor": "alice"})
    assert not results.put_once("abc123", {"action": "refused", "actor": "mallory"})  # If-None-Match
    assert results.get("abc123") == {"action": "published", "actor": "alice"}
    assert results.wait("abc123", 1) == {"action": "published", "actor": "alice"}

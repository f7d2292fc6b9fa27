"""The AWS error table (adapters/aws/errors.py) on the wire: the codes moto's server really sends over HTTP, through
the real adapters. The stack's moto for the missing object, bucket, queue, bus, parameter and job run, the refused
precondition and the empty range; a moto server of this module's own with IAM enforced for AccessDenied and unknown
credentials, where an ingestion whose file may not be read fails its message (retried, never consumed as the file's
fault) and gets past the denial once the policy allows it. Row by row over every code:
tests/unit/adapters/aws/test_aws_errors.py.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import boto3
import pytest
import requests
from botocore.config import Config
from moto.server import ThreadedMotoServer

from tests.fakes import FakeCatalog, FakeNotifier, FakeObjectStore, FakeWriter
from wap_ingest.adapters.aws.decision_log import S3DecisionLog
from wap_ingest.adapters.aws.emr import EmrServerlessJobs
from wap_ingest.adapters.aws.eventbridge import EventBridgeSink
from wap_ingest.adapters.aws.lake_lifecycle import current_rules
from wap_ingest.adapters.aws.publish_requests import SqsPublishRequests
from wap_ingest.adapters.aws.s3 import S3ObjectStore, s3_client_for
from wap_ingest.adapters.aws.s3_reports import S3ReportStore
from wap_ingest.adapters.aws.secrets import secret_from_parameter
from wap_ingest.core.audits import suites_from
from wap_ingest.core.downstream import DownstreamEvent
from wap_ingest.core.errors import (
    BadInputError,
    CatalogError,
    ConfigError,
    EmptySourceError,
    SourceNotFoundError,
)
from wap_ingest.core.ingest import Delivery, Item, ingest
from wap_ingest.core.models import DecisionRecord, SourceObject
from wap_ingest.core.pipeline import PipelineConfig, Ports
from wap_ingest.core.publish_requests import PublishRequest
from wap_stack.processes import free_port

pytestmark = [pytest.mark.stack]


@pytest.fixture(scope="module")
def s3(stack_env: dict[str, str]) -> Any:
    return s3_client_for(stack_env["AWS_REGION"], stack_env["AWS_ENDPOINT_URL"], 10.0)


@pytest.fixture
def bucket(s3: Any) -> str:
    name = f"errors-{uuid.uuid4().hex[:12]}"
    s3.create_bucket(Bucket=name)
    return name


def aws(stack_env: dict[str, str], service: str) -> Any:
    return boto3.client(service, endpoint_url=stack_env["AWS_ENDPOINT_URL"], region_name=stack_env["AWS_REGION"])


# --- the stack's moto: what a call expects, or a setting names, is not there --------------------------------

def test_a_missing_source_object_or_bucket_is_the_files_fault(s3: Any, bucket: str) -> None:
    store = S3ObjectStore(s3)
    with pytest.raises(SourceNotFoundError, match=r"no such object.*S3 HeadObject answered HTTP 404"):
        store.head(bucket, "orders/gone.csv")  # a HEAD: no code, its status
    with pytest.raises(SourceNotFoundError, match=r"the bucket does not exist.*GetObject answered NoSuchBucket"):
        store.read_bytes(SourceObject(f"{bucket}-none", "orders/_load.json", 10, "e"), 1000)


def test_an_object_changed_since_its_event_is_left_to_its_own_event(s3: Any, bucket: str, tmp_path: Any) -> None:
    s3.put_object(Bucket=bucket, Key="orders/x.csv", Body=b"a\n1\n")
    with pytest.raises(SourceNotFoundError, match=r"changed since it was announced.*PreconditionFailed \(HTTP 412"):
        S3ObjectStore(s3).download(SourceObject(bucket, "orders/x.csv", 4, "an-older-etag"), tmp_path)


def test_an_empty_manifest_is_the_files_fault_not_an_outage(s3: Any, bucket: str) -> None:
    s3.put_object(Bucket=bucket, Key="orders/_load.json", Body=b"")
    head = S3ObjectStore(s3).head(bucket, "orders/_load.json")
    with pytest.raises(EmptySourceError, match=r"the manifest is empty.*InvalidRange \(HTTP 416"):
        S3ObjectStore(s3).read_bytes(head, 1000)


def test_the_service_own_objects(s3: Any, bucket: str) -> None:
    reports = S3ReportStore(s3, bucket)
    assert reports.load("wap-t-none-1") is None  # NoSuchKey: no report kept
    with pytest.raises(ConfigError, match=r"the bucket does not exist.*Fix: check LAKE_BUCKET"):
        S3ReportStore(s3, f"{bucket}-none").save("wap-t-abc-1", {})
    record = DecisionRecord("wap.t", "wap-t-abc-1", "discarded", "r", "op", "2027-01-15T08:00:00+00:00")
    log = S3DecisionLog(s3, bucket)
    log.record(record)
    with pytest.raises(CatalogError, match=r"never overwritten.*PreconditionFailed"):  # If-None-Match refused
        log.record(record)
    assert current_rules(s3, bucket) == []  # NoSuchLifecycleConfiguration: none


def test_what_a_setting_names_does_not_exist(stack_env: dict[str, str], s3: Any) -> None:
    queue = f"{stack_env['AWS_ENDPOINT_URL']}/123456789012/no-such-queue"
    request = PublishRequest(branch="wap-t-abc-1", reason="ok", reaudit=True)
    # SQS's JSON protocol names it QueueDoesNotExist (moto 5.2, and AWS), its query protocol
    # AWS.SimpleQueueService.NonExistentQueue (moto 5.1): both are "no such resource"
    with pytest.raises(ConfigError, match=r"SQS has no such resource.*(QueueDoesNotExist|NonExistentQueue).*"
                                          r"WAP_PUBLISH_QUEUE_URL"):
        SqsPublishRequests(aws(stack_env, "sqs"), queue).send(request)
    with pytest.raises(ConfigError, match=r"EventBridge has no such resource.*ResourceNotFoundException"):
        EventBridgeSink(aws(stack_env, "events"), "no-such-bus").publish([DownstreamEvent("Table Published", {})])
    with pytest.raises(ConfigError, match=r"WAP_SLACK_TOKEN_PARAMETER='/wap/none': cannot read the Slack token.*"
                                          r"ParameterNotFound"):
        secret_from_parameter("/wap/none", variable="WAP_SLACK_TOKEN_PARAMETER", what="the Slack token",
                              ssm=aws(stack_env, "ssm"))
    jobs = EmrServerlessJobs(aws(stack_env, "emr-serverless"), s3, lake_bucket="lake", application_id="no-such-app",
                             request_for=lambda *_: {})
    with pytest.raises(ConfigError, match=r"EMR Serverless GetJobRun answered ResourceNotFoundException"):
        jobs.run_ended("no-such-app", "run-1")


# --- a moto server with IAM enforced ---------------------------------------------------------------------------

@dataclass(frozen=True)
class Iam:
    url: str
    keys: dict[str, tuple[str, str]]  # user -> (access key id, secret)

    def client(self, service: str, user: str | None, *, secret: str | None = None) -> Any:
        key, real = self.keys[user] if user else ("AKIAUNKNOWN", "unknown")
        return boto3.client(service, endpoint_url=self.url, region_name="us-east-1", aws_access_key_id=key,
                            aws_secret_access_key=secret or real,
                            config=Config(retries={"max_attempts": 1}, s3={"addressing_style": "path"}))


def policy(*actions: str) -> str:
    return json.dumps({"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": list(actions),
                                                               "Resource": "*"}]})


@pytest.fixture(scope="module")
def iam() -> Iterator[Iam]:
    """moto with IAM enforced from the first request after the set-up (moto's `reset-auth`): a `lister` that may
    only list, and an `admin`. The setting is the server's (in this process): it is put back afterwards."""
    port = free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    url = f"http://127.0.0.1:{port}"
    try:
        setup = boto3.client("iam", endpoint_url=url, region_name="us-east-1", aws_access_key_id="testing",
                             aws_secret_access_key="testing")
        store = boto3.client("s3", endpoint_url=url, region_name="us-east-1", aws_access_key_id="testing",
                             aws_secret_access_key="testing")
        store.create_bucket(Bucket="source")
        store.put_object(Bucket="source", Key="orders/x.csv", Body=b"id\n1\n")
        keys = {}
        for user, actions in (("lister", ("s3:ListBucket",)), ("admin", ("*",))):
            setup.create_user(UserName=user)
            setup.put_user_policy(UserName=user, PolicyName="p", PolicyDocument=policy(*actions))
            made = setup.create_access_key(UserName=user)["AccessKey"]
            keys[user] = (made["AccessKeyId"], made["SecretAccessKey"])
        requests.post(f"{url}/moto-api/reset-auth", data=b"0", timeout=10).raise_for_status()
        try:
            yield Iam(url, keys)
        finally:
            requests.post(f"{url}/moto-api/reset-auth", data=b"inf", timeout=10)
    finally:
        server.stop()


def test_access_denied_is_a_setting_with_the_permission_to_grant(iam: Iam, tmp_path: Any) -> None:
    store = S3ObjectStore(iam.client("s3", "lister"))
    # allowed (no prefix: moto's signature check fails a query holding a `/`, which AWS accepts)
    assert [o.key for o in store.list_objects("source", "")] == ["orders/x.csv"]
    with pytest.raises(ConfigError, match=r"may not s3:GetObject.*HeadObject answered HTTP 403.*Fix: grant "
                                          r"s3:GetObject on s3://source/orders/x.csv"):
        store.head("source", "orders/x.csv")
    with pytest.raises(ConfigError, match=r"GetObject answered AccessDenied \(HTTP 403: Access Denied\)"):
        store.download(SourceObject("source", "orders/x.csv", 5, None), tmp_path)
    with pytest.raises(ConfigError, match=r"may not sqs:SendMessage.*is not authorized to perform: sqs:SendMessage"):
        SqsPublishRequests(iam.client("sqs", "lister"), f"{iam.url}/123456789012/q").send(
            PublishRequest(branch="wap-t-abc-1", reason="ok", reaudit=True))


def test_unknown_credentials_are_a_setting(iam: Iam) -> None:
    with pytest.raises(ConfigError, match=r"credentials are missing, wrong or expired.*InvalidAccessKeyId"):
        S3ObjectStore(iam.client("s3", None)).list_objects("source", "")
    with pytest.raises(ConfigError, match=r"SignatureDoesNotMatch"):
        S3ObjectStore(iam.client("s3", "lister", secret="wrong")).list_objects("source", "")


def test_an_ingestion_denied_its_file_fails_its_message_until_the_grant(iam: Iam) -> None:
    """Denied, the file is neither INVALID (consumed) nor lost: its result is the error, which fails its message
    (the entry points retry it, then dead-letter it), alerted as such. After the grant, what the retried message
    does first (the object's metadata, for its routing) succeeds."""
    suites = suites_from({"tables": {"orders": [{"check": "row_count", "min": 1}]}}, default_namespace="wap")
    catalog, notifier = FakeCatalog(), FakeNotifier()
    ports = Ports(catalog=catalog, writer=FakeWriter(catalog, FakeObjectStore()),
                  objects=S3ObjectStore(iam.client("s3", "lister")))
    (denied,) = ingest([Item(SourceObject("source", "orders/x.csv"), Delivery(attempt=1, max_attempts=3))],
                       ports=ports, suites=suites, config=PipelineConfig(default_namespace="wap"), notifier=notifier)
    assert isinstance(denied, ConfigError) and not isinstance(denied, BadInputError)  # failed, not consumed
    (alert,) = notifier.alerts
    assert "grant s3:GetObject on s3://source/orders/x.csv" in alert.text and "will be retried" in alert.text
    iam.client("iam", "admin").put_user_policy(UserName="lister", PolicyName="p",
                                               PolicyDocument=policy("s3:ListBucket", "s3:GetObject"))
    assert S3ObjectStore(iam.client("s3", "lister")).head("source", "orders/x.csv").size == 5

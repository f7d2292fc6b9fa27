"""wap_stack/moto_overheads.py: the stack's moto finds a request's service without listing its package directory and
parses each JSONPath expression once, and answers exactly as moto itself does (a differential against moto
unpatched: S3, SQS, and an EventBridge rule whose target's input is transformed)."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from moto import backends
from moto.server import ThreadedMotoServer

from wap_stack.moto_overheads import installed

EVENT_PATHS = {"key": "$.detail.object.key", "size": "$.detail.object.size", "missing": "$.detail.nothing"}
TEMPLATE = '{"key": "<key>", "size": <size>, "missing": "<missing>"}'


@pytest.fixture()
def server(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    for name in ("AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL_SQS", "AWS_ENDPOINT_URL_EVENTS"):
        monkeypatch.delenv(name, raising=False)  # a stack test in this worker may have set them
    for name, value in (("AWS_ACCESS_KEY_ID", "testing"), ("AWS_SECRET_ACCESS_KEY", "testing"),
                        ("AWS_DEFAULT_REGION", "us-east-1")):
        monkeypatch.setenv(name, value)
    moto = ThreadedMotoServer(ip_address="127.0.0.1", port=0)
    moto.start()
    host, port = moto.get_host_and_port()
    try:
        yield f"http://{host}:{port}"
    finally:
        moto.stop()


def _answers(endpoint: str, run: int) -> list[Any]:
    """A few requests of each kind the stack makes, and what moto answered."""
    s3, sqs = boto3.client("s3", endpoint_url=endpoint), boto3.client("sqs", endpoint_url=endpoint)
    events = boto3.client("events", endpoint_url=endpoint)
    bucket, queue_name = f"bkt-{run}", f"q-{run}"
    s3.create_bucket(Bucket=bucket)
    s3.put_object(Bucket=bucket, Key="a/b.parquet", Body=b"abc")
    found: list[Any] = [s3.get_object(Bucket=bucket, Key="a/b.parquet")["Body"].read(),
                        [o["Key"] for o in s3.list_objects_v2(Bucket=bucket)["Contents"]]]
    queue = sqs.create_queue(QueueName=queue_name)["QueueUrl"]
    arn = sqs.get_queue_attributes(QueueUrl=queue, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    events.put_rule(Name=f"rule-{run}", EventPattern=json.dumps({"source": ["wap-lake"]}))
    events.put_targets(Rule=f"rule-{run}", Targets=[{"Id": "q", "Arn": arn, "InputTransformer": {
        "InputPathsMap": EVENT_PATHS, "InputTemplate": TEMPLATE}}])
    for size in (1, 2):
        events.put_events(Entries=[{"Source": "wap-lake", "DetailType": "published",
                                    "Detail": json.dumps({"object": {"key": f"k{size}", "size": size}})}])
    messages = sqs.receive_message(QueueUrl=queue, MaxNumberOfMessages=10, WaitTimeSeconds=1).get("Messages", [])
    found.append(sorted(json.loads(m["Body"])["key"] + str(json.loads(m["Body"])["size"]) for m in messages))
    return found


def test_every_answer_is_the_one_moto_gives(server: str) -> None:
    unpatched = _answers(server, 1)
    with installed():
        patched = _answers(server, 2)
    assert patched == unpatched
    assert patched[-1] == ["k11", "k22"]  # the events were transformed and delivered


def test_the_package_is_listed_once_and_an_expression_parsed_once(server: str, monkeypatch: pytest.MonkeyPatch
                                                                   ) -> None:
    import jsonpath_ng.ext

    own_modules = list(backends.list_of_moto_modules())
    with installed():
        listings: list[str] = []
        real_listdir = os.listdir
        monkeypatch.setattr(os, "listdir", lambda path=".": listings.append(str(path)) or real_listdir(path))
        assert list(backends.list_of_moto_modules()) == own_modules and listings == []
        boto3.client("s3", endpoint_url=server).list_buckets()
        assert listings == []  # the request found its service without listing moto's package
        first = jsonpath_ng.ext.parse("$.detail.object.key")
        assert jsonpath_ng.ext.parse("$.detail.object.key") is first
        assert [m.value for m in first.find({"detail": {"object": {"key": "k"}}})] == ["k"]

"""The AWS error table (adapters/aws/errors.py), row by row, over real botocore errors: each ClientError is raised by
a real boto3 client from a response of the shape AWS sends (botocore's Stubber answers in place of the network, after
the client validated the request), each BotoCoreError is botocore's own class. Then: every AWS adapter judges the same
failure the same way (AccessDenied was retried as an S3 outage in one adapter and a setting in another).
The same codes on the wire, as moto's server really sends them: tests/integration/adapters/aws/test_aws_errors.py."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import boto3
import pytest
from botocore.config import Config
from botocore.exceptions import (
    BotoCoreError,
    ClientError,
    ConnectionClosedError,
    ConnectTimeoutError,
    DataNotFoundError,
    EndpointConnectionError,
    FlexibleChecksumError,
    NoCredentialsError,
    NoRegionError,
    PartialCredentialsError,
    ProfileNotFound,
    ReadTimeoutError,
    ResponseStreamingError,
)

from tests.aws_stubs import client, client_error
from wap_ingest.adapters.aws import errors as aws_errors
from wap_ingest.adapters.aws.errors import (
    EMR_SERVERLESS,
    EVENTBRIDGE,
    S3,
    SECRETS_MANAGER,
    SQS,
    SSM,
    AwsService,
    Failure,
    aws_error,
    failure_of,
)
from wap_ingest.core.errors import (
    ConfigError,
    EmptySourceError,
    InfrastructureError,
    ObjectStoreUnavailableError,
    SourceNotFoundError,
    UnreadableSourceError,
    WapError,
)

SERVICES = {"s3": S3, "sqs": SQS, "emr-serverless": EMR_SERVERLESS, "events": EVENTBRIDGE, "ssm": SSM,
            "secretsmanager": SECRETS_MANAGER}
MOTO_SQS_DENIED = (  # moto's answer to a JSON-protocol call it denies: an XML document in the message
    '<?xml version="1.0" encoding="UTF-8"?>\n  <ErrorResponse>\n    <Errors>\n      <Error>\n        <Code>AccessDenied'
    '</Code>\n        <Message><![CDATA[User: arn:aws:iam::123456789012:user/u is not authorized to perform: '
    'sqs:SendMessage]]></Message>\n      </Error>\n    </Errors>\n</ErrorResponse>')


@dataclass(frozen=True)
class Row:
    service: str
    operation: str
    code: str
    status: int
    failure: Failure
    error: type[WapError]  # the table's verdict for this service
    message: str = ""
    meta: dict[str, str] = field(default_factory=dict)
    says: tuple[str, ...] = ()  # besides the service, the operation, the resource and a fix


ROWS = [
    # answered, and nothing is wrong with the request: retried, as the service's outage
    Row("s3", "get_object", "InternalError", 500, Failure.UNAVAILABLE, ObjectStoreUnavailableError,
        "We encountered an internal error. Please try again."),
    Row("s3", "put_object", "ServiceUnavailable", 503, Failure.UNAVAILABLE, ObjectStoreUnavailableError),
    Row("s3", "get_object", "RequestTimeout", 400, Failure.UNAVAILABLE, ObjectStoreUnavailableError,
        "Your socket connection to the server was not read from or written to within the timeout period."),
    Row("s3", "head_object", "502", 502, Failure.UNAVAILABLE, ObjectStoreUnavailableError, "Bad Gateway",
        says=("HTTP 502",)),
    Row("sqs", "send_message", "InternalFailure", 500, Failure.UNAVAILABLE, InfrastructureError),
    Row("emr-serverless", "get_job_run", "InternalServerException", 500, Failure.UNAVAILABLE, InfrastructureError),
    Row("ssm", "get_parameter", "InternalServerError", 500, Failure.UNAVAILABLE, InfrastructureError),
    Row("events", "put_events", "ServiceUnavailableException", 503, Failure.UNAVAILABLE, InfrastructureError),
    Row("s3", "get_object", "SlowDown", 503, Failure.THROTTLED, ObjectStoreUnavailableError,
        "Please reduce your request rate.", says=("throttling",)),
    Row("sqs", "send_message", "RequestThrottled", 403, Failure.THROTTLED, InfrastructureError),  # code over status
    Row("events", "put_events", "ThrottlingException", 400, Failure.THROTTLED, InfrastructureError),
    Row("ssm", "get_parameter", "Throttling", 400, Failure.THROTTLED, InfrastructureError, "Rate exceeded"),
    Row("ssm", "get_parameter", "TooManyRequestsException", 429, Failure.THROTTLED, InfrastructureError),
    Row("emr-serverless", "start_job_run", "ServiceQuotaExceededException", 402, Failure.THROTTLED,
        InfrastructureError),
    Row("secretsmanager", "get_secret_value", "RequestLimitExceeded", 400, Failure.THROTTLED, InfrastructureError),
    Row("s3", "get_object", "ProvisionedThroughputExceededException", 400, Failure.THROTTLED,
        ObjectStoreUnavailableError),
    Row("s3", "get_object", "429", 429, Failure.THROTTLED, ObjectStoreUnavailableError),
    # a permission to grant: a setting, naming the IAM action
    Row("s3", "get_object", "AccessDenied", 403, Failure.DENIED, ConfigError, "Access Denied",
        says=("s3:GetObject", "wap dlq redrive")),
    Row("s3", "head_object", "403", 403, Failure.DENIED, ConfigError, "Forbidden", says=("s3:GetObject",)),
    Row("s3", "list_objects_v2", "AccessDenied", 403, Failure.DENIED, ConfigError, says=("s3:ListBucket",)),
    Row("s3", "copy_object", "AccessDenied", 403, Failure.DENIED, ConfigError, says=("s3:GetObject and s3:PutObject",)),
    Row("s3", "get_bucket_lifecycle_configuration", "AccessDenied", 403, Failure.DENIED, ConfigError,
        says=("s3:GetLifecycleConfiguration",)),
    Row("s3", "get_object", "AllAccessDisabled", 403, Failure.DENIED, ConfigError),
    Row("sqs", "send_message", "403", 403, Failure.DENIED, ConfigError, MOTO_SQS_DENIED,
        says=("sqs:SendMessage", "is not authorized to perform: sqs:SendMessage")),  # moto's answer, XML in JSON
    Row("sqs", "send_message", "AccessDenied", 403, Failure.DENIED, ConfigError, says=("sqs:SendMessage",)),
    Row("emr-serverless", "start_job_run", "AccessDeniedException", 403, Failure.DENIED, ConfigError,
        says=("emr-serverless:StartJobRun",)),
    Row("events", "put_events", "AccessDeniedException", 400, Failure.DENIED, ConfigError, says=("events:PutEvents",)),
    Row("ssm", "get_parameter", "AccessDeniedException", 400, Failure.DENIED, ConfigError,
        says=("ssm:GetParameter",)),
    Row("secretsmanager", "get_secret_value", "AccessDeniedException", 400, Failure.DENIED, ConfigError,
        says=("secretsmanager:GetSecretValue",)),
    Row("sqs", "send_message", "AuthorizationError", 403, Failure.DENIED, ConfigError),
    # credentials
    Row("s3", "get_object", "InvalidAccessKeyId", 403, Failure.CREDENTIALS, ConfigError,
        "The AWS Access Key Id you provided does not exist in our records.", says=("AWS_PROFILE",)),
    Row("s3", "put_object", "SignatureDoesNotMatch", 403, Failure.CREDENTIALS, ConfigError),
    Row("s3", "get_object", "ExpiredToken", 400, Failure.CREDENTIALS, ConfigError),
    Row("sqs", "send_message", "ExpiredTokenException", 400, Failure.CREDENTIALS, ConfigError),
    Row("s3", "get_object", "InvalidToken", 400, Failure.CREDENTIALS, ConfigError),
    Row("ssm", "get_parameter", "UnrecognizedClientException", 400, Failure.CREDENTIALS, ConfigError),
    Row("events", "put_events", "InvalidClientTokenId", 403, Failure.CREDENTIALS, ConfigError),
    Row("emr-serverless", "get_job_run", "RequestExpired", 400, Failure.CREDENTIALS, ConfigError),
    Row("ssm", "get_parameter", "IncompleteSignature", 400, Failure.CREDENTIALS, ConfigError),
    Row("sqs", "send_message", "MissingAuthenticationToken", 403, Failure.CREDENTIALS, ConfigError),
    # what a setting names does not exist, or a request built from settings is invalid
    Row("s3", "put_object", "NoSuchBucket", 404, Failure.NO_BUCKET, ConfigError, "The specified bucket does not exist",
        says=("check the setting that names it, or create the bucket",)),
    Row("sqs", "send_message", "AWS.SimpleQueueService.NonExistentQueue", 400, Failure.NO_RESOURCE, ConfigError,
        "The specified queue does not exist.", {"QueryErrorCode": "QueueDoesNotExist", "Type": "Sender"},
        says=("QueueDoesNotExist",)),
    Row("sqs", "send_message", "QueueDoesNotExist", 400, Failure.NO_RESOURCE, ConfigError),
    Row("emr-serverless", "get_job_run", "ResourceNotFoundException", 404, Failure.NO_RESOURCE, ConfigError,
        "Application 00app does not exist"),
    Row("events", "put_events", "ResourceNotFoundException", 400, Failure.NO_RESOURCE, ConfigError,
        "Event bus wap does not exist."),
    Row("ssm", "get_parameter", "ParameterNotFound", 400, Failure.NO_RESOURCE, ConfigError),
    Row("secretsmanager", "get_secret_value", "ResourceNotFoundException", 400, Failure.NO_RESOURCE, ConfigError),
    Row("emr-serverless", "start_job_run", "ValidationException", 400, Failure.INVALID_REQUEST, ConfigError),
    Row("sqs", "send_message", "InvalidParameterValue", 400, Failure.INVALID_REQUEST, ConfigError),
    Row("events", "put_events", "InvalidParameterValueException", 400, Failure.INVALID_REQUEST, ConfigError),
    Row("s3", "put_object", "InvalidArgument", 400, Failure.INVALID_REQUEST, ConfigError),
    Row("s3", "get_object", "InvalidRequest", 400, Failure.INVALID_REQUEST, ConfigError),
    Row("s3", "list_objects_v2", "InvalidBucketName", 400, Failure.INVALID_REQUEST, ConfigError),
    Row("sqs", "send_message", "InvalidAddress", 404, Failure.INVALID_REQUEST, ConfigError),
    Row("s3", "put_object", "MalformedXML", 400, Failure.INVALID_REQUEST, ConfigError),
    # what the call means decides (callers pass their verdict): here the defaults
    Row("s3", "get_object", "NoSuchKey", 404, Failure.MISSING, InfrastructureError,
        "The specified key does not exist."),
    Row("s3", "head_object", "404", 404, Failure.MISSING, InfrastructureError, "Not Found"),
    Row("s3", "get_object", "NoSuchVersion", 404, Failure.MISSING, InfrastructureError),
    Row("s3", "head_object", "NotFound", 404, Failure.MISSING, InfrastructureError),
    Row("s3", "get_bucket_lifecycle_configuration", "NoSuchLifecycleConfiguration", 404, Failure.MISSING,
        InfrastructureError),
    Row("s3", "get_object", "PreconditionFailed", 412, Failure.PRECONDITION, InfrastructureError,
        "At least one of the pre-conditions you specified did not hold"),
    Row("s3", "head_object", "412", 412, Failure.PRECONDITION, InfrastructureError),
    Row("s3", "put_object", "ConditionalRequestConflict", 409, Failure.PRECONDITION, InfrastructureError),
    Row("s3", "get_object", "InvalidObjectState", 403, Failure.ARCHIVED, ConfigError,
        "The operation is not valid for the object's storage class"),
    Row("s3", "get_object", "InvalidRange", 416, Failure.UNSATISFIABLE_RANGE, InfrastructureError,
        "The requested range is not satisfiable"),
    Row("s3", "head_object", "416", 416, Failure.UNSATISFIABLE_RANGE, InfrastructureError),
    # anything else: retried, with the code
    Row("s3", "put_object", "EntityTooLarge", 400, Failure.UNKNOWN, InfrastructureError, says=("EntityTooLarge",)),
    Row("emr-serverless", "start_job_run", "ConflictException", 409, Failure.UNKNOWN, InfrastructureError),
]


@pytest.mark.parametrize("row", ROWS, ids=lambda r: f"{r.service}-{r.operation}-{r.code}")
def test_each_answer_has_one_verdict(row: Row) -> None:
    exc = client_error(row.service, row.operation, row.code, row.status, row.message, row.meta or None)
    service = SERVICES[row.service]
    assert failure_of(exc) is row.failure
    error = aws_error(exc, service=service, doing="doing the thing with", resource="the-resource")
    assert type(error) is row.error
    text = str(error)
    operation = exc.operation_name
    assert text.startswith("doing the thing with the-resource: ") and f"{service.name} {operation} answered" in text
    shown = row.meta.get("QueryErrorCode", row.code)  # botocore's name for the code, where it has one
    assert (f"HTTP {row.status}" in text) and (shown in text or row.code == str(row.status)) and "Fix: " in text
    for phrase in row.says:
        assert phrase in text


def test_every_code_of_the_table_has_its_row() -> None:
    assert {r.code for r in ROWS} >= set(aws_errors._CODES)
    assert {r.failure for r in ROWS} == set(Failure)
    assert set(aws_errors.VERDICTS) == set(Failure)


@pytest.mark.parametrize(
    ("exc", "failure", "error"),
    [
        (EndpointConnectionError(endpoint_url="http://127.0.0.1:9/source/x.csv"), Failure.UNAVAILABLE,
         ObjectStoreUnavailableError),
        (ConnectTimeoutError(endpoint_url="http://s3"), Failure.UNAVAILABLE, ObjectStoreUnavailableError),
        (ReadTimeoutError(endpoint_url="http://s3"), Failure.UNAVAILABLE, ObjectStoreUnavailableError),
        (ConnectionClosedError(endpoint_url="http://s3"), Failure.UNAVAILABLE, ObjectStoreUnavailableError),
        (ResponseStreamingError(error="Connection broken: IncompleteRead"), Failure.UNAVAILABLE,
         ObjectStoreUnavailableError),
        (FlexibleChecksumError(error_msg="Expected checksum x did not match calculated checksum y"),
         Failure.UNAVAILABLE, ObjectStoreUnavailableError),
        (NoCredentialsError(), Failure.CREDENTIALS, ConfigError),
        (PartialCredentialsError(provider="env", cred_var="AWS_SECRET_ACCESS_KEY"), Failure.CREDENTIALS, ConfigError),
        (ProfileNotFound(profile="wap"), Failure.CREDENTIALS, ConfigError),
        (NoRegionError(), Failure.CREDENTIALS, ConfigError),
        (DataNotFoundError(data_path="s3"), Failure.UNKNOWN, InfrastructureError),
    ],
    ids=lambda v: type(v).__name__ if isinstance(v, BotoCoreError) else str(v),
)
def test_failures_without_an_answer(exc: BotoCoreError, failure: Failure, error: type[WapError]) -> None:
    assert failure_of(exc) is failure
    raised = aws_error(exc, service=S3, doing="downloading", resource="s3://source/orders/x.csv")
    assert type(raised) is error
    assert f"no answer from S3 ({type(exc).__name__}" in str(raised) and "Fix: " in str(raised)


def test_a_request_botocore_refuses_is_a_setting_to_fix() -> None:
    try:
        client("s3").get_object(Bucket="source", Key="")  # a key the service model refuses (too short)
    except BotoCoreError as exc:
        assert failure_of(exc) is Failure.INVALID_REQUEST
        assert type(aws_error(exc, service=S3, doing="reading", resource="s3://source/")) is ConfigError
    else:
        raise AssertionError("botocore accepted an empty key")


def test_an_unreachable_endpoint_is_an_outage_named_with_the_fix() -> None:
    dead = boto3.client("s3", endpoint_url="http://127.0.0.1:9", region_name="us-east-1", aws_access_key_id="t",
                        aws_secret_access_key="t", config=Config(connect_timeout=1, retries={"max_attempts": 1}))
    with pytest.raises(BotoCoreError) as info:
        dead.head_object(Bucket="source", Key="orders/x.csv")
    error = aws_error(info.value, service=S3, doing="reading the metadata of", resource="s3://source/orders/x.csv")
    assert type(error) is ObjectStoreUnavailableError
    assert "S3 is unreachable" in str(error) and "AWS_ENDPOINT_URL" in str(error)


def test_a_caller_gives_the_meaning_of_its_own_failures() -> None:
    from wap_ingest.adapters.aws.s3 import COPIED, MANIFEST, SOURCE

    missing = client_error("s3", "get_object", "NoSuchKey", 404, "The specified key does not exist.")
    no_bucket = client_error("s3", "get_object", "NoSuchBucket", 404, "The specified bucket does not exist")
    changed = client_error("s3", "get_object", "PreconditionFailed", 412)
    archived = client_error("s3", "get_object", "InvalidObjectState", 403)
    empty = client_error("s3", "get_object", "InvalidRange", 416)
    denied = client_error("s3", "get_object", "AccessDenied", 403)

    def judged(exc: ClientError, special: Any) -> WapError:
        return aws_error(exc, service=S3, doing="downloading", resource="s3://source/orders/x.csv", special=special)

    assert type(judged(missing, SOURCE)) is SourceNotFoundError and "no such object" in str(judged(missing, SOURCE))
    assert type(judged(no_bucket, SOURCE)) is SourceNotFoundError
    assert type(judged(no_bucket, COPIED)) is ConfigError  # copying: the missing bucket is the lake's
    assert type(judged(changed, SOURCE)) is SourceNotFoundError
    assert type(judged(archived, SOURCE)) is UnreadableSourceError
    assert type(judged(empty, SOURCE)) is InfrastructureError and type(judged(empty, MANIFEST)) is EmptySourceError
    assert type(judged(denied, SOURCE)) is ConfigError  # never the file's fault: the file is retried once granted


def test_the_iam_action_of_an_operation() -> None:
    assert S3.action("HeadObject") == "s3:GetObject" and S3.action("PutObject") == "s3:PutObject"
    assert AwsService("SQS", "sqs").action("ChangeMessageVisibility") == "sqs:ChangeMessageVisibility"
    assert SQS.action(None) == "sqs:*"

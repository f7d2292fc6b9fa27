"""Every AWS failure, judged once: botocore's error codes, HTTP statuses and BotoCoreError kinds to the project's
failure taxonomy (core/errors.py), in one table that every AWS adapter calls through `aws_error` (PyIceberg's
`_handle_non_200_response(exc, {404: NoSuchTableError})` is the model: the caller passes only the few failures whose
meaning depends on the call; a missing source object is the file's fault, a missing report is "none").

A code is first read as one `Failure` (`failure_of`: the error code, else the HTTP status, else the kind of
BotoCoreError), and each failure has one default verdict (`VERDICTS`). An answer read off the wire without botocore
(STS's answer to the signed GetCallerIdentity request the service forwards for a publish request,
adapters/aws/publish_requests.py) is read by the same table (`answer_error`: its code and status), and no answer at all
by `no_answer_error` (UNAVAILABLE):
- UNAVAILABLE (5xx, InternalError, ServiceUnavailable, RequestTimeout; no answer: connection refused, a timeout, a
  broken or corrupt transfer, a success without its result) and THROTTLED (SlowDown, Throttling,
  TooManyRequestsException, a quota, 429): the service's outage (S3: ObjectStoreUnavailableError; the others:
  InfrastructureError), retried. Nothing is wrong with the request: the same one succeeds later, and back-off is the
  fix.
- DENIED (AccessDenied, AccessDeniedException, 403): ConfigError, see below.
- CREDENTIALS (InvalidAccessKeyId, SignatureDoesNotMatch, ExpiredToken, UnrecognizedClientException,
  IncompleteSignature, MissingAuthenticationToken; no credentials or no region at all): ConfigError. The credentials
  and the region are settings, wrong until someone fixes them (for STS's answer to an operator's signed publish
  request, the operator's: that call refuses the request instead, adapters/aws/publish_requests.py).
- NO_BUCKET (NoSuchBucket), NO_RESOURCE (ResourceNotFoundException, QueueDoesNotExist, ParameterNotFound),
  INVALID_REQUEST (ValidationException, InvalidParameterValue, InvalidArgument; a parameter botocore refused):
  ConfigError. The service's buckets, queues, application, bus and parameters are named by settings, and its
  requests are built from them: resending the same request cannot help.
- ARCHIVED (InvalidObjectState): ConfigError (a lifecycle rule moved the service's object to an archive class).
- MISSING (NoSuchKey, NoSuchVersion, NotFound, NoSuchLifecycleConfiguration, 404), PRECONDITION
  (PreconditionFailed, ConditionalRequestConflict, 412) and UNSATISFIABLE_RANGE (InvalidRange, 416): their meaning
  depends on the call, and the calls that expect them say it (a missing source object: SourceNotFoundError, the
  file's fault; a missing report: none; a write-once claim already made: not claimed). Elsewhere
  InfrastructureError: retried, as the state they read may change.
- UNKNOWN (any other code or BotoCoreError): InfrastructureError, retried then dead-lettered with the code: not
  known to be permanent, and never the file's fault unless a caller says so.

AccessDenied (DENIED) is a configuration problem: a permission to grant. Its fix is a policy change, after which the
retried or redriven (`wap dlq redrive`) message succeeds. It is not the file's fault: a BadInputError would be
consumed as INVALID and the file would never be ingested once the policy is fixed. It is not an outage either:
retrying alone cannot succeed, and "S3 is down" would send the on-call to the wrong place. ConfigError is neither:
in an ingestion the pipeline turns only BadInputError into an INVALID outcome, so a ConfigError fails its message like
any other error (retried with back-off, alerted on the first and last attempt, then dead-lettered), and its alert
names the action to grant, on what (tests/integration/adapters/aws/test_aws_errors.py shows both on moto with IAM
enforced).

Messages name the step and the resource, the service, the operation and its answer, and the fix: `downloading
s3://source/t/x.csv: this role may not s3:GetObject there; S3 GetObject answered AccessDenied (HTTP 403: Access
Denied). Fix: grant s3:GetObject on s3://source/t/x.csv in the role's policy; the retried (or redriven: ...`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from enum import Enum

from botocore.exceptions import (
    BotoCoreError,
    ChecksumError,
    ClientError,
    ConnectionError,
    CredentialRetrievalError,
    FlexibleChecksumError,
    HTTPClientError,
    IncompleteReadError,
    NoCredentialsError,
    NoRegionError,
    ParamValidationError,
    PartialCredentialsError,
    ProfileNotFound,
    SSOError,
    TokenRetrievalError,
)

from wap_ingest.adapters import Verdict
from wap_ingest.core.errors import (
    ConfigError,
    InfrastructureError,
    ObjectStoreUnavailableError,
    WapError,
)


class Failure(Enum):
    UNAVAILABLE = "unavailable"
    THROTTLED = "throttled"
    DENIED = "denied"
    CREDENTIALS = "credentials"
    NO_BUCKET = "no bucket"
    NO_RESOURCE = "no resource"
    INVALID_REQUEST = "invalid request"
    MISSING = "missing"
    PRECONDITION = "precondition"
    ARCHIVED = "archived"
    UNSATISFIABLE_RANGE = "unsatisfiable range"
    UNKNOWN = "unknown"


_CODES: dict[str, Failure] = {
    **dict.fromkeys(("InternalError", "InternalFailure", "InternalServerError", "InternalServerException",
                     "ServiceUnavailable", "ServiceUnavailableException", "RequestTimeout"), Failure.UNAVAILABLE),
    **dict.fromkeys(("SlowDown", "Throttling", "ThrottlingException", "TooManyRequestsException",
                     "RequestLimitExceeded", "RequestThrottled", "ProvisionedThroughputExceededException",
                     "ServiceQuotaExceededException"),
                    Failure.THROTTLED),
    **dict.fromkeys(("AccessDenied", "AccessDeniedException", "AllAccessDisabled", "AuthorizationError"),
                    Failure.DENIED),
    **dict.fromkeys(("InvalidAccessKeyId", "SignatureDoesNotMatch", "ExpiredToken", "ExpiredTokenException",
                     "InvalidToken", "UnrecognizedClientException", "InvalidClientTokenId", "RequestExpired",
                     "IncompleteSignature", "MissingAuthenticationToken"), Failure.CREDENTIALS),
    "NoSuchBucket": Failure.NO_BUCKET,
    **dict.fromkeys(("ResourceNotFoundException", "QueueDoesNotExist", "AWS.SimpleQueueService.NonExistentQueue",
                     "ParameterNotFound"), Failure.NO_RESOURCE),
    **dict.fromkeys(("ValidationException", "InvalidParameterValue", "InvalidParameterValueException",
                     "InvalidArgument", "InvalidRequest", "InvalidBucketName", "InvalidAddress", "MalformedXML"),
                    Failure.INVALID_REQUEST),
    **dict.fromkeys(("NoSuchKey", "NoSuchVersion", "NotFound", "NoSuchLifecycleConfiguration"), Failure.MISSING),
    **dict.fromkeys(("PreconditionFailed", "ConditionalRequestConflict"), Failure.PRECONDITION),
    "InvalidObjectState": Failure.ARCHIVED,
    "InvalidRange": Failure.UNSATISFIABLE_RANGE,
}
_STATUSES = {403: Failure.DENIED, 404: Failure.MISSING, 412: Failure.PRECONDITION, 416: Failure.UNSATISFIABLE_RANGE,
             429: Failure.THROTTLED}
_NO_ANSWER: tuple[tuple[tuple[type[BotoCoreError], ...], Failure], ...] = (
    ((NoCredentialsError, PartialCredentialsError, CredentialRetrievalError, ProfileNotFound, NoRegionError,
      SSOError, TokenRetrievalError), Failure.CREDENTIALS),
    ((ParamValidationError,), Failure.INVALID_REQUEST),
    ((ConnectionError, HTTPClientError, FlexibleChecksumError, ChecksumError, IncompleteReadError),
     Failure.UNAVAILABLE),
)


class _ServiceOutageError(InfrastructureError):
    """Stands in the table for the service's own class of outage (`AwsService.unavailable`); never raised."""


VERDICTS: dict[Failure, Verdict] = {
    Failure.UNAVAILABLE: Verdict(_ServiceOutageError, "{service} is unreachable or failing",
                                 "none needed if it passes: the message is retried; if it lasts, check "
                                 "AWS_ENDPOINT_URL, the network and the service's health (locally: `wap stack "
                                 "status`)"),
    Failure.THROTTLED: Verdict(_ServiceOutageError, "{service} is throttling this account's requests",
                               "none needed: the message is retried with back-off; if it lasts, spread the load or "
                               "raise the quota"),
    Failure.DENIED: Verdict(ConfigError, "this role may not {action} there",
                            "grant {action} on {resource} in the role's policy; the retried (or redriven: "
                            "`wap dlq redrive`) message then succeeds"),
    Failure.CREDENTIALS: Verdict(ConfigError, "the AWS credentials are missing, wrong or expired (or no region is set)",
                                 "check the credentials this process runs with (the function's role; locally "
                                 "AWS_PROFILE or AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY) and AWS_REGION"),
    Failure.NO_BUCKET: Verdict(ConfigError, "the bucket does not exist",
                               "check {setting}, or create the bucket (setup_aws.py)"),
    Failure.NO_RESOURCE: Verdict(ConfigError, "{service} has no such resource",
                                 "check {setting}, or create it (setup_aws.py)"),
    Failure.INVALID_REQUEST: Verdict(ConfigError, "{service} refused the request as invalid",
                                     "check {setting} against the message"),
    Failure.MISSING: Verdict(InfrastructureError, "it does not exist (any more)",
                             "find what removed it (a lifecycle rule, a person); the message is retried"),
    Failure.PRECONDITION: Verdict(InfrastructureError, "a condition of the request did not hold (the object changed, "
                                  "or exists already)", "none needed: the retried message reads the current state"),
    Failure.ARCHIVED: Verdict(ConfigError, "the object is in an archive storage class and cannot be read",
                              "restore it, and keep the service's objects out of archive classes (lifecycle rules)"),
    Failure.UNSATISFIABLE_RANGE: Verdict(InfrastructureError, "the byte range asked for is beyond the object's end",
                                         "none needed if the object is rewritten; the message is retried"),
    Failure.UNKNOWN: Verdict(InfrastructureError, "{service} refused the request",
                             "look the code up in {service}'s error reference; the message is retried, then "
                             "dead-lettered"),
}

# S3's operations whose IAM action has another name than the operation (the others: the operation's own name)
_S3_ACTIONS = {"HeadObject": "GetObject", "ListObjectsV2": "ListBucket", "HeadBucket": "ListBucket",
               "CopyObject": "GetObject and s3:PutObject", "UploadPartCopy": "GetObject and s3:PutObject",
               "CreateMultipartUpload": "PutObject", "CompleteMultipartUpload": "PutObject",
               "GetBucketLifecycleConfiguration": "GetLifecycleConfiguration",
               "PutBucketLifecycleConfiguration": "PutLifecycleConfiguration"}


@dataclass(frozen=True)
class AwsService:
    """An AWS API as messages name it, its IAM prefix, and its class of outage."""

    name: str
    iam_prefix: str
    unavailable: type[InfrastructureError] = InfrastructureError

    def action(self, operation: str | None) -> str:
        if not operation:
            return f"{self.iam_prefix}:*"
        return f"{self.iam_prefix}:{_S3_ACTIONS.get(operation, operation) if self.iam_prefix == 's3' else operation}"


S3 = AwsService("S3", "s3", ObjectStoreUnavailableError)
SQS = AwsService("SQS", "sqs")
EMR_SERVERLESS = AwsService("EMR Serverless", "emr-serverless")
EVENTBRIDGE = AwsService("EventBridge", "events")
SSM = AwsService("SSM Parameter Store", "ssm")
SECRETS_MANAGER = AwsService("Secrets Manager", "secretsmanager")
STS = AwsService("STS", "sts")


def failure_of(exc: BaseException) -> Failure:
    """What went wrong, from the error code, else the HTTP status, else the kind of BotoCoreError."""
    if isinstance(exc, ClientError):
        return failure_for(_code(exc), _status(exc))
    for kinds, failure in _NO_ANSWER:
        if isinstance(exc, kinds):
            return failure
    return Failure.UNKNOWN


def failure_for(code: str, status: int) -> Failure:
    """What an answer's error code says, else its HTTP status. A success status without a code is an answer that
    holds no result (cut short in transit, as a corrupt transfer): UNAVAILABLE."""
    if code in _CODES:
        return _CODES[code]
    if status in _STATUSES:
        return _STATUSES[status]
    if not code and 200 <= status < 300:
        return Failure.UNAVAILABLE
    return Failure.UNAVAILABLE if status >= 500 else Failure.UNKNOWN


def aws_error(exc: ClientError | BotoCoreError, *, service: AwsService, doing: str, resource: str,
              setting: str | None = None, special: Mapping[Failure, Verdict] | None = None) -> WapError:
    """The project's error for `exc`: `special` first (the failures whose meaning depends on this call), else the
    table. `doing` and `resource` say what failed ("reading the audit report", "s3://lake/wap-reports/b.json");
    `setting` names the variable that chose the resource, for the fix."""
    operation = getattr(exc, "operation_name", None)
    if isinstance(exc, ClientError):
        said = _said(service, operation, _code(exc), _status(exc), _text(exc))
    else:
        said = f"no answer from {service.name} ({type(exc).__name__}: {exc})"
    return _judged(failure_of(exc), said, service=service, operation=operation, doing=doing, resource=resource,
                   setting=setting, special=special)


def answer_error(code: str, status: int, text: str, *, service: AwsService, operation: str, doing: str,
                 resource: str, setting: str | None = None,
                 special: Mapping[Failure, Verdict] | None = None) -> WapError:
    """`aws_error` for an answer read without botocore: its error code ("" when it has none), HTTP status and
    message."""
    return _judged(failure_for(code, status), _said(service, operation, code, status, " ".join(text.split())[:300]),
                   service=service, operation=operation, doing=doing, resource=resource, setting=setting,
                   special=special)


def no_answer_error(exc: Exception, *, service: AwsService, operation: str, doing: str, resource: str,
                    setting: str | None = None, special: Mapping[Failure, Verdict] | None = None) -> WapError:
    """`aws_error` for a request sent without botocore that got no answer (`exc`: the HTTP client's error)."""
    return _judged(Failure.UNAVAILABLE, f"no answer from {service.name} ({type(exc).__name__})", service=service,
                   operation=operation, doing=doing, resource=resource, setting=setting, special=special)


def _judged(failure: Failure, said: str, *, service: AwsService, operation: str | None, doing: str, resource: str,
            setting: str | None, special: Mapping[Failure, Verdict] | None) -> WapError:
    verdict = (special or {}).get(failure) or VERDICTS[failure]
    if verdict.error is _ServiceOutageError:
        verdict = Verdict(service.unavailable, verdict.meaning, verdict.fix)
    return verdict.raised(f"{doing} {resource}", said, service=service.name, action=service.action(operation),
                          resource=resource, setting=setting or "the setting that names it")


def _said(service: AwsService, operation: str | None, code: str, status: int, text: str) -> str:
    if code in ("", str(status)):
        said = f"HTTP {status}" + (f" ({text})" if text else "")
    else:
        said = f"{code} (HTTP {status}" + (f": {text}" if text else "") + ")"
    return f"{service.name} {operation or 'request'} answered {said}"


def _code(exc: ClientError) -> str:
    error = exc.response.get("Error", {})
    return str(error.get("QueryErrorCode") or error.get("Code") or "")


def _status(exc: ClientError) -> int:
    return int(exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode") or 0)


def _text(exc: ClientError) -> str:
    """AWS's message in one short line (a JSON-protocol error can carry a whole XML document: its Message)."""
    text = str(exc.response.get("Error", {}).get("Message") or "")
    inner = re.search(r"<Message>(?:<!\[CDATA\[)?(.*?)(?:\]\]>)?</Message>", text, re.DOTALL)
    return " ".join((inner.group(1) if inner else text).split())[:300].rstrip(".")

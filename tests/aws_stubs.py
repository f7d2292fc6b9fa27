"""Real boto3 clients answered by botocore's Stubber (no network), for the tests of the AWS error table
(tests/unit/adapters/aws/test_aws_errors.py, test_aws_adapter_verdicts.py): a valid request per operation, and the
ClientError a client raises for a given answer. And STS answering the signed request the service forwards without
botocore (adapters/aws/publish_requests.py; tests/unit/core/test_publish_requests.py, test_sts_answers.py)."""

from __future__ import annotations

from typing import Any

import boto3
import requests
from botocore.config import Config
from botocore.exceptions import ClientError
from botocore.stub import Stubber

QUEUE = "https://sqs.us-east-1.amazonaws.com/123456789012/wap-events"
SECRET_ARN = "arn:aws:secretsmanager:us-east-1:123456789012:secret:wap-nessie-AbCdEf"
REQUESTS: dict[tuple[str, str], dict[str, Any]] = {  # a valid request per operation (the client validates it)
    ("s3", "get_object"): {"Bucket": "source", "Key": "orders/x.csv"},
    ("s3", "head_object"): {"Bucket": "source", "Key": "orders/x.csv"},
    ("s3", "list_objects_v2"): {"Bucket": "source", "Prefix": "orders/"},
    ("s3", "put_object"): {"Bucket": "lake", "Key": "wap-reports/b.json", "Body": b"{}"},
    ("s3", "copy_object"): {"Bucket": "lake", "Key": "wap-staging/x.csv",
                            "CopySource": {"Bucket": "source", "Key": "orders/x.csv"}},
    ("s3", "get_bucket_lifecycle_configuration"): {"Bucket": "lake"},
    ("sqs", "send_message"): {"QueueUrl": QUEUE, "MessageBody": "{}"},
    ("emr-serverless", "start_job_run"): {"applicationId": "00app", "clientToken": "t1",
                                          "executionRoleArn": "arn:aws:iam::123456789012:role/wap-emr-job"},
    ("emr-serverless", "get_job_run"): {"applicationId": "00app", "jobRunId": "run-1"},
    ("events", "put_events"): {"Entries": [{"Source": "wap-lake", "DetailType": "Table Published", "Detail": "{}"}]},
    ("ssm", "get_parameter"): {"Name": "/wap/slack-token", "WithDecryption": True},
    ("secretsmanager", "get_secret_value"): {"SecretId": SECRET_ARN},
}
def client(service: str) -> Any:
    return boto3.client(service, region_name="us-east-1", aws_access_key_id="testing", aws_secret_access_key="x",
                        config=Config(retries={"max_attempts": 1}))


def client_error(service: str, operation: str, code: str, status: int, message: str = "",
                 meta: dict[str, str] | None = None) -> ClientError:
    """The ClientError a boto3 client raises for this answer."""
    real = client(service)
    with Stubber(real) as stub:
        stub.add_client_error(operation, code, message, status, service_error_meta=meta)
        try:
            getattr(real, operation)(**REQUESTS[service, operation])
        except ClientError as exc:
            return exc
    raise AssertionError("the stubbed call did not fail")


class StsAnswers(requests.Session):
    """STS answering every request one way (`status`, `body`); what was sent is kept."""

    def __init__(self, status: int, body: str) -> None:
        super().__init__()
        self.status, self.body = status, body
        self.sent: list[tuple[str, Any, dict[str, str]]] = []

    def post(self, url: Any, data: Any = None, json: Any = None, **kwargs: Any) -> requests.Response:  # type: ignore[override]
        self.sent.append((url, data, dict(kwargs.get("headers") or {})))
        answer = requests.Response()
        answer.status_code, answer._content = self.status, self.body.encode()
        return answer


def sts_error_xml(code: str, message: str = "no") -> str:
    """STS's error document (the query protocol's ErrorResponse)."""
    return (f"<ErrorResponse><Error><Type>Sender</Type><Code>{code}</Code><Message>{message}</Message></Error>"
            f"</ErrorResponse>")

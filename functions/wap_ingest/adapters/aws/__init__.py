"""AWS: S3 and what an object weighs, SQS, EventBridge, EMR Serverless, dead letters, the decision log, publish
requests, secrets, metrics (boto3). Its failures are judged in `aws.errors`."""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .action_records import S3ActionRecords
    from .dead_letters import DeadLetter, SqsDeadLetters
    from .decision_log import S3DecisionLog
    from .emr import EmrServerlessJobs, digest_of, parse_submit_parameters, record_key
    from .emr_maintenance import EmrMaintenanceJobs
    from .emr_records import EmrRecords
    from .errors import S3, SQS, aws_error
    from .eventbridge import EventBridgeSink
    from .lake_lifecycle import apply_lake_lifecycle
    from .metrics import OutcomeMetrics, record_maintenance
    from .publish_requests import S3RequestResults, SqsPublishRequests, StsRequesters, queue_name_of
    from .s3 import S3ObjectStore, s3_client_for
    from .s3_reports import S3ReportStore
    from .secrets import secret_from_parameter
    from .seen_requests import SeenRequests
    from .sqs import SqsRetries

# What the rest of the service may use of this package, and the module each name lives in. Importing the face imports
# none of them: each is imported when first asked for (PEP 562), so an entry point pays only for what it uses.
_WHERE = {
    "DeadLetter": "dead_letters",
    "EmrMaintenanceJobs": "emr_maintenance",
    "EmrRecords": "emr_records",
    "EmrServerlessJobs": "emr",
    "EventBridgeSink": "eventbridge",
    "OutcomeMetrics": "metrics",
    "S3": "errors",
    "S3ActionRecords": "action_records",
    "S3DecisionLog": "decision_log",
    "S3ObjectStore": "s3",
    "S3ReportStore": "s3_reports",
    "S3RequestResults": "publish_requests",
    "SQS": "errors",
    "SeenRequests": "seen_requests",
    "SqsDeadLetters": "dead_letters",
    "SqsPublishRequests": "publish_requests",
    "SqsRetries": "sqs",
    "StsRequesters": "publish_requests",
    "apply_lake_lifecycle": "lake_lifecycle",
    "aws_error": "errors",
    "digest_of": "emr",
    "parse_submit_parameters": "emr",
    "queue_name_of": "publish_requests",
    "record_key": "emr",
    "record_maintenance": "metrics",
    "s3_client_for": "s3",
    "secret_from_parameter": "secrets",
}
__all__ = [
    "S3", "SQS", "DeadLetter", "EmrMaintenanceJobs", "EmrRecords", "EmrServerlessJobs", "EventBridgeSink",
    "OutcomeMetrics", "S3ActionRecords", "S3DecisionLog", "S3ObjectStore", "S3ReportStore", "S3RequestResults",
    "SeenRequests", "SqsDeadLetters", "SqsPublishRequests", "SqsRetries", "StsRequesters", "apply_lake_lifecycle",
    "aws_error", "digest_of", "parse_submit_parameters", "queue_name_of", "record_key", "record_maintenance",
    "s3_client_for", "secret_from_parameter",
]


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(import_module(f".{module}", __name__), name)

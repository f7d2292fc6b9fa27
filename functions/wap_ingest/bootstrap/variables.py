"""Every environment variable the service reads, with what it means (serverless.yml and `wap stack env` are checked
against this list; wap_ingest.bootstrap.config reads them)."""

from __future__ import annotations

# Every variable the service reads. serverless.yml and `wap stack env` are checked against this list.
KNOWN_VARIABLES: dict[str, str] = {
    "SOURCE_BUCKET": "bucket producers upload to (s3://$SOURCE_BUCKET/<table>/...)",
    "LAKE_BUCKET": "bucket holding the Iceberg warehouse",
    "NESSIE_ENDPOINT": "base URL of the Nessie server, e.g. http://127.0.0.1:19120",
    "WAP_NAMESPACE": "namespace of tables routed from keys without one (default: wap)",
    "WAP_WAREHOUSE": "warehouse location (default: s3://$LAKE_BUCKET/warehouse)",
    "WAP_AUDITS_FILE": "path of the audits YAML (default: ./audits.yml, else the repository's)",
    "WAP_JARS_DIR": "folder with the pinned Spark jars (default: .cache/jars/spark; `make jars`)",
    "WAP_SPARK_STARTUP_TUNING": "on (default) or off: the Spark driver's cold-start cuts (class-data archive, C1 JIT)",
    "WAP_SPARK_DRIVER_MEMORY": "Spark driver memory, e.g. 2g (default: 60% of the Lambda's memory, else 2g)",
    "WAP_WORK_DIR": "scratch folder for downloads and Spark (default: $TMPDIR/wap)",
    "WAP_MAIN_BRANCH": "the published branch (default: main)",
    "WAP_HTTP_TIMEOUT": "seconds for each Nessie/S3 call (default: 30)",
    "WAP_NESSIE_TOKEN_ENDPOINT": "OAuth2 token endpoint for Nessie clients (client-credentials grant); unset: no auth",
    "WAP_NESSIE_CLIENT_ID": "OAuth2 client id the service authenticates to Nessie with",
    "WAP_NESSIE_CLIENT_SECRET_PARAMETER": "SSM SecureString name or Secrets Manager ARN of the OAuth2 client secret",
    "WAP_NESSIE_CLIENT_SECRET": "the OAuth2 client secret itself, for local use (in AWS: the _PARAMETER)",
    "WAP_NESSIE_SCOPE": "OAuth2 scope(s) to request, space-separated, e.g. nessie/catalog (optional)",
    "SLACK_TOKEN": "Slack bot token (prefer WAP_SLACK_TOKEN_PARAMETER in AWS); unset: alerts go to the log",
    "SLACK_CHANNEL": "Slack channel for alerts, e.g. #data-alerts",
    "WAP_SLACK_TOKEN_PARAMETER": "SSM SecureString name or Secrets Manager ARN holding the Slack token",
    "WAP_SLACK_BASE_URL": "Slack API base URL (the local stack's sink); default: Slack",
    "WAP_SLACK_SIGNING_SECRET_PARAMETER": "SSM SecureString name or Secrets Manager ARN holding the Slack app's "
    "signing secret: requests to the interactivity endpoint are verified with it; unset: no actions from Slack",
    "WAP_SLACK_SIGNING_SECRET": "the Slack signing secret itself, for local use (in AWS: the _PARAMETER)",
    "WAP_SLACK_OPERATORS": "who may act on alerts from Slack: Slack user ids (U...) and user-group ids (S...), "
    "comma-separated; anyone else is refused with the reason (empty: no one)",
    "WAP_QUEUE_URL": "the ingest queue: the interactivity endpoint hands Slack actions to the function through it, "
    "and dead letters are redriven to it (`wap dlq`, the alarm's Redrive button)",
    "WAP_MAX_RECEIVES": "the queue's maxReceiveCount: the last attempt alerts that the event goes to the DLQ",
    "WAP_SOURCE_BUCKETS": "more buckets (comma-separated) whose objects may be ingested besides SOURCE_BUCKET; an "
    "event or `wap ingest` naming any other bucket (and always the lake bucket) is refused, nothing read",
    "WAP_STAGING_BUDGET_BYTES": "the most one group of files processes at once, counted as the bytes they inflate to "
    "(default: 1 GiB); files whose staged copy and scratch do not fit the free disk now go back to the queue as "
    "deferred",
    "WAP_MAX_INFLATION": "a file that inflates more than this many times (gzip, bzip2, Parquet's and ORC's codecs) "
    "is a decompression bomb: INVALID, never started (default: 200)",
    "WAP_ABANDONED_BRANCH_SECONDS": "a batch branch older than this belongs to a run that died and is deleted by the "
    "table's next run (default: 960, the function's longest run plus a margin)",
    "WAP_SWEEP_GRACE_SECONDS": "`wap maintain` removes a table's files that no reference of the catalog uses once "
    "they are older than this (default 259200, 3 days; it must exceed WAP_ABANDONED_BRANCH_SECONDS and, with EMR, an "
    "EMR run's limit)",
    "WAP_RETRY_BASE_SECONDS": "a failed or deferred SQS message comes back after this many seconds, doubled per "
    "receive (default 30)",
    "WAP_RETRY_MAX_SECONDS": "the longest back-off between two attempts of a message (default 900; at most 43200)",
    "WAP_LARGE_FILE_BYTES": "objects larger than this run on EMR Serverless, not in the function (default: 1 GiB)",
    "WAP_EMR_APPLICATION_ID": "EMR Serverless application for large files; unset: every file runs in the function",
    "WAP_EMR_EXECUTION_ROLE_ARN": "the role EMR Serverless job runs assume (setup_aws.py creates it)",
    "WAP_EMR_ARTIFACTS": "s3:// prefix of the job's entry point, package, Python archive and jars "
    "(default: s3://$LAKE_BUCKET/emr/artifacts; `make emr-artifacts`)",
    "WAP_EMR_LOGS": "s3:// prefix for the job runs' logs (default: s3://$LAKE_BUCKET/emr/logs)",
    "WAP_EMR_MAX_ATTEMPTS": "job runs one large file may have: a run that FAILED or was CANCELLED (driver lost, out of "
    "memory, timeout) is resubmitted by the next delivery of its event until then (default: 3)",
    "WAP_STAGE": "how Spark reads a source: `download` (a local copy; the function) or `s3` (a server-side copy "
    "of the exact version in the lake bucket, read by the cluster; EMR jobs)",
    "WAP_TIME_RESERVE_SECONDS": "the function hands a message back to the queue instead of starting a file with "
    "less time left than this, and leaves a table's scheduled maintenance to the next schedule (default: 90)",
    "WAP_EVENT_BUS": "EventBridge bus for downstream events (Table Published, File Rejected, File Invalid); unset: "
    "none",
    "WAP_PUBLISH_QUEUE_URL": "`wap publish` asks the service through this queue (the ingest queue) instead of "
    "merging itself: an operator has no write on main (docs/deploy.md, \"Catalog roles\")",
    "WAP_PUBLISH_PRINCIPALS": "the IAM roles (any session) and users whose signed publish requests the service "
    "serves, comma-separated ARNs (serverless.yml: the <prefix>-operator role); unset: none are served",
    "AWS_ENDPOINT_URL": "S3-compatible endpoint (local stack); unset on AWS",
    "AWS_REGION": "AWS region (default: us-east-1)",
    "POWERTOOLS_SERVICE_NAME": "service name in structured logs and metrics (Powertools)",
    "POWERTOOLS_METRICS_NAMESPACE": "CloudWatch metrics namespace (Powertools)",
    "POWERTOOLS_LOG_LEVEL": "log level of the structured logger (Powertools)",
}

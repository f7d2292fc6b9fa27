"""The permissions tests/e2e/test_iam_enforced.py grants but cannot use, each with the reason this run cannot use it
(a failure path, a service's own call, or what moto does not model). Keyed by (principal, statement Sid, action): the
action on all of the statement's resources; or by (principal, Sid, action, resource as the policy file writes it):
that one resource, where the action is used on the statement's others."""

from __future__ import annotations

_NOT_FOUND = ("S3 answers a read of a missing key with 404 NoSuchKey only to a caller allowed s3:ListBucket, else "
              "403 AccessDenied; the code tells a file deleted before its download (INVALID) by that 404. moto "
              "answers 404 without asking")
_NOT_FOUND_LAKE = ("Iceberg's S3FileIO asks whether a file exists before it writes it (HEAD, expecting 404): S3 "
                   "answers 404 only to a caller allowed s3:ListBucket, else 403 and the write fails; moto answers "
                   "404 without asking")
_VERSION = ("the event names the object's version in AWS (a versioned bucket), and reading a version is "
            "s3:GetObjectVersion; moto's notifications carry no versionId, so the current version is read")
_UNCOMMITTED = ("Iceberg deletes the files of a write whose commit failed (Spark's abort of an append or a compaction "
                "that lost its commit); every commit here succeeds, snapshot trimming is metadata only, and the "
                "maintenance's sweep removes only files no reference uses that are older than WAP_SWEEP_GRACE_SECONDS "
                "(3 days by default; tests/integration/core/pipeline/test_leaked_files.py runs it with 30 s): "
                "none here")
_STAGED = ("in AWS the job copies its source under wap-staging/ for Spark's executors (WAP_STAGE=s3, emr_request.py), "
           "reads the copy and deletes it; the local run downloads the source instead (WAP_STAGE=download, "
           "wap_stack/emr.py)")
_SLACK_TOKEN = ("the local stack hands the Slack sink's token over directly (SLACK_TOKEN); in AWS it is read from this "
                "parameter (WAP_SLACK_TOKEN_PARAMETER, serverless.yml)")
_MULTIPART = "S3FileIO aborts a multipart upload (files above its part size) that it cannot complete: a failure path"
# (principal, statement Sid, action): granted, never used by this run (on any of the statement's resources), and why
# it cannot be here.
NOT_EXERCISED: dict[tuple[str, ...], str] = {
    ("function", "WriteOwnLogs", "logs:CreateLogStream"): "written by the Lambda service for the function, not by it",
    ("function", "WriteOwnLogs", "logs:PutLogEvents"): "written by the Lambda service for the function, not by it",
    ("function", "DecryptSecretParametersViaSsm", "kms:Decrypt"): "SSM decrypts SecureStrings with KMS on the "
    "caller's behalf; moto's SSM calls no KMS",
    ("emr-job", "DecryptSecretParametersViaSsm", "kms:Decrypt"): "SSM decrypts SecureStrings with KMS on the "
    "caller's behalf; moto's SSM calls no KMS",
    ("operator", "DecryptOwnCatalogClientSecretViaSsm", "kms:Decrypt"): "SSM decrypts SecureStrings with KMS on the "
    "caller's behalf; moto's SSM calls no KMS",
    ("function", "PassEmrJobRoleOnly", "iam:PassRole"): "checked by EMR Serverless at StartJobRun; moto checks no "
    "PassRole",
    ("function", "ListSourceBucket", "s3:ListBucket"): _NOT_FOUND,
    ("emr-job", "ListSourceBucket", "s3:ListBucket"): _NOT_FOUND,
    ("function", "ReadSourceObjects", "s3:GetObjectVersion"): _VERSION,
    ("emr-job", "ReadSourceObjects", "s3:GetObjectVersion"): _VERSION,
    ("function", "ReadWriteLakeWarehouse", "s3:AbortMultipartUpload"): _MULTIPART,
    ("emr-job", "ReadWriteLakeWarehouse", "s3:AbortMultipartUpload"): _MULTIPART,
    ("emr-job", "ListLakeWarehouseAndEmrPrefixes", "s3:ListBucket"): _NOT_FOUND_LAKE,
    ("function", "LargeFileRecords", "s3:DeleteObject"): "adapters/aws/emr.py `_release`: a claim is dropped when the "
    "first submission of a large file fails, so the retried event submits it again: a failure path",
    ("function", "ReadWriteLakeWarehouse", "s3:DeleteObject"): _UNCOMMITTED,
    ("emr-job", "ReadWriteLakeWarehouse", "s3:DeleteObject"): _UNCOMMITTED,
    ("function", "AnswerPublishRequests", "s3:GetObject"): "a publish request's claim is read back only when it was "
    "written first by another delivery of the same request (SQS delivers at least once; "
    "tests/integration/adapters/aws/test_publish_signatures.py runs that path); each request here is delivered once",
    ("emr-job", "StagingCopies", "s3:GetObject"): _STAGED,
    ("emr-job", "StagingCopies", "s3:PutObject"): _STAGED,
    ("emr-job", "StagingCopies", "s3:DeleteObject"): _STAGED,
    ("emr-job", "AuditReports", "s3:PutObject"): "the job keeps the report of a large file whose audit fails; this "
    "run's large file passes its audit",
    ("emr-job", "WriteJobLogs", "s3:PutObject"): "EMR Serverless writes the driver's logs to the run's logUri as the "
    "job role; the local run keeps them on disk",
    ("function", "CancelStuckLargeFileJobs", "emr-serverless:CancelJobRun"): "the sweep cancels only a run hung past "
    "its limit (tests/integration/adapters/aws/test_emr_sweep.py runs that path); no run hangs here",
    ("operator", "ListSourceBucket", "s3:ListBucket"): _NOT_FOUND,
    # (principal, statement Sid, action, resource as the policy file writes it): one resource of a statement whose
    # action is used on its others
    ("function", "ReadSecretParameters", "ssm:GetParameter", "${SlackTokenParameterArn}"): _SLACK_TOKEN,
    ("emr-job", "ReadSecretParameters", "ssm:GetParameter", "${SlackTokenParameterArn}"): _SLACK_TOKEN,
}

"""What the lake bucket keeps, and for how long, outside the Iceberg tables (issue 15, item 3): S3 lifecycle rules,
created by setup_aws.py and applied by the local stack alike.

- `wap-staging/`: the exact copies the EMR jobs read; the job removes its copy, the rule is the backstop (1 day);
- `wap-requests/`: the answers to operators' publish requests, read once by the waiting `wap publish` (7 days);
- `wap-reports/`: the audit reports of rejected runs (`wap show BRANCH`), kept as long as an open branch is
  reviewed (90 days; `wap prune` discards older branches);
- `wap-slack-requests/`: the requests from Slack already served (replay protection; a request older than five minutes
  is refused anyway: 1 day).
The bucket is versioned: noncurrent versions of those objects go after a day, incomplete uploads after a day.
The warehouse (Iceberg's files, Nessie's business), the EMR records (`wap-emr/`, exactly once for large files) and the
decision log (`wap-decisions/`) are never expired.
"""

from __future__ import annotations

from typing import Any

from wap_ingest.adapters.aws.errors import Failure, failure_of

EXPIRY_DAYS = {"wap-staging/": 1, "wap-requests/": 7, "wap-reports/": 90, "wap-slack-requests/": 1}


def lake_lifecycle_rules() -> list[dict[str, Any]]:
    """The rules as S3's PutBucketLifecycleConfiguration takes them (ids are stable: compared on every run)."""
    return [{
        "ID": f"wap-expire-{prefix.rstrip('/')}",
        "Filter": {"Prefix": prefix},
        "Status": "Enabled",
        "Expiration": {"Days": days},
        "NoncurrentVersionExpiration": {"NoncurrentDays": 1},
        "AbortIncompleteMultipartUpload": {"DaysAfterInitiation": 1},
    } for prefix, days in EXPIRY_DAYS.items()]


def apply_lake_lifecycle(s3: Any, bucket: str) -> None:
    s3.put_bucket_lifecycle_configuration(Bucket=bucket, LifecycleConfiguration={"Rules": lake_lifecycle_rules()})


def current_rules(s3: Any, bucket: str) -> list[dict[str, Any]]:
    """The bucket's rules, or [] when it has none (any other failure is raised as botocore's, for setup_aws.py)."""
    from botocore.exceptions import ClientError

    try:
        return list(s3.get_bucket_lifecycle_configuration(Bucket=bucket).get("Rules", []))
    except ClientError as exc:
        if failure_of(exc) is Failure.MISSING:  # NoSuchLifecycleConfiguration
            return []
        raise


def drift(current: list[dict[str, Any]]) -> list[str]:
    """The ids of the wanted rules missing or different in `current` (other rules of the bucket are left alone)."""
    have = {rule.get("ID"): rule for rule in current}
    return [rule["ID"] for rule in lake_lifecycle_rules()
            if any(have.get(rule["ID"], {}).get(k) != v for k, v in rule.items())]

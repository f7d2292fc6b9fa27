"""Names and ARNs of every resource, derived from one prefix, the two bucket names and the Nessie service name.

`serverless.yml` builds the same names from its `prefix` param; tests/unit/project/test_deploy_files.py checks
both agree by calling these functions.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_PREFIX = re.compile(r"[a-z][a-z0-9-]{0,18}[a-z0-9]")
_SERVICE = re.compile(r"[a-z][a-z0-9-]{0,61}[a-z0-9]")
_BUCKET = re.compile(r"[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]")


class InvalidNameError(ValueError):
    """A name given on the command line or in the environment is not valid; the message says the fix."""


def validate_prefix(prefix: str) -> str:
    if not _PREFIX.fullmatch(prefix):
        raise InvalidNameError(f"--prefix {prefix!r}: use 2-20 of a-z, 0-9 and '-', starting with a letter.")
    return prefix


def validate_service_name(name: str) -> str:
    if "_" in name:
        raise InvalidNameError(f"-n {name!r}: Lightsail service names allow hyphens, not underscores.")
    if not _SERVICE.fullmatch(name):
        raise InvalidNameError(f"-n {name!r}: use 2-63 of a-z, 0-9 and '-', starting with a letter, e.g. nessie-wap.")
    return name


def validate_bucket(name: str, what: str) -> str:
    if not _BUCKET.fullmatch(name) or ".." in name:
        raise InvalidNameError(f"{what}={name!r} is not a valid S3 bucket name (3-63 of a-z, 0-9, '.', '-').")
    return name


def partition_for(region: str) -> str:
    if region.startswith("cn-"):
        return "aws-cn"
    if region.startswith("us-gov-"):
        return "aws-us-gov"
    return "aws"


@dataclass(frozen=True)
class ResourceNames:
    """Every name setup_aws.py creates. Properties only: no AWS call."""

    prefix: str
    source_bucket: str
    lake_bucket: str
    nessie_service: str

    @classmethod
    def build(cls, prefix: str, source_bucket: str, lake_bucket: str, nessie_service: str) -> ResourceNames:
        source = validate_bucket(source_bucket, "SOURCE_BUCKET")
        lake = validate_bucket(lake_bucket, "LAKE_BUCKET")
        if source == lake:
            raise InvalidNameError("SOURCE_BUCKET and LAKE_BUCKET must differ (lake writes would trigger ingestion).")
        return cls(validate_prefix(prefix), source, lake, validate_service_name(nessie_service))

    @property
    def queue(self) -> str:
        return f"{self.prefix}-ingest"

    @property
    def dead_letter_queue(self) -> str:
        return f"{self.prefix}-ingest-dlq"

    @property
    def alarm_topic(self) -> str:
        return f"{self.prefix}-alarms"

    @property
    def dead_letter_alarm(self) -> str:
        return f"{self.prefix}-ingest-dead-letters"

    @property
    def event_bus(self) -> str:
        """Downstream events (WAP_EVENT_BUS): Table Published, File Rejected, File Invalid, Load Published."""
        return f"{self.prefix}-events"

    @property
    def function(self) -> str:
        return f"{self.prefix}-ingest"

    @property
    def ecr_repository(self) -> str:
        return f"{self.prefix}-lambda"

    @property
    def emr_application(self) -> str:
        return f"{self.prefix}-spark"

    @property
    def lambda_role(self) -> str:
        return f"{self.prefix}-lambda-exec"

    @property
    def emr_job_role(self) -> str:
        return f"{self.prefix}-emr-job"

    @property
    def operator_role(self) -> str:
        """The role operators assume: the only principal, besides S3's notifications, that may send to the ingest
        queue (its policy), and the signer the function accepts for publish requests (WAP_PUBLISH_PRINCIPALS)."""
        return f"{self.prefix}-operator"

    @property
    def slack_token_parameter(self) -> str:
        return f"/{self.prefix}/slack-token"

    @property
    def slack_function(self) -> str:
        """The interactivity endpoint's function (serverless.yml `slack`): Slack's clicks and forms."""
        return f"{self.prefix}-slack-actions"

    @property
    def slack_signing_secret_parameter(self) -> str:
        return f"/{self.prefix}/slack-signing-secret"

    @property
    def nessie_client_secret_parameter(self) -> str:
        return f"/{self.prefix}/nessie-client-secret"

    @property
    def nessie_db_password_parameter(self) -> str:
        """The Nessie database's password (SSM SecureString), read by the Nessie container at start."""
        return f"/{self.prefix}/nessie/db-password"

    @property
    def nessie_secrets_user(self) -> str:
        """The IAM user whose access key lets the Nessie container read that one parameter (no IAM role on
        Lightsail)."""
        return f"{self.prefix}-nessie-secrets"

    @property
    def user_pool(self) -> str:
        return f"{self.prefix}-nessie"

    @property
    def user_pool_client(self) -> str:
        return f"{self.prefix}-ingest"

    def user_pool_domain(self, account_id: str) -> str:
        """Cognito domain prefixes are global per region: the account id makes this one unique."""
        return f"{self.prefix}-nessie-{account_id}"

    @property
    def nessie_database(self) -> str:
        return f"{self.nessie_service}-db"

    @property
    def warehouse_prefix(self) -> str:
        """Key prefix of the Iceberg warehouse in the lake bucket (WAP_WAREHOUSE's default)."""
        return "warehouse"


@dataclass(frozen=True)
class Account:
    account_id: str
    region: str

    @property
    def partition(self) -> str:
        return partition_for(self.region)

    def arn(self, service: str, resource: str, *, regional: bool = True, with_account: bool = True) -> str:
        region = self.region if regional else ""
        account = self.account_id if with_account else ""
        return f"arn:{self.partition}:{service}:{region}:{account}:{resource}"

    def bucket_arn(self, bucket: str) -> str:
        return self.arn("s3", bucket, regional=False, with_account=False)

    def queue_arn(self, queue: str) -> str:
        return self.arn("sqs", queue)

    def role_arn(self, role: str) -> str:
        return self.arn("iam", f"role/{role}", regional=False)

    def user_arn(self, user: str) -> str:
        return self.arn("iam", f"user/{user}", regional=False)

    def parameter_arn(self, name: str) -> str:
        return self.arn("ssm", f"parameter/{name.lstrip('/')}")

    def emr_application_arn(self, application_id: str) -> str:
        return self.arn("emr-serverless", f"/applications/{application_id}")

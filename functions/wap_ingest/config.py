"""One frozen Settings, loaded from the environment at the edge and validated.

Seed-compatible names: SOURCE_BUCKET, LAKE_BUCKET, NESSIE_ENDPOINT, SLACK_TOKEN, SLACK_CHANNEL.
Everything else is WAP_*; standard AWS variables (AWS_ENDPOINT_URL, AWS_REGION, credentials) point
boto3 and Spark at the object store. A missing or invalid value fails here, naming the variable and
the fix, instead of failing later inside a client.
"""

from __future__ import annotations

import os
import re
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlparse

from wap_ingest.core.errors import ConfigError, WapError
from wap_ingest.core.naming import identifier_from

REPO_ROOT = Path(__file__).resolve().parents[2]

# Every variable the service reads. serverless.yml and `wap stack env` are checked against this list.
KNOWN_VARIABLES: dict[str, str] = {
    "SOURCE_BUCKET": "bucket producers upload to (s3://$SOURCE_BUCKET/<table>/...)",
    "LAKE_BUCKET": "bucket holding the Iceberg warehouse",
    "NESSIE_ENDPOINT": "base URL of the Nessie server, e.g. http://127.0.0.1:19120",
    "WAP_NAMESPACE": "namespace of tables routed from keys without one (default: wap)",
    "WAP_WAREHOUSE": "warehouse location (default: s3://$LAKE_BUCKET/warehouse)",
    "WAP_AUDITS_FILE": "path of the audits YAML (default: ./audits.yml, else the repository's)",
    "WAP_JARS_DIR": "folder with the pinned Spark jars (default: .cache/jars/spark; `make jars`)",
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
    "WAP_MAX_RECEIVES": "the queue's maxReceiveCount: the last attempt alerts that the event goes to the DLQ",
    "WAP_SOURCE_BUCKETS": "more buckets (comma-separated) whose objects may be ingested besides SOURCE_BUCKET; an "
    "event or `wap ingest` naming any other bucket (and always the lake bucket) is refused, nothing read",
    "WAP_STAGING_BUDGET_BYTES": "the most one group of files stages on local disk at once (default: 1 GiB); files "
    "that do not fit the free disk now go back to the queue as deferred",
    "WAP_ABANDONED_BRANCH_SECONDS": "a batch branch older than this belongs to a run that died and is deleted by the "
    "table's next run (default: 960, the function's longest run plus a margin)",
    "WAP_RETRY_BASE_SECONDS": "a failed or deferred SQS message comes back after this many seconds, doubled per "
    "receive (default 30)",
    "WAP_RETRY_MAX_SECONDS": "the longest back-off between two attempts of a message (default 900; at most 43200)",
    "WAP_LARGE_FILE_BYTES": "objects larger than this run on EMR Serverless, not in the function (default: 1 GiB)",
    "WAP_EMR_APPLICATION_ID": "EMR Serverless application for large files; unset: every file runs in the function",
    "WAP_EMR_EXECUTION_ROLE_ARN": "the role EMR Serverless job runs assume (setup_aws.py creates it)",
    "WAP_EMR_ARTIFACTS": "s3:// prefix of the job's entry point, package, Python archive and jars "
    "(default: s3://$LAKE_BUCKET/emr/artifacts; `make emr-artifacts`)",
    "WAP_EMR_LOGS": "s3:// prefix for the job runs' logs (default: s3://$LAKE_BUCKET/emr/logs)",
    "WAP_STAGE": "how Spark reads a source: `download` (a local copy; the function) or `s3` (a server-side copy "
    "of the exact version in the lake bucket, read by the cluster; EMR jobs)",
    "WAP_TIME_RESERVE_SECONDS": "the function hands a message back to the queue instead of starting a file with "
    "less time left than this (default: 90)",
    "WAP_PUBLISH_QUEUE_URL": "`wap publish` asks the service through this queue (the ingest queue) instead of "
    "merging itself: an operator has no write on main (docs/deploy.md, \"Catalog roles\")",
    "AWS_ENDPOINT_URL": "S3-compatible endpoint (local stack); unset on AWS",
    "AWS_REGION": "AWS region (default: us-east-1)",
    "POWERTOOLS_SERVICE_NAME": "service name in structured logs and metrics (Powertools)",
    "POWERTOOLS_METRICS_NAMESPACE": "CloudWatch metrics namespace (Powertools)",
    "POWERTOOLS_LOG_LEVEL": "log level of the structured logger (Powertools)",
}


def _require(env: Mapping[str, str], name: str, fix: str) -> str:
    value = env.get(name, "").strip()
    if not value:
        raise ConfigError(f"{name} is not set. Fix: {fix}")
    return value


def _bucket(env: Mapping[str, str], name: str) -> str:
    value = _require(env, name, f"export {name}=<bucket name> (locally: eval \"$(wap stack env)\").")
    if not re.fullmatch(r"[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]", value):
        raise ConfigError(f"{name}={value!r} is not a valid S3 bucket name (3-63 of a-z, 0-9, '.', '-').")
    return value


def _url(env: Mapping[str, str], name: str, fix: str) -> str:
    value = _require(env, name, fix).rstrip("/")
    parsed = urlparse(value)
    if parsed.scheme not in ("http", "https") or not parsed.netloc:
        raise ConfigError(f"{name}={value!r} is not an http(s) URL. Fix: {fix}")
    return value


_LOOPBACK = ("127.0.0.1", "localhost", "::1")
_AUTH_VARIABLES = (
    "WAP_NESSIE_TOKEN_ENDPOINT", "WAP_NESSIE_CLIENT_ID", "WAP_NESSIE_CLIENT_SECRET_PARAMETER",
    "WAP_NESSIE_CLIENT_SECRET", "WAP_NESSIE_SCOPE",
)
_AUTH_FIX = (
    "set WAP_NESSIE_TOKEN_ENDPOINT, WAP_NESSIE_CLIENT_ID and WAP_NESSIE_CLIENT_SECRET_PARAMETER (or, locally, "
    "WAP_NESSIE_CLIENT_SECRET) together, or none of them for a Nessie without authentication "
    "(docs/deploy.md, \"Client authentication\")."
)


@dataclass(frozen=True)
class NessieAuthSettings:
    """The OAuth2 client-credentials settings for Nessie clients; the secret is read at start-up (bootstrap)."""

    token_endpoint: str
    client_id: str
    client_secret_parameter: str | None = None
    scope: str | None = None
    client_secret: str | None = field(default=None, repr=False)  # a secret: never printed


def nessie_auth_from(env: Mapping[str, str]) -> NessieAuthSettings | None:
    """None when no WAP_NESSIE_* auth variable is set (a Nessie without authentication, e.g. the local stack)."""
    values = {name: env.get(name, "").strip() for name in _AUTH_VARIABLES}
    if not any(values.values()):
        return None
    for name in ("WAP_NESSIE_TOKEN_ENDPOINT", "WAP_NESSIE_CLIENT_ID"):
        if not values[name]:
            given = ", ".join(n for n, v in values.items() if v)
            raise ConfigError(f"{name} is not set but Nessie client authentication is ({given}). Fix: {_AUTH_FIX}")
    endpoint = _url(env, "WAP_NESSIE_TOKEN_ENDPOINT", "use the https URL of the OAuth2 token endpoint.")
    parsed = urlparse(endpoint)
    if parsed.scheme != "https" and parsed.hostname not in _LOOPBACK:
        raise ConfigError(
            f"WAP_NESSIE_TOKEN_ENDPOINT={endpoint!r} is plain http: the client secret would cross the network "
            "unencrypted. Fix: use the https token endpoint (http is accepted for 127.0.0.1/localhost only)."
        )
    parameter = values["WAP_NESSIE_CLIENT_SECRET_PARAMETER"] or None
    secret = env.get("WAP_NESSIE_CLIENT_SECRET", "").strip() or None
    if parameter is None and secret is None:
        raise ConfigError(
            f"WAP_NESSIE_CLIENT_SECRET_PARAMETER is not set: the OAuth2 client secret of "
            f"WAP_NESSIE_CLIENT_ID={values['WAP_NESSIE_CLIENT_ID']!r} has no source. Fix: export "
            "WAP_NESSIE_CLIENT_SECRET_PARAMETER=<SSM SecureString name or Secrets Manager ARN> "
            "(locally: WAP_NESSIE_CLIENT_SECRET=<secret>)."
        )
    if parameter is not None and secret is not None:
        raise ConfigError(
            "WAP_NESSIE_CLIENT_SECRET and WAP_NESSIE_CLIENT_SECRET_PARAMETER are both set. Fix: unset one "
            "(the parameter in AWS; the direct value only for local use)."
        )
    return NessieAuthSettings(
        token_endpoint=endpoint,
        client_id=values["WAP_NESSIE_CLIENT_ID"],
        client_secret_parameter=parameter,
        scope=" ".join(env.get("WAP_NESSIE_SCOPE", "").split()) or None,
        client_secret=secret,
    )


def nessie_base_from(endpoint: str) -> str:
    """Accept the base URL or a seed-style URL ending in /api/v1 or /api/v2; return the base."""
    return re.sub(r"/api(/v[12])?/?$", "", endpoint.rstrip("/"))


DEFAULT_LARGE_FILE_BYTES = 1024**3  # see docs/scale-out.md for the measurements behind it
STAGES = ("download", "s3")


@dataclass(frozen=True)
class EmrSettings:
    """Where large files go: the EMR Serverless application, its job role, artefacts and logs."""

    application_id: str
    execution_role_arn: str
    artifacts: str  # s3://bucket/prefix (no trailing slash)
    logs: str


def emr_from(env: Mapping[str, str], lake: str) -> EmrSettings | None:
    application = env.get("WAP_EMR_APPLICATION_ID", "").strip()
    role = env.get("WAP_EMR_EXECUTION_ROLE_ARN", "").strip()
    if not application and not role:
        return None
    if not application or not role:
        missing = "WAP_EMR_EXECUTION_ROLE_ARN" if application else "WAP_EMR_APPLICATION_ID"
        raise ConfigError(f"{missing} is not set but the other EMR setting is. Fix: set both (setup_aws.py prints "
                          "them), or neither to run every file in the function.")
    if not re.fullmatch(r"arn:aws[a-z-]*:iam::\d{12}:role/[\w+=,.@/-]+", role):
        raise ConfigError(f"WAP_EMR_EXECUTION_ROLE_ARN={role!r} is not an IAM role ARN "
                          "(arn:aws:iam::<account>:role/<name>).")
    locations = {}
    for name, default in (("WAP_EMR_ARTIFACTS", f"s3://{lake}/emr/artifacts"), ("WAP_EMR_LOGS", f"s3://{lake}/emr/logs")):
        value = env.get(name, "").strip().rstrip("/") or default
        if not value.startswith("s3://"):
            raise ConfigError(f"{name}={value!r} must be an s3:// location.")
        locations[name] = value
    return EmrSettings(application, role, locations["WAP_EMR_ARTIFACTS"], locations["WAP_EMR_LOGS"])


def _positive(env: Mapping[str, str], name: str, default: float, example: str) -> float:
    raw = env.get(name, "").strip()
    if not raw:
        return default
    try:
        value = float(raw)
    except ValueError:
        value = -1.0
    if value <= 0:
        raise ConfigError(f"{name}={raw!r} must be a positive number. Fix: export {name}={example}.")
    return value


@dataclass(frozen=True)
class Settings:
    lake_bucket: str
    source_bucket: str | None
    nessie_endpoint: str
    namespace: str
    warehouse: str
    audits_file: Path
    jars_dir: Path
    spark_driver_memory: str
    work_dir: Path
    main_branch: str
    http_timeout: float
    aws_region: str
    aws_endpoint_url: str | None
    slack_channel: str | None = None
    slack_token_parameter: str | None = None
    slack_base_url: str | None = None
    max_receives: int = 5
    slack_token: str | None = field(default=None, repr=False)  # a secret: never printed
    nessie_auth: NessieAuthSettings | None = None  # None: Nessie without authentication
    large_file_bytes: int = DEFAULT_LARGE_FILE_BYTES
    emr: EmrSettings | None = None  # None: large files run in the function too
    stage: str = "download"
    time_reserve_seconds: float = 90.0
    # SOURCE_BUCKET and WAP_SOURCE_BUCKETS: the buckets whose objects may be ingested (empty: any but the lake's)
    source_buckets: frozenset[str] = frozenset()
    staging_budget_bytes: int = DEFAULT_LARGE_FILE_BYTES  # what one group of files may stage on local disk at once
    abandoned_branch_seconds: float = 960.0  # a batch branch older than this belongs to a run that died
    retry_base_seconds: float = 30.0  # a failed or deferred message's first retry; doubled per receive
    retry_max_seconds: float = 900.0  # the longest a retry is delayed

    @property
    def nessie_api_v1(self) -> str:
        return f"{self.nessie_endpoint}/api/v1"

    @property
    def nessie_api_v2(self) -> str:
        return f"{self.nessie_endpoint}/api/v2"

    @property
    def nessie_iceberg_rest(self) -> str:
        return f"{self.nessie_endpoint}/iceberg"

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> Settings:
        env = os.environ if env is None else env
        lake = _bucket(env, "LAKE_BUCKET")
        source = _bucket(env, "SOURCE_BUCKET") if env.get("SOURCE_BUCKET", "").strip() else None
        nessie = nessie_base_from(
            _url(env, "NESSIE_ENDPOINT", "export NESSIE_ENDPOINT=http://<host>:19120 (the server's base URL).")
        )
        try:
            namespace = identifier_from(env.get("WAP_NAMESPACE", "wap"), what="WAP_NAMESPACE", source="settings")
        except WapError as exc:
            raise ConfigError(str(exc)) from exc
        warehouse = env.get("WAP_WAREHOUSE", "").strip() or f"s3://{lake}/warehouse"
        if not warehouse.startswith("s3://"):
            raise ConfigError(f"WAP_WAREHOUSE={warehouse!r} must be an s3:// location.")
        audits = Path(env.get("WAP_AUDITS_FILE", "").strip() or _default_audits_file())
        if not audits.is_file():
            raise ConfigError(
                f"WAP_AUDITS_FILE: {audits} does not exist. Fix: create it (see audits.yml in the repository) "
                f"or point WAP_AUDITS_FILE at your audits file."
            )
        jars = Path(env.get("WAP_JARS_DIR", "").strip() or REPO_ROOT / ".cache" / "jars" / "spark")
        memory = env.get("WAP_SPARK_DRIVER_MEMORY", "").strip() or driver_memory_for(
            env.get("AWS_LAMBDA_FUNCTION_MEMORY_SIZE", "")
        )
        if not re.fullmatch(r"\d+[mMgG]", memory):
            raise ConfigError(f"WAP_SPARK_DRIVER_MEMORY={memory!r}: use a size such as 1536m or 2g.")
        timeout = _positive(env, "WAP_HTTP_TIMEOUT", 30.0, "30")
        endpoint = env.get("AWS_ENDPOINT_URL_S3", "").strip() or env.get("AWS_ENDPOINT_URL", "").strip()
        token = env.get("SLACK_TOKEN", "").strip() or None
        parameter = env.get("WAP_SLACK_TOKEN_PARAMETER", "").strip() or None
        channel = env.get("SLACK_CHANNEL", "").strip() or None
        if (token or parameter) and not channel:
            raise ConfigError("SLACK_CHANNEL is not set but a Slack token is. Fix: export SLACK_CHANNEL=#your-alerts.")
        base_url = env.get("WAP_SLACK_BASE_URL", "").strip() or None
        if base_url:
            base_url = _url(env, "WAP_SLACK_BASE_URL", "use http(s)://host:port/api/") + "/"
        max_receives = _positive_int(env, "WAP_MAX_RECEIVES", 5, "the queue's maxReceiveCount")
        return cls(
            lake_bucket=lake,
            source_bucket=source,
            nessie_endpoint=nessie,
            namespace=namespace,
            warehouse=warehouse.rstrip("/"),
            audits_file=audits,
            jars_dir=jars,
            spark_driver_memory=memory,
            work_dir=Path(env.get("WAP_WORK_DIR", "").strip() or Path(tempfile.gettempdir()) / "wap"),
            main_branch=env.get("WAP_MAIN_BRANCH", "main").strip() or "main",
            http_timeout=timeout,
            aws_region=env.get("AWS_REGION", "").strip() or env.get("AWS_DEFAULT_REGION", "").strip() or "us-east-1",
            aws_endpoint_url=endpoint.rstrip("/") or None,
            slack_channel=channel,
            slack_token_parameter=parameter,
            slack_base_url=base_url,
            max_receives=max_receives,
            slack_token=token,
            nessie_auth=nessie_auth_from(env),
            large_file_bytes=int(_positive(env, "WAP_LARGE_FILE_BYTES", DEFAULT_LARGE_FILE_BYTES, "1073741824")),
            emr=emr_from(env, lake),
            stage=_stage(env),
            time_reserve_seconds=_positive(env, "WAP_TIME_RESERVE_SECONDS", 90.0, "90"),
            source_buckets=source_buckets_from(env, source, lake),
            staging_budget_bytes=int(_positive(env, "WAP_STAGING_BUDGET_BYTES", DEFAULT_LARGE_FILE_BYTES,
                                               "1073741824")),
            abandoned_branch_seconds=_positive(env, "WAP_ABANDONED_BRANCH_SECONDS", 960.0, "960"),
            retry_base_seconds=_positive(env, "WAP_RETRY_BASE_SECONDS", 30.0, "30"),
            retry_max_seconds=_retry_max(env),
        )

    def spark_jars(self) -> list[Path]:
        jars = sorted(self.jars_dir.glob("*.jar")) if self.jars_dir.is_dir() else []
        if not jars:
            raise ConfigError(
                f"WAP_JARS_DIR: no jars in {self.jars_dir}. Fix: run `make jars` (fetches the pinned jars "
                f"from docker/pom.xml with mvn) or point WAP_JARS_DIR at them."
            )
        return jars


def _positive_int(env: Mapping[str, str], name: str, default: int, why: str) -> int:
    raw = env.get(name, "").strip()
    if not raw:
        return default
    if not raw.isdigit() or int(raw) <= 0:
        raise ConfigError(f"{name}={raw!r} must be a positive whole number. Fix: export {name}={default} ({why}).")
    return int(raw)


def _retry_max(env: Mapping[str, str]) -> float:
    value = _positive(env, "WAP_RETRY_MAX_SECONDS", 900.0, "900")
    if value > 43_200:
        raise ConfigError(f"WAP_RETRY_MAX_SECONDS={value:g} is above SQS's 12-hour visibility limit. Fix: export "
                          f"WAP_RETRY_MAX_SECONDS=900 (or any value up to 43200).")
    return value


def source_buckets_from(env: Mapping[str, str], source: str | None, lake: str) -> frozenset[str]:
    """SOURCE_BUCKET plus the comma-separated WAP_SOURCE_BUCKETS; the lake bucket is never one of them."""
    extra = [b.strip() for b in env.get("WAP_SOURCE_BUCKETS", "").split(",") if b.strip()]
    buckets = frozenset(([source] if source else []) + extra)
    if lake in buckets:
        raise ConfigError(f"the lake bucket {lake!r} is named as a source bucket (SOURCE_BUCKET/WAP_SOURCE_BUCKETS): "
                          f"the service would ingest its own tables' files. Fix: use a separate source bucket.")
    return buckets


def _stage(env: Mapping[str, str]) -> str:
    value = env.get("WAP_STAGE", "").strip() or "download"
    if value not in STAGES:
        raise ConfigError(f"WAP_STAGE={value!r}: use one of {', '.join(STAGES)}.")
    return value


def driver_memory_for(function_memory_mb: str) -> str:
    """Spark driver heap from the Lambda's memory: ~60%, leaving room for the JVM's off-heap memory,
    Python and the OS. Outside Lambda (no AWS_LAMBDA_FUNCTION_MEMORY_SIZE): 2g."""
    try:
        megabytes = int(function_memory_mb)
    except ValueError:
        return "2g"
    return f"{max(512, megabytes * 6 // 10)}m"


def _default_audits_file() -> Path:
    local = Path("audits.yml")
    return local if local.is_file() else REPO_ROOT / "audits.yml"

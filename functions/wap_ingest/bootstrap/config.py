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

from wap_ingest.bootstrap.slack_config import SlackActionSettings, slack_actions_from
from wap_ingest.core.errors import ConfigError, WapError
from wap_ingest.core.naming import identifier_from
from wap_ingest.core.publish_requests import PRINCIPALS_VARIABLE, principals_from

REPO_ROOT = Path(__file__).resolve().parents[3]


def _event_bus(env: Mapping[str, str]) -> str | None:
    value = env.get("WAP_EVENT_BUS", "").strip()
    if value and not re.fullmatch(r"(arn:aws[\w-]*:events:[\w-]+:\d{12}:event-bus/)?[/.\-_A-Za-z0-9]{1,256}", value):
        raise ConfigError(f"WAP_EVENT_BUS={value!r} is not an EventBridge bus name or ARN. Fix: export "
                          f"WAP_EVENT_BUS=<bus name> (setup_aws.py prints it), or unset it to send no events.")
    return value or None


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
DEFAULT_SWEEP_GRACE_SECONDS = 3 * 86_400.0  # far above a function's 15 minutes and an EMR run's limit
# emr_request.EXECUTION_TIMEOUT_MINUTES (tests/unit/bootstrap/test_sweep_settings.py)
EMR_RUN_LIMIT_SECONDS = 180 * 60.0
STAGES = ("download", "s3")
DEFAULT_EMR_MAX_ATTEMPTS = 3


@dataclass(frozen=True)
class EmrSettings:
    """Where large files go: the EMR Serverless application, its job role, artefacts and logs."""

    application_id: str
    execution_role_arn: str
    artifacts: str  # s3://bucket/prefix (no trailing slash)
    logs: str
    max_attempts: int = DEFAULT_EMR_MAX_ATTEMPTS  # job runs per object version (the first and the resubmissions)


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
    raw = env.get("WAP_EMR_MAX_ATTEMPTS", "").strip() or str(DEFAULT_EMR_MAX_ATTEMPTS)
    if not raw.isdigit() or not 1 <= int(raw) <= 9:
        raise ConfigError(f"WAP_EMR_MAX_ATTEMPTS={raw!r} must be a whole number from 1 to 9 (job runs per large "
                          f"file). Fix: export WAP_EMR_MAX_ATTEMPTS={DEFAULT_EMR_MAX_ATTEMPTS}.")
    return EmrSettings(application, role, locations["WAP_EMR_ARTIFACTS"], locations["WAP_EMR_LOGS"], int(raw))


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
    staging_budget_bytes: int = DEFAULT_LARGE_FILE_BYTES  # what one group of files may process at once
    max_inflation: float = 200.0  # a file that inflates more than this many times is a decompression bomb
    abandoned_branch_seconds: float = 960.0  # a batch branch older than this belongs to a run that died
    retry_base_seconds: float = 30.0  # a failed or deferred message's first retry; doubled per receive
    retry_max_seconds: float = 900.0  # the longest a retry is delayed
    event_bus: str | None = None  # EventBridge bus (name or ARN) for downstream events; None: none are sent
    publish_principals: tuple[str, ...] = ()  # IAM role/user ARNs whose publish requests are served; (): none
    slack_actions: SlackActionSettings | None = None  # acting on alerts from Slack; None: no signing secret set
    # `wap maintain` removes a table's unreferenced files only once they are older than this (core.lake_files)
    sweep_grace_seconds: float = DEFAULT_SWEEP_GRACE_SECONDS

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
            max_inflation=_positive(env, "WAP_MAX_INFLATION", 200.0, "200"),
            abandoned_branch_seconds=_positive(env, "WAP_ABANDONED_BRANCH_SECONDS", 960.0, "960"),
            retry_base_seconds=_positive(env, "WAP_RETRY_BASE_SECONDS", 30.0, "30"),
            retry_max_seconds=_retry_max(env),
            event_bus=_event_bus(env),
            publish_principals=_publish_principals(env),
            slack_actions=slack_actions_from(env),
            sweep_grace_seconds=_sweep_grace(env),
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


def _sweep_grace(env: Mapping[str, str]) -> float:
    """WAP_SWEEP_GRACE_SECONDS: longer than the longest run that may write a file it has not committed yet (the
    function's, which WAP_ABANDONED_BRANCH_SECONDS bounds, and with EMR configured an EMR job's limit)."""
    value = _positive(env, "WAP_SWEEP_GRACE_SECONDS", DEFAULT_SWEEP_GRACE_SECONDS, f"{DEFAULT_SWEEP_GRACE_SECONDS:g}")
    runs = {"WAP_ABANDONED_BRANCH_SECONDS (the function's longest run)":
            _positive(env, "WAP_ABANDONED_BRANCH_SECONDS", 960.0, "960")}
    if env.get("WAP_EMR_APPLICATION_ID", "").strip():
        runs["an EMR job run's limit (emr_request.EXECUTION_TIMEOUT_MINUTES)"] = EMR_RUN_LIMIT_SECONDS
    for what, longest in runs.items():
        if value <= longest:
            raise ConfigError(
                f"WAP_SWEEP_GRACE_SECONDS={value:g} is not longer than {what}, {longest:g} s: `wap maintain` could "
                f"remove a file a run in flight has written and not committed yet. Fix: export "
                f"WAP_SWEEP_GRACE_SECONDS={DEFAULT_SWEEP_GRACE_SECONDS:g} (3 days, the default), or unset it.")
    return value


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


def _publish_principals(env: Mapping[str, str]) -> tuple[str, ...]:
    try:
        return principals_from(env.get(PRINCIPALS_VARIABLE, ""))
    except WapError as exc:
        raise ConfigError(str(exc)) from exc


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

"""What the stack's processes take from the shell that runs `wap stack up`: an allow list, never the caller's whole
environment (issue 33). A shell where `eval "$(wap stack env --role operator)"` was run holds the operator's catalog
client (WAP_NESSIE_*), AWS role credentials (AWS_SESSION_TOKEN), the publish queue of an earlier stack; a developer's
shell may hold AWS_PROFILE, AWS_ENDPOINT_URL_S3 or a real deployment's settings. Handed to the stack's function, any
of them points it away from the stack's own catalog, store and identity (seen: every file failing with a ConfigError).

So every process the stack starts (moto, Nessie, the OIDC issuer, the Slack sink, each execution environment's
runtime and worker, the local EMR runner) gets:
- from the caller, only the system's basics (`SYSTEM`, `SYSTEM_PREFIXES`: PATH, HOME, JAVA_HOME, the locale, the
  temporary folder, CA bundles, the Python and container tools' own variables) and the test session's tag
  (WAP_TEST_SESSION, wap_stack/leftovers.py), plus, for the processes that run the service, the settings that tune how
  it runs and name no endpoint, bucket, credential or identity (`TUNABLES`: the audits file, the thresholds, the
  retry back-off...);
- everything else from the stack itself: its endpoints, buckets, queues, keys and roles (wap_stack/state.py
  `stack_environment`, wap_stack/auth.py, wap_stack/iam.py), set by the code that starts each process.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

SYSTEM = frozenset({
    "PATH", "HOME", "USER", "LOGNAME", "SHELL", "TERM", "LANG", "LANGUAGE", "TZ", "TMPDIR", "TEMP", "TMP",
    "JAVA_HOME", "VIRTUAL_ENV", "SSL_CERT_FILE", "SSL_CERT_DIR", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE",
    "AWS_CA_BUNDLE", "SPARK_LOCAL_IP", "SPARK_LOCAL_HOSTNAME", "DBUS_SESSION_BUS_ADDRESS",
    "WAP_TEST_SESSION",  # every process of a test session carries its tag (tests/conftest.py)
})
SYSTEM_PREFIXES = ("LC_", "PYTHON", "XDG_", "CONTAINERS_", "COVERAGE_", "COV_CORE_")
# The service's settings (wap_ingest/bootstrap/variables.py) that say how the stack's function runs, not where or as
# whom.
TUNABLES = frozenset({
    "WAP_AUDITS_FILE", "WAP_NAMESPACE", "WAP_JARS_DIR", "WAP_SPARK_STARTUP_TUNING", "WAP_SPARK_DRIVER_MEMORY",
    "WAP_HTTP_TIMEOUT", "WAP_SOURCE_BUCKETS", "WAP_STAGING_BUDGET_BYTES", "WAP_MAX_INFLATION",
    "WAP_ABANDONED_BRANCH_SECONDS", "WAP_RETRY_BASE_SECONDS", "WAP_RETRY_MAX_SECONDS", "WAP_LARGE_FILE_BYTES",
    "WAP_EMR_MAX_ATTEMPTS", "WAP_TIME_RESERVE_SECONDS", "WAP_SWEEP_GRACE_SECONDS", "POWERTOOLS_LOG_LEVEL",
    "POWERTOOLS_METRICS_NAMESPACE",
})


def _system(name: str) -> bool:
    return name in SYSTEM or name.startswith(SYSTEM_PREFIXES)


def system_environment(caller: Mapping[str, str] | None = None) -> dict[str, str]:
    """The caller's variables any stack process may see: the system's basics and the test session's tag."""
    caller = os.environ if caller is None else caller
    return {name: value for name, value in caller.items() if _system(name)}


def service_environment(stack: Mapping[str, str], caller: Mapping[str, str] | None = None) -> dict[str, str]:
    """A process that runs the service (the function, the Slack endpoint, the EMR runner): the system's basics and
    the caller's TUNABLES, then the stack's own settings `stack` over them."""
    caller = os.environ if caller is None else caller
    return system_environment(caller) | {n: v for n, v in caller.items() if n in TUNABLES} | dict(stack)


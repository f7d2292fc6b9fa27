"""What every provisioning step receives: clients, names, the account, the mode, and the report."""

from __future__ import annotations

import enum
import sys
import time
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, TextIO

from infra.provision.names import Account, ResourceNames

Client = Any  # boto3 clients are dynamically typed


class ProvisionError(RuntimeError):
    """A step cannot go on; the message says which resource and what to do."""


class Outcome(enum.Enum):
    CREATED = "created"
    UPDATED = "updated"
    UNCHANGED = "unchanged"
    SKIPPED = "skipped"
    DELETED = "deleted"
    ABSENT = "absent"
    WOULD_CREATE = "would create"
    WOULD_UPDATE = "would update"
    WOULD_DELETE = "would delete"

    @property
    def changes(self) -> bool:
        return self in (Outcome.CREATED, Outcome.UPDATED, Outcome.DELETED)


class Clients:
    """boto3 clients made on first use, all with the same session, region and endpoint.

    `overrides` replaces a service's client (tests pass a Stubber-wrapped Lightsail client: moto has none).
    """

    def __init__(
        self,
        factory: Callable[..., Client],
        *,
        region: str,
        endpoint_url: str | None = None,
        overrides: Mapping[str, Client] | None = None,
    ) -> None:
        self._factory = factory
        self.region = region
        self._endpoint_url = endpoint_url
        self._cache: dict[str, Client] = dict(overrides or {})

    def __call__(self, service: str) -> Client:
        if service not in self._cache:
            kwargs: dict[str, Any] = {"region_name": self.region}
            if self._endpoint_url:
                kwargs["endpoint_url"] = self._endpoint_url
            self._cache[service] = self._factory(service, **kwargs)
        return self._cache[service]


@dataclass(frozen=True)
class JobNetwork:
    """Subnets and security groups the operator brings for the EMR jobs (--subnet-ids, --security-group-ids)."""

    subnet_ids: tuple[str, ...]
    security_group_ids: tuple[str, ...]


@dataclass
class Context:
    clients: Clients
    names: ResourceNames
    account: Account
    dry_run: bool = False
    force: bool = False
    verbose: bool = False
    out: TextIO = field(default_factory=lambda: sys.stdout)
    environ: Mapping[str, str] = field(default_factory=dict)
    given_network: JobNetwork | None = None  # None: infra/provision/network.py creates the jobs' network
    state: dict[str, str] = field(default_factory=dict)
    outcomes: Counter[Outcome] = field(default_factory=Counter)
    sleep: Callable[[float], None] = time.sleep
    wait_seconds: float = 1800.0
    poll_seconds: float = 15.0

    def report(self, outcome: Outcome, kind: str, name: str, detail: str = "") -> Outcome:
        self.outcomes[outcome] += 1
        suffix = f" ({detail})" if detail else ""
        print(f"{outcome.value:<13} {kind} {name}{suffix}", file=self.out)
        return outcome

    def detail(self, message: str) -> None:
        """Extra lines for --verbose (never a secret)."""
        if self.verbose:
            print(f"{'':<13} - {message}", file=self.out)

    def note(self, message: str) -> None:
        print(message, file=self.out)

    def pending(self, create: Callable[[], Any], kind: str, name: str, detail: str = "") -> Outcome:
        """Create something that does not exist yet, or say it would."""
        if self.dry_run:
            return self.report(Outcome.WOULD_CREATE, kind, name, detail)
        create()
        return self.report(Outcome.CREATED, kind, name, detail)

    def converge(self, changes: list[str], apply: Callable[[], Any], kind: str, name: str) -> Outcome:
        """Bring an existing resource to its settings: `changes` names what differs (empty: nothing)."""
        if not changes:
            return self.report(Outcome.UNCHANGED, kind, name)
        if self.dry_run:
            return self.report(Outcome.WOULD_UPDATE, kind, name, ", ".join(changes))
        apply()
        return self.report(Outcome.UPDATED, kind, name, ", ".join(changes))

    def removal(self, exists: bool, delete: Callable[[], Any], kind: str, name: str, detail: str = "") -> Outcome:
        if not exists:
            return self.report(Outcome.ABSENT, kind, name)
        if self.dry_run:
            return self.report(Outcome.WOULD_DELETE, kind, name, detail)
        delete()
        return self.report(Outcome.DELETED, kind, name, detail)

    def wait_until(self, done: Callable[[], bool], what: str) -> None:
        """Poll `done` every poll_seconds, up to wait_seconds (Lightsail databases take ~10 minutes)."""
        waited = 0.0
        while not done():
            if waited >= self.wait_seconds:
                raise ProvisionError(f"gave up waiting for {what} after {waited:.0f} s; run the command again later.")
            self.note(f"{'':<13} ... waiting for {what}")
            self.sleep(self.poll_seconds)
            waited += self.poll_seconds

    def template_values(self) -> dict[str, str]:
        """Placeholders available to every infra file."""
        names, account = self.names, self.account
        return {
            "Partition": account.partition,
            "Region": account.region,
            "AccountId": account.account_id,
            "Prefix": names.prefix,
            "SourceBucket": names.source_bucket,
            "SourceBucketArn": account.bucket_arn(names.source_bucket),
            "LakeBucket": names.lake_bucket,
            "LakeBucketArn": account.bucket_arn(names.lake_bucket),
            "WarehousePrefix": names.warehouse_prefix,
            "QueueArn": account.queue_arn(names.queue),
            "DeadLetterQueueArn": account.queue_arn(names.dead_letter_queue),
            "EventBusArn": account.arn("events", f"event-bus/{names.event_bus}"),
            "FunctionName": names.function,
            "EmrApplicationName": names.emr_application,
            "EmrJobRoleArn": account.role_arn(names.emr_job_role),
            "OperatorRoleArn": account.role_arn(names.operator_role),
            "LambdaRoleArn": account.role_arn(names.lambda_role),
            "SlackTokenParameterArn": account.parameter_arn(names.slack_token_parameter),
            "SlackSigningSecretParameterArn": account.parameter_arn(names.slack_signing_secret_parameter),
            "SlackFunctionName": names.slack_function,
            "NessieClientSecretParameterArn": account.parameter_arn(names.nessie_client_secret_parameter),
            # infra/iam/operator-policy.json: the shared operator client's secret (infra/provision/auth.py stores it)
            "OperatorClientSecretParameterArn": account.parameter_arn(f"/{names.prefix}/nessie-operator-client-secret"),
            "NessieService": names.nessie_service,
        } | self.state

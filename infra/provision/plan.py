"""The order of things: `create` walks the steps forwards, `delete` backwards (after a safety check)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from infra.provision import alarms, auth, bus, emr, nessie, network, queues, registry, roles, secrets, storage
from infra.provision.context import Context, Outcome


@dataclass(frozen=True)
class Step:
    component: str
    create: Callable[[Context], object]
    delete: Callable[[Context], object]


STEPS: tuple[Step, ...] = (
    Step("storage", storage.ensure_lake_bucket, storage.remove_lake_bucket),
    Step("storage", storage.ensure_source_bucket, storage.remove_source_bucket),
    Step("storage", storage.ensure_lake_lifecycle, lambda ctx: None),  # goes with the bucket
    Step("events", queues.ensure_dead_letter_queue, queues.remove_dead_letter_queue),
    Step("events", queues.ensure_ingest_queue, queues.remove_ingest_queue),
    Step("events", storage.ensure_notification, storage.remove_notification),
    Step("events", alarms.ensure_alarm_topic, alarms.remove_alarm_topic),
    Step("events", alarms.ensure_dead_letter_alarm, alarms.remove_dead_letter_alarm),
    Step("events", bus.ensure_event_bus, bus.remove_event_bus),
    Step("image", registry.ensure_repository, registry.remove_repository),
    Step("network", network.ensure_network, network.remove_network),  # before the application that uses it
    Step("emr", emr.ensure_application, emr.remove_application),
    Step("emr", emr.ensure_artifacts, emr.remove_artifacts),
    Step("iam", roles.ensure_emr_job_role, roles.remove_emr_job_role),
    Step("iam", roles.ensure_lambda_role, roles.remove_lambda_role),
    Step("iam", roles.ensure_operator_role, roles.remove_operator_role),
    Step("secrets", secrets.ensure_slack_token, secrets.remove_slack_token),
    Step("secrets", secrets.ensure_slack_signing_secret, secrets.remove_slack_signing_secret),
    Step("nessie", auth.ensure_nessie_auth, auth.remove_nessie_auth),
    Step("nessie", nessie.ensure_nessie, nessie.remove_nessie),
)


def steps_for(skip: frozenset[str]) -> list[Step]:
    return [step for step in STEPS if step.component not in skip]


def _summary(ctx: Context, verb: str) -> None:
    counts = ", ".join(f"{n} {o.value}" for o, n in sorted(ctx.outcomes.items(), key=lambda i: i[0].value))
    changed = any(o.changes for o in ctx.outcomes)
    if ctx.dry_run:
        ctx.note(f"{verb} (dry run): nothing was changed. {counts}")
    elif changed:
        ctx.note(f"{verb}: done. {counts}")
    elif verb == "delete":
        ctx.note(f"{verb}: nothing changed, nothing was left to delete. {counts}")
    else:
        ctx.note(f"{verb}: nothing changed, every resource was already as specified. {counts}")


def create(ctx: Context, skip: frozenset[str] = frozenset()) -> int:
    for step in steps_for(skip):
        step.create(ctx)
    _summary(ctx, "create")
    if "image" not in skip:
        ctx.note(f"Image repository: {registry.repository_uri(ctx)}")
    if "iam" not in skip:
        ctx.note(f"Operators publish as {ctx.account.role_arn(ctx.names.operator_role)} (assumed under their IAM "
                 f"user name; docs/deploy.md, \"How an operator publishes\")")
    if "emr" not in skip and ctx.state.get("EmrApplicationId", "<pending>") != "<pending>":
        ctx.note(f"EMR Serverless application: export WAP_EMR_APPLICATION_ID={ctx.state['EmrApplicationId']}  "
                 "(serverless.yml passes it to the function; `make emr-artifacts` uploads the job's artefacts)")
    return 0


def refusals(ctx: Context, skip: frozenset[str]) -> list[str]:
    """What holds data and would be destroyed: delete stops before touching anything unless --force."""
    if ctx.force:
        return []
    reasons = []
    if "storage" not in skip:
        reasons += [f"s3://{b} is not empty" for b in storage.non_empty_buckets(ctx)]
    if "image" not in skip and registry.repository_has_images(ctx):
        reasons.append(f"ecr repository {ctx.names.ecr_repository} holds images")
    return reasons


def delete(ctx: Context, skip: frozenset[str] = frozenset()) -> int:
    reasons = refusals(ctx, skip)
    if reasons:
        for reason in reasons:
            ctx.report(Outcome.SKIPPED, "refusing", reason)
        ctx.note("delete: refused, nothing was deleted. Empty them first, or pass --force to delete the data too.")
        return 1
    for step in reversed(steps_for(skip)):
        step.delete(ctx)
    _summary(ctx, "delete")
    return 0

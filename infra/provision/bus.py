"""The EventBridge bus downstream jobs listen to (WAP_EVENT_BUS): the function and the EMR jobs put one event per
outcome on it (wap_ingest.core.downstream); a consumer adds its own rule. Removing it removes every rule on it."""

from __future__ import annotations

from botocore.exceptions import ClientError

from infra.provision.context import Context, Outcome

_KIND = "eventbridge bus"


def _exists(ctx: Context) -> bool:
    try:
        ctx.clients("events").describe_event_bus(Name=ctx.names.event_bus)
        return True
    except ClientError as exc:
        if exc.response.get("Error", {}).get("Code") == "ResourceNotFoundException":
            return False
        raise


def ensure_event_bus(ctx: Context) -> Outcome:
    name = ctx.names.event_bus
    if _exists(ctx):
        return ctx.converge([], lambda: None, _KIND, name)
    tags = [{"Key": "wap:prefix", "Value": ctx.names.prefix}]
    return ctx.pending(lambda: ctx.clients("events").create_event_bus(Name=name, Tags=tags), _KIND, name,
                       "downstream events: export WAP_EVENT_BUS=" + name)


def remove_event_bus(ctx: Context) -> Outcome:
    events, name = ctx.clients("events"), ctx.names.event_bus
    exists = _exists(ctx)

    def delete() -> None:
        for page in events.get_paginator("list_rules").paginate(EventBusName=name):
            for rule in page.get("Rules", []):
                targets = events.list_targets_by_rule(Rule=rule["Name"], EventBusName=name).get("Targets", [])
                if targets:
                    events.remove_targets(Rule=rule["Name"], EventBusName=name, Ids=[t["Id"] for t in targets])
                events.delete_rule(Name=rule["Name"], EventBusName=name)
        events.delete_event_bus(Name=name)

    return ctx.removal(exists, delete, _KIND, name)

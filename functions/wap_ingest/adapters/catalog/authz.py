"""Who may do what in the Nessie catalog: three roles, and the Nessie authorization rules (CEL) that enforce them.

Used by the deployed Nessie service (infra/provision/nessie.py renders `nessie_environment()` into the
container's environment) and by the local stack (`wap stack up --auth` passes `nessie_properties()`).

Roles come from the access token's `scope` claim: Quarkus OIDC maps each scope to a role of the request's
security identity (`quarkus.oidc.roles.role-claim-path=scope`, split on spaces), and Nessie 0.99 hands those
roles to the rules as the list `roles` (`role` is the principal's name, i.e. the token's subject). A Cognito
resource server `nessie` with the scopes `service`, `operator` and `reader` gives the scopes `nessie/service`, ...

- service (the function and the EMR job): read everything; create, commit to and delete `wap-*` branches;
  merge into `main`. The only role that writes `main`.
- operator: read everything; delete `wap-*` branches; create, write and delete a dry run's own branches
  (`wap audit`: `wap-[<ns>.]<table>-<digest>-d<start>x<token>`, core.branches), which are never merged (the service
  refuses to publish a dry run's branch whatever it holds); publish a reviewed `wap-*` branch by asking the service
  (`wap publish` with WAP_PUBLISH_QUEUE_URL: wap_ingest.core.publish_requests), which checks the operator's signed
  request through AWS STS, re-audits the branch and merges it: only a rejected file's or load's branch kept for
  review, and only the keys of its run's recorded plan at the content the service committed (core.merge_plan;
  anything else on it refuses the publish). The operator holds no write on `main`, nor on any branch the service
  merges.
- reader: read `main` only.
Nobody may reassign (ASSIGN_REFERENCE_TO_HASH) or delete `main`, or create, reassign or delete any branch or
tag other than `wap-*` ones: no rule grants it.

Why the operator does not merge itself (Nessie 0.99, checked in its TreeApiImpl): a merge into `main` is
authorized with exactly the checks of a direct commit to `main` (COMMIT_CHANGE_AGAINST_REFERENCE on `main`, then
CREATE_ENTITY/UPDATE_ENTITY/DELETE_ENTITY per changed key on `main`), and the rule inputs (ref, path, role,
roles, op) do not say which it is. A role that may merge may also commit to `main` directly, around the audit.
So only the service, whose code merges audited branches only, gets those checks on `main`, and even it never
gets DELETE_ENTITY there (no table or namespace can be dropped from `main`), nor assign or delete `main`.
"""

from __future__ import annotations

SERVICE = "service"
OPERATOR = "operator"
READER = "reader"
ROLES = (SERVICE, OPERATOR, READER)
RESOURCE_SERVER = "nessie"  # the Cognito resource server identifier: scopes are nessie/<role>
MAIN = "main"
WAP_PREFIX = "wap-"

READ_OPS = ("VIEW_REFERENCE", "READ_ENTRIES", "LIST_COMMIT_LOG", "READ_CONTENT_KEY", "READ_ENTITY_VALUE")
# What a merge of a WAP branch needs on `main` (and therefore, see the module's note, a direct commit too):
# the service's alone.
MERGE_OPS = ("COMMIT_CHANGE_AGAINST_REFERENCE", "CREATE_ENTITY", "UPDATE_ENTITY")
WAP_BRANCH_OPS = ("CREATE_REFERENCE", "COMMIT_CHANGE_AGAINST_REFERENCE", "CREATE_ENTITY", "UPDATE_ENTITY",
                  "DELETE_ENTITY", "DELETE_REFERENCE")
# A dry run's branch (core.branches.run_branch_name with RunKind.DRY_RUN), as a CEL (RE2) pattern: the operator may
# write exactly these, and nothing merges them (merging needs commit rights on main, the service's alone).
DRY_RUN_BRANCH = "^wap-([a-z_][a-z0-9_]*[.])?[a-z_][a-z0-9_]*-[0-9a-f]{16}-d[0-9]+x[0-9a-f]+$"


def scope_for(role: str) -> str:
    """The OAuth2 scope (and so the Nessie role) of `role`: `nessie/service`, ..."""
    if role not in ROLES:
        raise ValueError(f"unknown catalog role {role!r}: use one of {', '.join(ROLES)}")
    return f"{RESOURCE_SERVER}/{role}"


def _has(*roles: str) -> str:
    return "(" + " || ".join(f"'{scope_for(role)}' in roles" for role in roles) + ")"


def _ops(ops: tuple[str, ...]) -> str:
    return "op in [" + ", ".join(f"'{op}'" for op in ops) + "]"


# Rule ids are lower-case letters only: as environment variables (NESSIE_SERVER_AUTHORIZATION_RULES_<ID>) they
# map back to the same key. Only `op`, `ref` and `roles` appear: they are bound for every kind of check (a rule
# naming `contentType` fails on repository-config checks, where it is unbound). A request is allowed when any
# rule is true.
RULES: dict[str, str] = {
    "readall": f"{_has(SERVICE, OPERATOR)} && {_ops(READ_OPS)}",
    "readmain": f"{_has(READER)} && ref == '{MAIN}' && {_ops(READ_OPS)}",
    "readconfig": f"{_has(*ROLES)} && op == 'READ_REPOSITORY_CONFIG'",
    "servicewap": f"{_has(SERVICE)} && ref.startsWith('{WAP_PREFIX}') && {_ops(WAP_BRANCH_OPS)}",
    "operatorwap": f"{_has(OPERATOR)} && ref.startsWith('{WAP_PREFIX}') && op == 'DELETE_REFERENCE'",
    "operatordryrun": f"{_has(OPERATOR)} && ref.startsWith('{WAP_PREFIX}') && ref.matches('{DRY_RUN_BRANCH}') && "
                      f"{_ops(WAP_BRANCH_OPS)}",
    "mergemain": f"{_has(SERVICE)} && ref == '{MAIN}' && {_ops(MERGE_OPS)}",
}


def nessie_properties() -> dict[str, str]:
    """The Nessie server properties that turn the rules on (authentication must be on as well)."""
    return {
        "nessie.server.authorization.enabled": "true",
        "quarkus.oidc.roles.role-claim-path": "scope",
    } | {f"nessie.server.authorization.rules.{rule_id}": rule for rule_id, rule in RULES.items()}


def nessie_environment() -> dict[str, str]:
    """`nessie_properties()` as the container's environment variables (Quarkus's mapping: upper case, `_`)."""
    return {name.upper().replace(".", "_").replace("-", "_"): value for name, value in nessie_properties().items()}

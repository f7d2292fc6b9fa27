"""custom_sql checks may only read the new rows: each query is parsed with Spark's own parser (no query is run) and
accepted only when it is a read-only query whose only relation is the view `new_rows` (or the query's own CTEs).

Refused: commands, writes and DDL (INSERT, CREATE, DROP, SET, ...), any other table, branch or path
(`nessie.wap.\\`t@main\\``, `parquet.\\`/etc/passwd\\``), table-valued functions, functions that reach the JVM
(`reflect`, `java_method`, `try_reflect`) and any function that is not one of Spark's built-ins. The plan is walked
through its children, its CTE definitions and the subqueries in its expressions.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from wap_ingest.core.audits import NEW_ROWS_VIEW, AuditSuites
from wap_ingest.core.errors import AuditSuiteError

# logical plan nodes a read-only query over one view is made of (Spark 3.5 class names, unresolved plans)
READ_ONLY_NODES = frozenset({
    "Project", "Filter", "Aggregate", "Sort", "GlobalLimit", "LocalLimit", "Offset", "Tail", "SubqueryAlias",
    "UnresolvedRelation", "UnresolvedWith", "CTERelationDef", "Join", "Union", "Intersect", "Except", "Distinct",
    "Deduplicate", "Window", "WithWindowDefinition", "UnresolvedSubqueryColumnAliases", "Generate", "Pivot",
    "Unpivot", "UnresolvedInlineTable", "OneRowRelation", "UnresolvedHint", "Sample", "LateralJoin",
    "RepartitionByExpression", "Repartition", "UnresolvedHaving", "Expand",
})
JVM_FUNCTIONS = frozenset({"reflect", "java_method", "try_reflect"})
SUBQUERIES = frozenset({"ScalarSubquery", "ListQuery", "Exists", "LateralSubquery"})  # expressions holding a plan


def refusal(spark: Any, query: str) -> str | None:
    """Why `query` may not run as a custom_sql check, or None when it only reads `new_rows`."""
    try:
        plan = spark._jsparkSession.sessionState().sqlParser().parsePlan(query)
    except Exception as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        return f"it is not valid Spark SQL ({first[:200]})"
    ctes = {name.lower() for name in _cte_names(plan)}
    registry = spark._jvm.org.apache.spark.sql.catalyst.analysis.FunctionRegistry.builtin()
    identifier = spark._jvm.org.apache.spark.sql.catalyst.FunctionIdentifier
    for node in _plans(plan):
        kind = node.getClass().getSimpleName()
        if kind not in READ_ONLY_NODES:
            return f"it is not a read-only query ({kind}): only SELECT/WITH over {NEW_ROWS_VIEW} may run"
        if kind == "UnresolvedRelation":
            name = _seq(node.multipartIdentifier())
            if len(name) != 1 or (name[0].lower() != NEW_ROWS_VIEW and name[0].lower() not in ctes):
                return f"it reads {'.'.join(name)!r}: a check may read only the new rows, the view {NEW_ROWS_VIEW!r}"
        for expression in _expressions(node):
            if expression.getClass().getSimpleName() == "UnresolvedFunction":
                parts = _seq(expression.nameParts())
                name = parts[-1].lower()
                if len(parts) != 1 or name in JVM_FUNCTIONS:
                    return f"it calls {'.'.join(parts)}(), which reaches the JVM or a catalog"
                if not registry.functionExists(identifier.apply(name)):
                    return f"it calls {name}(), which is not one of Spark's built-in functions"
    return None


def check_custom_sql(spark: Any, suites: AuditSuites) -> None:
    """Every custom_sql query of the audits file, refused with the table and the check named (run when the engine
    starts, before any file is read)."""
    for table, check in _custom_sql_checks(suites):
        reason = refusal(spark, check.sql)
        if reason is not None:
            raise AuditSuiteError(
                f"audits file: table {table!r}, check {check.name!r} (custom_sql) is refused: {reason}. Fix: write "
                f"it as a SELECT over {NEW_ROWS_VIEW} that returns the rows breaking the rule."
            )


def require_read_only(spark: Any, query: str) -> None:
    """The same rule, where a query is about to run (a suite re-read for a re-audit, or a batch's measurement)."""
    reason = refusal(spark, query)
    if reason is not None:
        raise AuditSuiteError(f"a custom_sql check is refused: {reason}. Query: {query[:200]!r}. Fix: write it as a "
                              f"SELECT over {NEW_ROWS_VIEW} in the audits file.")


def _custom_sql_checks(suites: AuditSuites) -> Iterator[tuple[str, Any]]:
    tables = [(str(t), s) for t, s in suites.by_table.items()] + [("defaults", suites.default)]
    for table, suite in tables:
        for check in suite.checks:
            if getattr(check, "kind", None) == "custom_sql":
                yield table, check


def _plans(plan: Any) -> Iterator[Any]:
    """The plan, its children, its inner children (CTE definitions) and the subquery plans of its expressions."""
    stack = [plan]
    while stack:
        node = stack.pop()
        yield node
        stack += _seq(node.children()) + _seq(node.innerChildren())
        stack += [e.plan() for e in _expressions(node) if e.getClass().getSimpleName() in SUBQUERIES]


def _expressions(node: Any) -> Iterator[Any]:
    stack = _seq(node.expressions())
    while stack:
        expression = stack.pop()
        yield expression
        stack += _seq(expression.children())


def _cte_names(plan: Any) -> list[str]:
    names = []
    for node in _plans(plan):
        if node.getClass().getSimpleName() == "UnresolvedWith":
            names += [str(pair._1()) for pair in _seq(node.cteRelations())]
    return names


def _seq(scala_seq: Any) -> list[Any]:
    items, iterator = [], scala_seq.iterator()
    while iterator.hasNext():
        items.append(iterator.next())
    return items


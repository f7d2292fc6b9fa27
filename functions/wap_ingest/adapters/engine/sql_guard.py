"""custom_sql checks may only read the new rows, and only with what an explicit allow list names
(spark_sql_allowed.py): each query is judged on the plans Spark itself makes of it, and never run to be judged.

1. Parsed (`sessionState.sqlParser.parsePlan`): every plan node and every expression must be of an allowed class;
   every relation a bare name that is `new_rows` or a CTE of the query visible where it is read (CTE scopes are
   followed: a CTE defined in an inner query does not hide a table of the same name outside it); every function
   call a one-part name on the list. So IDENTIFIER(...) in any position, TRANSFORM ... USING, LATERAL VIEW and
   generators, hints, table-valued functions, inline tables, other tables, branches and paths, commands and
   writes are refused by what they are, not by a list of what to fear.
2. Analysed, against the view `new_rows` (`sessionState.analyzer.executeAndCheck` on that same parsed plan, which
   resolves names and builds every call without running anything; only a plan that passed step 1 is analysed):
   again every node and expression of an allowed class, a function only as the class Spark's built-in registry
   gives the name the query called it by (a temporary function that took a built-in's name resolves to a UDF:
   refused), every expression deterministic, and the only relations the view `new_rows` (a leaf here: its plan is
   the service's) and the query's own CTEs.
Before a query runs (`require_read_only`), the view holds the new rows and both steps are taken. When the engine
starts (`check_custom_sql`), every query of the audits file is judged by step 1, which needs no table.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

from wap_ingest.adapters.engine.py4j_lookup import per_jvm, static
from wap_ingest.adapters.engine.sql_allowed import (
    ANALYSED_EXPRESSIONS,
    ANALYSED_PLANS,
    BUILT_EXPRESSIONS,
    CONSTRUCTS,
    FUNCTIONS,
    PARSED_EXPRESSIONS,
    PARSED_PLANS,
    PARSER_BUILT,
    SESSION_NAMES,
)
from wap_ingest.core.audits import NEW_ROWS_VIEW, AuditSuites, CustomSql
from wap_ingest.core.errors import AuditSuiteError

CATALYST = "org.apache.spark.sql.catalyst."


def refusal(spark: Any, query: str) -> str | None:
    """Why `query` may not run as a custom_sql check, or None when it is allowed. Judged on its analysed plan too
    when the session has the view `new_rows` (where a check is about to run); an analysis error is raised as Spark
    raises it (the query could not run either)."""
    return _judge(spark, query, analyse=_has_view(spark))


def check_custom_sql(spark: Any, suites: AuditSuites) -> None:
    """Every custom_sql query of the audits file, its parsed plan judged (step 1), refused with the table and the
    check named: run when the engine starts, before any file is read. No table is loaded and nothing analysed here
    (a cold start would pay for every table's schema and a first analysis: 0.8 s measured for one table); the
    analysed plan is judged before each run (`require_read_only`), against the real new rows. In a process that
    registers no function of its own, what only analysis refuses (a temporary function in a built-in's place) cannot
    be there when the engine starts."""
    for name, suite in [*((t.qualified, s) for t, s in suites.by_table.items()), ("defaults", suites.default)]:
        for check in (c for c in suite.checks if isinstance(c, CustomSql)):
            reason = _judge(spark, check.sql, analyse=False)
            if reason is not None:
                raise AuditSuiteError(
                    f"audits file: table {name!r}, check {check.name!r} (custom_sql) is refused: {reason}. Fix: "
                    f"write it as a SELECT over {NEW_ROWS_VIEW} that returns the rows breaking the rule, with the "
                    f"built-in functions listed in wap_ingest/adapters/engine/sql_allowed.py."
                )


def require_read_only(spark: Any, query: str) -> None:
    """The same rule, where a query is about to run (a suite re-read for a re-audit, or a batch's measurement):
    the view `new_rows` holds the rows, so the analysed plan is always judged here."""
    reason = refusal(spark, query)
    if reason is not None:
        raise AuditSuiteError(f"a custom_sql check is refused: {reason}. Query: {query[:200]!r}. Fix: write it as a "
                              f"SELECT over {NEW_ROWS_VIEW} in the audits file, with the built-in functions listed in "
                              f"wap_ingest/adapters/engine/sql_allowed.py.")


def _judge(spark: Any, query: str, *, analyse: bool) -> str | None:
    state = spark._jsparkSession.sessionState()
    try:
        parsed = state.sqlParser().parsePlan(query)
    except Exception as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        return f"it is not valid Spark SQL ({first[:200]})"
    called: set[str] = set()
    reason = _parsed_refusal(spark, parsed, called)
    if reason is not None or not analyse:
        return reason
    tracker = spark._jvm.org.apache.spark.sql.catalyst.QueryPlanningTracker(spark._jvm.scala.Option.apply(None))
    analysed = state.analyzer().executeAndCheck(parsed, tracker)  # resolves, never runs
    return _analysed_refusal(spark, analysed, _function_classes(spark, PARSER_BUILT | called))


def _has_view(spark: Any) -> bool:
    return bool(spark._jsparkSession.sessionState().catalog().getTempView(NEW_ROWS_VIEW).isDefined())


def _parsed_refusal(spark: Any, plan: Any, called: set[str]) -> str | None:
    """Step 1: the parsed plan, CTE scope by scope; the functions it calls by name are added to `called`."""
    operators = _function_classes(spark, PARSER_BUILT)
    stack: list[tuple[Any, frozenset[str]]] = [(plan, frozenset())]
    while stack:
        node, ctes = stack.pop()
        kind = _name(node)
        if kind not in PARSED_PLANS:
            return _construct(spark, node, kind)
        if kind == "analysis.UnresolvedRelation":
            name = _seq(node.multipartIdentifier())
            if len(name) != 1 or (name[0].lower() != NEW_ROWS_VIEW and name[0].lower() not in ctes):
                return f"it reads {'.'.join(name)!r}: a check may read only the new rows, the view {NEW_ROWS_VIEW!r}"
        if kind == "plans.logical.UnresolvedWith":  # each definition sees the outer CTEs and the ones before it
            visible = set(ctes)
            for pair in _seq(node.cteRelations()):
                stack.append((pair._2(), frozenset(visible)))
                visible.add(str(pair._1()).lower())
            stack.append((node.child(), frozenset(visible)))
            continue
        for expression in _expressions(spark, node.expressions()):
            reason = _parsed_expression_refusal(spark, expression, operators, called)
            if reason is not None:
                return reason
            if _is(spark, "expressions.SubqueryExpression", expression):
                stack.append((expression.plan(), ctes))
        stack += [(child, ctes) for child in _seq(node.children()) + _seq(node.innerChildren())]
    return None


def _parsed_expression_refusal(spark: Any, expression: Any, operators: frozenset[str], called: set[str]) -> str | None:
    kind = _name(expression)
    if kind == "analysis.UnresolvedFunction":
        parts = [str(p) for p in _seq(expression.nameParts())]
        if len(parts) != 1 or parts[0].lower() not in FUNCTIONS:
            return f"it calls {'.'.join(parts)}(), which is not on the list of functions a check may call"
        called.add(parts[0].lower())
    elif kind == "analysis.UnresolvedAttribute":
        parts = [str(p) for p in _seq(expression.nameParts())]
        if len(parts) == 1 and parts[0].lower() in SESSION_NAMES:
            return (f"it names {parts[0]}, which Spark reads as the session's {parts[0]}() unless a column has that "
                    f"name (write {NEW_ROWS_VIEW}.{parts[0]} for a column)")
    elif kind not in PARSED_EXPRESSIONS and kind not in operators:
        return _construct(spark, expression, kind)
    return None


def _analysed_refusal(spark: Any, plan: Any, functions: frozenset[str]) -> str | None:
    """Step 2: the analysed plan, where a function is allowed as the class the registry gives the name the query
    called it by (or an operator); the view `new_rows` is a leaf here."""
    allowed = ANALYSED_EXPRESSIONS | BUILT_EXPRESSIONS | functions
    stack = [plan]
    while stack:
        node = stack.pop()
        kind = _name(node)
        if kind not in ANALYSED_PLANS:
            return _construct(spark, node, kind)
        if kind == "plans.logical.View":
            name = str(node.desc().identifier().table())
            if not node.isTempView() or name.lower() != NEW_ROWS_VIEW:
                return f"it reads the view {name!r}: a check may read only the new rows, the view {NEW_ROWS_VIEW!r}"
            continue
        for expression in _expressions(spark, node.expressions()):
            ekind = _name(expression)
            if ekind not in allowed:
                return _construct(spark, expression, ekind)
            if not expression.deterministic():
                return f"it uses {expression.prettyName()}(), which is not deterministic (a re-audit could differ)"
            if _is(spark, "expressions.SubqueryExpression", expression):
                stack.append(expression.plan())
        stack += _seq(node.children()) + _seq(node.innerChildren())
    return None


def _expressions(spark: Any, roots: Any) -> Iterator[Any]:
    """Every expression under `roots`; of a function Spark rewrites into another at analysis (InheritAnalysisRules:
    its child is that rewrite), the arguments as written, not the rewrite the allowed function made of them."""
    stack = _seq(roots)
    while stack:
        expression = stack.pop()
        yield expression
        if _is(spark, "expressions.InheritAnalysisRules", expression):
            stack += _seq(expression.parameters())
        else:
            stack += _seq(expression.children())


def _function_classes(spark: Any, names: Iterable[str]) -> frozenset[str]:
    """The classes of these allowed functions in Spark's built-in registry (never the session's, where a temporary
    function can take a built-in's name), relative to CATALYST."""
    jvm = spark._jvm
    known: dict[str, str | None] = per_jvm(jvm).setdefault("custom_sql.function_classes", {})
    registry = f"{CATALYST}analysis.FunctionRegistry"
    for name in set(names) - known.keys():
        identifier = static(jvm, f"{CATALYST}FunctionIdentifier", "apply")(name)
        info = static(jvm, registry, "builtin")().lookupFunction(identifier)
        info = info if info.isDefined() else static(jvm, registry, "builtinOperators")().get(name)
        found = info.get().getClassName() if info.isDefined() else None  # an operator's info may name no class
        known[name] = str(found).removeprefix(CATALYST) if found else None
    return frozenset(c for c in (known[n] for n in names) if c is not None)


def _construct(spark: Any, node: Any, kind: str) -> str:
    simple = kind.rsplit(".", 1)[-1]
    if simple == "AggregateExpression":  # FIRST(x), LAST(x), ANY_VALUE(x): the parser builds these itself
        name = node.aggregateFunction().prettyName()
        return f"it calls {name}(), which is not on the list of functions a check may call"
    if simple == "UnresolvedTableValuedFunction":
        return f"it reads {'.'.join(str(p) for p in _seq(node.name()))}(...), {CONSTRUCTS[simple]}"
    words = CONSTRUCTS.get(simple, simple)
    if simple.endswith("WithUnresolvedIdentifier"):
        words += f" (IDENTIFIER({str(node.identifierExpr().sql())[:80]}))"
    elif _is(spark, "expressions.Expression", node):
        try:
            words += f" ({str(node.sql())[:80]})"
        except Exception:  # an unresolved expression may have no SQL text
            words += f" ({node.prettyName()})"
    return f"it uses {words}, which a check may not use"


def _name(node: Any) -> str:
    return str(node.getClass().getName()).removeprefix(CATALYST)


def _is(spark: Any, kind: str, node: Any) -> bool:
    known, key = per_jvm(spark._jvm), f"custom_sql.class:{kind}"
    if key not in known:
        known[key] = static(spark._jvm, "java.lang.Class", "forName")(CATALYST + kind)
    return bool(known[key].isInstance(node))


def _seq(scala_seq: Any) -> list[Any]:
    items, iterator = [], scala_seq.iterator()
    while iterator.hasNext():
        items.append(iterator.next())
    return items

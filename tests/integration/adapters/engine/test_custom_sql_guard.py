"""custom_sql checks are accepted by allow list, on the plans the real Spark makes of them (never run to be judged):
the bypasses of issues 14 and 24 and every construct that is not a plain read of the new rows are refused with
the table, the check and the construct named, when the engine starts and where they would run; the real pipeline
never runs them (the other table keeps its rows, no environment value reaches a report or an alert); the queries
of the repository's own audits files are accepted."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import AUDITS, Lake, parquet_bytes
from tests.paths import ROOT
from wap_ingest.adapters.engine.sql_guard import check_custom_sql, refusal, require_read_only
from wap_ingest.adapters.engine.tables import IcebergTables
from wap_ingest.bootstrap.audits_file import load_suites
from wap_ingest.core.audits import CustomSql, suites_from
from wap_ingest.core.errors import AuditSuiteError
from wap_ingest.core.ingest import Item

pytestmark = [pytest.mark.stack, pytest.mark.spark]

JVM_ENV = "SELECT IDENTIFIER('java_method')('java.lang.System', 'getenv', 'AWS_SECRET_ACCESS_KEY') AS k FROM new_rows"
REFUSED = {
    # IDENTIFIER() in every position: the name is a string, resolved only at analysis
    "IDENTIFIER() naming java_method": JVM_ENV,
    "IDENTIFIER() naming an allowed function": "SELECT IDENTIFIER('upper')(my_col_1) FROM new_rows",
    "IDENTIFIER() as the table": "SELECT * FROM IDENTIFIER('new_rows')",
    "IDENTIFIER() as another table": "SELECT * FROM IDENTIFIER('nessie.wap.other')",
    "IDENTIFIER() as a column": "SELECT IDENTIFIER('my_col_0') FROM new_rows",
    "IDENTIFIER() of a unicode escape": "SELECT IDENTIFIER('java\\u005fmethod')('java.lang.System', 'getenv', 'HOME') "
                                        "FROM new_rows",
    "IDENTIFIER() of a concatenation": "SELECT IDENTIFIER('java' || '_method')('java.lang.System', 'getenv', 'HOME') "
                                       "FROM new_rows",
    # what reaches the JVM, files, scripts, the session
    "reflect": "SELECT reflect('java.lang.System', 'getenv', 'HOME') AS v FROM new_rows",
    "java_method": "SELECT java_method('java.lang.System', 'getProperty', 'user.home') FROM new_rows",
    "java_method in capitals": "SELECT JAVA_METHOD('java.lang.System', 'getenv', 'HOME') FROM new_rows",
    "java_method in backquotes between comments": "SELECT /* a */ `java_method` /* b */ ('java.lang.System', "
                                                  "'getenv', 'HOME') FROM new_rows -- c",
    "java_method split by a comment": "SELECT java/**/_method('java.lang.System', 'getenv', 'HOME') FROM new_rows",
    "try_reflect": "SELECT try_reflect('java.lang.System', 'getenv', 'HOME') FROM new_rows",
    "TRANSFORM USING a script": "SELECT TRANSFORM(my_col_0) USING 'cat' AS (a) FROM new_rows",
    "LATERAL VIEW with a generator": "SELECT * FROM new_rows LATERAL VIEW explode(array(1, 2)) t AS x",
    "a generator": "SELECT explode(array(my_col_0)) FROM new_rows",
    "a hint": "SELECT /*+ BROADCAST(new_rows) */ * FROM new_rows",
    "a repartition hint": "SELECT /*+ REPARTITION(1000) */ * FROM new_rows",
    "a table-valued function": "SELECT * FROM range(10)",
    "range joined to the new rows": "SELECT * FROM new_rows JOIN range(3) ON true",
    "read_files": "SELECT * FROM read_files('/etc/passwd')",
    "input_file_name": "SELECT input_file_name() AS f FROM new_rows",
    "uuid": "SELECT uuid() AS u FROM new_rows",
    "rand": "SELECT * FROM new_rows WHERE rand() < 0.5",
    "first (not deterministic)": "SELECT first(my_col_0) FROM new_rows",
    "current_user()": "SELECT current_user() AS u FROM new_rows",
    "current_user without parentheses": "SELECT current_user AS u FROM new_rows",
    "session_user without parentheses": "SELECT * FROM new_rows WHERE session_user = 'root'",
    "version": "SELECT version() FROM new_rows",
    "raise_error": "SELECT raise_error('x') FROM new_rows",
    "TABLESAMPLE": "SELECT * FROM new_rows TABLESAMPLE (10 PERCENT)",
    "EXECUTE IMMEDIATE": "EXECUTE IMMEDIATE 'SELECT * FROM nessie.wap.other'",
    # writes, commands, other relations
    "insert through a CTE": "WITH x AS (SELECT * FROM new_rows) INSERT INTO nessie.wap.`other@main` SELECT * FROM x",
    "another table": "SELECT * FROM nessie.wap.`other@main`",
    "another branch of a table": "SELECT * FROM new_rows JOIN nessie.wap.`t@wap-x` USING (my_col_0)",
    "a sub-query over main": "SELECT * FROM new_rows WHERE my_col_0 IN (SELECT my_col_0 FROM nessie.wap.`t@main`)",
    "a path": "SELECT * FROM parquet.`/etc/passwd`",
    "a subquery over another table": "SELECT * FROM new_rows WHERE my_col_0 IN (SELECT a FROM other)",
    "a scalar subquery over another table": "SELECT (SELECT max(a) FROM other) AS m FROM new_rows",
    "a CTE over another table": "WITH x AS (SELECT * FROM other) SELECT * FROM x",
    "a CTE named like a table, outside its scope": "SELECT * FROM (WITH other AS (SELECT * FROM new_rows) SELECT * "
                                                   "FROM other) a JOIN other b ON true",
    "an inner CTE read by the outer query": "WITH x AS (WITH other AS (SELECT * FROM new_rows) SELECT * FROM other) "
                                            "SELECT * FROM other",
    "a CTE read before its definition": "WITH a AS (SELECT * FROM b), b AS (SELECT * FROM new_rows) SELECT * FROM a",
    "an inline table": "SELECT * FROM VALUES (1), (2) AS t(a)",
    "a global temporary view": "SELECT * FROM global_temp.new_rows",
    "DDL": "DROP TABLE nessie.wap.other",
    "a command": "SET spark.sql.ansi.enabled = false",
    "caching": "CACHE TABLE new_rows",
    "two statements": "SELECT * FROM new_rows; DROP TABLE x",
    "a catalog function": "SELECT nessie.system.f(my_col_0) FROM new_rows",
    "an unknown function": "SELECT my_udf(my_col_0) FROM new_rows",
}
ACCEPTED = [
    "SELECT * FROM new_rows WHERE my_col_0 < 0",
    "WITH bad AS (SELECT * FROM new_rows WHERE my_col_2 > 1e9) SELECT * FROM bad",
    "SELECT a.my_col_0 FROM new_rows a JOIN new_rows b ON a.my_col_0 = b.my_col_0 AND a.my_col_1 <> b.my_col_1",
    "SELECT my_col_1, count(*) AS n FROM new_rows GROUP BY my_col_1 HAVING count(*) > 100",
    "SELECT * FROM (SELECT my_col_0, row_number() OVER (ORDER BY my_col_0) AS r FROM new_rows) WHERE r < 0",
    "SELECT * FROM new_rows WHERE my_col_0 IN (SELECT my_col_0 FROM new_rows WHERE my_col_2 < 0)",
    "SELECT * FROM /* the view */ `new_rows` nr WHERE nr.my_col_1 NOT LIKE 'v%' OR nr.my_col_0 BETWEEN 1 AND 5",
    "WITH other AS (SELECT * FROM new_rows) SELECT * FROM (WITH t AS (SELECT * FROM other) SELECT * FROM t)",
    "SELECT my_col_1, lag(my_col_0) OVER w AS prev, sum(my_col_2) OVER (PARTITION BY my_col_1 ORDER BY my_col_0 ROWS "
    "BETWEEN 2 PRECEDING AND CURRENT ROW) AS s FROM new_rows WINDOW w AS (ORDER BY my_col_0) ORDER BY 1 LIMIT 10",
    "SELECT my_col_1, avg(my_col_2), percentile_approx(my_col_2, 0.5), count(DISTINCT my_col_0) FROM new_rows "
    "GROUP BY ROLLUP(my_col_1)",
    "SELECT upper(my_col_1), nvl(my_col_1, 'x'), lpad(my_col_1, 3, 'x'), regexp_extract(my_col_1, '(v)', 1), "
    "CASE WHEN my_col_0 > 1 THEN 1 ELSE 0 END, cast(my_col_2 AS decimal(10, 2)), ceil(my_col_2), md5(my_col_1) "
    "FROM new_rows",
    "SELECT * FROM new_rows WHERE date_add(current_date(), my_col_0) > current_date + INTERVAL 1 DAY",
    "SELECT transform(array(my_col_0), x -> x + 1) AS a, named_struct('a', my_col_0).a AS b FROM new_rows",
    "SELECT my_col_0 FROM new_rows EXCEPT SELECT my_col_0 FROM new_rows WHERE EXISTS (SELECT 1 FROM new_rows)",
]


@pytest.fixture
def spark(lake: Lake) -> Any:
    return lake.service.ports.writer.spark


@pytest.fixture
def new_rows(spark: Any) -> Iterator[Any]:
    """The view as a run has it (the check is then judged on the analysed plan too)."""
    spark.createDataFrame([(1, "v1", 0.5)], "my_col_0 int, my_col_1 string, my_col_2 double") \
        .createOrReplaceTempView("new_rows")
    yield spark
    spark.catalog.dropTempView("new_rows")


@pytest.fixture
def session(spark: Any) -> Any:
    """A session of the same engine whose temporary functions and views are its own."""
    return spark.newSession()


@pytest.mark.parametrize("name", sorted(REFUSED))
def test_a_query_that_is_not_an_allowed_read_of_the_new_rows_is_refused(spark: Any, name: str) -> None:
    assert refusal(spark, REFUSED[name]) is not None, name


@pytest.mark.parametrize("name", sorted(REFUSED))
def test_it_is_refused_where_it_would_run_too(new_rows: Any, name: str) -> None:
    assert refusal(new_rows, REFUSED[name]) is not None, name


@pytest.mark.parametrize("query", ACCEPTED)
def test_reads_of_the_new_rows_are_accepted_parsed_and_analysed(spark: Any, new_rows: Any, query: str) -> None:
    assert refusal(spark, query) is None
    new_rows.sql(query).collect()  # and they do run


@pytest.mark.parametrize("query, construct", [
    (JVM_ENV, "IDENTIFIER('java_method')"),
    ("SELECT * FROM IDENTIFIER('nessie.wap.t')", "IDENTIFIER('nessie.wap.t')"),
    ("SELECT TRANSFORM(my_col_0) USING 'cat' AS (a) FROM new_rows", "TRANSFORM ... USING"),
    ("SELECT * FROM new_rows LATERAL VIEW explode(array(1)) t AS x", "LATERAL VIEW"),
    ("SELECT /*+ BROADCAST(new_rows) */ * FROM new_rows", "a hint"),
    ("SELECT * FROM read_files('/etc/passwd')", "read_files(...)"),
    ("SELECT uuid() FROM new_rows", "uuid()"),
    ("SELECT * FROM nessie.wap.`t@main`", "'nessie.wap.t@main'"),
])
def test_the_refusal_names_the_construct(spark: Any, query: str, construct: str) -> None:
    assert construct in (refusal(spark, query) or "")


def test_the_audits_are_checked_when_the_engine_starts_naming_the_table_and_the_check(spark: Any) -> None:
    suites = suites_from({"tables": {"orders": [
        {"check": "custom_sql", "name": "no negative ids", "sql": ACCEPTED[0]},
        {"check": "custom_sql", "name": "sneaky", "sql": JVM_ENV}]}},
        default_namespace="wap")
    with pytest.raises(AuditSuiteError, match=r"table 'wap\.orders', check 'sneaky' \(custom_sql\) is refused: it "
                                              r"uses a name computed from a string \(IDENTIFIER\('java_method'\)\)"):
        check_custom_sql(spark, suites)


def test_the_engine_refuses_to_start_with_such_a_suite(lake: Lake, tmp_path: Path) -> None:
    from wap_ingest.bootstrap import build_service
    from wap_ingest.bootstrap.config import Settings

    audits = tmp_path / "audits.yml"
    audits.write_text(f'tables:\n  orders:\n    - check: custom_sql\n      name: env\n      sql: "{JVM_ENV}"\n')
    service = build_service(Settings.from_env(lake.env | {"WAP_AUDITS_FILE": str(audits)}))
    with pytest.raises(AuditSuiteError, match=r"table 'wap\.orders', check 'env' \(custom_sql\) is refused"):
        service.engine.session()


@pytest.mark.parametrize("path", [ROOT / "audits.yml", AUDITS], ids=["audits.yml", "tests/data/audits.yml"])
def test_the_repositorys_own_audits_are_accepted(spark: Any, path: Path) -> None:
    suites = load_suites(path, "wap")
    check_custom_sql(spark, suites)
    queries = [c.sql for s in [*suites.by_table.values(), suites.default] for c in s.checks if isinstance(c, CustomSql)]
    assert queries
    columns = "order_id bigint, status string, amount double, my_col_0 int, my_col_1 string, my_col_2 double"
    spark.createDataFrame([], columns).createOrReplaceTempView("new_rows")
    try:
        assert {q: refusal(spark, q) for q in queries} == {q: None for q in queries}  # analysed too
    finally:
        spark.catalog.dropTempView("new_rows")


def test_a_temporary_function_that_took_a_builtin_name_is_refused_before_it_runs(session: Any) -> None:
    """Spark resolves a one-part name to the session's temporary function before the built-in: only the analysed
    plan shows it, and it is judged where the query would run (the new rows in the view). The start-up check judges
    the parsed plan, where `lower` is the built-in's name (the service's own sessions register no function)."""
    query = "SELECT * FROM new_rows WHERE lower(my_col_1) = 'v1'"
    suites = suites_from({"tables": {"shadowed": [{"check": "custom_sql", "name": "shadowed", "sql": query}]}},
                         default_namespace="wap")
    session.createDataFrame([(1, "v1")], "my_col_0 int, my_col_1 string").createOrReplaceTempView("new_rows")
    assert refusal(session, query) is None  # lower() is the built-in one
    session.udf.register("lower", lambda value: value, "string")  # this test's own session only
    check_custom_sql(session, suites)  # the parsed plan names a built-in
    assert "user-defined function" in (refusal(session, query) or "")
    with pytest.raises(AuditSuiteError, match=r"custom_sql check is refused: it uses a Python user-defined "
                                              r"function \(lower\(my_col_1\)"):
        require_read_only(session, query)


def test_the_start_up_check_loads_no_table(lake: Lake, session: Any, table_name: str,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """Judging the parsed plan needs no table: a cold start does not pay for each listed table's schema."""
    lake.service.ingest(lake.put(f"{table_name}/base.parquet", parquet_bytes(4)))  # a table there is to load
    suites = suites_from({"tables": {table_name: [{"check": "custom_sql", "name": "rows", "sql": ACCEPTED[0]}]}},
                         default_namespace="wap")
    loads: list[str] = []
    original = IcebergTables.iceberg_table

    def loading(self: IcebergTables, table: Any, ref: str) -> Any:
        loads.append(f"{table}@{ref}")
        return original(self, table, ref)

    monkeypatch.setattr(IcebergTables, "iceberg_table", loading)
    check_custom_sql(session, suites)
    assert loads == []


def test_a_cte_scope_does_not_open_a_relation_of_the_same_name(session: Any) -> None:
    """A CTE named `secrets` inside a subquery is not in scope outside it: there `secrets` is the session's view."""
    session.createDataFrame([("s3cr3t",)], "v string").createOrReplaceTempView("secrets")
    session.createDataFrame([(1,)], "my_col_0 int").createOrReplaceTempView("new_rows")
    query = ("SELECT b.v FROM (WITH secrets AS (SELECT my_col_0 FROM new_rows) SELECT * FROM secrets) a "
             "JOIN secrets b ON true")
    assert [r.v for r in session.sql(query).collect()] == ["s3cr3t"]  # what the query would read
    assert "it reads 'secrets'" in (refusal(session, query) or "")


def test_the_pipeline_never_runs_a_refused_query(lake: Lake, table_name: str) -> None:
    other = f"{table_name}_other"
    lake.service.ingest(lake.put(f"{other}/base.parquet", parquet_bytes(4)))
    os.environ["WAP_TEST_SECRET_VALUE"] = "s3cr3t-value-never-shown"
    suites = suites_from({"tables": {table_name: [
        {"check": "custom_sql", "name": "insert", "sql": REFUSED["insert through a CTE"].replace("other", other)},
        {"check": "custom_sql", "name": "env", "sql": "SELECT reflect('java.lang.System', 'getenv', "
                                                      "'WAP_TEST_SECRET_VALUE') AS v FROM new_rows"},
    ]}}, default_namespace="wap")
    service = lake.service.replaced(suites=suites)
    (result,) = service.ingest_all([Item(lake.put(f"{table_name}/new.parquet", parquet_bytes(40)))])
    assert isinstance(result, AuditSuiteError) and "refused" in str(result)
    assert "s3cr3t" not in str(result)
    assert lake.count(f"wap.{other}") == 4  # nothing was inserted around the audit
    assert [b for b in lake.wap_branches() if table_name in b] == []


def test_identifier_never_brings_the_jvms_environment_into_a_report(lake: Lake, table_name: str) -> None:
    """Issue 24: IDENTIFIER('java_method')(...) passed the old guard, and the function's AWS secret came back as
    the check's sample rows (the stored report, the Slack alert)."""
    secret = lake.env["AWS_SECRET_ACCESS_KEY"]
    suites = suites_from({"tables": {table_name: [{"check": "custom_sql", "name": "env", "sql": JVM_ENV}]}},
                         default_namespace="wap")
    service = lake.service.replaced(suites=suites)
    (result,) = service.ingest_all([Item(lake.put(f"{table_name}/new.parquet", parquet_bytes(3)))])
    assert isinstance(result, AuditSuiteError), result
    assert "IDENTIFIER('java_method')" in str(result) and f"'{secret}'" not in str(result)
    assert [b for b in lake.wap_branches() if table_name in b] == []  # no rejected branch, so no report, no alert

"""custom_sql checks can only read the new rows (Spark's own parser, no query run): the bypasses observed in issue
14 and more are refused with the table and the check named, before and where they would run; the real pipeline
never runs them (the other table keeps its rows, no environment value reaches a report)."""

from __future__ import annotations

import os
from typing import Any

import pytest

from tests.conftest import Lake, parquet_bytes
from wap_ingest.adapters.spark_sql_guard import check_custom_sql, refusal
from wap_ingest.core.audits import suites_from
from wap_ingest.core.errors import AuditSuiteError
from wap_ingest.core.ingest import Item

pytestmark = [pytest.mark.stack, pytest.mark.spark]

REFUSED = {
    "insert through a CTE": "WITH x AS (SELECT * FROM new_rows) INSERT INTO nessie.wap.`other@main` SELECT * FROM x",
    "reflect": "SELECT reflect('java.lang.System', 'getenv', 'HOME') AS v FROM new_rows",
    "java_method": "SELECT java_method('java.lang.System', 'getProperty', 'user.home') FROM new_rows",
    "try_reflect": "SELECT try_reflect('java.lang.System', 'getenv', 'HOME') FROM new_rows",
    "another table": "SELECT * FROM nessie.wap.`other@main`",
    "another branch of a table": "SELECT * FROM new_rows JOIN nessie.wap.`t@wap-x` USING (my_col_0)",
    "a path": "SELECT * FROM parquet.`/etc/passwd`",
    "a table-valued function": "SELECT * FROM range(10)",
    "a subquery over another table": "SELECT * FROM new_rows WHERE my_col_0 IN (SELECT a FROM other)",
    "a scalar subquery over another table": "SELECT (SELECT max(a) FROM other) AS m FROM new_rows",
    "a CTE over another table": "WITH x AS (SELECT * FROM other) SELECT * FROM x",
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
]


@pytest.fixture
def spark(lake: Lake) -> Any:
    return lake.service.ports.writer.spark


@pytest.mark.parametrize("name", sorted(REFUSED))
def test_a_query_that_is_not_a_read_of_the_new_rows_is_refused(spark: Any, name: str) -> None:
    assert refusal(spark, REFUSED[name]) is not None, name


@pytest.mark.parametrize("query", ACCEPTED)
def test_read_only_queries_over_the_new_rows_are_accepted(spark: Any, query: str) -> None:
    assert refusal(spark, query) is None


def test_the_audits_are_checked_when_the_engine_starts_naming_the_table_and_the_check(spark: Any) -> None:
    suites = suites_from({"tables": {"orders": [
        {"check": "custom_sql", "name": "no negative ids", "sql": ACCEPTED[0]},
        {"check": "custom_sql", "name": "sneaky", "sql": REFUSED["insert through a CTE"]}]}},
        default_namespace="wap")
    with pytest.raises(AuditSuiteError, match=r"table 'wap\.orders', check 'sneaky' \(custom_sql\) is refused"):
        check_custom_sql(spark, suites)


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

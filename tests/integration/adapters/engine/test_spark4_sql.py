"""Spark 4.1's SQL, decided on purpose (issue 35, item 2), on the service's own session.

1. custom_sql: what Spark 4 added to its SQL is each refused by the allow list (adapters/engine/sql_allowed.py), by
   what it is and named in the refusal, on the parsed plan (when the engine starts) and where the check would run:
   SQL pipe syntax, SQL scripts, EXECUTE IMMEDIATE, session variables (declared, set, or read), IDENTIFIER(), the new
   table-valued functions, COLLATE and the new functions. The older hidden shapes are in test_custom_sql_guard.py.
2. ANSI mode: Spark 4 turns `spark.sql.ansi.enabled` on by default; the service turns it off (session.py) and keeps
   Spark 3.5's semantics: an invalid cast, a division by zero or an overflow in a check gives null and the check runs,
   where ANSI would raise (shown on a session of the same engine with ANSI on).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.conftest import Lake
from wap_ingest.adapters.engine.errors import EngineStep, engine_failure
from wap_ingest.adapters.engine.sql_guard import refusal
from wap_ingest.core.errors import EngineError

pytestmark = [pytest.mark.stack, pytest.mark.spark]

# each Spark 4 construct: (a check written with it, what the refusal names)
SPARK4 = {
    "pipe syntax": ("FROM new_rows |> WHERE my_col_0 < 0", "SQL pipe syntax (|>)"),
    "pipe syntax after a SELECT": ("SELECT * FROM new_rows |> WHERE my_col_0 IS NULL", "SQL pipe syntax (|>)"),
    "pipe syntax hiding a function": ("FROM new_rows |> SELECT reflect('java.lang.System', 'getenv', 'HOME')",
                                      "SQL pipe syntax (|>)"),
    "pipe syntax aggregating": ("FROM new_rows |> AGGREGATE count(*) AS n GROUP BY my_col_1", "SQL pipe syntax (|>)"),
    "pipe syntax joining another table": ("FROM new_rows |> JOIN other USING (my_col_0)", "'other'"),
    "a SQL script": ("BEGIN SELECT * FROM new_rows WHERE my_col_0 < 0; END", "a SQL script (BEGIN ... END)"),
    "a SQL script with a variable": ("BEGIN DECLARE x INT DEFAULT 0; SELECT * FROM new_rows WHERE my_col_0 < x; END",
                                     "a SQL script (BEGIN ... END)"),
    "EXECUTE IMMEDIATE of a read of the new rows": ("EXECUTE IMMEDIATE 'SELECT * FROM new_rows'", "EXECUTE IMMEDIATE"),
    "EXECUTE IMMEDIATE of a variable": ("EXECUTE IMMEDIATE q", "EXECUTE IMMEDIATE"),
    "DECLARE VARIABLE": ("DECLARE VARIABLE limit_value INT DEFAULT 0", "DECLARE VARIABLE"),
    "DECLARE OR REPLACE": ("DECLARE OR REPLACE VARIABLE limit_value INT DEFAULT 0", "DECLARE VARIABLE"),
    "SET VAR": ("SET VAR limit_value = 1", "SET VAR"),
    "SET VARIABLE from a query": ("SET VARIABLE limit_value = (SELECT max(my_col_0) FROM new_rows)", "SET VAR"),
    "IDENTIFIER() as the table": ("SELECT * FROM IDENTIFIER('new_rows')", "IDENTIFIER('new_rows')"),
    "IDENTIFIER() naming a function": ("SELECT IDENTIFIER('reflect')('java.lang.System', 'getenv', 'HOME') "
                                       "FROM new_rows", "IDENTIFIER('reflect')"),
    "IDENTIFIER() as a column": ("SELECT IDENTIFIER('my_col_0') FROM new_rows", "IDENTIFIER('my_col_0')"),
    "collations()": ("SELECT * FROM collations()", "collations(...), a table-valued function"),
    "sql_keywords()": ("SELECT * FROM sql_keywords()", "sql_keywords(...), a table-valued function"),
    "variant_explode()": ("SELECT * FROM variant_explode(parse_json('[1, 2]'))",
                          "variant_explode(...), a table-valued function"),
    "variant_explode() in a LATERAL join": ("SELECT * FROM new_rows, LATERAL variant_explode(parse_json('[1]'))",
                                            "a LATERAL subquery"),
    "COLLATE": ("SELECT * FROM new_rows WHERE my_col_1 COLLATE UTF8_LCASE = 'V1'", "COLLATE (a collation)"),
    "collate()": ("SELECT * FROM new_rows WHERE collate(my_col_1, 'UTF8_LCASE') = 'V1'", "collate()"),
    "collation()": ("SELECT collation(my_col_1) FROM new_rows", "collation()"),
    "parse_json()": ("SELECT * FROM new_rows WHERE parse_json(my_col_1) IS NULL", "parse_json()"),
    "variant_get()": ("SELECT * FROM new_rows WHERE variant_get(parse_json(my_col_1), '$.a', 'int') < 0",
                      "variant_get()"),
    "randstr() (not deterministic)": ("SELECT * FROM new_rows WHERE my_col_1 = randstr(2)", "randstr()"),
    "uniform() (not deterministic)": ("SELECT * FROM new_rows WHERE my_col_0 < uniform(0, 10)", "uniform()"),
}


@pytest.fixture
def spark(lake: Lake) -> Any:
    return lake.service.ports.writer.spark


@pytest.fixture
def session(spark: Any) -> Iterator[Any]:
    """A session of the service's engine (its settings, its own views and variables) holding the view of a run."""
    own = spark.newSession()
    own.createDataFrame([(0, "v1", 0.5), (2, "x", 1.5)], "my_col_0 int, my_col_1 string, my_col_2 double") \
        .createOrReplaceTempView("new_rows")
    yield own
    own.catalog.dropTempView("new_rows")


@pytest.mark.parametrize("name", sorted(SPARK4))
def test_each_spark4_construct_is_refused_when_the_engine_starts_naming_it(spark: Any, name: str) -> None:
    query, named = SPARK4[name]

    assert named in (refusal(spark, query) or ""), name


@pytest.mark.parametrize("name", sorted(SPARK4))
def test_each_spark4_construct_is_refused_where_the_check_would_run(session: Any, name: str) -> None:
    query, _ = SPARK4[name]

    assert refusal(session, query) is not None, name


@pytest.mark.parametrize("query", [
    "SELECT * FROM new_rows WHERE my_col_0 > limit_value",
    "SELECT * FROM new_rows WHERE my_col_0 > session.limit_value",
    "SELECT * FROM new_rows WHERE my_col_0 > system.session.limit_value",
    "SELECT limit_value AS v FROM new_rows",
])
def test_a_session_variable_read_by_a_check_is_refused(session: Any, query: str) -> None:
    """A variable is a plain name when parsed (so the start-up check cannot see it) and a VariableReference once
    analysed: refused where the check would run. The service declares none; this session does, to prove it."""
    session.sql("DECLARE OR REPLACE VARIABLE limit_value INT DEFAULT 1")

    assert "a session variable" in (refusal(session, query) or "")


def test_the_service_runs_spark_sql_without_ansi_mode(spark: Any) -> None:
    assert spark.conf.get("spark.sql.ansi.enabled") == "false"
    [row] = spark.sql("SELECT 1 / 0 AS d, CAST('x' AS INT) AS c, 2147483647 + 1 AS o, 'abc' < 2 AS s").collect()

    assert row.asDict() == {"d": None, "c": None, "o": -2147483648, "s": None}  # Spark 3.5's answers


def test_a_check_with_a_bad_cast_or_a_zero_divisor_runs_as_on_spark_35(session: Any) -> None:
    check = ("SELECT * FROM new_rows WHERE my_col_2 / my_col_0 > 1 OR CAST(my_col_1 AS INT) < 0 "
             "OR try_cast(my_col_1 AS INT) IS NULL AND my_col_1 NOT LIKE 'v%'")
    assert refusal(session, check) is None

    rows = session.sql(check).collect()  # the row with my_col_0 = 0 divides by zero; 'x' is no number

    assert [r.my_col_1 for r in rows] == ["x"]  # found by try_cast; the null division and cast select nothing


def test_with_ansi_mode_the_same_check_would_raise_and_count_as_an_outage(session: Any) -> None:
    """Why it is off: in an audit, this exception is no result the pipeline can file as the file's fault: the
    engine's error classification makes it an infrastructure failure (EngineError: retried, then dead-lettered)."""
    session.conf.set("spark.sql.ansi.enabled", "true")
    with pytest.raises(Exception, match=r"DIVIDE_BY_ZERO|CAST_INVALID_INPUT") as raised:
        session.sql("SELECT * FROM new_rows WHERE my_col_2 / my_col_0 > 1 OR CAST(my_col_1 AS INT) < 0").collect()

    failure = engine_failure(raised.value, step=EngineStep.MEASURE, doing="auditing the new rows", table="wap.t",
                             spark=session)
    assert type(failure) is EngineError


CSV = "id,amount,code,day,flag\n1,2.5,007,2024-01-31,true\n2,,n/a,2024-02-30,false\n2147483648,1e3,12,,maybe\n"
JSON = ('{"id": 1, "amount": 2.5, "code": "007", "nested": {"a": 1}}\n'
        '{"id": "two", "amount": null, "code": 7, "nested": {"a": "x"}}\n{"id": 2147483648, "amount": 1e400}\n')


@pytest.mark.parametrize("fmt, text", [("csv", CSV), ("json", JSON)])
def test_a_read_infers_and_parses_the_same_with_or_without_ansi_mode(spark: Any, tmp_path: Any, fmt: str,
                                                                    text: str) -> None:
    """The source reads do not depend on the setting: the same inferred schema and the same values (mixed types,
    an impossible date, a value past int and past double), with the service's reader options."""
    from wap_ingest.adapters.engine.read import reader_options
    from wap_ingest.core.models import FileFormat

    path = tmp_path / f"mixed.{fmt}"
    path.write_text(text)
    options = reader_options(FileFormat.CSV if fmt == "csv" else FileFormat.JSON, ())
    read = {}
    for ansi in ("false", "true"):
        own = spark.newSession()
        own.conf.set("spark.sql.ansi.enabled", ansi)
        try:
            frame = own.read.options(**options).format(fmt).load(str(path))
            read[ansi] = (frame.schema.simpleString(), [r.asDict(recursive=True) for r in frame.collect()])
        except Exception as exc:  # FAILFAST: then both must fail alike
            read[ansi] = ("raised", str(exc).strip().splitlines()[0][:200])

    assert read["true"] == read["false"]
    assert read["false"][0] != "raised" or fmt == "json", read  # the CSV reads; what JSON does is compared above

"""The custom_sql allow list (adapters/engine/sql_allowed.py) against the real Spark: every name and class it lists
exists in this Spark; Spark's own documented examples of every allowed function are accepted, parsed and
analysed, and those of every other built-in function (reflect, java_method, uuid, rand, input_file_name,
current_user, xpath, explode, raise_error...) are refused."""

from __future__ import annotations

import re
from typing import Any

import pytest

from tests.conftest import Lake
from wap_ingest.adapters.engine import sql_allowed as allowed
from wap_ingest.adapters.engine.sql_guard import CATALYST, refusal

pytestmark = [pytest.mark.stack, pytest.mark.spark]

EXAMPLE = re.compile(r">\s*(SELECT.*?);", re.S)
# an example over an inline table is read over `new_rows` holding the same rows (a check may not use VALUES)
INLINE = re.compile(r"FROM VALUES (?P<rows>.+?) (?:AS )?(?P<name>\w+)\((?P<columns>[^)]*)\)", re.S | re.I)
NEVER = {  # what must stay off the list, whatever else is added to it
    "reflect", "java_method", "try_reflect", "input_file_name", "input_file_block_start", "input_file_block_length",
    "uuid", "rand", "randn", "random", "shuffle", "monotonically_increasing_id", "spark_partition_id",
    "current_user", "user", "session_user", "current_database", "current_schema", "current_catalog", "version",
    "current_timezone", "raise_error", "assert_true", "aes_encrypt", "aes_decrypt", "try_aes_decrypt", "first",
    "last", "first_value", "last_value", "any_value", "explode", "explode_outer", "posexplode", "inline", "stack",
    "json_tuple", "xpath", "xpath_string", "window", "session_window", "read_files", "range",
}


@pytest.fixture(scope="module")
def spark(lake: Lake) -> Any:
    session = lake.service.ports.writer.spark.newSession()  # its own temporary views
    session.conf.set("spark.sql.session.timeZone", "UTC")
    return session


def _info(spark: Any, name: str) -> Any:
    catalyst = spark._jvm.org.apache.spark.sql.catalyst
    info = catalyst.analysis.FunctionRegistry.builtin().lookupFunction(catalyst.FunctionIdentifier.apply(name))
    return info if info.isDefined() else catalyst.analysis.FunctionRegistry.builtinOperators().get(name)


def _builtin_names(spark: Any) -> set[str]:
    names, iterator = set(), spark._jvm.org.apache.spark.sql.catalyst.analysis.FunctionRegistry.builtin() \
        .listFunction().iterator()
    while iterator.hasNext():
        names.add(str(iterator.next().funcName()))
    return names


def _judge_examples(spark: Any, name: str) -> dict[str, str | None]:
    """Each documented example of the function, with the guard's verdict where it would run. An example of Spark
    4.1's TIME type is left out where the session has TIME off (its default): Spark cannot analyse it there, so
    neither a check nor the guard can (test_time_examples_are_what_spark_itself_cannot_analyse_here)."""
    from pyspark.errors import AnalysisException

    verdicts = {}
    for match in EXAMPLE.finditer(_info(spark, name).get().getExamples() or ""):
        query = " ".join(match.group(1).split())
        inline = INLINE.search(query)
        if inline:
            spark.sql(f"SELECT * FROM VALUES {inline['rows']} AS {inline['name']}({inline['columns']})") \
                .createOrReplaceTempView("new_rows")
            query = INLINE.sub(lambda m: f"FROM new_rows AS {m['name']}", query)
        else:
            spark.createDataFrame([(1,)], "a int").createOrReplaceTempView("new_rows")
        try:
            verdicts[query] = refusal(spark, query)
        except AnalysisException as exc:
            if "UNSUPPORTED_TIME_TYPE" not in str(exc) or spark.conf.get("spark.sql.timeType.enabled") == "true":
                raise
    return verdicts


def test_every_allowed_function_is_a_builtin_of_this_spark(spark: Any) -> None:
    assert sorted(n for n in allowed.FUNCTIONS if not _info(spark, n).isDefined()) == []
    assert allowed.PARSER_BUILT <= allowed.FUNCTIONS
    assert sorted(allowed.FUNCTIONS & NEVER) == []


def test_every_listed_class_exists_in_this_spark(spark: Any) -> None:
    listed = (allowed.PARSED_PLANS | allowed.ANALYSED_PLANS | allowed.PARSED_EXPRESSIONS
              | allowed.ANALYSED_EXPRESSIONS | allowed.BUILT_EXPRESSIONS)
    missing = []
    for kind in sorted(listed):
        try:
            spark._jvm.java.lang.Class.forName(CATALYST + kind)
        except Exception:
            missing.append(kind)
    assert missing == []


def test_sparks_examples_of_every_allowed_function_are_accepted(spark: Any) -> None:
    refused = {}
    for name in sorted(allowed.FUNCTIONS):
        refused |= {f"{name}: {q}": r for q, r in _judge_examples(spark, name).items() if r is not None}
    spark.catalog.dropTempView("new_rows")
    assert refused == {}


def test_sparks_examples_of_every_other_builtin_function_are_refused(spark: Any) -> None:
    others = sorted(_builtin_names(spark) - allowed.FUNCTIONS)
    assert NEVER - {"read_files", "range"} <= set(others)  # table-valued functions are not in this registry
    accepted = [f"{name}: {q}" for name in others for q, r in _judge_examples(spark, name).items() if r is None]
    spark.catalog.dropTempView("new_rows")
    assert accepted == []


def test_time_examples_are_what_spark_itself_cannot_analyse_here(spark: Any) -> None:
    """The examples _judge_examples leaves out (hour, minute, second, extract of a TIME): Spark refuses them before
    any check could run, and the same functions over a timestamp are accepted."""
    from pyspark.errors import AnalysisException

    assert spark.conf.get("spark.sql.timeType.enabled") == "false"
    spark.createDataFrame([(1,)], "a int").createOrReplaceTempView("new_rows")
    with pytest.raises(AnalysisException, match="UNSUPPORTED_TIME_TYPE"):
        spark.sql("SELECT hour(TIME'13:59:59') FROM new_rows").collect()
    assert refusal(spark, "SELECT hour(current_timestamp()), minute(current_timestamp()), second(current_timestamp()), "
                          "extract(HOUR FROM current_timestamp()) FROM new_rows") is None
    spark.catalog.dropTempView("new_rows")

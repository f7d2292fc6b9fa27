"""What a custom_sql check may be made of (Spark 4.1): the explicit lists spark_sql_guard judges a query by.

Nothing outside these lists is accepted. Functions are named as a query writes them; their expression classes come
from Spark's own built-in registry (FunctionRegistry.builtin, never the session's, where a temporary function can
take a built-in's name). Plan nodes and the expressions a query holds besides function calls are named by class,
relative to `org.apache.spark.sql.catalyst.`.

Generous with plain scalar, aggregate, window, string, date and math functions; nothing that reaches the JVM
(reflect, java_method), files (input_file_name, xpath's parsers), the environment or the session (current_user,
version, current_database), the network, or that is non-deterministic (rand, uuid, shuffle, first/last) or has an
effect (raise_error, assert_true). `current_date`, `current_timestamp` (and `now`, `curdate`, `localtimestamp`) are
accepted: one value for the whole query, the usual way to find rows dated in the future.

Re-derived for Spark 4.1 (issue 35): every name and class here exists in 4.1's registry and catalyst (tested), and
what 4.x added stays off the lists, so it is refused by what it is: SQL pipe syntax (`|>`: PipeOperator,
PipeExpression), SQL scripts (BEGIN ... END: CompoundBody), EXECUTE IMMEDIATE, session variables (DECLARE and SET VAR
are commands; a variable read in a query resolves to VariableReference), IDENTIFIER() (still parsed into the
*WithUnresolvedIdentifier nodes in 4.1.1), the new table-valued functions (collations(), sql_keywords(),
variant_explode(): UnresolvedTableValuedFunction), COLLATE and the collate()/collation() functions, and every new
function (parse_json, variant_get, try_reflect, randstr, uniform...). Pipe syntax and COLLATE could be allowed
(a pipe query is a SELECT written otherwise; a collation is deterministic), but neither adds a check that plain SQL
cannot write (lower(), upper() compare without case), so the list stays as small as the checks need.
"""

from __future__ import annotations

_AGGREGATES = """
    any approx_count_distinct approx_percentile array_agg avg bit_and bit_or bit_xor bitmap_construct_agg
    bitmap_or_agg bool_and bool_or collect_list collect_set corr count count_if count_min_sketch covar_pop
    covar_samp every grouping grouping_id histogram_numeric hll_sketch_agg hll_union_agg kurtosis max max_by mean
    median min min_by mode percentile percentile_approx regr_avgx regr_avgy regr_count regr_intercept regr_r2
    regr_slope regr_sxx regr_sxy regr_syy skewness some std stddev stddev_pop stddev_samp sum try_avg try_sum var_pop
    var_samp variance
"""
_WINDOW = "cume_dist dense_rank lag lead nth_value ntile percent_rank rank row_number"
_OPERATORS = """
    + - * / % & | ^ ~ ! < <= <=> = == > >= <> != || and or not in between case when div mod negative positive
    isnull isnotnull isnan like ilike rlike regexp regexp_like equal_null << >> >>>
"""
_CONDITIONALS = "coalesce if ifnull nanvl nullif nvl nvl2"
_CASTS = "bigint binary boolean cast date decimal double float int smallint string timestamp tinyint typeof"
_MATH = """
    abs acos acosh asin asinh atan atan2 atanh bin bit_count bit_get bround cbrt ceil ceiling conv cos cosh cot csc
    degrees e exp expm1 factorial floor getbit greatest hex hypot least ln log log10 log1p log2 pi pmod pow power
    radians rint round sec shiftleft shiftright shiftrightunsigned sign signum sin sinh sqrt tan tanh try_add
    try_divide try_multiply try_subtract unhex width_bucket bitmap_bit_position bitmap_bucket_number bitmap_count
    hll_sketch_estimate hll_union
"""
_STRINGS = """
    ascii base64 bit_length btrim char char_length character_length chr concat concat_ws contains decode elt encode
    endswith find_in_set format_number format_string initcap instr lcase left len length levenshtein locate lower
    lpad ltrim luhn_check mask octet_length overlay position printf regexp_count regexp_extract regexp_extract_all
    regexp_instr regexp_replace regexp_substr repeat replace reverse right rpad rtrim sentences soundex space split
    split_part startswith substr substring substring_index to_binary to_char to_number to_varchar translate trim
    try_to_binary try_to_number ucase unbase64 upper parse_url url_decode url_encode
    crc32 hash md5 sha sha1 sha2 xxhash64
"""
_DATES = """
    add_months convert_timezone curdate current_date current_timestamp date_add date_diff date_format
    date_from_unix_date date_part date_sub date_trunc dateadd datediff datepart day dayofmonth dayofweek dayofyear
    extract from_unixtime from_utc_timestamp hour last_day localtimestamp make_date make_dt_interval make_interval
    make_timestamp make_timestamp_ltz make_timestamp_ntz make_ym_interval minute month months_between next_day now
    quarter second timestamp_micros timestamp_millis timestamp_seconds to_date to_timestamp to_timestamp_ltz
    to_timestamp_ntz to_unix_timestamp to_utc_timestamp trunc try_to_timestamp unix_date unix_micros unix_millis
    unix_seconds unix_timestamp weekday weekofyear year
"""
_COLLECTIONS = """
    array array_append array_compact array_contains array_distinct array_except array_insert array_intersect
    array_join array_max array_min array_position array_prepend array_remove array_repeat array_size array_union
    arrays_overlap arrays_zip cardinality flatten get sequence size slice sort_array element_at try_element_at map
    map_concat map_contains_key map_entries map_from_arrays map_from_entries map_keys map_values str_to_map
    named_struct struct aggregate array_sort exists filter forall map_filter map_zip_with reduce transform
    transform_keys transform_values zip_with
    from_json get_json_object json_array_length json_object_keys schema_of_json to_json from_csv schema_of_csv to_csv
"""
# the functions a query may call (lower case, as written); any other name is refused
FUNCTIONS = frozenset(" ".join((_AGGREGATES, _WINDOW, _OPERATORS, _CONDITIONALS, _CASTS, _MATH, _STRINGS, _DATES,
                                _COLLECTIONS)).split())
# the allowed functions whose expressions the parser or the analyser may build themselves, from operators and SQL
# syntax (`a + b`, `a || b`, `x IS NULL`, `POSITION(a IN b)`, `SUBSTRING(a FROM 1)`, `TRIM(BOTH 'x' FROM a)`,
# `struct(...)`, `current_date` without parentheses, a full join's USING columns) rather than from a call by name
PARSER_BUILT = frozenset(f"""{_OPERATORS} concat position overlay substring trim ltrim rtrim struct coalesce
                         lower current_date current_timestamp""".split())

# bare names Spark resolves to a function when no column has them: a column so named is written `new_rows.user`
SESSION_NAMES = frozenset({"current_user", "user", "session_user"})


def _names(prefix: str, text: str) -> frozenset[str]:
    return frozenset(prefix + name for name in text.split())


_LOGICAL, _ANALYSIS, _EXPR = "plans.logical.", "analysis.", "expressions."
# plan nodes of a query as parsed: projections, filters, aggregates, joins and set operations over named relations
# (each name checked: `new_rows` or one of the query's CTEs in scope), CTEs, sorting, limits, named windows
PARSED_PLANS = _names(_LOGICAL, """
    Project Filter Aggregate Sort GlobalLimit LocalLimit Offset SubqueryAlias Join Union Intersect Except Distinct
    UnresolvedWith WithWindowDefinition OneRowRelation
""") | _names(_ANALYSIS, "UnresolvedRelation UnresolvedHaving UnresolvedSubqueryColumnAliases")
# and as analysed: the same, resolved; a CTE's definition and its references; the view `new_rows` (not entered)
ANALYSED_PLANS = _names(_LOGICAL, """
    Project Filter Aggregate Window Expand Sort GlobalLimit LocalLimit Offset SubqueryAlias Join Union Intersect
    Except Distinct WithCTE CTERelationDef CTERelationRef OneRowRelation View
""")

# expressions that are not function calls: names, literals, aliases, operators the parser builds itself, CASE,
# CAST, subqueries, window specifications, grouping sets, lambdas (`x -> x + 1`), field access, and what the
# analyser makes of them (date and interval arithmetic, aggregate and window wrappers, outer references, grouping())
PARSED_EXPRESSIONS = _names(_ANALYSIS, """
    UnresolvedAttribute UnresolvedStar UnresolvedAlias UnresolvedFunction UnresolvedExtractValue UnresolvedOrdinal
""") | _names(_EXPR, """
    Alias Literal Cast CaseWhen In InSubquery ListQuery ScalarSubquery Exists SortOrder UnresolvedWindowExpression
    WindowExpression WindowSpecDefinition WindowSpecReference UnresolvedNamedLambdaVariable UnspecifiedFrame$
    SpecifiedWindowFrame UnboundedPreceding$ UnboundedFollowing$ CurrentRow$ LambdaFunction Cube Rollup GroupingSets
    LikeAll NotLikeAll LikeAny NotLikeAny NamedArgumentExpression TimestampAdd TimestampDiff IsUnknown IsNotUnknown
""")
ANALYSED_EXPRESSIONS = _names(_EXPR, """
    AttributeReference Alias Literal Cast CaseWhen OuterReference ScalarSubquery ListQuery InSubquery Exists
    SortOrder WindowExpression WindowSpecDefinition SpecifiedWindowFrame UnboundedPreceding$ UnboundedFollowing$
    CurrentRow$ LambdaFunction NamedLambdaVariable GetStructField GetArrayItem GetMapValue GetArrayStructFields
    KnownNotNull LikeAll NotLikeAll LikeAny NotLikeAny IsUnknown IsNotUnknown If ShiftRight
    DateAdd DateSub DateDiff TimestampAddInterval DateAddInterval DatetimeSub SubtractDates SubtractTimestamps
    DateAddYMInterval
    TimestampAddYMInterval
    MultiplyYMInterval MultiplyDTInterval DivideYMInterval DivideDTInterval TimestampAdd TimestampDiff
    ExtractANSIIntervalYears ExtractANSIIntervalMonths ExtractANSIIntervalDays ExtractANSIIntervalHours
    ExtractANSIIntervalMinutes ExtractANSIIntervalSeconds
    aggregate.AggregateExpression
""")
# what the allowed functions registered under an ExpressionBuilder become, and what they build themselves
# (array_sort's default comparator, convert_timezone's default source zone: the session's, UTC in the service;
# since Spark 4.1, hour, minute, second, make_timestamp(_ltz, _ntz), mode, to_char and to_varchar are builders too,
# and build Hour, Minute, Second, MakeTimestampFromDateTime, MakeTimestampNTZ, Mode, and to_char's forms: ToCharacter,
# or the allowed date_format, base64, hex or decode)
BUILT_EXPRESSIONS = _names(_EXPR, """
    aggregate.CountMinSketchAgg aggregate.Average aggregate.Sum
    CurrentDate DatePart Extract MakeTimestamp ParseToTimestamp Ceil Floor RoundCeil RoundFloor StringLPad
    StringRPad BinaryPad Contains StartsWith EndsWith BinaryPredicate Mask CurrentTimeZone Hour Minute Second
    aggregate.Mode MakeTimestampFromDateTime MakeTimestampNTZ ToCharacter DateFormatClass Base64 Hex Decode
""")

# how a refused construct is named in the message (class simple name -> words)
CONSTRUCTS = {
    "ExpressionWithUnresolvedIdentifier": "a name computed from a string",
    "PlanWithUnresolvedIdentifier": "a relation named by a string",
    "ScriptTransformation": "TRANSFORM ... USING (an external script)",
    "Generate": "LATERAL VIEW or a generator",
    "UnresolvedGenerator": "a generator",
    "UnresolvedHint": "a hint (/*+ ... */)",
    "ResolvedHint": "a hint (/*+ ... */)",
    "UnresolvedTableValuedFunction": "a table-valued function",
    "UnresolvedInlineTable": "an inline table (VALUES ...)",
    "Sample": "TABLESAMPLE (rows chosen at random)",
    "LateralJoin": "a LATERAL subquery",
    "RepartitionByExpression": "DISTRIBUTE BY / CLUSTER BY",
    "Repartition": "a repartition",
    "Pivot": "PIVOT",
    "Unpivot": "UNPIVOT",
    "InsertIntoStatement": "INSERT (a write)",
    "ScalaUDF": "a user-defined function",
    "PythonUDF": "a Python user-defined function",
    "ScalaUDAF": "a user-defined aggregate function",
    "ScalaAggregator": "a user-defined aggregate function",
    # Spark 4.x
    "PipeOperator": "SQL pipe syntax (|>)",
    "PipeExpression": "SQL pipe syntax (|>)",
    "CompoundBody": "a SQL script (BEGIN ... END)",
    "UnresolvedExecuteImmediate": "EXECUTE IMMEDIATE",
    "CreateVariable": "DECLARE VARIABLE (a session variable)",
    "SetVariable": "SET VAR (a session variable)",
    "VariableReference": "a session variable",
    "Collate": "COLLATE (a collation)",
}

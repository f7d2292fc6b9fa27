"""The engine: Spark with Iceberg (the session, reads, writes, registration, audits measured by Spark, maintenance,
the custom_sql guard) and the checks and measurements of the files it takes. Its failures are judged in
`engine.errors`."""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .maintenance import SparkTableMaintainer
    from .session import SparkEngine, SparkSettings, local_driver_options, spark_conf_for, spark_session_for
    from .sql_guard import check_custom_sql
    from .writer import SparkIcebergWriter

# What the rest of the service may use of this package, and the module each name lives in. Importing the face imports
# none of them: each is imported when first asked for (PEP 562), so an entry point pays only for what it uses.
_WHERE = {
    "SparkEngine": "session",
    "SparkIcebergWriter": "writer",
    "SparkSettings": "session",
    "SparkTableMaintainer": "maintenance",
    "check_custom_sql": "sql_guard",
    "local_driver_options": "session",
    "spark_conf_for": "session",
    "spark_session_for": "session",
}
__all__ = [
    "SparkEngine", "SparkIcebergWriter", "SparkSettings", "SparkTableMaintainer", "check_custom_sql",
    "local_driver_options", "spark_conf_for", "spark_session_for",
]


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(import_module(f".{module}", __name__), name)

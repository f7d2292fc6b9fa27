"""Audit suites: the checks of each table, evaluated on the engine's measurements of the new rows.

The document shape (YAML in `audits.yml`; parsing YAML is the config layer's job, validation is here):

    tables:
      customer_data_log:            # `<table>` (default namespace) or `<namespace>.<table>`
        - check: not_null
          columns: [my_col_1]
        - check: row_count
          min: 1
          severity: warn            # error (default): reject the run; warn: publish and alert
    defaults:                       # optional: the suite of tables not listed (default: row_count min 1)
      - check: row_count
        min: 1

Every check of a suite contributes to one MeasurementPlan, so the engine measures all of them together,
and the suite is evaluated without further calls. `audits.yml` documents each check with an example.
"""


from __future__ import annotations

from .base import NEW_COLUMN_POLICIES, NEW_ROWS_VIEW, SEVERITIES, AuditContext, Check
from .cross import Reconcile, References
from .learned import Anomaly
from .parse import ALLOWED_KEYS, COMMON_KEYS, suites_from
from .rows import CustomSql, NotNull, RuleCheck, Unique
from .suite import DEFAULT_SUITE, AuditSuite, AuditSuites, audit
from .table import Freshness, RowCount, RowCountVsHistory, Schema, type_name

__all__ = [
           "ALLOWED_KEYS",
           "COMMON_KEYS",
           "DEFAULT_SUITE",
           "NEW_COLUMN_POLICIES",
           "NEW_ROWS_VIEW",
           "SEVERITIES",
           "Anomaly",
           "AuditContext",
           "AuditSuite",
           "AuditSuites",
           "Check",
           "CustomSql",
           "Freshness",
           "NotNull",
           "Reconcile",
           "References",
           "RowCount",
           "RowCountVsHistory",
           "RuleCheck",
           "Schema",
           "Unique",
           "audit",
           "suites_from",
           "type_name",
]

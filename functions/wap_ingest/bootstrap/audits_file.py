"""The audits file (YAML) read from disk into the core's AuditSuites; errors name the file and the fix."""

from __future__ import annotations

from pathlib import Path

import yaml

from wap_ingest.core.audits import AuditSuites, suites_from
from wap_ingest.core.errors import AuditSuiteError


def load_suites(path: Path, default_namespace: str) -> AuditSuites:
    try:
        document = yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as exc:
        raise AuditSuiteError(f"audits file {path}: not valid YAML: {exc}") from exc
    except OSError as exc:
        raise AuditSuiteError(f"audits file {path}: cannot be read ({exc}). Fix: check WAP_AUDITS_FILE.") from exc
    try:
        return suites_from(document, default_namespace=default_namespace)
    except AuditSuiteError as exc:
        raise AuditSuiteError(f"{path}: {exc}") from exc

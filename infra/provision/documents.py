"""The data files in infra/: loaded, then rendered with `${Name}` placeholders (string.Template syntax).

Placeholders are substituted in string values only, after parsing, so a value can never break the
document's structure. A placeholder without a value is an error that names it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from string import Template
from typing import Any

import yaml

INFRA_DIR = Path(__file__).resolve().parents[1]


class TemplateError(ValueError):
    """An infra file uses a placeholder that setup_aws.py does not provide."""


def load(relative: str) -> Any:
    """Parse `infra/<relative>` (.json or .yml/.yaml)."""
    path = INFRA_DIR / relative
    text = path.read_text(encoding="utf-8")
    if path.suffix == ".json":
        return json.loads(text)
    return yaml.safe_load(text)


def render(document: Any, values: Mapping[str, str]) -> Any:
    """A copy of `document` with every `${Name}` in its strings replaced by `values[Name]`."""
    if isinstance(document, str):
        try:
            return Template(document).substitute(values)
        except KeyError as exc:
            raise TemplateError(f"placeholder ${{{exc.args[0]}}} has no value (in {document!r})") from exc
    if isinstance(document, list):
        return [render(item, values) for item in document]
    if isinstance(document, dict):
        return {key: render(value, values) for key, value in document.items()}
    return document


def placeholders(document: Any) -> set[str]:
    """Every placeholder name used in `document` (for tests and --verbose)."""
    if isinstance(document, str):
        return {m.group("named") or m.group("braced") for m in Template.pattern.finditer(document)} - {None}
    if isinstance(document, list):
        return set().union(*(placeholders(item) for item in document)) if document else set()
    if isinstance(document, dict):
        return set().union(*(placeholders(v) for v in document.values())) if document else set()
    return set()


def load_rendered(relative: str, values: Mapping[str, str]) -> Any:
    return render(load(relative), values)


def policy_json(document: Any) -> str:
    """IAM/SQS policies as compact JSON (what the APIs take)."""
    return json.dumps(document, separators=(",", ":"), sort_keys=True)

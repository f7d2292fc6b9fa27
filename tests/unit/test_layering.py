"""The dependency rule: core imports only the standard library and itself; adapters never import
entry points; nothing imports an SDK at module level outside adapters/, local/ and entrypoints/."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "functions" / "wap_ingest"


def imported_modules(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            if node.level:  # relative: resolve against the package path
                rel = path.relative_to(PACKAGE.parent).with_suffix("").parts[: -node.level]
                names.add(".".join([*rel, node.module] if node.module else rel))
            elif node.module:
                names.add(node.module)
    return names


def test_core_imports_only_the_standard_library_and_itself() -> None:
    offenders = []
    for path in sorted((PACKAGE / "core").rglob("*.py")):
        for name in imported_modules(path):
            top = name.split(".")[0]
            if name.startswith("wap_ingest.core") or top == "__future__":
                continue
            if top not in sys.stdlib_module_names:
                offenders.append(f"{path.name}: {name}")
    assert offenders == []


def test_the_checker_would_catch_an_sdk_import(tmp_path: Path) -> None:
    fake = PACKAGE / "core" / "models.py"
    assert "boto3" in imported_modules_from_source("import boto3\nfrom pyspark.sql import x\n", fake)


def imported_modules_from_source(source: str, path: Path) -> set[str]:
    tree = ast.parse(source)
    return {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names} | {
        n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module
    }


def test_adapters_do_not_import_entrypoints() -> None:
    for path in sorted((PACKAGE / "adapters").rglob("*.py")):
        assert not any("entrypoints" in name for name in imported_modules(path)), path.name


def test_adapters_get_plain_values_not_the_settings_nor_the_wiring() -> None:
    """The composition root (bootstrap) reads config.Settings and hands adapters clients and plain values."""
    offenders = [f"{path.name}: {name}" for path in sorted((PACKAGE / "adapters").rglob("*.py"))
                 for name in imported_modules(path) if name in ("wap_ingest.config", "wap_ingest.bootstrap")]
    assert offenders == []


def test_the_wap_steps_are_defined_once() -> None:
    """Branch, write, audit and merge are called from the one pipeline package (its one-table groups, its
    multi-table loads and the tables' maintenance); no other core module drives them."""
    pipeline = PACKAGE / "core" / "pipeline"
    callers = {path for path in (PACKAGE / "core").rglob("*.py")
               if ".create_branch(" in path.read_text(encoding="utf-8") or ".merge(" in path.read_text(
                   encoding="utf-8")}
    outside = {str(p.relative_to(PACKAGE)) for p in callers if p.parent != pipeline}
    assert outside == {"core/review.py"}, outside  # review: an operator's publish of a branch the pipeline left
    # groups and loads publish files; maintain merges a table's upkeep through the same discipline
    assert {p.name for p in callers if p.parent == pipeline} == {"groups.py", "loads.py", "maintain.py"}

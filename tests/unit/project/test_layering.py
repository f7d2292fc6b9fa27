"""The dependency rule: core imports only the standard library and itself; adapters are packages, one per technology,
each behind its face (its `__init__`), and nothing outside a package reaches into its insides; entry points import
the core, the composition root and the packages' faces; entry points are handed their use cases by the composition
root and never read settings or reach adapters through a service object; adapters never import entry points or the
composition root; the local development stack (wap_stack) is a package of its own that the service never imports."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

from tests.paths import ROOT

PACKAGE = ROOT / "functions" / "wap_ingest"


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
                 for name in imported_modules(path) if name in ("wap_ingest.bootstrap.config", "wap_ingest.bootstrap")]
    assert offenders == []


def test_the_transaction_has_one_owner() -> None:
    """Branches are created and merged in one module of the whole package: the transaction owner. File groups,
    loads, maintenance, dry runs and reviewed publishes hand it their work; the Nessie adapter implements the port."""
    owner = PACKAGE / "core" / "pipeline" / "transaction.py"
    callers = {path.relative_to(PACKAGE).as_posix() for path in PACKAGE.rglob("*.py")
               if ".create_branch(" in path.read_text(encoding="utf-8") or ".merge(" in path.read_text(
                   encoding="utf-8")}
    assert callers == {owner.relative_to(PACKAGE).as_posix()}, callers
    nessie = (PACKAGE / "adapters" / "catalog" / "nessie.py").read_text(encoding="utf-8")
    assert "def create_branch(" in nessie and "def merge(" in nessie  # the port, on Nessie's REST v2


def _module_of(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def import_graph() -> dict[str, set[str]]:
    """Every module of the package and the package modules it imports, at module level or inside functions (an
    import inside a function hides a circle, it does not remove it). `from pkg import name` counts as importing
    `pkg.name` when that is a module, else `pkg`."""
    modules = {_module_of(p): p for p in PACKAGE.rglob("*.py")}
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
        edges: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                edges |= {a.name for a in node.names}
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    anchor = package.split(".")
                    anchor = anchor[: len(anchor) - (node.level - 1)]
                    base = ".".join([*anchor, base] if base else anchor)
                for alias in node.names:
                    edges.add(f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else base)
        graph[name] = {e for e in edges if e in modules and e != name}
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for nxt in sorted(graph[node]):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    sys.setrecursionlimit(10_000)
    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_no_circle_in_the_import_graph() -> None:
    """A package's __init__ re-exporting its modules is not a circle: only edges between distinct modules count, and
    a package imports its own submodules by design (they are skipped)."""
    graph = {name: {e for e in edges if not e.startswith(f"{name}.")} for name, edges in import_graph().items()}
    assert cycles(graph) == []


def test_the_circle_finder_finds_a_circle() -> None:
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


ADAPTERS = PACKAGE / "adapters"
PACKAGES = sorted(p.name for p in ADAPTERS.iterdir() if p.is_dir() and (p / "__init__.py").exists())


def test_adapters_are_packages_each_with_a_face() -> None:
    """No module at the top of adapters/ but its `__init__` (the shared Verdict); each package names in `__all__`
    what the rest of the service may use of it, each name importable."""
    assert sorted(p.name for p in ADAPTERS.glob("*.py")) == ["__init__.py"]
    assert PACKAGES == ["aws", "catalog", "engine", "formats", "slack"]
    import importlib

    for name in PACKAGES:
        face = importlib.import_module(f"wap_ingest.adapters.{name}")
        assert face.__all__, name
        for exported in face.__all__:
            assert getattr(face, exported) is not None, f"{name}.{exported}"


def reached_insides(path: Path, source: str | None = None) -> list[str]:
    """The adapter packages' insides a module outside them imports (`wap_ingest.adapters.<package>.<module>`)."""
    tree = ast.parse(source if source is not None else path.read_text(encoding="utf-8"))
    mine = path.relative_to(PACKAGE).parts
    own = mine[1] if len(mine) > 2 and mine[0] == "adapters" else None
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and not node.level:
            parts = node.module.split(".")
            if parts[:2] == ["wap_ingest", "adapters"] and len(parts) > 3 and parts[2] != own:
                found.append(node.module)
        elif isinstance(node, ast.Import):
            found += [a.name for a in node.names if a.name.startswith("wap_ingest.adapters.") and
                      len(a.name.split(".")) > 3 and a.name.split(".")[2] != own]
    return found


def test_nothing_reaches_into_another_packages_insides() -> None:
    offenders = [f"{path.relative_to(PACKAGE)}: {name}" for path in sorted(PACKAGE.rglob("*.py"))
                 for name in reached_insides(path)]
    assert offenders == []


def test_the_rule_catches_an_entry_point_importing_an_adapters_insides() -> None:
    handler = PACKAGE / "entrypoints" / "lambda_handler.py"
    assert reached_insides(handler, "from wap_ingest.adapters.engine.writer import SparkIcebergWriter\n") == [
        "wap_ingest.adapters.engine.writer"]
    assert reached_insides(handler, "from wap_ingest.adapters.engine import SparkIcebergWriter\n") == []


def test_entry_points_import_the_core_the_composition_root_and_faces_only() -> None:
    allowed = ("wap_ingest.core", "wap_ingest.bootstrap", "wap_ingest.entrypoints", "wap_ingest.dashboard",
               *(f"wap_ingest.adapters.{name}" for name in PACKAGES))
    offenders = []
    for path in sorted((PACKAGE / "entrypoints").rglob("*.py")):
        for name in imported_modules(path):
            if name.startswith("wap_ingest.") and not name.startswith(allowed):
                offenders.append(f"{path.name}: {name}")
    assert offenders == []


def test_the_service_never_imports_the_development_stack_at_module_level() -> None:
    """wap_stack is not in the Lambda image nor the EMR artefacts: `wap stack` is found only where it is installed
    (entrypoints/cli.py imports it inside a function, and says nothing when it is absent)."""
    offenders = []
    for path in sorted(PACKAGE.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in tree.body:
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else (
                [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            offenders += [f"{path.relative_to(PACKAGE)}: {n}" for n in names if n.startswith("wap_stack")]
    assert offenders == []


# What an entry point may take from the composition root: the use cases it is handed and their accessors, never the
# Service, the Settings or an adapter's builder.
HANDED = {"DeadLetterCommands", "EmrJobUseCases", "FunctionUseCases", "OperationUseCases", "OperatorCommands",
          "PipelineCommands", "PublishRequests", "SlackActionUseCases", "SlackEndpointUseCases", "check_settings",
          "dead_letter_commands", "emr_job", "function", "operator_commands", "pipeline_commands", "slack_endpoint"}
WIRING = ("wap_ingest.bootstrap.config", "wap_ingest.bootstrap.root", "wap_ingest.bootstrap.builders")
LOCATOR_NAMES = {"svc", "service", "Service", "Settings", "settings"}


def locator_uses(path: Path, source: str | None = None) -> list[str]:
    """How a module reaches past the use cases it is handed: an import of the wiring (config, root, builders) or of
    anything the composition root offers but its use cases, and any `svc`, `service` or `settings` it reads."""
    tree = ast.parse(source if source is not None else path.read_text(encoding="utf-8"))
    found: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and not node.level:
            if node.module.startswith(WIRING):
                found.append(f"imports {node.module}")
            elif node.module == "wap_ingest.bootstrap":
                found += [f"imports {a.name} from the composition root" for a in node.names if a.name not in HANDED]
        elif isinstance(node, ast.Import):
            found += [f"imports {a.name}" for a in node.names if a.name.startswith(WIRING)]
        elif isinstance(node, ast.Attribute) and node.attr in LOCATOR_NAMES:
            found.append(f"line {node.lineno}: reads .{node.attr}")
        elif isinstance(node, ast.Name) and node.id in LOCATOR_NAMES:
            found.append(f"line {node.lineno}: uses {node.id}")
    return found


def test_entry_points_are_handed_their_use_cases_and_reach_nothing_through_a_service_object() -> None:
    """Each entry point gets the use cases it needs from the composition root (bootstrap: `function()`,
    `slack_endpoint()`, `emr_job()`, `pipeline_commands()`...): no `svc.settings`, `svc.notifier`, `svc.retries`, no
    Service, no config.Settings. (entrypoints/emr_artifacts.py builds the EMR artefacts from bootstrap.emr_request's
    names, which is no wiring.)"""
    offenders = [f"{path.name}: {use}" for path in sorted((PACKAGE / "entrypoints").rglob("*.py"))
                 for use in locator_uses(path)]
    assert offenders == []


def test_the_rule_catches_a_handler_reaching_through_a_service_object() -> None:
    handler = PACKAGE / "entrypoints" / "lambda_handler.py"
    reaching = ("from wap_ingest.bootstrap import service\n"
                "def handle(event):\n"
                "    svc = service()\n"
                "    svc.retries.back_off('arn', 'r', svc.settings.retry_base_seconds)\n")
    assert locator_uses(handler, reaching) == [
        "imports service from the composition root", "line 3: uses svc", "line 3: uses service",
        "line 4: reads .settings", "line 4: uses svc", "line 4: uses svc"]
    assert locator_uses(handler, "from wap_ingest.bootstrap.config import Settings\n") == [
        "imports wap_ingest.bootstrap.config"]
    assert locator_uses(handler, "import wap_ingest.bootstrap.root\n") == ["imports wap_ingest.bootstrap.root"]
    assert locator_uses(handler, "from wap_ingest.bootstrap import Service, notifier_for\n") == [
        "imports Service from the composition root", "imports notifier_for from the composition root"]
    assert locator_uses(handler, "def f(uses):\n    return uses.settings.max_receives\n") == [
        "line 2: reads .settings"]
    handed = ("from wap_ingest.bootstrap import function\n"
              "def handle(event, context):\n"
              "    uses = function()\n"
              "    return uses.deliveries.ingest([], None)\n")
    assert locator_uses(handler, handed) == []


ROUTING = PACKAGE / "core" / "routing.py"
ROUTES = {"route", "check_bucket", "exact_version", "parse_manifest", "where_for"}  # routing's own steps
THRESHOLDS = {"threshold_bytes", "large_file_bytes"}


def routing_outside(path: Path, source: str | None = None) -> list[str]:
    """Routing done by a module itself: a call of one of routing's steps, or a comparison with the large-file
    threshold (every path asks core.routing.Router.place, which compares it in `where_for` only)."""
    tree = ast.parse(source if source is not None else path.read_text(encoding="utf-8"))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            name = node.func.id if isinstance(node.func, ast.Name) else (
                node.func.attr if isinstance(node.func, ast.Attribute) else "")
            if name in ROUTES:
                found.append(f"line {node.lineno}: calls {name}")
        elif isinstance(node, ast.Compare):
            operands = [node.left, *node.comparators]
            if any((isinstance(o, ast.Attribute) and o.attr in THRESHOLDS) or
                   (isinstance(o, ast.Name) and o.id in THRESHOLDS) for o in operands):
                found.append(f"line {node.lineno}: compares with the large-file threshold")
    return found


def test_routing_is_decided_in_one_place() -> None:
    """Files, groups and a load's manifest entries are routed, and the EMR threshold compared, in core/routing.py
    only."""
    offenders = [f"{path.relative_to(PACKAGE)}: {found}" for path in sorted(PACKAGE.rglob("*.py")) if path != ROUTING
                 for found in routing_outside(path)]
    assert offenders == []


def test_the_rule_catches_routing_done_elsewhere() -> None:
    ingest = PACKAGE / "core" / "ingest.py"
    assert routing_outside(ingest, "if routed.processed > large_files.threshold_bytes:\n    pass\n") == [
        "line 1: compares with the large-file threshold"]
    assert routing_outside(ingest, "routed = [route(s, objects=o) for s in sources]\n") == ["line 1: calls route"]
    assert routing_outside(ingest, "placed = router.place(source, table)\n") == []

"""The EMR job's artefacts carry the service only: the package zip (`spark.submit.pyFiles`) holds every module of
wap_ingest and nothing else, none of the local development stack (wap_stack, or wap_ingest/local where it was)."""

from __future__ import annotations

import zipfile
from pathlib import Path

from wap_ingest.bootstrap.emr_request import AUDITS, ENTRY_POINT, PACKAGE
from wap_ingest.entrypoints import emr_artifacts


def dev_stack_modules(names: list[str]) -> list[str]:
    return [n for n in names if "wap_stack" in n.split("/") or n.startswith("wap_ingest/local/")]


def test_the_package_zip_holds_the_service_and_no_module_of_the_development_stack(tmp_path: Path) -> None:
    built = emr_artifacts.build(tmp_path, python=False)

    assert {p.name for p in built} == {PACKAGE, ENTRY_POINT, AUDITS}
    with zipfile.ZipFile(tmp_path / PACKAGE) as archive:
        names = archive.namelist()
    package = emr_artifacts.PACKAGE_DIR
    assert sorted(names) == sorted(f"wap_ingest/{p.relative_to(package).as_posix()}" for p in package.rglob("*.py"))
    assert "wap_ingest/entrypoints/emr_job.py" in names
    assert [n for n in names if not n.startswith("wap_ingest/")] == []
    assert dev_stack_modules(names) == []


def test_the_development_stack_is_a_package_beside_the_service_not_inside_it() -> None:
    package = emr_artifacts.PACKAGE_DIR

    assert package.name == "wap_ingest"
    assert (package.parent / "wap_stack" / "__init__.py").is_file()  # beside it, where the zip does not look
    assert not (package / "local").exists()

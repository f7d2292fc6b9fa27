"""The --json contract of the ops commands: every schema is a valid JSON Schema, and `wap schema` prints it."""

from __future__ import annotations

import json

import jsonschema
import pytest

from wap_ingest.entrypoints.cli import main
from wap_ingest.entrypoints.ops_schema import SCHEMA_VERSION, SCHEMAS


@pytest.mark.parametrize("command", ["branches", "prune", "show", "publish", "discard", "history"])
def test_each_ops_command_has_a_valid_schema(command: str, capsys: pytest.CaptureFixture[str]) -> None:
    jsonschema.Draft202012Validator.check_schema(SCHEMAS[command])
    assert main(["schema", command]) == 0
    assert json.loads(capsys.readouterr().out) == SCHEMAS[command]


def test_the_schemas_reject_what_scripts_must_not_receive() -> None:
    ok = {"schema_version": SCHEMA_VERSION, "table": "wap.t", "entries": [], "emr_jobs": []}
    jsonschema.validate(ok, SCHEMAS["history"])
    for bad in ({"table": "wap.t", "entries": []}, ok | {"schema_version": 2}, ok | {"entries": [{"at": 1}]},
                ok | {"emr_jobs": [{"job_run_id": "j"}]}):
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate(bad, SCHEMAS["history"])

"""setup_aws.py and the Nessie container's bootstrap key on moto over HTTP (Lightsail through botocore's Stubber):
rotation on request (a dry run first), a new key when the deployed one was deleted, a restart when the database
password changed, and a first run without a Nessie image. The create/create-again/delete cycle and the checks
shared with it are in test_setup_aws.py."""

from __future__ import annotations

import json
from typing import Any

import pytest
from botocore.stub import ANY, Stubber
from infra.provision.names import ResourceNames

from tests.integration.setup_aws_harness import (
    DB_PASSWORD,
    Capture,
    _database,
    _not_found,
    _parameter,
    _service,
    _user,
    assert_deployment,
    assert_password_never_sent,
    client,
    names_for,
    run,
    stub_delete,
    stub_first_create,
    stub_second_create,
)

pytestmark = pytest.mark.stack


def stub_redeploy(stub: Stubber, names: ResourceNames, deployed: dict[str, Any], captured: Capture) -> None:
    """A `create` that finds the service with `deployed` and submits a new deployment."""
    stub_second_create(stub, names, deployed)
    stub.add_response("create_container_service_deployment", {"containerService": {}},
                      {"serviceName": names.nessie_service, "containers": captured, "publicEndpoint": ANY})
    stub.add_response("get_container_services", _service(names, deployed), {"serviceName": names.nessie_service})


def test_the_access_key_is_rotated_on_request_and_replaced_when_gone(
    moto_url: str, lightsail: tuple[Any, Stubber]
) -> None:
    ls, stub = lightsail
    names = names_for("rotate")
    iam = client(moto_url, "iam")
    first = Capture()
    stub_first_create(stub, names, first)
    assert run(moto_url, names, "-v", "create", lightsail=ls).code == 0
    [old_key] = _user(moto_url, names.nessie_secrets_user)["keys"]  # type: ignore[index]

    stub_second_create(stub, names, first.value)
    dry = run(moto_url, names, "-v", "create", "--dry-run", lightsail=ls, environ={"WAP_ROTATE_NESSIE_KEY": "1"})

    assert dry.code == 0, dry.out
    stub.assert_no_pending_responses()
    assert "would create  iam access key for rotate-nessie-secrets (rotation (WAP_ROTATE_NESSIE_KEY))" in dry.out
    assert f"would update  lightsail container service {names.nessie_service} (deployment" in dry.out
    assert _user(moto_url, names.nessie_secrets_user)["keys"] == [old_key]  # type: ignore[index]

    containers = Capture()
    stub_redeploy(stub, names, first.value, containers)
    rotated = run(moto_url, names, "-v", "create", lightsail=ls, environ={"WAP_ROTATE_NESSIE_KEY": "1"})

    assert rotated.code == 0, rotated.out
    stub.assert_no_pending_responses()
    [new_key] = _user(moto_url, names.nessie_secrets_user)["keys"]  # type: ignore[index]
    assert new_key != old_key
    deployment = {"containers": containers.value, "publicEndpoint": first.value["publicEndpoint"]}
    assert_deployment(names, deployment, new_key)
    assert f"created       iam access key {new_key}" in rotated.out
    assert f"deleted       iam access key {old_key} (replaced by {new_key})" in rotated.out
    assert containers.value["nessie"]["environment"]["WAP_SECRETS_SECRET_ACCESS_KEY"] not in rotated.out

    # someone deletes the deployed key: the next create makes and deploys a new one
    iam.delete_access_key(UserName=names.nessie_secrets_user, AccessKeyId=new_key)
    replaced = Capture()
    stub_redeploy(stub, names, deployment, replaced)
    again = run(moto_url, names, "-v", "create", lightsail=ls)

    assert again.code == 0, again.out
    stub.assert_no_pending_responses()
    [third_key] = _user(moto_url, names.nessie_secrets_user)["keys"]  # type: ignore[index]
    assert third_key not in (old_key, new_key)
    assert "no deployed key is usable" in again.out
    assert replaced.value["nessie"]["environment"]["WAP_SECRETS_ACCESS_KEY_ID"] == third_key
    assert_password_never_sent(ls)

    # the database password was rotated in Lightsail: the parameter follows and Nessie restarts to read it
    deployed = {"containers": replaced.value, "publicEndpoint": first.value["publicEndpoint"]}
    db = {"relationalDatabaseName": names.nessie_database}
    stub.add_response("get_relational_database", _database(names), db)
    stub.add_response("get_relational_database_master_user_password", {"masterUserPassword": "rotated-db-password"},
                      {**db, "passwordVersion": "CURRENT"})
    stub.add_response("get_container_services", _service(names, deployed), {"serviceName": names.nessie_service})
    stub.add_response("create_container_service_deployment", {"containerService": {}},
                      {"serviceName": names.nessie_service, **deployed})
    stub.add_response("get_container_services", _service(names, deployed), {"serviceName": names.nessie_service})
    restarted = run(moto_url, names, "-v", "create", lightsail=ls)

    assert restarted.code == 0, restarted.out
    stub.assert_no_pending_responses()
    assert f"updated       ssm parameter {names.nessie_db_password_parameter} (value)" in restarted.out
    assert "restart (the database password changed)" in restarted.out
    assert _user(moto_url, names.nessie_secrets_user)["keys"] == [third_key]  # type: ignore[index]
    assert "rotated-db-password" not in restarted.out + json.dumps(ls.sent_to_lightsail)
    parameter = client(moto_url, "ssm").get_parameter(Name=names.nessie_db_password_parameter, WithDecryption=True)
    assert parameter["Parameter"]["Value"] == "rotated-db-password"

    stub_delete(stub, names, deployed)
    assert run(moto_url, names, "-v", "delete", lightsail=ls).code == 0
    assert _user(moto_url, names.nessie_secrets_user) is None


def test_without_an_image_the_service_is_created_empty_and_no_key_is_made(
    moto_url: str, lightsail: tuple[Any, Stubber]
) -> None:
    ls, stub = lightsail
    names = names_for("noimage")
    db = {"relationalDatabaseName": names.nessie_database}
    stub.add_response("get_relational_database", _database(names), db)
    stub.add_response("get_relational_database_master_user_password", {"masterUserPassword": DB_PASSWORD},
                      {**db, "passwordVersion": "CURRENT"})
    _not_found(stub, "get_container_services", {"serviceName": names.nessie_service})
    stub.add_response("create_container_service", {"containerService": {"containerServiceName": names.nessie_service}},
                      {"serviceName": names.nessie_service, "power": "small", "scale": 1, "tags": ANY})

    result = run(moto_url, names, "-v", "create", lightsail=ls, image=None)

    assert result.code == 0, result.out
    stub.assert_no_pending_responses()
    assert f"skipped       nessie deployment {names.nessie_service} (WAP_NESSIE_IMAGE is not set" in result.out
    assert "push-container-image" in result.out
    assert _user(moto_url, names.nessie_secrets_user)["keys"] == []  # type: ignore[index]
    assert _parameter(moto_url, names.nessie_db_password_parameter) is not None
    assert_password_never_sent(ls)
    assert DB_PASSWORD not in result.out

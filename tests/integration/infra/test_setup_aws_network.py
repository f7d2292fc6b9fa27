"""The EMR jobs' network against a real moto server (HTTP): setup_aws.py creates a VPC whose private subnets route
through a NAT gateway, a security group with HTTPS out only, and gives them to the EMR application; a second run
changes nothing, drift is repaired, delete removes it all. Or the operator brings subnets and security groups, and
nothing is created."""

from __future__ import annotations

from typing import Any

import pytest
import setup_aws
from infra.provision.names import ResourceNames

from tests.integration.setup_aws_harness import client, names_for, run

pytestmark = pytest.mark.stack

SKIP = ("--skip", "nessie")


def _tagged(items: list[dict[str, Any]], name: str) -> list[dict[str, Any]]:
    return [i for i in items if {"Key": "Name", "Value": name} in i.get("Tags", [])]


def network(moto_url: str, names: ResourceNames) -> dict[str, Any]:
    """What exists in moto under the `<prefix>-emr-*` names (empty lists where nothing does)."""
    ec2, prefix = client(moto_url, "ec2"), f"{names.prefix}-emr"
    vpcs = _tagged(ec2.describe_vpcs()["Vpcs"], f"{prefix}-vpc")
    vpc_ids = [v["VpcId"] for v in vpcs]
    in_vpc = [{"Name": "vpc-id", "Values": vpc_ids}] if vpc_ids else None

    def listed(call: Any, key: str) -> list[dict[str, Any]]:
        return list(call(Filters=in_vpc)[key]) if in_vpc else []

    nats = [n for n in listed(ec2.describe_nat_gateways, "NatGateways") if n["State"] != "deleted"]
    return {
        "vpcs": vpcs,
        "subnets": {s["Tags"][0]["Value"] if s.get("Tags") else s["SubnetId"]: s
                    for s in listed(ec2.describe_subnets, "Subnets")},
        "tables": {t["Tags"][0]["Value"]: t for t in listed(ec2.describe_route_tables, "RouteTables") if t.get("Tags")},
        "nats": nats,
        "addresses": _tagged(ec2.describe_addresses()["Addresses"], f"{prefix}-nat"),
        "gateways": _tagged(ec2.describe_internet_gateways()["InternetGateways"], f"{prefix}-igw"),
        "groups": [g for g in listed(ec2.describe_security_groups, "SecurityGroups") if g["GroupName"] != "default"],
        "endpoints": listed(ec2.describe_vpc_endpoints, "VpcEndpoints"),
    }


def application(moto_url: str, names: ResourceNames) -> dict[str, Any] | None:
    emr = client(moto_url, "emr-serverless")
    apps = [a for a in emr.list_applications()["applications"]
            if a["name"] == names.emr_application and a["state"] != "TERMINATED"]
    return dict(emr.get_application(applicationId=apps[0]["id"])["application"]) if apps else None


def _default_route(table: dict[str, Any]) -> dict[str, Any]:
    return next(r for r in table["Routes"] if r.get("DestinationCidrBlock") == "0.0.0.0/0")


def assert_network(net: dict[str, Any], names: ResourceNames, app: dict[str, Any]) -> None:
    prefix = f"{names.prefix}-emr"
    assert len(net["vpcs"]) == 1 and len(net["nats"]) == 1 and len(net["addresses"]) == 1
    assert len(net["gateways"]) == 1 and net["gateways"][0]["Attachments"][0]["VpcId"] == net["vpcs"][0]["VpcId"]
    public, private = net["subnets"][f"{prefix}-public"], [net["subnets"][f"{prefix}-private-{x}"] for x in "ab"]
    assert len({s["AvailabilityZone"] for s in private}) == 2  # two zones: one zone's outage does not stop the jobs
    nat = net["nats"][0]
    assert nat["SubnetId"] == public["SubnetId"]
    assert nat["NatGatewayAddresses"][0]["AllocationId"] == net["addresses"][0]["AllocationId"]
    public_table, private_table = net["tables"][f"{prefix}-public"], net["tables"][f"{prefix}-private"]
    assert _default_route(public_table)["GatewayId"] == net["gateways"][0]["InternetGatewayId"]
    assert _default_route(private_table)["NatGatewayId"] == nat["NatGatewayId"]
    assert not any(r.get("GatewayId", "").startswith("igw-") for r in private_table["Routes"])  # private: no IGW
    assert {a["SubnetId"] for a in private_table["Associations"] if "SubnetId" in a} == {
        s["SubnetId"] for s in private}
    [endpoint] = net["endpoints"]
    assert endpoint["ServiceName"].endswith(".s3") and private_table["RouteTableId"] in endpoint["RouteTableIds"]
    [group] = net["groups"]
    assert group["GroupName"] == f"{prefix}-jobs" and group["IpPermissions"] == []
    assert [(p["IpProtocol"], p["FromPort"], p["ToPort"], [r["CidrIp"] for r in p["IpRanges"]])
            for p in group["IpPermissionsEgress"]] == [("tcp", 443, 443, ["0.0.0.0/0"])]
    assert sorted(app["networkConfiguration"]["subnetIds"]) == sorted(s["SubnetId"] for s in private)
    assert app["networkConfiguration"]["securityGroupIds"] == [group["GroupId"]]


def test_create_makes_the_network_again_changes_nothing_repairs_drift_and_delete_removes_it(
    moto_url: str,
) -> None:
    names = names_for("netw")
    first = run(moto_url, names, "-v", "create", *SKIP)

    assert first.code == 0, first.out
    for line in ("created       ec2 vpc netw-emr-vpc", "created       ec2 nat gateway netw-emr-nat",
                 "created       ec2 subnet netw-emr-private-b", "created       ec2 security group netw-emr-jobs"):
        assert line in first.out
    app = application(moto_url, names)
    assert app is not None
    state = network(moto_url, names)
    assert_network(state, names, app)

    second = run(moto_url, names, "-v", "create", *SKIP)

    assert second.code == 0, second.out
    ec2_lines = [line for line in second.out.splitlines() if " ec2 " in line]
    assert len(ec2_lines) == 11 and all(line.startswith("unchanged") for line in ec2_lines), second.out
    assert "nothing changed" in second.out
    assert network(moto_url, names) == state and application(moto_url, names) == app

    ec2, emr = client(moto_url, "ec2"), client(moto_url, "emr-serverless")
    group = state["groups"][0]["GroupId"]
    ec2.authorize_security_group_egress(GroupId=group, IpPermissions=[
        {"IpProtocol": "tcp", "FromPort": 5432, "ToPort": 5432, "IpRanges": [{"CidrIp": "0.0.0.0/0"}]}])
    emr.stop_application(applicationId=app["applicationId"])
    emr.update_application(applicationId=app["applicationId"], networkConfiguration={
        "subnetIds": [state["subnets"]["netw-emr-public"]["SubnetId"]], "securityGroupIds": [group]})
    repaired = run(moto_url, names, "-v", "create", *SKIP)

    assert repaired.code == 0, repaired.out
    assert "updated       ec2 security group netw-emr-jobs (egress tcp 5432-5432 0.0.0.0/0)" in repaired.out
    assert "updated       emr-serverless application netw-spark (networkConfiguration)" in repaired.out
    assert_network(network(moto_url, names), names, application(moto_url, names) or {})

    deleted = run(moto_url, names, "-v", "delete", *SKIP)

    assert deleted.code == 0, deleted.out
    assert deleted.out.index("deleted       emr-serverless application") < deleted.out.index("deleted       ec2 subnet")
    gone = network(moto_url, names)
    assert (gone["vpcs"], gone["nats"], gone["addresses"], gone["gateways"]) == ([], [], [], [])
    again = run(moto_url, names, "-v", "delete", *SKIP)
    assert "absent        ec2 vpc netw-emr-vpc" in again.out and "nothing was left to delete" in again.out


def test_dry_run_says_what_the_network_would_be_and_makes_nothing(moto_url: str) -> None:
    names = names_for("netdry")

    result = run(moto_url, names, "-v", "create", "--dry-run", *SKIP)

    assert result.code == 0, result.out
    for what in ("ec2 vpc netdry-emr-vpc", "ec2 nat gateway netdry-emr-nat", "ec2 route table netdry-emr-private",
                 "ec2 security group netdry-emr-jobs", "emr-serverless application netdry-spark"):
        assert f"would create  {what}" in result.out
    assert network(moto_url, names)["vpcs"] == [] and application(moto_url, names) is None


def _own_network(moto_url: str) -> tuple[list[str], str]:
    ec2 = client(moto_url, "ec2")
    vpc = ec2.create_vpc(CidrBlock="10.77.0.0/16")["Vpc"]["VpcId"]
    subnets = [ec2.create_subnet(VpcId=vpc, CidrBlock=f"10.77.{i}.0/24", AvailabilityZone=f"us-east-1{z}")
               ["Subnet"]["SubnetId"] for i, z in ((1, "a"), (2, "b"))]
    group = ec2.create_security_group(GroupName="own-emr", Description="own", VpcId=vpc)["GroupId"]
    return subnets, group


def test_own_subnets_and_security_groups_are_used_and_nothing_is_created(moto_url: str) -> None:
    names = names_for("netown")
    subnets, group = _own_network(moto_url)
    given = ("--subnet-ids", ",".join(subnets), "--security-group-ids", group)

    result = run(moto_url, names, "-v", "create", *given, *SKIP)

    assert result.code == 0, result.out
    assert "skipped       ec2 network given (subnets in us-east-1a, us-east-1b; nothing created)" in result.out
    assert "created       ec2" not in result.out and network(moto_url, names)["vpcs"] == []
    app = application(moto_url, names)
    assert app is not None
    assert app["networkConfiguration"] == {"subnetIds": subnets, "securityGroupIds": [group]}
    again = run(moto_url, names, "-v", "create", *given, *SKIP)
    assert "unchanged     emr-serverless application netown-spark" in again.out

    deleted = run(moto_url, names, "-v", "delete", *given, *SKIP)

    assert deleted.code == 0, deleted.out
    ec2 = client(moto_url, "ec2")
    assert len(ec2.describe_subnets(SubnetIds=subnets)["Subnets"]) == 2  # not ours to delete


def test_own_network_ids_must_exist_and_come_in_pairs(
    moto_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    names = names_for("netbad")
    missing = run(moto_url, names, "-v", "create", "--subnet-ids", "subnet-0000000000000dead",
                  "--security-group-ids", "sg-0000000000000dead", *SKIP)

    assert missing.code == 1
    assert "--subnet-ids subnet-0000000000000dead" in capsys.readouterr().err
    assert application(moto_url, names) is None  # stopped before the application

    with pytest.raises(SystemExit) as exit_:
        setup_aws.main(["-v", "create", "-n", "nessie-x", "--source-bucket", "a-src", "--lake-bucket", "a-lake",
                        "--subnet-ids", "subnet-1"], environ={})
    assert exit_.value.code == 2
    assert "--subnet-ids and --security-group-ids go together" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        setup_aws.main(["-v", "create", "-n", "nessie-x", "--source-bucket", "a-src", "--lake-bucket", "a-lake"],
                       environ={"WAP_EMR_SUBNET_IDS": "sg-1", "WAP_EMR_SECURITY_GROUP_IDS": "sg-2"})
    assert "is not a subnet-... id" in capsys.readouterr().err

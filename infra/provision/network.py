"""The network the EMR Serverless jobs run in, so they reach Nessie, the token endpoint (Cognito) and Slack.

A job without a VPC configuration reaches only some AWS services of its own Region (S3, Glue, CloudWatch Logs,
KMS, STS...), never the internet; see docs/deploy.md, "Network for the large-file jobs". So either the operator
brings subnets and security groups (`--subnet-ids`, `--security-group-ids`: nothing is created, they are checked),
or this module creates, all named `<prefix>-emr-*` and tagged `wap:prefix`:

    VPC 10.42.0.0/16 ── internet gateway
      public subnet 10.42.0.0/24 (AZ 1) ── route 0.0.0.0/0 -> internet gateway; NAT gateway with an Elastic IP
      private subnets 10.42.1.0/24 (AZ 1), 10.42.2.0/24 (AZ 2) ── route 0.0.0.0/0 -> NAT gateway,
                                                                  S3 gateway endpoint (S3 bytes skip the NAT)
      security group: no inbound rule, outbound TCP 443 only (DNS to the VPC resolver is not filtered)

Every resource is found by its Name tag, so a second run creates nothing; removal walks backwards.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from botocore.exceptions import ClientError

from infra.provision.context import Client, Context, JobNetwork, Outcome, ProvisionError

PENDING = "<pending>"
VPC_CIDR = "10.42.0.0/16"
PUBLIC_CIDR = "10.42.0.0/24"
PRIVATE_CIDRS = ("10.42.1.0/24", "10.42.2.0/24")
ANYWHERE = "0.0.0.0/0"
EGRESS = (("tcp", 443, 443, ANYWHERE),)  # (protocol, from port, to port, CIDR): HTTPS out, nothing else
_NAT_LIVE = ("pending", "available")


def _name(ctx: Context, part: str) -> str:
    return f"{ctx.names.prefix}-emr-{part}"


def _tags(ctx: Context, resource: str, name: str) -> list[dict[str, Any]]:
    return [{"ResourceType": resource, "Tags": [{"Key": "Name", "Value": name},
                                                {"Key": "wap:prefix", "Value": ctx.names.prefix}]}]


def _by_name(name: str, *more: tuple[str, str]) -> list[dict[str, Any]]:
    return [{"Name": "tag:Name", "Values": [name]}] + [{"Name": k, "Values": [v]} for k, v in more]


def _first(items: list[dict[str, Any]]) -> dict[str, Any] | None:
    return dict(items[0]) if items else None


def _id(found: dict[str, Any] | None, key: str) -> str:
    return str((found or {}).get(key))


def _created(ctx: Context, create: Callable[[], str], kind: str, name: str, detail: str = "") -> str:
    """ctx.pending that also returns the new id (PENDING in a dry run)."""
    made: list[str] = []
    ctx.pending(lambda: made.append(create()), kind, name, detail)
    return made[0] if made else PENDING


# --- finding ---------------------------------------------------------------------------------------------

def _vpc(ec2: Client, name: str) -> dict[str, Any] | None:
    return _first(ec2.describe_vpcs(Filters=_by_name(name))["Vpcs"])


def _subnet(ec2: Client, name: str, vpc: str) -> dict[str, Any] | None:
    return _first(ec2.describe_subnets(Filters=_by_name(name, ("vpc-id", vpc)))["Subnets"])


def _gateway(ec2: Client, name: str) -> dict[str, Any] | None:
    return _first(ec2.describe_internet_gateways(Filters=_by_name(name))["InternetGateways"])


def _route_table(ec2: Client, name: str, vpc: str) -> dict[str, Any] | None:
    return _first(ec2.describe_route_tables(Filters=_by_name(name, ("vpc-id", vpc)))["RouteTables"])


def _address(ec2: Client, name: str) -> dict[str, Any] | None:
    return _first(ec2.describe_addresses(Filters=_by_name(name))["Addresses"])


def _nat(ec2: Client, name: str, vpc: str) -> dict[str, Any] | None:
    found = ec2.describe_nat_gateways(Filters=_by_name(name, ("vpc-id", vpc)))["NatGateways"]
    return _first([n for n in found if n.get("State") in _NAT_LIVE])


def _endpoint(ec2: Client, vpc: str, service: str) -> dict[str, Any] | None:
    found = ec2.describe_vpc_endpoints(Filters=[{"Name": "vpc-id", "Values": [vpc]},
                                                {"Name": "service-name", "Values": [service]}])["VpcEndpoints"]
    return _first([e for e in found if str(e.get("State", "")).lower() not in ("deleted", "deleting")])


def _group(ec2: Client, name: str, vpc: str) -> dict[str, Any] | None:
    filters = [{"Name": "group-name", "Values": [name]}, {"Name": "vpc-id", "Values": [vpc]}]
    return _first(ec2.describe_security_groups(Filters=filters)["SecurityGroups"])


def _s3_service(ctx: Context) -> str:
    return f"com.amazonaws.{ctx.account.region}.s3"


def _zones(ec2: Client) -> list[str]:
    zones = ec2.describe_availability_zones(Filters=[{"Name": "state", "Values": ["available"]}])
    names = sorted(z["ZoneName"] for z in zones["AvailabilityZones"]
                   if z.get("ZoneType", "availability-zone") == "availability-zone")
    if len(names) < 2:
        raise ProvisionError(f"the region has {len(names)} available zone(s); the EMR jobs' subnets need two. "
                             "Fix: pass --subnet-ids and --security-group-ids of your own network.")
    return names[:2]


# --- creating --------------------------------------------------------------------------------------------

def _ensure_vpc(ctx: Context, ec2: Client) -> str:
    name = _name(ctx, "vpc")
    found = _vpc(ec2, name)
    if found is not None:
        ctx.report(Outcome.UNCHANGED, "ec2 vpc", name, found["VpcId"] if ctx.verbose else "")
        return str(found["VpcId"])

    def create() -> str:
        vpc = ec2.create_vpc(CidrBlock=VPC_CIDR, TagSpecifications=_tags(ctx, "vpc", name))["Vpc"]["VpcId"]
        ec2.modify_vpc_attribute(VpcId=vpc, EnableDnsSupport={"Value": True})
        ec2.modify_vpc_attribute(VpcId=vpc, EnableDnsHostnames={"Value": True})
        return str(vpc)

    return _created(ctx, create, "ec2 vpc", name, VPC_CIDR)


def _ensure_gateway(ctx: Context, ec2: Client, vpc: str) -> str:
    name = _name(ctx, "igw")
    found = _gateway(ec2, name)
    if found is None:
        def create() -> str:
            igw = ec2.create_internet_gateway(TagSpecifications=_tags(ctx, "internet-gateway", name))
            gateway = str(igw["InternetGateway"]["InternetGatewayId"])
            ec2.attach_internet_gateway(InternetGatewayId=gateway, VpcId=vpc)
            return gateway

        return _created(ctx, create, "ec2 internet gateway", name)
    gateway = str(found["InternetGatewayId"])
    attached = vpc in [a.get("VpcId") for a in found.get("Attachments", [])]
    ctx.converge([] if attached else [f"attach to {vpc}"],
                 lambda: ec2.attach_internet_gateway(InternetGatewayId=gateway, VpcId=vpc),
                 "ec2 internet gateway", name)
    return gateway


def _ensure_subnet(ctx: Context, ec2: Client, vpc: str, part: str, cidr: str, zone: str) -> str:
    name = _name(ctx, part)
    found = None if vpc == PENDING else _subnet(ec2, name, vpc)
    if found is not None:
        ctx.report(Outcome.UNCHANGED, "ec2 subnet", name, f"{found['SubnetId']} in {found['AvailabilityZone']}")
        return str(found["SubnetId"])
    return _created(ctx, lambda: str(ec2.create_subnet(
        VpcId=vpc, CidrBlock=cidr, AvailabilityZone=zone, TagSpecifications=_tags(ctx, "subnet", name),
    )["Subnet"]["SubnetId"]), "ec2 subnet", name, f"{cidr} in {zone}")


def _route_changes(table: dict[str, Any], target_key: str, target: str, subnets: list[str]) -> list[str]:
    default = next((r for r in table.get("Routes", []) if r.get("DestinationCidrBlock") == ANYWHERE), None)
    changes = [] if default is not None and default.get(target_key) == target else [f"{ANYWHERE} -> {target}"]
    associated = {a.get("SubnetId") for a in table.get("Associations", [])}
    return changes + [f"associate {s}" for s in subnets if s not in associated]


def _ensure_routes(ctx: Context, ec2: Client, vpc: str, part: str, target_key: str, target: str,
                   subnets: list[str]) -> str:
    """A route table whose default route goes to `target` (an internet or NAT gateway), for `subnets`."""
    name, kind = _name(ctx, part), "ec2 route table"
    found = None if PENDING in (vpc, target, *subnets) else _route_table(ec2, name, vpc)

    def apply(table: str, default_exists: bool) -> None:
        route = {"RouteTableId": table, "DestinationCidrBlock": ANYWHERE, target_key: target}
        (ec2.replace_route if default_exists else ec2.create_route)(**route)
        associated = {a.get("SubnetId") for a in (found or {}).get("Associations", [])}
        for subnet in subnets:
            if subnet not in associated:
                ec2.associate_route_table(RouteTableId=table, SubnetId=subnet)

    if found is None:
        def create() -> str:
            table = str(ec2.create_route_table(VpcId=vpc, TagSpecifications=_tags(ctx, "route-table", name))
                        ["RouteTable"]["RouteTableId"])
            apply(table, default_exists=False)
            return table

        return _created(ctx, create, kind, name, f"{ANYWHERE} -> {target}")
    table = str(found["RouteTableId"])
    exists = any(r.get("DestinationCidrBlock") == ANYWHERE for r in found.get("Routes", []))
    ctx.converge(_route_changes(found, target_key, target, subnets), lambda: apply(table, exists), kind, name)
    return table


def _ensure_nat(ctx: Context, ec2: Client, vpc: str, subnet: str) -> str:
    name = _name(ctx, "nat")
    address = _address(ec2, name)
    if address is None:
        allocation = _created(ctx, lambda: str(ec2.allocate_address(
            Domain="vpc", TagSpecifications=_tags(ctx, "elastic-ip", name))["AllocationId"]), "ec2 elastic ip", name)
    else:
        allocation = str(address["AllocationId"])
        ctx.report(Outcome.UNCHANGED, "ec2 elastic ip", name, str(address.get("PublicIp", "")))
    found = None if vpc == PENDING else _nat(ec2, name, vpc)
    if found is not None:
        ctx.report(Outcome.UNCHANGED, "ec2 nat gateway", name, f"{found['NatGatewayId']}, {found.get('State')}")
        return str(found["NatGatewayId"])

    def create() -> str:
        made = ec2.create_nat_gateway(SubnetId=subnet, AllocationId=allocation,
                                      TagSpecifications=_tags(ctx, "natgateway", name))
        nat = str(made["NatGateway"]["NatGatewayId"])
        ctx.wait_until(lambda: _nat_state(ec2, nat) == "available", f"nat gateway {name} to be available")
        return nat

    return _created(ctx, create, "ec2 nat gateway", name, "billed per hour and per GB, see docs/deploy.md")


def _nat_state(ec2: Client, nat: str) -> str:
    found = ec2.describe_nat_gateways(NatGatewayIds=[nat])["NatGateways"]
    state = str(found[0]["State"]) if found else "deleted"
    if state == "failed":
        raise ProvisionError(f"nat gateway {nat} failed: {found[0].get('FailureMessage')}. Fix the cause (an "
                             "Elastic IP quota?), delete it (setup_aws.py delete --skip storage ...) and run again.")
    return state


def _ensure_endpoint(ctx: Context, ec2: Client, vpc: str, table: str) -> None:
    service, kind = _s3_service(ctx), "ec2 vpc endpoint"
    found = None if PENDING in (vpc, table) else _endpoint(ec2, vpc, service)
    if found is None:
        ctx.pending(lambda: ec2.create_vpc_endpoint(
            VpcEndpointType="Gateway", VpcId=vpc, ServiceName=service, RouteTableIds=[table],
            TagSpecifications=_tags(ctx, "vpc-endpoint", _name(ctx, "s3"))), kind, service, "gateway")
        return
    missing = [] if table in found.get("RouteTableIds", []) else [f"route table {table}"]
    ctx.converge(missing, lambda: ec2.modify_vpc_endpoint(VpcEndpointId=found["VpcEndpointId"],
                                                          AddRouteTableIds=[table]), kind, service)


def _rules(permissions: list[dict[str, Any]]) -> set[tuple[str, int, int, str]]:
    return {(str(p.get("IpProtocol")), int(p.get("FromPort", -1)), int(p.get("ToPort", -1)), r["CidrIp"])
            for p in permissions for r in p.get("IpRanges", [])}


def _permissions(rules: set[tuple[str, int, int, str]]) -> list[dict[str, Any]]:
    return [{"IpProtocol": proto, "FromPort": low, "ToPort": high, "IpRanges": [{"CidrIp": cidr}]}
            for proto, low, high, cidr in sorted(rules)]


def _ensure_group(ctx: Context, ec2: Client, vpc: str) -> str:
    name, kind, wanted = _name(ctx, "jobs"), "ec2 security group", set(EGRESS)
    found = None if vpc == PENDING else _group(ec2, name, vpc)

    def converge(group: str, egress: set[tuple[str, int, int, str]], ingress: list[dict[str, Any]]) -> None:
        if egress - wanted:
            ec2.revoke_security_group_egress(GroupId=group, IpPermissions=_permissions(egress - wanted))
        if wanted - egress:
            ec2.authorize_security_group_egress(GroupId=group, IpPermissions=_permissions(wanted - egress))
        if ingress:
            ec2.revoke_security_group_ingress(GroupId=group, IpPermissions=ingress)

    if found is None:
        def create() -> str:
            group = str(ec2.create_security_group(
                GroupName=name, VpcId=vpc, Description="wap-lake EMR Serverless jobs: HTTPS out only",
                TagSpecifications=_tags(ctx, "security-group", name))["GroupId"])
            current = _group(ec2, name, vpc) or {}
            converge(group, _rules(current.get("IpPermissionsEgress", [])), current.get("IpPermissions", []))
            return group

        return _created(ctx, create, kind, name, "outbound TCP 443 only")
    group, egress, ingress = str(found["GroupId"]), _rules(found.get("IpPermissionsEgress", [])), \
        list(found.get("IpPermissions", []))
    changes = [f"egress {r[0]} {r[1]}-{r[2]} {r[3]}" for r in sorted(egress ^ wanted)]
    changes += ["no inbound rule"] if ingress else []
    ctx.converge(changes, lambda: converge(group, egress, ingress), kind, name)
    return group


def _check_given(ctx: Context, given: JobNetwork) -> None:
    """Brought by the operator: check they exist (a typo fails here, not at the first large file)."""
    ec2 = ctx.clients("ec2")
    try:
        subnets = ec2.describe_subnets(SubnetIds=list(given.subnet_ids))["Subnets"]
        ec2.describe_security_groups(GroupIds=list(given.security_group_ids))
    except ClientError as exc:
        raise ProvisionError(f"--subnet-ids {','.join(given.subnet_ids)} / --security-group-ids "
                             f"{','.join(given.security_group_ids)}: {exc}. Fix: pass ids that exist in "
                             f"{ctx.account.region}, or neither option to have setup_aws.py create it.") from exc
    zones = sorted({s.get("AvailabilityZone", "?") for s in subnets})
    ctx.report(Outcome.SKIPPED, "ec2 network", "given", f"subnets in {', '.join(zones)}; nothing created")


def ensure_network(ctx: Context) -> Outcome:
    if ctx.given_network is not None:
        _check_given(ctx, ctx.given_network)
        return Outcome.SKIPPED
    ec2 = ctx.clients("ec2")
    zones = _zones(ec2)
    vpc = _ensure_vpc(ctx, ec2)
    gateway = _ensure_gateway(ctx, ec2, vpc)
    public = _ensure_subnet(ctx, ec2, vpc, "public", PUBLIC_CIDR, zones[0])
    _ensure_routes(ctx, ec2, vpc, "public", "GatewayId", gateway, [public])
    nat = _ensure_nat(ctx, ec2, vpc, public)
    private = [_ensure_subnet(ctx, ec2, vpc, f"private-{letter}", cidr, zone)
               for letter, cidr, zone in zip("ab", PRIVATE_CIDRS, zones, strict=True)]
    table = _ensure_routes(ctx, ec2, vpc, "private", "NatGatewayId", nat, private)
    _ensure_endpoint(ctx, ec2, vpc, table)
    group = _ensure_group(ctx, ec2, vpc)
    ctx.state["EmrSubnetIds"] = ",".join(private)
    ctx.state["EmrSecurityGroupIds"] = group
    return Outcome.UNCHANGED


# --- removing --------------------------------------------------------------------------------------------

def _dependency(what: str, delete: Callable[[], Any]) -> Callable[[], None]:
    def run() -> None:
        try:
            delete()
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") != "DependencyViolation":
                raise
            raise ProvisionError(f"{what} is still in use ({exc}). EMR Serverless releases its network interfaces "
                                 "some minutes after the application is deleted: run delete again later.") from exc
    return run


def _remove_nat(ctx: Context, ec2: Client, vpc: str) -> None:
    name = _name(ctx, "nat")
    nat = _nat(ec2, name, vpc)

    def delete() -> None:
        ec2.delete_nat_gateway(NatGatewayId=_id(nat, "NatGatewayId"))
        ctx.wait_until(lambda: _nat_state(ec2, _id(nat, "NatGatewayId")) == "deleted",
                       f"nat gateway {name} to be deleted")

    ctx.removal(nat is not None, delete, "ec2 nat gateway", name)
    address = _address(ec2, name)
    ctx.removal(address is not None, lambda: ec2.release_address(AllocationId=_id(address, "AllocationId")),
                "ec2 elastic ip", name)


def _remove_table(ctx: Context, ec2: Client, vpc: str, part: str) -> None:
    name = _name(ctx, part)
    table = _route_table(ec2, name, vpc)

    def delete() -> None:
        for association in (table or {}).get("Associations", []):
            if not association.get("Main"):
                ec2.disassociate_route_table(AssociationId=association["RouteTableAssociationId"])
        ec2.delete_route_table(RouteTableId=_id(table, "RouteTableId"))

    ctx.removal(table is not None, delete, "ec2 route table", name)


def _remove_subnet(ctx: Context, ec2: Client, vpc: str, part: str) -> None:
    name = _name(ctx, part)
    subnet = _subnet(ec2, name, vpc)
    ctx.removal(subnet is not None, _dependency(f"subnet {name}", lambda: ec2.delete_subnet(
        SubnetId=_id(subnet, "SubnetId"))), "ec2 subnet", name)


def remove_network(ctx: Context) -> Outcome:
    if ctx.given_network is not None:
        return ctx.report(Outcome.SKIPPED, "ec2 network", "given", "not created here, not deleted")
    ec2 = ctx.clients("ec2")
    vpc_name = _name(ctx, "vpc")
    found = _vpc(ec2, vpc_name)
    if found is None:
        return ctx.report(Outcome.ABSENT, "ec2 vpc", vpc_name)
    vpc = str(found["VpcId"])
    group_name = _name(ctx, "jobs")
    group = _group(ec2, group_name, vpc)
    ctx.removal(group is not None, _dependency(f"security group {group_name}", lambda: ec2.delete_security_group(
        GroupId=_id(group, "GroupId"))), "ec2 security group", group_name)
    endpoint = _endpoint(ec2, vpc, _s3_service(ctx))
    ctx.removal(endpoint is not None, lambda: ec2.delete_vpc_endpoints(
        VpcEndpointIds=[_id(endpoint, "VpcEndpointId")]), "ec2 vpc endpoint", _s3_service(ctx))
    _remove_table(ctx, ec2, vpc, "private")
    for part in ("private-b", "private-a"):
        _remove_subnet(ctx, ec2, vpc, part)
    _remove_nat(ctx, ec2, vpc)
    _remove_table(ctx, ec2, vpc, "public")
    _remove_subnet(ctx, ec2, vpc, "public")
    gateway = _gateway(ec2, _name(ctx, "igw"))

    def drop_gateway() -> None:
        gateway_id = _id(gateway, "InternetGatewayId")
        for attachment in (gateway or {}).get("Attachments", []):
            ec2.detach_internet_gateway(InternetGatewayId=gateway_id, VpcId=attachment["VpcId"])
        ec2.delete_internet_gateway(InternetGatewayId=gateway_id)

    ctx.removal(gateway is not None, drop_gateway, "ec2 internet gateway", _name(ctx, "igw"))
    return ctx.removal(True, _dependency(f"vpc {vpc_name}", lambda: ec2.delete_vpc(VpcId=vpc)), "ec2 vpc", vpc_name)

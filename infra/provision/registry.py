"""The ECR repository the Lambda image is pushed to: scan on push, immutable tags, AES256 at rest."""

from __future__ import annotations

from typing import Any

from botocore.exceptions import ClientError

from infra.provision.context import Client, Context, Outcome

_KIND = "ecr repository"


def describe_repository(ecr: Client, name: str) -> dict[str, Any] | None:
    try:
        repositories = ecr.describe_repositories(repositoryNames=[name])["repositories"]
    except ClientError as exc:
        if exc.response.get("Error", {}).get("Code") == "RepositoryNotFoundException":
            return None
        raise
    return dict(repositories[0]) if repositories else None


def _drift(repository: dict[str, Any]) -> list[str]:
    changes = []
    if not repository.get("imageScanningConfiguration", {}).get("scanOnPush"):
        changes.append("scan on push")
    if repository.get("imageTagMutability") != "IMMUTABLE":
        changes.append("immutable tags")
    return changes


def ensure_repository(ctx: Context) -> Outcome:
    ecr, name = ctx.clients("ecr"), ctx.names.ecr_repository
    repository = describe_repository(ecr, name)
    if repository is None:
        return ctx.pending(
            lambda: ecr.create_repository(
                repositoryName=name,
                imageScanningConfiguration={"scanOnPush": True},
                imageTagMutability="IMMUTABLE",
                encryptionConfiguration={"encryptionType": "AES256"},
                tags=[{"Key": "wap:prefix", "Value": ctx.names.prefix}],
            ),
            _KIND,
            name,
            "scan on push, immutable tags",
        )
    ctx.detail(f"image URI prefix: {repository.get('repositoryUri')}")

    def apply() -> None:
        ecr.put_image_scanning_configuration(repositoryName=name, imageScanningConfiguration={"scanOnPush": True})
        ecr.put_image_tag_mutability(repositoryName=name, imageTagMutability="IMMUTABLE")

    return ctx.converge(_drift(repository), apply, _KIND, name)


def repository_uri(ctx: Context) -> str:
    """`<account>.dkr.ecr.<region>.amazonaws.com/<repository>` (what `docker push` and serverless.yml use)."""
    return f"{ctx.account.account_id}.dkr.ecr.{ctx.account.region}.amazonaws.com/{ctx.names.ecr_repository}"


def repository_has_images(ctx: Context) -> bool:
    ecr = ctx.clients("ecr")
    if describe_repository(ecr, ctx.names.ecr_repository) is None:
        return False
    return bool(ecr.list_images(repositoryName=ctx.names.ecr_repository, maxResults=1).get("imageIds"))


def remove_repository(ctx: Context) -> Outcome:
    ecr, name = ctx.clients("ecr"), ctx.names.ecr_repository
    exists = describe_repository(ecr, name) is not None
    return ctx.removal(exists, lambda: ecr.delete_repository(repositoryName=name, force=ctx.force), _KIND, name)

"""Fixtures shared by the integration modules: the setup_aws harness's moto server and Lightsail stub."""

from tests.integration.setup_aws_harness import lightsail, moto_url  # noqa: F401 (fixtures)

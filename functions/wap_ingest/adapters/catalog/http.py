"""Small helpers shared by the adapters that speak HTTP with `requests`."""

from __future__ import annotations

from typing import Any

import requests


def json_object(response: requests.Response) -> dict[str, Any]:
    """The response's JSON object, or {} when the body is not JSON or not an object (error pages)."""
    try:
        data = response.json()
    except ValueError:
        return {}
    return data if isinstance(data, dict) else {}

"""What a mirror without OIDC, Kubernetes review, Slack or Redis does not load: PyJWT, httpx,
slack_sdk, the access package's kubernetes_asyncio client, the Redis client, the Redis store
and its leases, and never kubernetes_asyncio's generated API and model modules (memory and
start-up time of every `serve`)."""

from __future__ import annotations

import subprocess
import sys


def loaded_after(module: str, names: list[str]) -> list[str]:
    code = f"import sys, {module}; print(' '.join(n for n in {names!r} if n in sys.modules))"
    out = subprocess.run(
        [sys.executable, "-c", code], check=True, capture_output=True, text=True, timeout=120
    )
    return out.stdout.split()


def test_access_control_loads_no_jwt_httpx_or_kubernetes_client():
    names = ["jwt", "httpx", "aiohttp", "kubernetes_asyncio"]
    assert loaded_after("dra_mirror.service.access.control", names) == []


def test_the_runtime_loads_no_jwt_and_no_slack_notifier():
    names = ["jwt", "dra_mirror.service.alerts.slack"]
    assert loaded_after("dra_mirror.service.runtime.mirror", names) == []


def test_serve_loads_no_httpx_jwt_or_slack_sdk():
    names = [
        "jwt",
        "httpx",
        "slack_sdk",
        "kubernetes_asyncio.client.api",
        "kubernetes_asyncio.client.models.v1_pod",
        "redis",
        "dra_mirror.service.stores.redis",
        "dra_mirror.service.stores.lease",
        "dra_mirror.service.reactor.leased",
    ]
    assert (
        loaded_after("dra_mirror.service.cli.main, dra_mirror.service.runtime.mirror", names) == []
    )
